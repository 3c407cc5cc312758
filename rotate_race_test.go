package noydb_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// hubLine is one device's line to a shared hub: while down, every
// operation fails with an error wrapping stores.ErrUnavailable, as a
// server out of reach does; other devices still reach the hub.
type hubLine struct {
	stores.Store
	down atomic.Bool
}

func newHubLine(hub stores.Store) *hubLine {
	l := &hubLine{}
	l.Store = faultstore.New(hub, faultstore.Options{Before: func(faultstore.Op, string) error {
		if l.down.Load() {
			return fmt.Errorf("dial tcp 10.0.0.1:5432: connection refused: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	return l
}

// Update keeps the faultstore's transactions.
func (l *hubLine) Update(ctx context.Context, fn func(stores.Tx) error) error {
	return l.Store.(stores.Transactor).Update(ctx, fn)
}

// putTexts writes a note per id whose text is the id, and returns them.
func putTexts(t testing.TB, v *vault.Vault, want map[string]string, ids ...string) {
	t.Helper()
	notes := vault.CollectionOf[Note](v, "notes")
	for _, id := range ids {
		require.NoError(t, notes.Put(context.Background(), id, Note{Text: id}))
		want[id] = id
	}
}

// allReadable asserts that v holds exactly the notes of want, each
// readable with its text, and that its ledger verifies.
func allReadable(t testing.TB, v *vault.Vault, want map[string]string, who string) {
	t.Helper()
	got := map[string]string{}
	for r, err := range vault.CollectionOf[Note](v, "notes").List(context.Background()) {
		if !assert.NoError(t, err, "%s: %s", who, r.ID) {
			continue
		}
		got[r.ID] = r.Value.Text
	}
	assert.Equal(t, want, got, who)
	rep, err := v.Audit().Verify(context.Background())
	require.NoError(t, err, who)
	assert.NoError(t, rep.Problem, who)
}

// onHub opens the hub's copy of vault "team" as user, the way a server
// holding the hub would (no hub of its own).
func onHub(t testing.TB, hub stores.Store, user, secret string) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), personCfg(hub, user, secret))
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// TestRotateRaceOnTwoDevices: two devices of one hub rotate the keys (a
// RotateKeys, or a Revoke, which rotates) one just after the other, each
// before syncing with the other's change, and each writes records under
// the generation it made. Before the fix both made generation 2 with
// different keys, the keyring merge kept one, and the records sealed with
// the other became unreadable. A device rotates on the hub first: the
// second rotation sees the first and makes generation 3. Run with the same
// person on both devices and with two owners; after Sync both ways every
// record reads on both devices and on the hub, and every ledger verifies.
func TestRotateRaceOnTwoDevices(t *testing.T) {
	for name, newStore := range memAndBadger() {
		for _, same := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/same-person=%v", name, same), func(t *testing.T) {
				rotationRace(t, memstore.New(), newStore, same)
			})
		}
	}
}

// TestRotateRaceOnPGHub: TestRotateRaceOnTwoDevices and
// TestRotateConcurrentOnTwoDevices with a PostgreSQL hub, whose
// transactions detect the racing keyring writes.
func TestRotateRaceOnPGHub(t *testing.T) {
	mem := func(testing.TB) stores.Store { return memstore.New() }
	for _, same := range []bool{true, false} {
		t.Run(fmt.Sprintf("same-person=%v", same), func(t *testing.T) {
			rotationRace(t, pgtest.Open(t, nil), mem, same)
		})
	}
	for round := range 3 {
		t.Run(fmt.Sprint("concurrent-", round), func(t *testing.T) {
			concurrentRotation(t, pgtest.Open(t, nil))
		})
	}
}

