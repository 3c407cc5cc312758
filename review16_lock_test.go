package noydb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// lockOrderStore is a memstore whose transactions record the order in
// which pgstore would lock their keys, and report each key locked below
// one the transaction already holds: two transactions that lock two keys
// crosswise like that can deadlock on PostgreSQL. Its Tx is a
// stores.Prefetcher, so the vault takes the paths it takes on pgstore.
//
// The model is pgstore's (stores/pgstore/tx.go): a Get of a key the
// transaction does not know yet locks it (or claims it when missing); a
// Prefetch locks the keys it does not know yet in ascending order; a Put or
// Delete is only recorded, and the keys written but not yet locked are
// locked in ascending order at the next round trip (a Get or Prefetch that
// goes to the server, or the commit). A Put makes its key known, so a later
// Get or Prefetch of it takes no lock. Two kinds of keys written after
// their head are exempt: the entries of a ledger (<prefix>_ledger/<digits>)
// and the batch records of a numbering pass (<prefix>_numbering/<series>/batch/…),
// which only the holder of their head (which sorts after them) writes or
// reads in a transaction, so that no transaction waits for them while
// holding another key.
type lockOrderStore struct {
	*memstore.Store
	mu  sync.Mutex
	bad []string // one line per key locked out of order
}

// Update runs fn in a memstore transaction seen through a lockOrderTx.
func (s *lockOrderStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.Store.Update(ctx, func(tx stores.Tx) error {
		t := &lockOrderTx{tx: tx, known: map[string]bool{}}
		err := fn(t)
		if err == nil {
			t.flush() // the commit sends the writes not sent yet
		}
		if len(t.bad) > 0 {
			s.mu.Lock()
			for _, b := range t.bad {
				s.bad = append(s.bad, b+" in a transaction locking "+strings.Join(t.locked, " "))
			}
			s.mu.Unlock()
		}
		return err
	})
}

// outOfOrder returns the keys locked out of order so far, and forgets them.
func (s *lockOrderStore) outOfOrder() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.bad
	s.bad = nil
	return out
}

// lockOrderTx is the Tx of lockOrderStore.
type lockOrderTx struct {
	tx      stores.Tx
	known   map[string]bool // read, claimed or written: answered without the server
	pending []string        // written, not known before, not locked yet
	locked  []string        // in the order taken
	top     string          // the greatest key locked
	bad     []string
}

var _ stores.Prefetcher = (*lockOrderTx)(nil)

// lock takes keys, in the order given.
func (t *lockOrderTx) lock(keys ...string) {
	for _, k := range keys {
		if k < t.top && !underHead(k) {
			t.bad = append(t.bad, fmt.Sprintf("%q locked after %q", k, t.top))
		}
		t.top = max(t.top, k)
		t.locked = append(t.locked, k)
	}
}

// flush locks the keys written since the last round trip, in key order.
func (t *lockOrderTx) flush() {
	slices.Sort(t.pending)
	t.lock(slices.Compact(t.pending)...)
	t.pending = nil
}

// underHead reports whether key is that of a ledger entry or of a numbering
// pass's batch record.
func underHead(key string) bool {
	if _, rest, ok := strings.Cut(key, "_ledger/"); ok {
		return rest != "" && rest[0] >= '0' && rest[0] <= '9'
	}
	_, rest, ok := strings.Cut(key, "_numbering/")
	return ok && strings.Contains(rest, "/batch/")
}

func (t *lockOrderTx) Get(key string) (stores.Item, error) {
	if !t.known[key] {
		t.flush()
		t.lock(key)
		t.known[key] = true
	}
	return t.tx.Get(key)
}

