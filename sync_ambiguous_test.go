package noydb_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// errLostReply is a hub commit that went through but whose reply was lost.
var errLostReply = errors.New("the hub's reply was lost")

// ambiguousHub wraps hub so that its next n transactions (armed by the
// returned counter) commit and then report errLostReply.
func ambiguousHub(hub stores.Store) (stores.Store, *atomic.Int64) {
	var n atomic.Int64
	return faultstore.New(hub, faultstore.Options{After: func(op faultstore.Op, _ string) error {
		if op == faultstore.OpUpdate && n.Add(-1) >= 0 {
			return errLostReply
		}
		return nil
	}}), &n
}

// ambiguousPush is one case of TestSyncKeepsAChangeAfterAnAmbiguousPush:
// before writes n-1 on device A (nil: nothing) and syncs; pushed changes
// n-1, and A's push of it commits on the hub but reports an error; after
// is the change A then makes; want is n-1 in the end ("": absent).
type ambiguousPush struct {
	name                  string
	before, pushed, after func(ctx context.Context, notes *vault.Collection[Note]) error
	want                  string
	policy                vault.SyncPolicy
}

// sealedNotes returns the sealed notes of vault "team" on st by key.
func sealedNotes(t testing.TB, st stores.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for it, err := range stores.ListUnder(context.Background(), st, "v/team/notes/") {
		require.NoError(t, err)
		out[it.Key] = string(it.Value)
	}
	return out
}

func put(text string) func(context.Context, *vault.Collection[Note]) error {
	return func(ctx context.Context, notes *vault.Collection[Note]) error {
		return notes.Put(ctx, "n-1", Note{Text: text})
	}
}

func del(ctx context.Context, notes *vault.Collection[Note]) error { return notes.Delete(ctx, "n-1") }

func ambiguousPushes() []ambiguousPush {
	return []ambiguousPush{
		{name: "a new record, then deleted", pushed: put("new"), after: del},
		{name: "an edit, then deleted", before: put("first"), pushed: put("edited"), after: del},
		{name: "an edit, then edited again", before: put("first"), pushed: put("edited"), after: put("again"), want: "again"},
		{name: "an edit, then edited again, manual policy", before: put("first"), pushed: put("edited"), after: put("again"),
			want: "again", policy: vault.Manual},
		{name: "a deletion, then written again", before: put("first"), pushed: del, after: put("back"), want: "back"},
	}
}

// TestSyncKeepsAChangeAfterAnAmbiguousPush: device A's push commits on
// the hub, but A gets an error (a reply lost on the way back), so it
// does not acknowledge it; A then changes the record again. A's next Sync
// finds its own push in the hub's feed and recognises it: its later
// change stands, with no conflict, and reaches the hub and device B. It
// used to take the pushed revision for another device's change made since
// A last synced: a conflict the later change could lose (a deletion, at
// the same revision), or, for a record A had never synced before, the
// pushed revision taken as the hub's change over an unchanged record,
// which brought a deleted record back without a word.
func TestSyncKeepsAChangeAfterAnAmbiguousPush(t *testing.T) {
	devices := memAndBadger()
	devices["filestore"] = newFolder // a device that commits a pull in steps
	for name, newStore := range devices {
		t.Run(name, func(t *testing.T) {
			for _, c := range ambiguousPushes() {
				t.Run(c.name, func(t *testing.T) { keepsChangeAfterAmbiguousPush(t, memstore.New(), newStore(t), newStore(t), c) })
			}
		})
	}
}

// TestSyncAmbiguousPushPostgresHub runs the cases of
// TestSyncKeepsAChangeAfterAnAmbiguousPush with a PostgreSQL hub (under
// scripts/with-postgres).
func TestSyncAmbiguousPushPostgresHub(t *testing.T) {
	for _, c := range ambiguousPushes() {
		t.Run(c.name, func(t *testing.T) {
			keepsChangeAfterAmbiguousPush(t, pgtest.Open(t, nil), memstore.New(), memstore.New(), c)
		})
	}
}

func keepsChangeAfterAmbiguousPush(t *testing.T, hub, devA, devB stores.Store, c ambiguousPush) {
	ctx := context.Background()
	flaky, lost := ambiguousHub(hub)
	a := openPerson(t, hubPerson(devA, flaky, "olga", "o"))
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	for _, v := range []*vault.Vault{a, b} {
		require.NoError(t, v.SetConflictPolicy("notes", c.policy))
	}
	na := vault.CollectionOf[Note](a, "notes")
	if c.before != nil {
		require.NoError(t, c.before(ctx, na))
		mustSync(t, a)
		mustSync(t, b)
	}
	require.NoError(t, c.pushed(ctx, na))
	onHub := sealedNotes(t, hub)
	lost.Store(1)
	_, err := a.Sync(ctx)
	require.ErrorIs(t, err, errLostReply)
	require.NotEqual(t, onHub, sealedNotes(t, hub), "the push committed on the hub")

	require.NoError(t, c.after(ctx, na))
	for _, v := range []*vault.Vault{a, b, a} {
		rep := mustSync(t, v)
		assert.Empty(t, rep.Conflicts, "a device's own push is no change of another")
	}
	for name, v := range map[string]*vault.Vault{"A": a, "B": b} {
		got, ok := notesOf(t, v)["n-1"]
		if c.want == "" {
			assert.False(t, ok, "device %s: A's deletion", name)
			continue
		}
		assert.Equal(t, c.want, got.Value.Text, "device %s: A's last write", name)
	}
	verified(t, a)
	verified(t, b)
}