// rotationRace is TestRotateRaceOnTwoDevices on hub, with devices made by
// newStore; same puts one person on both devices.
func rotationRace(t *testing.T, hub stores.Store, newStore func(testing.TB) stores.Store, same bool) {
	ctx := context.Background()
	a := openPerson(t, hubPerson(newStore(t), hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "pia", vault.Secret([]byte("p")), vault.RoleOwner))
	require.NoError(t, a.Grant(ctx, "rex", vault.Secret([]byte("r")), vault.RoleWriter))
	want := map[string]string{}
	putTexts(t, a, want, "a-0", "a-1")
	mustSync(t, a)
	userB, secretB := "pia", "p"
	if same {
		userB, secretB = "olga", "o"
	}
	b := openPerson(t, hubPerson(newStore(t), hub, userB, secretB))
	mustSync(t, b)
	putTexts(t, b, want, "b-0")

	// A rotates and writes; B, not synced since, revokes rex
	// (which rotates) and writes.
	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	putTexts(t, a, want, "a-2", "a-3")
	require.NoError(t, b.Revoke(ctx, "rex"))
	require.NoError(t, b.Rotation().Wait(ctx))
	assert.Equal(t, uint64(3), b.Rotation().Generation(), "B saw A's generation 2 on the hub")
	putTexts(t, b, want, "b-1", "b-2")

	for range 2 {
		mustSync(t, a)
		mustSync(t, b)
	}
	allReadable(t, a, want, "device A")
	allReadable(t, b, want, "device B")
	h := onHub(t, hub, "olga", "o")
	allReadable(t, h, want, "hub")
	revoked := 0
	for _, k := range peopleKinds(t, h) {
		if k == "person-revoked "+userB+" rex" {
			revoked++
		}
	}
	assert.Equal(t, 1, revoked, "the hub's ledger records the revocation made on it once: %v", peopleKinds(t, h))
	gens := generations(t, hub)
	assert.Equal(t, len(want), gens[2]+gens[3], "every record on the hub sealed by a rotation's generation: %v", gens)

	// rex, revoked by B after A's rotation reached the hub,
	// opens nowhere.
	_, err = vault.Open(ctx, personCfg(hub, "rex", "r"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)
}

// TestRotateOfflineRefused: a device that cannot reach its hub does not
// rotate (RotateKeys and a rotating Revoke fail with sequence.ErrOffline,
// the device's store unchanged) and goes on writing with the generation
// it knows while another device rotates. After Sync every record reads
// everywhere, records written once the rotation reached the device are
// sealed by the new generation, and those written before were re-sealed
// by that Sync before it pushed them (ResumeRotation finds none left).
func TestRotateOfflineRefused(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub := memstore.New()
			devB := faultstore.NewAdversary(newStore(t))
			lineB := newHubLine(hub)
			a := openPerson(t, hubPerson(newStore(t), hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "rex", vault.Secret([]byte("r")), vault.RoleWriter))
			want := map[string]string{}
			putTexts(t, a, want, "a-0")
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB.Store(), lineB, "olga", "o"))
			mustSync(t, b)

			lineB.down.Store(true)
			before, err := devB.Snapshot(ctx)
			require.NoError(t, err)
			_, err = b.RotateKeys(ctx)
			assert.ErrorIs(t, err, sequence.ErrOffline)
			err = b.Revoke(ctx, "rex")
			assert.ErrorIs(t, err, sequence.ErrOffline)
			after, err := devB.Snapshot(ctx)
			require.NoError(t, err)
			assert.Empty(t, changedKeys(before, after), "a refused rotation writes nothing on the device")
			assert.Nil(t, b.Rotation())

			putTexts(t, b, want, "b-0", "b-1")
			require.NoError(t, a.Revoke(ctx, "rex"))
			require.NoError(t, a.Rotation().Wait(ctx))
			putTexts(t, a, want, "a-1")
			mustSync(t, a)
			putTexts(t, b, want, "b-2") // B has not heard of the revocation yet
			assert.Equal(t, map[uint64]int{1: 4}, generations(t, devB.Raw()))

			lineB.down.Store(false)
			mustSync(t, b)
			putTexts(t, b, want, "b-3") // the revocation reached B
			it, err := devB.Raw().Get(ctx, "v/team/notes/b-3")
			require.NoError(t, err)
			gen, err := crypto.RecordGeneration(it.Value)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), gen, "written once the revocation reached B")
			onB := generations(t, devB.Raw())
			assert.Zero(t, onB[1], "b-0..b-2, written before B heard of the rotation, re-sealed by the Sync: %v", onB)
			rot, err := b.ResumeRotation(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			assert.Zero(t, rot.Progress().Done)
			assert.Equal(t, map[uint64]int{2: 6}, generations(t, devB.Raw()))
			for range 2 {
				mustSync(t, b)
				mustSync(t, a)
			}
			assert.Equal(t, map[uint64]int{2: 6}, generations(t, hub))
			allReadable(t, a, want, "device A")
			allReadable(t, b, want, "device B")
			allReadable(t, onHub(t, hub, "olga", "o"), want, "hub")
			_, err = vault.Open(ctx, personCfg(hub, "rex", "r"))
			assert.ErrorIs(t, err, vault.ErrNoAccess)
		})
	}
}