func (t *lockOrderTx) Prefetch(keys []string) error {
	var todo []string
	for _, k := range keys {
		if err := stores.CheckKey(k); err != nil {
			return err
		}
		if !t.known[k] {
			todo = append(todo, k)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	t.flush()
	slices.Sort(todo)
	todo = slices.Compact(todo)
	t.lock(todo...)
	for _, k := range todo {
		t.known[k] = true
	}
	return nil
}

func (t *lockOrderTx) Put(key string, value []byte) error {
	if !t.known[key] {
		t.pending = append(t.pending, key)
		t.known[key] = true
	}
	return t.tx.Put(key, value)
}

func (t *lockOrderTx) Delete(key string) error {
	if !t.known[key] {
		t.pending = append(t.pending, key)
	}
	return t.tx.Delete(key)
}

// Slip is a record numbered by field name by a deferred-numbering pass.
type Slip struct {
	No   uint64 `json:"No"`
	Text string
}

// TestReview16LockOrder: the commits of numbered puts (NumberingOf's Put
// and Collection.PutNumbered: record, counter, ledger, current
// generation), of a key rotation (on a vault, and on the hub of a device)
// and its re-seal, of record puts after the rotation, of a
// deferred-numbering pass's stamps (a batch, and a single record), and of
// a device's handoff of a numbered record lock their keys in ascending
// order, the one global order that keeps PostgreSQL's row locks from
// deadlocking (see lockOrderStore for the model of pgstore's locks).
// Before the fix the numbered puts locked the current generation after
// the record, the rotation locked it after the ledger's head, the stamps
// locked it after the record, or the records in the pass's order, and the
// handoff locked its entry after the record.
func TestReview16LockOrder(t *testing.T) {
	ctx := context.Background()
	st := &lockOrderStore{Store: memstore.New()}
	v := openPerson(t, personCfg(st, "olga", "o"))
	receipts := vault.CollectionOf[Receipt](v, "receipts")
	nr, err := vault.NumberingOf(receipts, "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	require.True(t, nr.Online())
	notes := vault.CollectionOf[Note](v, "notes")
	slips := vault.CollectionOf[Slip](v, "slips")
	//lint:ignore SA1019 on a store with compare-and-swap only Numbering defers: its passes stamp
	ns, err := v.Numbering("slip", numbering.Options{Collection: "slips", Field: "No"})
	require.NoError(t, err)
	invoices := vault.CollectionOf[Receipt](v, "invoices")
	seq, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)

	round := func(name string, first int) {
		t.Helper()
		for i := first; i < first+3; i++ {
			_, err := nr.Put(ctx, fmt.Sprintf("r-%d", i), Receipt{Total: i})
			require.NoError(t, err)
			require.NoError(t, notes.Put(ctx, fmt.Sprintf("n-%d", i), Note{Text: "x"}))
			_, err = invoices.PutNumbered(ctx, fmt.Sprintf("i-%d", i), seq, func(s sequence.Serial) (Receipt, error) {
				return Receipt{Number: s.N}, nil
			})
			require.NoError(t, err)
		}
		// Slips enqueued in descending id order, so that a pass's batch
		// names them out of key order.
		for i := first + 2; i >= first; i-- {
			id := fmt.Sprintf("s-%d", i)
			require.NoError(t, slips.Put(ctx, id, Slip{Text: "x"}))
			_, err := ns.Enqueue(ctx, id)
			require.NoError(t, err)
		}
		rep, err := ns.RunPass(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, rep.Assigned, "%s: the pass numbers the three slips", name)
		// A pass of one record stamps it alone (Stamp, not StampBatch).
		id := fmt.Sprintf("s-%d", first+5)
		require.NoError(t, slips.Put(ctx, id, Slip{Text: "x"}))
		_, err = ns.Enqueue(ctx, id)
		require.NoError(t, err)
		rep, err = ns.RunPass(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, rep.Assigned, "%s: the pass numbers the slip", name)
		assert.Empty(t, st.outOfOrder(), "%s: keys locked out of order", name)
	}
	round("before any rotation", 0)

	rot, err := v.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	assert.Empty(t, st.outOfOrder(), "rotation and re-seal: keys locked out of order")

	round("after the rotation", 10)

	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.NoError(t, rep.Problem)

	// A device hands a numbered record off to its hub's pass with the
	// record's commit, and rotates on its hub first: those commits too.
	hub, dev := &lockOrderStore{Store: memstore.New()}, &lockOrderStore{Store: memstore.New()}
	d := openPerson(t, hubPerson(dev, hub, "olga", "o"))
	dr, err := vault.NumberingOf(vault.CollectionOf[Receipt](d, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	r, err := dr.Put(ctx, "r-1", Receipt{Total: 1})
	require.NoError(t, err)
	require.True(t, r.Pending)
	assert.Empty(t, dev.outOfOrder(), "handoff on a device: keys locked out of order")
	putTexts(t, d, map[string]string{}, "a", "b")
	mustSync(t, d)
	hub.outOfOrder()
	rot, err = d.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	assert.Empty(t, hub.outOfOrder(), "rotation on the hub: keys locked out of order")
}

// deadlockCounter is a pgstore that counts the transactions PostgreSQL
// ended as deadlocked (SQLSTATE 40P01, which pgstore reports as an error
// wrapping stores.ErrConflict that names the SQLSTATE). Embedding keeps the
// store's other powers (Locker, RangeLister, MultiGetter).
type deadlockCounter struct {
	*pgstore.Store
	deadlocks atomic.Int64
}

// isDeadlock reports whether err is pgstore's report of a deadlock.
func isDeadlock(err error) bool {
	return err != nil && strings.Contains(err.Error(), "SQLSTATE 40P01")
}

// Update runs fn in a pgstore transaction and counts it when it deadlocked,
// whether the deadlock came back from a Get or Prefetch (and fn returned
// something else) or from the commit.
func (s *deadlockCounter) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	var seen bool
	err := s.Store.Update(ctx, func(tx stores.Tx) error {
		return fn(&deadlockTx{Tx: tx, seen: &seen})
	})
	if seen || isDeadlock(err) {
		s.deadlocks.Add(1)
	}
	return err
}

// deadlockTx notes a deadlock reported by any call of a pgstore Tx.
type deadlockTx struct {
	stores.Tx
	seen *bool
}

var _ stores.Prefetcher = (*deadlockTx)(nil)

func (t *deadlockTx) note(err error) error {
	if isDeadlock(err) {
		*t.seen = true
	}
	return err
}

func (t *deadlockTx) Get(key string) (stores.Item, error) {
	it, err := t.Tx.Get(key)
	return it, t.note(err)
}

func (t *deadlockTx) Prefetch(keys []string) error {
	return t.note(t.Tx.(stores.Prefetcher).Prefetch(keys))
}

// TestReview16PGNoDeadlocks: on PostgreSQL, two handles of one vault (two
// processes, say) put numbered records in three series at once, while one
// of them rotates the keys (with the re-seal that follows) and the other
// puts plain records and runs deferred-numbering passes that stamp records
// with the current generation. No transaction deadlocks; every series
// holds exactly 1..N; every record reads; the ledger verifies.
func TestReview16PGNoDeadlocks(t *testing.T) {
	ctx := context.Background()
	st := &deadlockCounter{Store: pgtest.Open(t, nil)}
	first := openPerson(t, personCfg(st, "olga", "o"))
	second := openPerson(t, personCfg(st, "olga", "o"))
	handles := []*vault.Vault{first, second}

	const (
		perWorker = 12
		rotations = 3
	)
	seriesNames := []string{"invoice", "receipt", "ticket"}
	var (
		mu   sync.Mutex
		got  = map[string][]uint64{}
		want = map[string]int{}
		wg   sync.WaitGroup
	)
	for hi, v := range handles {
		for _, series := range seriesNames {
			coll := vault.CollectionOf[Receipt](v, series+"s")
			nr, err := vault.NumberingOf(coll, series, sequence.Options{}, setReceiptNumber)
			require.NoError(t, err)
			require.True(t, nr.Online())
			want[series] += 2 * perWorker
			for w := range 2 {
				wg.Go(func() {
					for i := range perWorker {
						r, err := nr.Put(ctx, fmt.Sprintf("h%d-w%d-%d", hi, w, i), Receipt{Total: i})
						if !assert.NoError(t, err, "numbered put") {
							return
						}
						mu.Lock()
						got[series] = append(got[series], r.Serial.N)
						mu.Unlock()
					}
				})
			}
		}
	}
	wg.Go(func() { // rotations, each with its re-seal
		for range rotations {
			rot, err := first.RotateKeys(ctx)
			if !assert.NoError(t, err, "rotate") {
				return
			}
			assert.NoError(t, rot.Wait(ctx), "re-seal")
		}
	})
	//lint:ignore SA1019 on a store with compare-and-swap only Numbering defers: its passes stamp
	ns, err := second.Numbering("slip", numbering.Options{Collection: "slips", Field: "No"})
	require.NoError(t, err)
	slips := vault.CollectionOf[Slip](second, "slips")
	notes := vault.CollectionOf[Note](second, "notes")
	stamped := 0
	wg.Go(func() { // plain puts, and passes that stamp what they enqueued
		for round := range 4 {
			for i := 5; i >= 0; i-- { // enqueued out of key order
				id := fmt.Sprintf("s-%d-%d", round, i)
				if !assert.NoError(t, slips.Put(ctx, id, Slip{Text: id}), "slip put") {
					return
				}
				if _, err := ns.Enqueue(ctx, id); !assert.NoError(t, err, "enqueue") {
					return
				}
				assert.NoError(t, notes.Put(ctx, id, Note{Text: id}), "note put")
			}
			rep, err := ns.RunPass(ctx)
			if !assert.NoError(t, err, "pass") {
				return
			}
			stamped += rep.Assigned
		}
	})
	wg.Wait()

	t.Logf("deadlocks: %d", st.deadlocks.Load())
	assert.Zero(t, st.deadlocks.Load(), "transactions PostgreSQL ended as deadlocked")
	for _, series := range seriesNames {
		nums := slices.Sorted(slices.Values(got[series]))
		wantNums := make([]uint64, want[series])
		for i := range wantNums {
			wantNums[i] = uint64(i + 1)
		}
		assert.Equal(t, wantNums, nums, "series %s: exactly 1..N", series)
	}
	assert.Equal(t, 24, stamped, "the passes number every slip")
	for i, v := range handles {
		rep, err := v.Audit().Verify(ctx)
		require.NoError(t, err, "handle %d", i)
		assert.NoError(t, rep.Problem, "handle %d", i)
	}
	n := 0
	for r, err := range vault.CollectionOf[Receipt](first, "receipts").List(ctx) {
		if assert.NoError(t, err, "receipt %s reads", r.ID) {
			n++
		}
	}
	assert.Equal(t, want["receipt"], n, "every receipt reads")
}
