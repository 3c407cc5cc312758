package noydb_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// holdStore is a store with atomic compare-and-swap but no transactions.
// Once armed, the first compare-and-swap of a key holding part stops before
// it reaches the store: it closes reached and waits for release (so do the
// others that come meanwhile).
type holdStore struct {
	stores.Store
	part             string
	armed            atomic.Bool
	once             sync.Once
	reached, release chan struct{}
}

func newHoldStore(st stores.Store, part string) *holdStore {
	return &holdStore{Store: st, part: part, reached: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdStore) Capabilities() stores.Capabilities {
	caps := h.Store.Capabilities()
	caps.Transactions = false
	return caps
}

func (h *holdStore) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) (uint64, error) {
	if h.armed.Load() && strings.Contains(key, h.part) {
		h.once.Do(func() {
			close(h.reached)
			<-h.release
		})
	}
	return h.Store.CompareAndSwap(ctx, key, version, value)
}

// waitClosing returns once Close has begun: probe, a call on the vault,
// is refused with ErrClosed.
func waitClosing(t *testing.T, probe func() error) {
	t.Helper()
	for {
		err := probe()
		if errors.Is(err, noydb.ErrClosed) {
			return
		}
		require.NoError(t, err)
		runtime.Gosched()
	}
}

// closeDuring runs call in a goroutine and, once call is in flight (it has
// called hold), runs closeFn; hold returns once Close has begun on v, so
// what call does after it races a Close that waits for it. It returns what
// call and closeFn returned.
func closeDuring(v *vault.Vault, closeFn func() error, call func(hold func()) error) (callErr, closeErr error) {
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func() {
		once.Do(func() { close(reached) })
		<-release
	}
	done := make(chan error, 1)
	go func() { done <- call(hold) }()
	select {
	case <-reached:
	case err := <-done:
		return err, nil // call failed before it was in flight
	}
	closed := make(chan error, 1)
	go func() { closed <- closeFn() }()
	// Wait on the vault itself: the call may hold the store.
	for !v.Closed() {
		runtime.Gosched()
	}
	close(release)
	return <-done, <-closed
}

// A Put on a store without transactions has sealed its record and is about
// to write it when Close begins. Close waits for it: the Put completes, its
// ledger entry included, before Close returns, and nothing reaches the
// store after Close returned (no record change without its ledger entry).
func TestCloseWaitsForRecordWrite(t *testing.T) {
	for storeName, newStore := range memAndBadger() {
		t.Run(storeName, func(t *testing.T) {
			ctx := context.Background()
			raw := newStore(t)
			hs := newHoldStore(raw, "/notes/")
			db := openDB(t, hs, "firm", "s")
			v := openVault(t, db, "books")
			notes := vault.CollectionOf[string](v, "notes")
			other := vault.CollectionOf[string](v, "other")

			hs.armed.Store(true)
			putDone := make(chan error, 1)
			go func() { putDone <- notes.Put(ctx, "n1", "hello") }()
			<-hs.reached
			closeDone := make(chan error, 1)
			go func() { closeDone <- v.Close() }()
			waitClosing(t, func() error { _, err := other.Count(ctx); return err })
			close(hs.release)

			require.NoError(t, <-closeDone)
			atClose := snapshot(t, raw)
			putErr := <-putDone
			assert.Equal(t, atClose, snapshot(t, raw), "a write reached the store after Close returned")
			require.NoError(t, putErr, "a Put admitted before Close completes")

			v2 := openVault(t, openDB(t, raw, "firm", "s"), "books")
			got, err := vault.CollectionOf[string](v2, "notes").Get(ctx, "n1")
			require.NoError(t, err)
			assert.Equal(t, "hello", got)
			var puts []uint64
			for e, err := range v2.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				if e.Collection == "notes" && e.ID == "n1" {
					puts = append(puts, e.Revision)
				}
			}
			assert.Equal(t, []uint64{1}, puts, "the record's ledger entry")
		})
	}
}

// A numbering pass is stamping records when Close begins. Close waits for
// the pass, which completes: its numbers, ledger entries and head are in
// the store, its rollback pin is in the state folder (a store that then
// serves the head from before the pass is caught), and nothing reaches the
// store after Close returned.
func TestCloseWaitsForNumberingPass(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	raw := adv.Store()
	hs := newHoldStore(raw, "/tickets/")
	dir := t.TempDir()
	db := openWithState(t, hs, dir)
	v := openVault(t, db, "books")
	tickets := vault.CollectionOf[Ticket](v, "tickets")
	ns := ticketNumbering(t, v)
	for i, id := range []string{"t-1", "t-2", "t-3"} {
		require.NoError(t, tickets.Put(ctx, id, Ticket{Subject: id}))
		_, err := ns.Enqueue(ctx, id)
		require.NoError(t, err)
		if i == 0 {
			_, err := ns.RunPass(ctx)
			require.NoError(t, err)
		}
	}
	before, err := adv.Snapshot(ctx) // head at 1

	require.NoError(t, err)
	hs.armed.Store(true)
	passDone := make(chan error, 1)
	go func() { _, err := ns.RunPass(ctx); passDone <- err }()
	<-hs.reached
	closeDone := make(chan error, 1)
	go func() { closeDone <- v.Close() }()
	waitClosing(t, func() error { _, err := tickets.Count(ctx); return err })
	close(hs.release)

	require.NoError(t, <-closeDone)
	atClose := snapshot(t, raw)
	passErr := <-passDone
	assert.Equal(t, atClose, snapshot(t, raw), "a write reached the store after Close returned")
	require.NoError(t, passErr, "a pass admitted before Close completes")

	db2 := openWithState(t, raw, dir)
	v2 := openVault(t, db2, "books")
	ns2 := ticketNumbering(t, v2)
	last, err := ns2.Last(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), last)
	var nos []uint64
	for r, err := range vault.CollectionOf[Ticket](v2, "tickets").List(ctx) {
		require.NoError(t, err)
		nos = append(nos, r.Value.No)
	}
	slices.Sort(nos)
	assert.Equal(t, []uint64{1, 2, 3}, nos)
	require.NoError(t, db2.Close())

	// The pin of the head at 3 reached the state folder before Close
	// returned: the head from before the pass is a rollback.
	require.NoError(t, adv.Restore(ctx, before, "v/books/_numbering/"))
	v3 := openVault(t, openWithState(t, raw, dir), "books")
	ns3 := ticketNumbering(t, v3)
	_, err = ns3.Last(ctx)
	assert.ErrorIs(t, err, noydb.ErrRollback)
}

