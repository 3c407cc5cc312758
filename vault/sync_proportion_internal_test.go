package vault

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// Sync in proportion to the changes: a sync that follows a large push or
// a large pull does not read back, from the hub's ledger or the device's,
// the entries that push or pull wrote.

func openSyncDevice(t *testing.T, st, hub stores.Store, user, secret string) *Vault {
	t.Helper()
	v, err := Open(context.Background(), Config{Store: st, Hub: hub, Name: "shop", User: user, Secret: []byte(secret),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// TestSyncLearnsAGrantMadeAfterALargePush: after a push of many records,
// a person granted on another device is still learnt by the device's
// replay of the hub's people, which follows the people entries' links and
// so never reads the pushed records back (ledger:
// TestReplayPeopleReadsOnlyPeople).
func TestSyncLearnsAGrantMadeAfterALargePush(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	a := openSyncDevice(t, memstore.New(), hub, "olga", "o")
	notes := CollectionOf[string](a, "notes")
	_, err := a.Sync(ctx)
	require.NoError(t, err)
	for i := range 40 {
		require.NoError(t, notes.Put(ctx, fmt.Sprintf("n%02d", i), "x"))
	}
	rep, err := a.Sync(ctx)
	require.NoError(t, err)
	require.Equal(t, 40, rep.Pushed)

	b := openSyncDevice(t, memstore.New(), hub, "olga", "o")
	_, err = b.Sync(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Grant(ctx, "carol", Secret([]byte("c")), RoleWriter))
	_, err = b.Sync(ctx)
	require.NoError(t, err)
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	st, err := a.hub.peopleState(ctx)
	require.NoError(t, err)
	carol, named := st.Person("carol")
	require.True(t, named)
	assert.Equal(t, RoleWriter.String(), carol.Role, "a grant made on another device after the push")
}

// TestPullMovesPushCursorPastPulledEntries: a pull's local commits move
// the push cursor past the entries they append (records pulled), when
// the device has nothing of its own before them, so the push that follows
// a first pull of many records does not read them all back; a change of
// the device's own made before the pull keeps the cursor before it, and
// is pushed.
func TestPullMovesPushCursorPastPulledEntries(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	a, notes := deviceWithNotes(t, hub, 40)

	b := openSyncDevice(t, memstore.New(), hub, "olga", "o")
	s := pullRun(t, b)
	require.Equal(t, 40, s.rep.Pulled)
	head, err := b.ledger.Head(ctx)
	require.NoError(t, err)
	at, err := s.loadPush(ctx)
	require.NoError(t, err)
	assert.Equal(t, head.Seq, at, "the push cursor is past the pulled entries")

	// A change of b's own, then a pull: the cursor stays before the
	// change, which the push sends.
	require.NoError(t, CollectionOf[string](b, "notes").Put(ctx, "mine", "b"))
	own, err := b.ledger.Head(ctx)
	require.NoError(t, err)
	require.NoError(t, notes.Put(ctx, "n00", "again"))
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	s = pullRun(t, b)
	require.Equal(t, 1, s.rep.Pulled)
	at, err = s.loadPush(ctx)
	require.NoError(t, err)
	assert.Equal(t, own.Seq-1, at, "the push cursor waits before the device's own change")
	rep, err := b.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Pushed)
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	got, err := notes.Get(ctx, "mine")
	require.NoError(t, err)
	assert.Equal(t, "b", got)
}

// ledgerReads is a hub store that counts the reads of its ledger's
// entries (gets and lists under the ledger's folder).
type ledgerReads struct {
	*memstore.Store
	gets, lists atomic.Int64
}

func (s *ledgerReads) Get(ctx context.Context, key string) (stores.Item, error) {
	if strings.Contains(key, "/_ledger/") {
		s.gets.Add(1)
	}
	return s.Store.Get(ctx, key)
}

func (s *ledgerReads) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	if strings.Contains(prefix, "/_ledger/") {
		s.lists.Add(1)
	}
	return s.Store.List(ctx, prefix)
}

// TestHubPeopleAfterALargePushReadsNoRecords: after a push of many
// records, the replay of the hub's people (each sync's keyring step)
// reads a few entries of the hub's ledger, not the pushed ones.
func TestHubPeopleAfterALargePushReadsNoRecords(t *testing.T) {
	ctx := context.Background()
	hub := &ledgerReads{Store: memstore.New()}
	a := openSyncDevice(t, memstore.New(), hub, "olga", "o")
	notes := CollectionOf[string](a, "notes")
	_, err := a.Sync(ctx)
	require.NoError(t, err)
	for i := range 200 {
		require.NoError(t, notes.Put(ctx, fmt.Sprintf("n%03d", i), "x"))
	}
	rep, err := a.Sync(ctx)
	require.NoError(t, err)
	require.Equal(t, 200, rep.Pushed)

	hub.gets.Store(0)
	hub.lists.Store(0)
	_, err = a.hub.peopleState(ctx)
	require.NoError(t, err)
	assert.Zero(t, hub.lists.Load(), "the replay listed the hub's ledger")
	t.Logf("%d reads", hub.gets.Load())
	assert.LessOrEqual(t, hub.gets.Load(), int64(8), "entries of the hub's ledger read")
}

// TestPullTakesNoPulledRecordForItsOwn: a pull of many records in several
// local commits does not read back, before each commit, the entries the
// commits before it appended (records pulled, which the push cursor
// passed): they are not changes of the device's own, and reading them
// would cost a read of the device's ledger per commit and a note per
// record pulled.
func TestPullTakesNoPulledRecordForItsOwn(t *testing.T) {
	defer func(b, p int) { syncBatch, syncPass = b, p }(syncBatch, syncPass)
	syncBatch, syncPass = 8, 64
	ctx := context.Background()
	hub := memstore.New()
	a, notes := deviceWithNotes(t, hub, 40)

	b := openSyncDevice(t, memstore.New(), hub, "olga", "o")
	s := pullRun(t, b)
	require.Equal(t, 40, s.rep.Pulled)
	assert.Empty(t, s.own, "records taken for the device's own")
	assert.Empty(t, s.ownPuts, "record writes taken for the device's own")
	head, err := b.ledger.Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head.Seq, s.ownRead, "the device's ledger is known to hold nothing of its own up to its head")

	// A change of b's own, then a pull: the change is b's own.
	require.NoError(t, CollectionOf[string](b, "notes").Put(ctx, "mine", "b"))
	require.NoError(t, notes.Put(ctx, "n00", "again"))
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	s = pullRun(t, b)
	require.Equal(t, 1, s.rep.Pulled)
	assert.Equal(t, map[recKey]bool{{"notes", "mine"}: true}, s.own)
}

// pullRun runs the pull of a Sync of v and returns its run.
func pullRun(t *testing.T, v *Vault) *syncRun {
	t.Helper()
	ctx := context.Background()
	s := &syncRun{v: v, h: v.hub, rep: &SyncReport{}}
	require.NoError(t, s.keyrings(ctx))
	require.NoError(t, s.loadGiven(ctx))
	require.NoError(t, s.pull(ctx))
	return s
}

// deviceWithNotes opens a device of hub as olga, writes n notes there and
// pushes them.
func deviceWithNotes(t *testing.T, hub stores.Store, n int) (*Vault, *Collection[string]) {
	t.Helper()
	ctx := context.Background()
	a := openSyncDevice(t, memstore.New(), hub, "olga", "o")
	notes := CollectionOf[string](a, "notes")
	for i := range n {
		require.NoError(t, notes.Put(ctx, fmt.Sprintf("n%02d", i), "x"))
	}
	_, err := a.Sync(ctx)
	require.NoError(t, err)
	return a, notes
}
