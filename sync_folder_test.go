package noydb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Sync on a device whose store is a file folder (filestore: no
// transactions, no atomic compare-and-swap), committed in steps by
// vault/sync_staged.go.

// newFolder opens a filestore in a fresh folder of t, without fsync (a
// machine crash is not what these tests cut; a cut is a failed operation).
func newFolder(t testing.TB) stores.Store {
	t.Helper()
	st, err := filestore.Open(t.TempDir(), &filestore.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestSyncFileFolderAndBadgerConverge: a file-folder device and a badger
// device converge through a memstore hub: new records, edits and deletes
// on both (the two-device scenario, its reports and pulled ledger entries
// exact), and the same record changed on both under the default policy.
func TestSyncFileFolderAndBadgerConverge(t *testing.T) {
	newBadger := memAndBadger()["badgerstore"]
	t.Run("folder first", func(t *testing.T) {
		twoDevicesConverge(t, memstore.New(), newFolder(t), newBadger(t))
	})
	t.Run("badger first", func(t *testing.T) {
		twoDevicesConverge(t, memstore.New(), newBadger(t), newFolder(t))
	})
	t.Run("same record on both", func(t *testing.T) {
		sameRecordOnBoth(t, memstore.New(), newFolder(t), newBadger(t))
	})
}

// sameRecordOnBoth: devices da and db change the same records while apart
// (both edit x; A edits y twice, B once; A deletes z, B edits it); under
// the default policy (HigherRevisionWins) the higher revision wins each,
// an equal one by cipher hash, and both devices and the hub end equal.
func sameRecordOnBoth(t *testing.T, hub, da, db stores.Store) {
	ctx := context.Background()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
	for _, id := range []string{"x", "y", "z"} {
		require.NoError(t, na.Put(ctx, id, Note{id}))
	}
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, na.Put(ctx, "x", Note{"x by a"}))
	require.NoError(t, nb.Put(ctx, "x", Note{"x by b"}))
	require.NoError(t, na.Put(ctx, "y", Note{"y by a"}))
	require.NoError(t, na.Put(ctx, "y", Note{"y by a again"}))
	require.NoError(t, nb.Put(ctx, "y", Note{"y by b"}))
	require.NoError(t, na.Delete(ctx, "z"))
	require.NoError(t, nb.Put(ctx, "z", Note{"z by b"}))
	mustSync(t, a)
	rep := mustSync(t, b)
	ids := make([]string, 0, len(rep.Conflicts))
	for _, c := range rep.Conflicts {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	assert.Equal(t, []string{"x", "y", "z"}, ids)
	mustSync(t, a)
	got := assertConverged(t, hub, []stores.Store{da, db}, a, b)
	// y: A's revision 3 beats B's 2. z: deleted on A (as revision 2),
	// edited on B to 2: equal, and the deletion's empty hash sorts first,
	// so B's side stands. x: both at 2, decided by cipher hash; B's side,
	// if it wins, is resealed above the hub's revision.
	assert.Equal(t, "y by a again@3", got["y"])
	assert.Equal(t, "z by b@2", got["z"])
	assert.Contains(t, []string{"x by a@2", "x by b@3"}, got["x"])
	assert.Len(t, got, 3)
}

// TestSyncFileFolderResumesAfterACut: TestSyncResumesAfterACut's scenario
// with device A on a file folder, its sync cut at every store operation on
// the device, before or after the operation applied (a crash, or a write
// whose answer was lost); the next syncs converge, every ledger verifies,
// and A's ledger shows each change it pulled exactly once, as an uncut
// sync records it.
func TestSyncFileFolderResumesAfterACut(t *testing.T) {
	ctx := context.Background()
	want := map[string]string{
		"a1": "a1-edit@2", "a3": "a3@1", "b1": "b1-edit@2", "b3": "b3@1",
	}
	// run plays the scenario with A's sync cut by c (nil: not cut) and
	// returns A's pulled entries, or nil when the cut did not strike.
	run := func(t *testing.T, c *cutter) []string {
		rawHub, rawA, rawB := memstore.New(), newFolder(t), memstore.New()
		da := rawA
		if c != nil {
			da = faultstore.New(rawA, faultstore.Options{Before: c.before, After: c.afterWrite})
		}
		a, b := syncDevice(t, da, rawHub), syncDevice(t, rawB, rawHub)
		defer func() { _ = a.Close(); _ = b.Close() }()
		na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
		for _, id := range []string{"a1", "a2"} {
			require.NoError(t, na.Put(ctx, id, Note{id}))
		}
		for _, id := range []string{"b1", "b2"} {
			require.NoError(t, nb.Put(ctx, id, Note{id}))
		}
		mustSync(t, a)
		mustSync(t, b)
		require.NoError(t, na.Put(ctx, "a1", Note{"a1-edit"}))
		require.NoError(t, na.Delete(ctx, "a2"))
		require.NoError(t, na.Put(ctx, "a3", Note{"a3"}))
		require.NoError(t, nb.Put(ctx, "b1", Note{"b1-edit"}))
		require.NoError(t, nb.Delete(ctx, "b2"))
		require.NoError(t, nb.Put(ctx, "b3", Note{"b3"}))
		mustSync(t, b)
		if c != nil {
			c.armed.Store(true)
			_, err := a.Sync(ctx)
			c.armed.Store(false)
			if !c.reached() {
				require.NoError(t, err)
				return nil
			}
		}
		mustSync(t, a)
		mustSync(t, b)
		mustSync(t, a)
		assert.Equal(t, want, assertConverged(t, rawHub, []stores.Store{rawA, rawB}, a, b))
		var pulled []string
		for e, err := range a.Audit().Read(ctx, 1) {
			require.NoError(t, err)
			if e.Kind == ledger.RecordPulled || e.Kind == ledger.RecordPulledDelete {
				pulled = append(pulled, fmt.Sprintf("%s %s@%d hub#%d", e.Kind, e.ID, e.Revision, e.Number))
			}
		}
		slices.Sort(pulled)
		return pulled
	}
	uncut := run(t, nil)
	// b2 was written and deleted on B while A never held it: nothing to
	// apply, and no entry.
	require.Equal(t, []string{"record-pulled b1@2 hub#5", "record-pulled b3@1 hub#7"}, uncut)
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			cuts := 0
			for k := int64(1); ; k++ {
				got := run(t, &cutter{k: k, after: after})
				if got == nil {
					break
				}
				cuts++
				if !assert.Equal(t, uncut, got, "cut at %d", k) {
					return
				}
			}
			assert.Greater(t, cuts, 10, "a sync takes more store operations than that")
			t.Logf("%d cuts", cuts)
		})
	}
}