// changedKeys returns the keys whose value differs between two snapshots.
func changedKeys(a, b faultstore.Snapshot) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestRotateConcurrentOnTwoDevices: two devices of one hub rotate at the
// same moment. The hub takes one rotation at a time: each either makes
// its own generation (2 and 3) or fails with an error matching
// stores.ErrConflict, writing nothing (the other committed first); never
// two rotations of one number. After Sync both ways every record written
// meanwhile reads on both devices and on the hub.
func TestRotateConcurrentOnTwoDevices(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) { concurrentRotation(t, memstore.New()) })
	}
}

// concurrentRotation is TestRotateConcurrentOnTwoDevices on hub.
func concurrentRotation(t *testing.T, hub stores.Store) {
	ctx := context.Background()
	a := openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "pia", vault.Secret([]byte("p")), vault.RoleOwner))
	want := map[string]string{}
	putTexts(t, a, want, "a-0")
	mustSync(t, a)
	b := openPerson(t, hubPerson(memstore.New(), hub, "pia", "p"))
	mustSync(t, b)

	devs := []*vault.Vault{a, b}
	gens := make([]uint64, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, v := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rot, err := v.RotateKeys(ctx)
			if errs[i] = err; err == nil {
				gens[i], errs[i] = rot.Generation(), rot.Wait(ctx)
			}
		}()
	}
	wg.Wait()
	made := map[uint64]bool{}
	for i, err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, stores.ErrConflict, "device %d", i)
			continue
		}
		assert.False(t, made[gens[i]], "generation %d made twice", gens[i])
		made[gens[i]] = true
	}
	t.Logf("made %v, errors %v", made, errs)
	require.NotEmpty(t, made, "one rotation at least commits")
	putTexts(t, a, want, "a-1")
	putTexts(t, b, want, "b-1")
	for range 2 {
		mustSync(t, a)
		mustSync(t, b)
	}
	allReadable(t, a, want, "device A")
	allReadable(t, b, want, "device B")
	allReadable(t, onHub(t, hub, "olga", "o"), want, "hub")
}

// TestRotateOnDeviceOpenedWithoutHub: a device of a hub opened without it
// does not rotate: RotateKeys and a rotating Revoke fail with an error
// wrapping sequence.ErrOffline, writing nothing.
func TestRotateOnDeviceOpenedWithoutHub(t *testing.T) {
	ctx := context.Background()
	hub, dev := memstore.New(), faultstore.NewAdversary(memstore.New())
	a := openPerson(t, hubPerson(dev.Store(), hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "rex", vault.Secret([]byte("r")), vault.RoleWriter))
	mustSync(t, a)
	require.NoError(t, a.Close())

	v := openPerson(t, personCfg(dev.Store(), "olga", "o"))
	before, err := dev.Snapshot(ctx)
	require.NoError(t, err)
	_, err = v.RotateKeys(ctx)
	assert.ErrorIs(t, err, sequence.ErrOffline)
	assert.ErrorIs(t, v.Revoke(ctx, "rex"), sequence.ErrOffline)
	after, err := dev.Snapshot(ctx)
	require.NoError(t, err)
	assert.Empty(t, changedKeys(before, after))
	// Without a rotation the revocation itself is a keyring change, which
	// travels with Sync like a grant.
	require.NoError(t, v.Revoke(ctx, "rex", vault.RevokeWithoutRotation()))
}

