package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// errReseal stops a rotation's re-sealing before it re-seals anything.
var errReseal = errors.New("test: the re-sealing is held back")

// stampStore wraps st so that, while hold is set, the re-sealing's listing
// of the tickets collection fails: the rotation's commit (the new
// generation, the store's current generation) is made, its re-sealing
// ends at once and stays pending, as after a crash.
func stampStore(st stores.Store, hold *atomic.Bool) stores.Store {
	return faultstore.New(st, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if hold.Load() && op == faultstore.OpList && key == "v/team/t" {
			return errReseal
		}
		return nil
	}})
}

// stampTickets writes n tickets through c, t-00 to t-(n-1), and returns their ids.
func stampTickets(t testing.TB, c *vault.Collection[Ticket], n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("t-%02d", i)
		require.NoError(t, c.Put(context.Background(), ids[i], Ticket{Subject: "secret " + ids[i]}))
	}
	return ids
}

// TestStampStaleHandleSealsCurrentGeneration: olga's second handle,
// opened before a rotation on her first (a plain one, or the one of bob's
// revocation; finished, or interrupted before it re-sealed anything), runs
// a deferred-numbering pass over six pending tickets. Every record it
// stamps is sealed with the store's current generation, as a record
// commit of a stale handle is (rotate_current.go): after a revocation, no
// stamped ticket opens with any key bob held (unwrapped by hand from his
// raw keyring entry), and the numbers are exactly 1..6. On memstore and
// badger.
func TestStampStaleHandleSealsCurrentGeneration(t *testing.T) {
	for name, newStore := range memAndBadger() {
		for _, change := range []string{"rotate", "rotate-interrupted", "revoke", "revoke-interrupted"} {
			t.Run(name+"/"+change, func(t *testing.T) {
				ctx := context.Background()
				st := newStore(t)
				var hold atomic.Bool
				owner := openPerson(t, personCfg(stampStore(st, &hold), "olga", "o"))
				require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleWriter))
				ids := stampTickets(t, vault.CollectionOf[Ticket](owner, "tickets"), 6)
				stale := openPerson(t, personCfg(st, "olga", "o"))
				hdr, err := st.Get(ctx, "v/team/_header")
				require.NoError(t, err)
				entry, err := st.Get(ctx, "v/team/_keyring/bob")
				require.NoError(t, err)
				bobKeys := heldKeys(t, "team", "bob", "bob-secret", hdr.Value, entry.Value)
				require.True(t, opensWith(t, st, "tickets", ids[0], bobKeys), "control: bob's keys open a ticket before")

				interrupted := change == "rotate-interrupted" || change == "revoke-interrupted"
				hold.Store(interrupted)
				var rot *vault.Rotation
				if change == "rotate" || change == "rotate-interrupted" {
					rot, err = owner.RotateKeys(ctx)
					require.NoError(t, err)
				} else {
					require.NoError(t, owner.Revoke(ctx, "bob"))
					rot = owner.Rotation()
					require.NotNil(t, rot)
				}
				if interrupted {
					require.ErrorIs(t, rot.Wait(ctx), errReseal)
					assert.Equal(t, uint64(1), envelopeGen(t, st, "v/team/tickets/"+ids[0]), "control: not re-sealed")
				} else {
					require.NoError(t, rot.Wait(ctx))
				}
				hold.Store(false)
				top := rot.Generation()
				require.Equal(t, uint64(2), top)

				series := ticketNumbering(t, stale)
				for _, id := range ids {
					_, err := series.Enqueue(ctx, id)
					require.NoError(t, err)
				}
				rep, err := series.RunPass(ctx)
				require.NoError(t, err)
				assert.Equal(t, len(ids), rep.Assigned)

				numbers := map[uint64]string{}
				for _, id := range ids {
					assert.Equal(t, top, envelopeGen(t, st, "v/team/tickets/"+id), "%s stamped below the store's generation", id)
					if change == "revoke" || change == "revoke-interrupted" {
						assert.False(t, opensWith(t, st, "tickets", id, bobKeys), "%s opens with a key bob held", id)
					}
					got, err := vault.CollectionOf[Ticket](owner, "tickets").Get(ctx, id)
					require.NoError(t, err)
					assert.Equal(t, "secret "+id, got.Subject)
					numbers[got.No] = id
				}
				for n := uint64(1); n <= uint64(len(ids)); n++ {
					assert.Contains(t, numbers, n, "number %d", n)
				}
				assert.Len(t, numbers, len(ids))
				verified(t, owner)
			})
		}
	}
}