// TestSyncConvergenceFileFolderDevice: schedules of
// TestSyncConvergenceProperty (random edits, deletes, deferred receipts
// and syncs on three devices, some cut on the device's or the hub's side)
// with device 0 on a file folder; it is also the device whose
// SyncAndSettle numbers the receipts.
func TestSyncConvergenceFileFolderDevice(t *testing.T) {
	convergenceSchedules(t, 50, func() stores.Store { return memstore.New() }, func(i int) stores.Store {
		if i == 0 {
			return newFolder(t)
		}
		return memstore.New()
	})
}

// TestSyncFileFolderDeferredReceipts: receipts written offline on a
// file-folder device (deferred numbering: pending) get the numbers 1..N,
// each once, through SyncAndSettle, on the device as on the hub; the
// device's ledger verifies.
func TestSyncFileFolderDeferredReceipts(t *testing.T) {
	ctx := context.Background()
	hub, dev := newSwitchedHub(), newFolder(t)
	v, nr := receiptDevice(t, dev, hub, vault.HigherRevisionWins)
	hub.down.Store(true)
	for i := range 5 {
		_, err := nr.Put(ctx, fmt.Sprintf("r%d", i), Receipt{Total: 10 * i})
		require.NoError(t, err)
	}
	_, err := v.SyncAndSettle(ctx)
	require.ErrorIs(t, err, stores.ErrUnavailable, "offline: the sync fails and changes nothing")
	for i := range 5 {
		got, err := nr.Get(ctx, fmt.Sprintf("r%d", i))
		require.NoError(t, err)
		assert.True(t, got.Pending)
	}
	hub.down.Store(false)
	rep, err := v.SyncAndSettle(ctx)
	require.NoError(t, err)
	require.Contains(t, rep.Settled, "receipt")
	var numbers []uint64
	for i := range 5 {
		id := fmt.Sprintf("r%d", i)
		got, err := nr.Get(ctx, id)
		require.NoError(t, err)
		require.False(t, got.Pending, id)
		assert.Equal(t, got.Serial.N, got.Value.Number, id)
		assert.Equal(t, 10*i, got.Value.Total, id)
		onHub, err := hubReceipt(t, hub, id)
		require.NoError(t, err)
		assert.Equal(t, got.Serial.N, onHub.Serial.N, id)
		numbers = append(numbers, got.Serial.N)
	}
	slices.Sort(numbers)
	assert.Equal(t, seq1toN(5), numbers)
	vr, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, vr.OK())
}

