// Package memstore is an in-memory store: compare-and-swap and transactions,
// nothing survives the process. It is the default store of noydb.Open.
//
// # Concurrency
//
// A Store is safe for concurrent use. Compare-and-swap is atomic and
// transactions are serialized, so Capabilities reports CASAtomic and
// Transactions, but neither Durable nor Shared.
package memstore

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/noydb-go/noydb/stores"
)

type entry struct {
	key     string
	value   []byte
	version uint64
}

// Store is an in-memory stores.Store and stores.Transactor. Create it with New.
type Store struct {
	mu      sync.RWMutex
	data    table
	sorted  []string // keys in order, but for added; rebuilt lazily when stale
	added   []string // keys new since sorted was last brought up to date
	stale   bool     // a key was deleted: sorted is rebuilt
	version uint64   // last version handed out, store-wide, so versions are never reused
	spare   *txn     // a transaction for the next Update (see recycle)
	closed  bool
}

var (
	_ stores.Store       = (*Store)(nil)
	_ stores.Transactor  = (*Store)(nil)
	_ stores.RangeLister = (*Store)(nil)
	_ stores.TxSharer    = (*txn)(nil)
)

// New returns an empty in-memory store.
func New() *Store {
	return &Store{data: newTable()}
}

// Capabilities reports CASAtomic and Transactions.
func (s *Store) Capabilities() stores.Capabilities {
	return stores.Capabilities{CASAtomic: true, Transactions: true}
}

func begin(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return stores.CheckKey(key)
}

// Get returns the item at key.
func (s *Store) Get(ctx context.Context, key string) (stores.Item, error) {
	if err := begin(ctx, key); err != nil {
		return stores.Item{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return stores.Item{}, stores.ErrClosed
	}
	return s.getLocked(key)
}

func (s *Store) getLocked(key string) (stores.Item, error) {
	e, ok := s.data.get(key)
	if !ok {
		return stores.Item{}, stores.ErrNotFound
	}
	return stores.Item{Key: key, Value: slices.Clone(e.value), Version: e.version}, nil
}

// Put writes value at key.
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := begin(ctx, key); err != nil {
		return 0, err
	}
	if err := stores.CheckValue(value); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, stores.ErrClosed
	}
	return s.putLocked(key, value), nil
}

func (s *Store) putLocked(key string, value []byte) uint64 {
	return s.adoptLocked(key, slices.Clone(value))
}

// adoptLocked stores value, which the store now owns, at key.
func (s *Store) adoptLocked(key string, value []byte) uint64 {
	s.version++
	if s.data.set(entry{key: key, value: value, version: s.version}) && !s.stale {
		s.added = append(s.added, key)
	}
	return s.version
}

// CompareAndSwap writes value at key if its version is expected.
func (s *Store) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	if err := begin(ctx, key); err != nil {
		return 0, err
	}
	if err := stores.CheckValue(value); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, stores.ErrClosed
	}
	if e, _ := s.data.get(key); e.version != expected {
		return 0, stores.ErrConflict
	}
	return s.putLocked(key, value), nil
}

// Delete removes key.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := begin(ctx, key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return stores.ErrClosed
	}
	s.deleteLocked(key)
	return nil
}

func (s *Store) deleteLocked(key string) {
	if s.data.del(key) {
		s.stale = true
		clear(s.added)
		s.added = s.added[:0]
	}
}

// mergeSorted sorts added, keys none of which is in sorted, and merges
// them into sorted, in place from the back.
func mergeSorted(sorted, added []string) []string {
	slices.Sort(added)
	n, k := len(sorted), len(added)
	if n == 0 || sorted[n-1] < added[0] {
		return append(sorted, added...) // appended after every key: the ledger's way
	}
	out := slices.Grow(sorted, k)[:n+k]
	i, j := n-1, k-1
	for w := n + k - 1; j >= 0; w-- {
		if i >= 0 && out[i] > added[j] {
			out[w] = out[i]
			i--
		} else {
			out[w] = added[j]
			j--
		}
	}
	return out
}

// List yields the items under prefix in key order. It works on a snapshot
// taken when iteration starts, so the loop body may use the store.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return s.list(ctx, prefix, "")
}

// ListAfter is List without the keys up to after (stores.RangeLister): it
// copies only the items it yields, so a ledger's walk from a recent
// position costs the entries after it, not the whole ledger.
func (s *Store) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return s.list(ctx, prefix, after)
}