// TestStampRevokedStaleHandleRefused: bob's handle, opened before olga
// revoked him, runs a deferred-numbering pass over six pending tickets
// (enqueued by olga): it is refused with ErrNoAccess and writes nothing
// (the store's every key and value, the ledger's head, are as before).
// Whether the revocation's re-sealing finished or was interrupted before
// it re-sealed anything. On memstore and badger.
func TestStampRevokedStaleHandleRefused(t *testing.T) {
	for name, newStore := range memAndBadger() {
		for _, interrupted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/interrupted=%v", name, interrupted), func(t *testing.T) {
				ctx := context.Background()
				st := newStore(t)
				var hold atomic.Bool
				owner := openPerson(t, personCfg(stampStore(st, &hold), "olga", "o"))
				require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleWriter))
				ids := stampTickets(t, vault.CollectionOf[Ticket](owner, "tickets"), 6)
				series := ticketNumbering(t, owner)
				for _, id := range ids {
					_, err := series.Enqueue(ctx, id)
					require.NoError(t, err)
				}
				bob := openPerson(t, personCfg(st, "bob", "bob-secret"))

				hold.Store(interrupted)
				require.NoError(t, owner.Revoke(ctx, "bob"))
				if interrupted {
					require.ErrorIs(t, owner.Rotation().Wait(ctx), errReseal)
				} else {
					require.NoError(t, owner.Rotation().Wait(ctx))
				}
				hold.Store(false)

				head, err := owner.Audit().Head(ctx)
				require.NoError(t, err)
				before := faultstore.Snapshot(snapshotStore(t, st))
				_, err = ticketNumbering(t, bob).RunPass(ctx)
				assert.ErrorIs(t, err, vault.ErrNoAccess)
				assert.Empty(t, changedKeys(before, faultstore.Snapshot(snapshotStore(t, st))), "keys the refused pass changed")
				after, err := owner.Audit().Head(ctx)
				require.NoError(t, err)
				assert.Equal(t, head, after)

				// Olga's own pass numbers them all.
				rep, err := series.RunPass(ctx)
				require.NoError(t, err)
				assert.Equal(t, len(ids), rep.Assigned)
				verified(t, owner)
			})
		}
	}
}

// onceAtHead wraps st so that the first read of the ticket series' head
// after arm is set (a pass's first step once it holds the series) runs
// fn first: a rotation made by another handle between the pass's entry
// and its stamps.
func onceAtHead(st stores.Store, arm *atomic.Bool, fn func()) stores.Store {
	return faultstore.New(st, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpGet && key == "v/team/_numbering/ticket/head" && arm.CompareAndSwap(true, false) {
			fn()
		}
		return nil
	}})
}

// TestStampRotationDuringPass: the rotation (a plain one, the one of a
// grant limited to notes, or the one of bob's revocation, its re-sealing
// interrupted before it re-sealed anything) commits while a pass of olga's other handle, which entered the
// series before it, plans its batch over n pending tickets. The stamps
// that follow find the store's generation in their transaction and seal
// with it: every ticket on the new generation, none opening with a key bob
// held or with the limited person's keys, numbers exactly 1..n. A pass of bob's own handle caught so is
// refused at its first stamp with ErrNoAccess: no ticket changes and the
// ledger gets nothing; olga's next pass finishes the batch it committed.
// With one ticket too (a single stamp, not a batch). On memstore and
// badger.
func TestStampRotationDuringPass(t *testing.T) {
	for name, newStore := range memAndBadger() {
		for _, tc := range []struct {
			change  string
			tickets int // 1: Stamp; more: StampBatch
		}{{"rotate", 6}, {"limit", 6}, {"revoke", 6}, {"revoke", 1}, {"revoke-own-pass", 6}, {"revoke-own-pass", 1}} {
			t.Run(fmt.Sprintf("%s/%s/%d", name, tc.change, tc.tickets), func(t *testing.T) {
				change := tc.change
				ctx := context.Background()
				st := newStore(t)
				var hold, arm atomic.Bool
				owner := openPerson(t, personCfg(stampStore(st, &hold), "olga", "o"))
				require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleWriter))
				ids := stampTickets(t, vault.CollectionOf[Ticket](owner, "tickets"), tc.tickets)
				series := ticketNumbering(t, owner)
				for _, id := range ids {
					_, err := series.Enqueue(ctx, id)
					require.NoError(t, err)
				}
				hdr, err := st.Get(ctx, "v/team/_header")
				require.NoError(t, err)
				entry, err := st.Get(ctx, "v/team/_keyring/bob")
				require.NoError(t, err)
				bobKeys := heldKeys(t, "team", "bob", "bob-secret", hdr.Value, entry.Value)

				var rot *vault.Rotation
				rotate := func() {
					hold.Store(true)
					defer hold.Store(false)
					switch change {
					case "rotate":
						var err error
						rot, err = owner.RotateKeys(ctx)
						require.NoError(t, err)
					case "limit":
						// The grant waits for the re-sealing, which fails.
						err := owner.Grant(ctx, "lim", vault.Secret([]byte("lim-secret")), vault.RoleWriter, "notes")
						require.ErrorIs(t, err, errReseal)
						rot = owner.Rotation()
					default:
						require.NoError(t, owner.Revoke(ctx, "bob"))
						rot = owner.Rotation()
					}
					require.ErrorIs(t, rot.Wait(ctx), errReseal)
				}
				user, secret := "olga", "o"
				if change == "revoke-own-pass" {
					user, secret = "bob", "bob-secret"
				}
				stale := openPerson(t, personCfg(onceAtHead(st, &arm, rotate), user, secret))
				staleSeries := ticketNumbering(t, stale)
				_, err = staleSeries.Pending(ctx) // enters the series once
				require.NoError(t, err)

				head, err := owner.Audit().Head(ctx)
				require.NoError(t, err)
				before := faultstore.Snapshot(snapshotStore(t, st))
				arm.Store(true)
				rep, err := staleSeries.RunPass(ctx)
				require.NotNil(t, rot, "the rotation ran during the pass")
				require.Equal(t, uint64(2), rot.Generation())
				if change == "revoke-own-pass" {
					assert.ErrorIs(t, err, vault.ErrNoAccess)
					for _, k := range changedKeys(before, faultstore.Snapshot(snapshotStore(t, st))) {
						assert.NotContains(t, k, "/tickets/", "the refused pass changed a ticket")
					}
					after, herr := owner.Audit().Head(ctx)
					require.NoError(t, herr)
					assert.Equal(t, head.Seq+2, after.Seq, "the ledger got the revocation and the rotation only")
					rep, err = series.RunPass(ctx)
				}
				require.NoError(t, err)
				assert.Equal(t, len(ids), rep.Assigned)

				numbers := map[uint64]string{}
				for _, id := range ids {
					assert.Equal(t, uint64(2), envelopeGen(t, st, "v/team/tickets/"+id), "%s stamped below the store's generation", id)
					if change == "revoke" || change == "revoke-own-pass" {
						assert.False(t, opensWith(t, st, "tickets", id, bobKeys), "%s opens with a key bob held", id)
					}
					got, err := vault.CollectionOf[Ticket](owner, "tickets").Get(ctx, id)
					require.NoError(t, err)
					numbers[got.No] = id
				}
				for n := uint64(1); n <= uint64(len(ids)); n++ {
					assert.Contains(t, numbers, n, "number %d", n)
				}
				assert.Len(t, numbers, len(ids))
				if change == "limit" {
					opened, total := rawOpens(t, st, "tickets", entryKeys(t, st, "lim", "lim-secret"))
					assert.Equal(t, len(ids), total)
					assert.Zero(t, opened, "tickets open with the keys of a person limited to notes")
				}
				verified(t, owner)
			})
		}
	}
}

