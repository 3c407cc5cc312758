// Package faultstore wraps a stores.Store to inject failures. It is for tests
// only: it makes the rare outcomes of a real store (a write that fails, a
// write that succeeds but reports an error, a lost compare-and-swap race, a
// slow round trip) happen on demand, reproducibly from a seed.
//
// # Usage
//
//	inner := memstore.New()
//	s := faultstore.New(inner, faultstore.Options{
//		Seed:      1,
//		FailAfter: 0.05, // 5% of writes are applied but report ErrInjectedAfter
//		Conflict:  0.05, // 5% of writes report stores.ErrConflict and change nothing
//	})
//
// New returns a store that also implements stores.Transactor exactly when the
// inner store does and Options.HideTransactor is false, so CAS-only code paths
// can be exercised on memstore.
//
// # Concurrency
//
// A wrapped store is safe for concurrent use when the inner store is. The
// fault decisions come from one seeded generator: a single goroutine sees the
// same faults on every run; concurrent callers share the same sequence of
// decisions in whatever order they reach it.
package faultstore

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/stores"
)

// Errors returned by injected faults.
var (
	// ErrInjected is returned by an operation that failed before it reached the
	// inner store: nothing was written.
	ErrInjected = errors.New("faultstore: injected failure before the write")
	// ErrInjectedAfter is returned by a write that the inner store applied:
	// the caller cannot tell it from a failure, which is the point.
	ErrInjectedAfter = errors.New("faultstore: injected failure after the write was applied")
)

// Op names a store operation, for hooks and statistics.
type Op int

// The operations of a store.
const (
	OpGet Op = iota
	OpPut
	OpCompareAndSwap
	OpDelete
	OpList
	OpUpdate
)

var opNames = [...]string{"get", "put", "compare-and-swap", "delete", "list", "update"}

// String returns the operation's name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "unknown"
}

// IsWrite reports whether the operation changes the store.
func (o Op) IsWrite() bool {
	return o == OpPut || o == OpCompareAndSwap || o == OpDelete || o == OpUpdate
}

// Options configures the faults. The zero value injects nothing and passes
// every call through unchanged.
type Options struct {
	// Seed makes the fault decisions reproducible.
	Seed uint64
	// FailBefore is the probability that a write returns ErrInjected without
	// reaching the inner store.
	FailBefore float64
	// FailAfter is the probability that a write reaches the inner store and,
	// if it succeeded there, returns ErrInjectedAfter anyway: the ambiguous case.
	FailAfter float64
	// Conflict is the probability that a compare-and-swap or a transaction
	// returns stores.ErrConflict without reaching the inner store.
	Conflict float64
	// Reads makes FailBefore apply to Get and List too.
	Reads bool
	// Latency is added before every operation (cut short if the context is done).
	Latency time.Duration
	// HideTransactor hides the inner store's stores.Transactor: the wrapped store
	// then reports Transactions=false and has no Update method.
	HideTransactor bool
	// NotCASAtomic makes Capabilities report CASAtomic=false.
	NotCASAtomic bool
	// Before, if set, runs before every operation, after Latency; a non-nil
	// error is returned instead of running the operation. For Update, key is "".
	Before func(op Op, key string) error
	// After, if set, runs after every write that the inner store accepted; a
	// non-nil error is returned in place of success (the write stays applied).
	After func(op Op, key string) error
}

// Stats counts the faults injected so far.
type Stats struct {
	// Before counts ErrInjected results, After counts ErrInjectedAfter results,
	// and Conflicts counts injected stores.ErrConflict results.
	Before, After, Conflicts int64
}

// Store is a fault-injecting stores.Store. It is safe for concurrent use when
// the inner store is. Create it with New.
type Store struct {
	inner stores.Store
	opts  Options

	mu  sync.Mutex
	rng *rand.Rand

	before, after, conflicts atomic.Int64
}

// TxStore is a Store whose inner store implements stores.Transactor.
type TxStore struct {
	*Store
	tx stores.Transactor
}

var (
	_ stores.Store      = (*Store)(nil)
	_ stores.Transactor = (*TxStore)(nil)
)

// New wraps inner. The result is a *TxStore when inner implements
// stores.Transactor and opts.HideTransactor is false, and a *Store otherwise.
func New(inner stores.Store, opts Options) stores.Store {
	s := &Store{inner: inner, opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
	if tx, ok := inner.(stores.Transactor); ok && !opts.HideTransactor {
		return &TxStore{Store: s, tx: tx}
	}
	return s
}

// Stats reports how many faults were injected so far.
func (s *Store) Stats() Stats {
	return Stats{Before: s.before.Load(), After: s.after.Load(), Conflicts: s.conflicts.Load()}
}

// chance draws one decision with probability p.
func (s *Store) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Float64() < p
}