// list yields the items under prefix whose keys sort after after.
func (s *Store) list(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(stores.Item{}, err)
			return
		}
		items, err := s.snapshot(prefix, after)
		if err != nil {
			yield(stores.Item{}, err)
			return
		}
		for i, it := range items {
			if i%256 == 0 {
				if err := ctx.Err(); err != nil {
					yield(stores.Item{}, err)
					return
				}
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}

// listBuffer is the size of the buffers a listing copies values into.
const listBuffer = 32 << 10

func (s *Store) snapshot(prefix, after string) ([]stores.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, stores.ErrClosed
	}
	switch {
	case s.stale:
		s.sorted = s.data.keys(s.sorted[:0])
		slices.Sort(s.sorted)
		s.stale, s.added = false, s.added[:0]
	case len(s.added) > 0:
		// Only the new keys are sorted, then merged in: a list after a few
		// writes costs the store's size, not a sort of it.
		s.sorted = mergeSorted(s.sorted, s.added)
		clear(s.added)
		s.added = s.added[:0]
	}
	start, _ := slices.BinarySearch(s.sorted, max(prefix, after))
	if start < len(s.sorted) && s.sorted[start] == after {
		start++
	}
	end := start
	for end < len(s.sorted) && strings.HasPrefix(s.sorted[end], prefix) {
		end++
	}
	items := make([]stores.Item, 0, end-start)
	for _, k := range s.sorted[start:end] {
		e, _ := s.data.get(k)
		items = append(items, stores.Item{Key: k, Value: e.value, Version: e.version})
	}
	// The values are copied into shared buffers of up to listBuffer bytes,
	// each value capped at its length: a long listing makes few
	// allocations, and a value kept from it keeps at most one buffer.
	var buf []byte
	for i, it := range items {
		n := len(it.Value)
		if cap(buf)-len(buf) < n {
			buf = make([]byte, 0, max(n, listBuffer))
		}
		at := len(buf)
		buf = append(buf, it.Value...)
		items[i].Value = buf[at : at+n : at+n]
	}
	return items, nil
}

// Update runs fn with the store locked: transactions are serialized, so they
// never conflict. Writes are buffered and applied only if fn returns nil.
func (s *Store) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return stores.ErrClosed
	}
	tx := s.spare // transactions are serialized: one at a time needs one
	if tx == nil {
		tx = &txn{}
		tx.writes = tx.first[:0]
	}
	s.spare = nil
	tx.s = s
	defer s.recycle(tx) // before the unlock: the spare is the lock's
	if err := fn(tx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, w := range tx.writes {
		if w.deleted {
			s.deleteLocked(w.key)
		} else {
			s.adoptLocked(w.key, w.value)
		}
	}
	return nil
}

// recycle forgets the writes of t, whose Update is ending, and keeps it
// as the store's spare: fn may not keep its tx (stores.Transactor), and
// Update holds the store's lock from taking the spare to putting it back,
// so the next Update reuses it. A transaction that grew past its first
// writes is dropped, not kept large. s.mu is held.
func (s *Store) recycle(t *txn) {
	if cap(t.writes) > len(t.first) {
		return
	}
	*t = txn{} // drops the values and keys it held
	t.writes = t.first[:0]
	s.spare = t
}

// Close drops the data. Later calls return stores.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.data = newTable()
	s.sorted, s.added = nil, nil
	return nil
}

// txn buffers writes in order; a later write of a key overrides an earlier
// one. Lookups scan backwards, and build an index only when a transaction
// that has written many keys reads one back.
type txn struct {
	s      *Store
	writes []write
	index  map[string]int // last position of each key in writes, once built
	first  [8]write       // room for the writes of a small transaction
}

const indexAbove = 16

type write struct {
	key     string
	value   []byte // owned by the transaction
	deleted bool
}

// find returns the last write of key in the transaction, or nil. Keys read
// back are usually among the last written, so the newest writes are scanned
// before an index is built.
func (t *txn) find(key string) *write {
	if t.index == nil {
		for i := len(t.writes) - 1; i >= max(0, len(t.writes)-indexAbove); i-- {
			if t.writes[i].key == key {
				return &t.writes[i]
			}
		}
		if len(t.writes) <= indexAbove {
			return nil
		}
		t.index = make(map[string]int, 2*len(t.writes))
		for i, w := range t.writes {
			t.index[w.key] = i
		}
	}
	if i, ok := t.index[key]; ok {
		return &t.writes[i]
	}
	return nil
}

func (t *txn) Get(key string) (stores.Item, error) {
	it, err := t.GetShared(key)
	if err == nil {
		it.Value = slices.Clone(it.Value)
	}
	return it, err
}

// GetShared implements stores.TxSharer: Get without copying the value.
func (t *txn) GetShared(key string) (stores.Item, error) {
	if err := stores.CheckKey(key); err != nil {
		return stores.Item{}, err
	}
	if w := t.find(key); w != nil {
		if w.deleted {
			return stores.Item{}, stores.ErrNotFound
		}
		// Uncommitted writes have no version yet; report the committed one.
		e, _ := t.s.data.get(key)
		return stores.Item{Key: key, Value: w.value, Version: e.version}, nil
	}
	e, ok := t.s.data.get(key)
	if !ok {
		return stores.Item{}, stores.ErrNotFound
	}
	return stores.Item{Key: key, Value: e.value, Version: e.version}, nil
}

// PutShared implements stores.TxSharer: Put that keeps value as given.
func (t *txn) PutShared(key string, value []byte) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	if err := stores.CheckValue(value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	t.set(write{key: key, value: value})
	return nil
}

func (t *txn) Put(key string, value []byte) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	if err := stores.CheckValue(value); err != nil {
		return err
	}
	t.set(write{key: key, value: slices.Clone(value)})
	return nil
}

func (t *txn) Delete(key string) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	t.set(write{key: key, deleted: true})
	return nil
}

func (t *txn) set(w write) {
	t.writes = append(t.writes, w)
	if t.index != nil {
		t.index[w.key] = len(t.writes) - 1
	}
}