// TestRotateDeviceCommitFails: the rotation commits on the hub, then the
// device's commit fails. RotateKeys says so; the generation is on the
// hub only. The device's next Sync brings it: that Sync re-seals the
// record written meanwhile before it pushes it, from then on the device
// seals with it, ResumeRotation re-seals its older records, and every
// record reads on both devices and the hub.
func TestRotateDeviceCommitFails(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	var failUpdate atomic.Bool
	injected := errors.New("injected: disk full")
	devA := faultstore.New(memstore.New(), faultstore.Options{Before: func(op faultstore.Op, _ string) error {
		if op == faultstore.OpUpdate && failUpdate.CompareAndSwap(true, false) {
			return injected
		}
		return nil
	}})
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	want := map[string]string{}
	putTexts(t, a, want, "a-0", "a-1")
	mustSync(t, a)
	b := openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
	mustSync(t, b)

	failUpdate.Store(true)
	_, err := a.RotateKeys(ctx)
	require.ErrorIs(t, err, injected)
	assert.ErrorContains(t, err, "generation 2 is on the hub")
	assert.Nil(t, a.Rotation())
	putTexts(t, a, want, "a-2") // still generation 1 here

	mustSync(t, a)
	putTexts(t, a, want, "a-3")
	gens := generations(t, devA)
	assert.Equal(t, map[uint64]int{1: 2, 2: 2}, gens, "a-2 re-sealed before its push, a-3 sealed by the generation the Sync brought")
	rot, err := a.ResumeRotation(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	assert.Equal(t, map[uint64]int{2: 4}, generations(t, devA))

	rot, err = b.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	assert.Equal(t, uint64(3), rot.Generation())
	putTexts(t, b, want, "b-0")
	for range 2 {
		mustSync(t, a)
		mustSync(t, b)
	}
	allReadable(t, a, want, "device A")
	allReadable(t, b, want, "device B")
	allReadable(t, onHub(t, hub, "olga", "o"), want, "hub")
}

// TestRotateInterleavedOnHub: device A's rotation commits on the hub
// between device B's reading of the hub's keyring and B's commit there
// (forced: A rotates from a hook run before B's transaction on the hub).
// B's rotation fails with an error matching stores.ErrConflict and writes
// nothing, on the hub or on B; called again it makes generation 3. On
// memstore and on PostgreSQL, whose transaction must see the entries A
// replaced.
func TestRotateInterleavedOnHub(t *testing.T) {
	hubs := map[string]func(testing.TB) stores.Store{
		"memstore":   func(testing.TB) stores.Store { return memstore.New() },
		"postgresql": func(t testing.TB) stores.Store { return pgtest.Open(t, nil) },
	}
	for name, newHub := range hubs {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub := newHub(t)
			var armed atomic.Bool
			var a *vault.Vault
			var aErr error
			lineB := faultstore.New(hub, faultstore.Options{Before: func(op faultstore.Op, _ string) error {
				if op == faultstore.OpUpdate && armed.CompareAndSwap(true, false) {
					_, aErr = a.RotateKeys(ctx)
				}
				return nil
			}})
			a = openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "pia", vault.Secret([]byte("p")), vault.RoleOwner))
			want := map[string]string{}
			putTexts(t, a, want, "a-0")
			mustSync(t, a)
			devB := faultstore.NewAdversary(memstore.New())
			b := openPerson(t, hubPerson(devB.Store(), lineB, "pia", "p"))
			mustSync(t, b)

			before, err := devB.Snapshot(ctx)
			require.NoError(t, err)
			armed.Store(true)
			_, err = b.RotateKeys(ctx)
			require.NoError(t, aErr, "A's rotation, run inside B's")
			assert.ErrorIs(t, err, stores.ErrConflict)
			after, err := devB.Snapshot(ctx)
			require.NoError(t, err)
			assert.Empty(t, changedKeys(before, after), "B's failed rotation wrote nothing on B")
			require.NoError(t, a.Rotation().Wait(ctx))
			assert.Equal(t, uint64(2), a.Rotation().Generation())

			rot, err := b.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			assert.Equal(t, uint64(3), rot.Generation())
			putTexts(t, a, want, "a-1")
			putTexts(t, b, want, "b-0")
			for range 2 {
				mustSync(t, a)
				mustSync(t, b)
			}
			allReadable(t, a, want, "device A")
			allReadable(t, b, want, "device B")
			allReadable(t, onHub(t, hub, "olga", "o"), want, "hub")
		})
	}
}