// A call made from inside another while Close waits for the outer one is
// refused, so Close does not wait for a call that waits for Close: the
// build function of a PutNumbered reads the collection after Close began,
// gets ErrClosed and fails the PutNumbered, which takes no number.
func TestCloseRefusesNestedCall(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	db := openDB(t, st, "firm", "s")
	v := openVault(t, db, "books")
	seq, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	invoices := vault.CollectionOf[Invoice](v, "invoices")

	putErr, closeErr := closeDuring(v, v.Close, func(hold func()) error {
		_, err := invoices.PutNumbered(ctx, "inv-1", seq, func(s sequence.Serial) (Invoice, error) {
			hold()
			if _, err := invoices.Get(ctx, "inv-0"); !errors.Is(err, stores.ErrNotFound) {
				return Invoice{}, err
			}
			return Invoice{Total: int(s.N)}, nil
		})
		return err
	})
	require.NoError(t, closeErr)
	assert.ErrorIs(t, putErr, noydb.ErrClosed)

	v2 := openVault(t, openDB(t, st, "firm", "s"), "books")
	_, err = vault.CollectionOf[Invoice](v2, "invoices").Get(ctx, "inv-1")
	assert.ErrorIs(t, err, stores.ErrNotFound)
	seq2, err := v2.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	n, err := seq2.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n, "no number taken")
}

// A vault closed with its own Close is opened anew by the DB, and goes on
// where it stopped; ForgetVault accepts it once closed.
func TestReopenVaultClosedByItself(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openWithState(t, memstore.New(), dir)
	v := openVault(t, db, "books")
	seq, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	n, err := seq.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
	require.NoError(t, v.Close())

	v2 := openVault(t, db, "books")
	assert.NotSame(t, v, v2)
	assert.False(t, v2.Closed())
	seq2, err := v2.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	n, err = seq2.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
	_, err = seq.Next(ctx)
	assert.ErrorIs(t, err, noydb.ErrClosed, "the old handle stays closed")

	assert.Error(t, db.ForgetVault(ctx, "books"), "open in this DB")
	require.NoError(t, v2.Close())
	require.NoError(t, db.ForgetVault(ctx, "books"))
	used, err := vault.Used(dir, "books")
	require.NoError(t, err)
	assert.False(t, used)

	v3 := openVault(t, db, "books")
	seq3, err := v3.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	n, err = seq3.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), n)
	require.NoError(t, db.Close())
	assert.True(t, v3.Closed())
}

// Two DBs of one process share the pins of a vault in one state folder,
// sealed with the key of the first opener: closing that opener leaves the
// pins of the second working (their key is not wiped under them).
func TestCloseKeepsSharedPinsKey(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	dir := t.TempDir()
	v1 := openVault(t, openWithState(t, st, dir), "books")
	v2 := openVault(t, openWithState(t, st, dir), "books")
	require.NoError(t, v1.Close())
	seq, err := v2.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	for want := uint64(1); want <= 3; want++ {
		n, err := seq.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, n)
	}
	require.NoError(t, v2.Close())
}

// A call in flight on a vault uses the DB while DB.Close waits for that
// call: the DB refuses it with ErrClosed instead of deadlocking, and both
// return.
func TestDBCloseLetsCallsInFlightUseTheDB(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, memstore.New(), "firm", "s")
	v := openVault(t, db, "books")
	seq, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	invoices := vault.CollectionOf[Invoice](v, "invoices")

	putErr, closeErr := closeDuring(v, db.Close, func(hold func()) error {
		_, err := invoices.PutNumbered(ctx, "inv-1", seq, func(s sequence.Serial) (Invoice, error) {
			hold()
			if _, err := db.OpenVault(ctx, "other"); err != nil {
				return Invoice{}, err
			}
			return Invoice{Total: int(s.N)}, nil
		})
		return err
	})
	assert.ErrorIs(t, putErr, noydb.ErrClosed)
	require.NoError(t, closeErr)
	require.NoError(t, db.Close(), "idempotent")
}