// enter runs the latency and the faults that strike before an operation.
func (s *Store) enter(ctx context.Context, op Op, key string) error {
	if s.opts.Latency > 0 {
		t := time.NewTimer(s.opts.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if s.opts.Before != nil {
		if err := s.opts.Before(op, key); err != nil {
			return err
		}
	}
	if (op.IsWrite() || s.opts.Reads) && s.chance(s.opts.FailBefore) {
		s.before.Add(1)
		return ErrInjected
	}
	if (op == OpCompareAndSwap || op == OpUpdate) && s.chance(s.opts.Conflict) {
		s.conflicts.Add(1)
		return stores.ErrConflict
	}
	return nil
}

// leave runs the faults that strike after a write the inner store accepted.
func (s *Store) leave(op Op, key string) error {
	if s.opts.After != nil {
		if err := s.opts.After(op, key); err != nil {
			return err
		}
	}
	if s.chance(s.opts.FailAfter) {
		s.after.Add(1)
		return ErrInjectedAfter
	}
	return nil
}

// Get reads through to the inner store.
func (s *Store) Get(ctx context.Context, key string) (stores.Item, error) {
	if err := s.enter(ctx, OpGet, key); err != nil {
		return stores.Item{}, err
	}
	return s.inner.Get(ctx, key)
}

// Put writes through to the inner store, subject to the faults.
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := s.enter(ctx, OpPut, key); err != nil {
		return 0, err
	}
	v, err := s.inner.Put(ctx, key, value)
	if err != nil {
		return 0, err
	}
	if err := s.leave(OpPut, key); err != nil {
		return 0, err
	}
	return v, nil
}

// CompareAndSwap writes through to the inner store, subject to the faults.
func (s *Store) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	if err := s.enter(ctx, OpCompareAndSwap, key); err != nil {
		return 0, err
	}
	v, err := s.inner.CompareAndSwap(ctx, key, expected, value)
	if err != nil {
		return 0, err
	}
	if err := s.leave(OpCompareAndSwap, key); err != nil {
		return 0, err
	}
	return v, nil
}

// Delete deletes through the inner store, subject to the faults.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.enter(ctx, OpDelete, key); err != nil {
		return err
	}
	if err := s.inner.Delete(ctx, key); err != nil {
		return err
	}
	return s.leave(OpDelete, key)
}

// List lists through the inner store; with Options.Reads it may fail first.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		if err := s.enter(ctx, OpList, prefix); err != nil {
			yield(stores.Item{}, err)
			return
		}
		for it, err := range s.inner.List(ctx, prefix) {
			if !yield(it, err) {
				return
			}
		}
	}
}

// ListAfter lists through stores.ListAfter on the inner store, keeping its
// range listing when it has one; with Options.Reads it may fail first (as
// a List).
func (s *Store) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		if err := s.enter(ctx, OpList, prefix); err != nil {
			yield(stores.Item{}, err)
			return
		}
		for it, err := range stores.ListAfter(ctx, s.inner, prefix, after) {
			if !yield(it, err) {
				return
			}
		}
	}
}

// GetMany reads through stores.GetMany on the inner store, keeping its
// one-step read when it has one; it counts as one Get (of its first key)
// for the faults and hooks.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	if err := s.enter(ctx, OpGet, key); err != nil {
		return nil, err
	}
	return stores.GetMany(ctx, s.inner, keys)
}

// Capabilities reports the inner store's, adjusted by HideTransactor and NotCASAtomic.
func (s *Store) Capabilities() stores.Capabilities {
	c := s.inner.Capabilities()
	if s.opts.HideTransactor {
		c.Transactions = false
	}
	if s.opts.NotCASAtomic {
		c.CASAtomic = false
	}
	return c
}

// Close closes the inner store.
func (s *Store) Close() error { return s.inner.Close() }

// Update runs the inner store's transaction, subject to the faults: a Conflict
// or FailBefore fault returns before fn runs; a FailAfter fault returns
// ErrInjectedAfter after the transaction committed.
func (t *TxStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if err := t.enter(ctx, OpUpdate, ""); err != nil {
		return err
	}
	if err := t.tx.Update(ctx, fn); err != nil {
		return err
	}
	return t.leave(OpUpdate, "")
}