// TestSyncFileFolderSequence: on a file-folder device with a hub, a
// Sequence takes its numbers on the hub (1..3, each once), the numbered
// records are written on the folder and reach another device; with the
// hub down, PutNumbered fails with sequence.ErrOffline and writes nothing.
func TestSyncFileFolderSequence(t *testing.T) {
	ctx := context.Background()
	hub, dev := newSwitchedHub(), newFolder(t)
	v := openOnHub(t, dev, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")
	put := func(id string) error {
		_, err := inv.PutNumbered(ctx, id, q, func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted}, nil
		})
		return err
	}
	for i := range 3 {
		require.NoError(t, put(fmt.Sprintf("i%d", i)))
	}
	hub.down.Store(true)
	require.ErrorIs(t, put("offline"), sequence.ErrOffline)
	_, err = inv.Get(ctx, "offline")
	require.ErrorIs(t, err, vault.ErrNotFound)
	hub.down.Store(false)
	mustSync(t, v)
	other := syncDevice(t, memstore.New(), hub)
	mustSync(t, other)
	got := map[string]string{}
	for r, err := range vault.CollectionOf[Invoice](other, "invoices").List(ctx) {
		require.NoError(t, err)
		got[r.ID] = r.Value.Number
	}
	want := map[string]string{}
	for i := range 3 {
		x, err := inv.Get(ctx, fmt.Sprintf("i%d", i))
		require.NoError(t, err)
		want[fmt.Sprintf("i%d", i)] = x.Number
	}
	assert.Equal(t, want, got)
	list, err := v.Series(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, uint64(3), list[0].Head)
	vr, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, vr.OK())
}

// TestSyncFileFolderWhileWriting: a file-folder device syncs while it
// writes (records it is writing come back from another device meanwhile);
// every sync succeeds, and after the writes both devices and the hub hold
// the same records and every ledger verifies.
func TestSyncFileFolderWhileWriting(t *testing.T) {
	ctx := context.Background()
	hub, da, db := memstore.New(), newFolder(t), memstore.New()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
	done := make(chan error, 1)
	go func() {
		for i := range 200 {
			if err := na.Put(ctx, fmt.Sprintf("w%d", i%20), Note{fmt.Sprintf("a%d", i)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := 0; ; i++ {
		finished := false
		select {
		case err := <-done:
			require.NoError(t, err)
			finished = true
		default:
		}
		require.NoError(t, nb.Put(ctx, fmt.Sprintf("w%d", i%20), Note{fmt.Sprintf("b%d", i)}))
		mustSync(t, b)
		mustSync(t, a)
		if finished {
			break
		}
	}
	mustSync(t, b)
	mustSync(t, a)
	mustSync(t, b)
	got := assertConverged(t, hub, []stores.Store{da, db}, a, b)
	assert.Len(t, got, 20)
}

// TestSyncFileFolderLocalWriteDuringApply: a local write lands on a record
// between a file-folder device's reading it and writing the hub's version
// (injected just as the commit writes its intent): the write is not lost.
// The commit finds the record moved (compare-and-swap), drops its
// entries for it and runs again, now deciding a conflict (both sides at
// revision 2; under DeviceWins the local write stands, resealed as 3); the
// ledger shows no pull of the hub's revision, and every side converges on
// the local write.
func TestSyncFileFolderLocalWriteDuringApply(t *testing.T) {
	ctx := context.Background()
	hub, rawA, db := memstore.New(), newFolder(t), memstore.New()
	var armed, injected atomic.Bool
	var na *vault.Collection[Note]
	var injectErr error
	da := faultstore.New(rawA, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpPut && strings.HasSuffix(key, "/_sync/apply") && armed.Load() && !injected.Swap(true) {
			injectErr = na.Put(ctx, "x", Note{"local"})
		}
		return nil
	}})
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	require.NoError(t, a.SetConflictPolicy("notes", vault.DeviceWins))
	na = vault.CollectionOf[Note](a, "notes")
	nb := vault.CollectionOf[Note](b, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"x"}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, nb.Put(ctx, "x", Note{"from b"}))
	mustSync(t, b)
	armed.Store(true)
	rep := mustSync(t, a)
	armed.Store(false)
	require.True(t, injected.Load(), "the commit wrote an intent")
	require.NoError(t, injectErr)
	require.Len(t, rep.Conflicts, 1)
	assert.False(t, rep.Conflicts[0].HubWon)
	assert.Equal(t, 1, rep.Pushed)
	mustSync(t, b)
	assert.Equal(t, map[string]string{"x": "local@3"}, assertConverged(t, hub, []stores.Store{rawA, db}, a, b))
	for e, err := range a.Audit().Read(ctx, 1) {
		require.NoError(t, err)
		assert.NotEqual(t, ledger.RecordPulled, e.Kind, "entry %d", e.Seq)
	}
	_, err := rawA.Get(ctx, "v/shop/_sync/apply")
	require.ErrorIs(t, err, stores.ErrNotFound, "the intent is removed")
}

// TestSyncFileFolderSyncDuringALocalWrite: a file-folder device writes a
// record (first the record, then its ledger entry) and syncs between the
// two, pulling another device's change of the record: the local write is
// not lost. The pull used to take the record, changed from its sync base
// with no entry of the device's own yet, for a staged commit cut before
// its base, so the hub's revision replaced it silently; the write's entry
// then named a value no side held. Now the write in flight is the
// device's change: a conflict, which DeviceWins decides for it, and every
// side converges on the local write.
func TestSyncFileFolderSyncDuringALocalWrite(t *testing.T) {
	ctx := context.Background()
	hub, rawA, db := memstore.New(), newFolder(t), memstore.New()
	var armed atomic.Bool
	var a *vault.Vault
	var syncErr error
	var rep vault.SyncReport
	da := faultstore.New(rawA, faultstore.Options{After: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "/notes/x") && armed.CompareAndSwap(true, false) {
			rep, syncErr = a.Sync(ctx)
		}
		return nil
	}})
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	require.NoError(t, a.SetConflictPolicy("notes", vault.DeviceWins))
	na := vault.CollectionOf[Note](a, "notes")
	nb := vault.CollectionOf[Note](b, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"x"}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, nb.Put(ctx, "x", Note{"from b"}))
	mustSync(t, b)

	armed.Store(true)
	require.NoError(t, na.Put(ctx, "x", Note{"local"}))
	require.False(t, armed.Load(), "the sync ran inside the write")
	require.NoError(t, syncErr)
	require.Len(t, rep.Conflicts, 1, "%+v", rep)
	assert.False(t, rep.Conflicts[0].HubWon)
	got, err := na.Get(ctx, "x")
	require.NoError(t, err)
	assert.Equal(t, "local", got.Text)

	mustSync(t, a)
	mustSync(t, b)
	conv := assertConverged(t, hub, []stores.Store{rawA, db}, a, b)
	assert.True(t, strings.HasPrefix(conv["x"], "local@"), "%v", conv)
}