// TestStampStaleDeviceSettlesOnHub: olga's device B hands three tickets
// to a series (pending, pushed to the hub), then, without syncing again,
// runs the pass on the hub after she revoked bob on device A (the new
// generation committed on the hub first). The pass brings the hub's
// keyring first and stamps with the new generation: no ticket on the hub
// or, after B's sync, on B opens with a key bob held (unwrapped by hand
// from his hub entry before the revocation), and the numbers are 1..3.
func TestStampStaleDeviceSettlesOnHub(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleWriter))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	mustSync(t, b)
	h, err := vault.NumberingOf(vault.CollectionOf[Ticket](b, "tickets"), "ticket", sequence.Options{},
		func(tk *Ticket, s sequence.Serial) { tk.No = s.N })
	require.NoError(t, err)
	ids := []string{"t-00", "t-01", "t-02"}
	for _, id := range ids {
		r, err := h.Put(ctx, id, Ticket{Subject: "secret " + id})
		require.NoError(t, err)
		require.True(t, r.Pending)
	}
	mustSync(t, b)
	hdr, err := hub.Get(ctx, "v/team/_header")
	require.NoError(t, err)
	entry, err := hub.Get(ctx, "v/team/_keyring/bob")
	require.NoError(t, err)
	bobKeys := heldKeys(t, "team", "bob", "bob-secret", hdr.Value, entry.Value)
	require.True(t, opensWith(t, hub, "tickets", ids[0], bobKeys), "control")

	require.NoError(t, a.Revoke(ctx, "bob"))
	require.NoError(t, a.Rotation().Wait(ctx))
	rep, err := h.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, len(ids), rep.Assigned)
	for _, id := range ids {
		assert.Equal(t, uint64(2), envelopeGen(t, hub, "v/team/tickets/"+id), "%s stamped below the hub's generation", id)
		assert.False(t, opensWith(t, hub, "tickets", id, bobKeys), "%s opens with a key bob held on the hub", id)
	}
	mustSync(t, b)
	numbers := map[uint64]string{}
	for _, id := range ids {
		assert.False(t, opensWith(t, devB, "tickets", id, bobKeys), "%s opens with a key bob held on device B", id)
		r, err := h.Get(ctx, id)
		require.NoError(t, err)
		numbers[r.Serial.N] = id
		assert.Equal(t, r.Serial.N, r.Value.No)
	}
	assert.Equal(t, map[uint64]string{1: "t-00", 2: "t-01", 3: "t-02"}, numbers)
	verified(t, b)
}