// TestSyncFileFolderManualAndMerge: on a file-folder device, a conflict
// kept under Manual is listed, resolved and synced everywhere; one under
// Merge is merged on the device and synced everywhere.
func TestSyncFileFolderManualAndMerge(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, policy func(b *vault.Vault)) (stores.Store, stores.Store, stores.Store, *vault.Vault, *vault.Vault) {
		hub, da, db := memstore.New(), memstore.New(), newFolder(t)
		a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
		policy(b)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"base"}))
		mustSync(t, a)
		mustSync(t, b)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"A"}))
		require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "x", Note{"B"}))
		mustSync(t, a)
		return hub, da, db, a, b
	}
	t.Run("manual", func(t *testing.T) {
		hub, da, db, a, b := setup(t, func(b *vault.Vault) { require.NoError(t, b.SetConflictPolicy("notes", vault.Manual)) })
		rep := mustSync(t, b)
		assert.Equal(t, []vault.SyncConflict{{Collection: "notes", ID: "x", Policy: vault.Manual,
			DeviceRevision: 2, HubRevision: 2, Kept: true}}, rep.Conflicts)
		assert.Zero(t, rep.Pushed)
		pending, err := b.Conflicts(ctx)
		require.NoError(t, err)
		assert.Equal(t, []vault.PendingConflict{{Collection: "notes", ID: "x", HubRevision: 2}}, pending)
		nb := vault.CollectionOf[Note](b, "notes")
		require.NoError(t, nb.Resolve(ctx, "x", &Note{"A and B"}))
		assert.ErrorIs(t, nb.Resolve(ctx, "x", &Note{"again"}), vault.ErrNoConflict)
		assert.Equal(t, 1, mustSync(t, b).Pushed)
		mustSync(t, a)
		assert.Equal(t, map[string]string{"x": "A and B@3"}, assertConverged(t, hub, []stores.Store{da, db}, a, b))
	})
	t.Run("merge", func(t *testing.T) {
		hub, da, db, a, b := setup(t, func(b *vault.Vault) {
			require.NoError(t, vault.MergeWith(b, "notes", func(local, hub Note) (Note, error) {
				return Note{local.Text + "+" + hub.Text}, nil
			}))
		})
		rep := mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		assert.Equal(t, 1, rep.Pushed)
		mustSync(t, a)
		assert.Equal(t, map[string]string{"x": "B+A@3"}, assertConverged(t, hub, []stores.Store{da, db}, a, b))
	})
}
