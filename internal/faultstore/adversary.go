package faultstore

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/noydb-go/noydb/stores"
)

// Adversary is a store that misbehaves on command, for the tests that ask
// what the SDK does when its store lies: it deletes keys behind the SDK's
// back, serves an older snapshot of some or all keys, rewrites values, wipes
// everything, yields keys outside the prefix a List asked for, and reports
// an error for a write it committed. Between commands it passes every call
// through to the inner store unchanged.
//
// The commands act on the inner store directly, as an operator or an
// attacker with access to the store would. Adversary is safe for concurrent
// use when the inner store is.
type Adversary struct {
	inner stores.Store

	mu        sync.Mutex
	extra     map[string][]stores.Item // List prefix match -> items yielded first
	gets      map[string]stores.Item   // Get key -> the item answered
	failAfter int                      // writes left that commit and then report an error
	inTx      func()                   // runs inside the next transaction, once
}

// NewAdversary wraps inner. Use Store for the store to hand to the SDK.
func NewAdversary(inner stores.Store) *Adversary {
	return &Adversary{inner: inner, extra: map[string][]stores.Item{}, gets: map[string]stores.Item{}}
}

// Store returns the store to give the SDK: it implements stores.Transactor
// exactly when the inner store does.
func (a *Adversary) Store() stores.Store {
	if tr, ok := a.inner.(stores.Transactor); ok {
		return &advTx{Adversary: a, tr: tr}
	}
	return a
}

// Raw returns the inner store, for reading or writing behind the SDK's back.
func (a *Adversary) Raw() stores.Store { return a.inner }

// Snapshot is a copy of every key and value of a store at one moment.
type Snapshot map[string][]byte

// Snapshot copies every key of the store.
func (a *Adversary) Snapshot(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{}
	for it, err := range a.inner.List(ctx, "") {
		if err != nil {
			return nil, err
		}
		snap[it.Key] = append([]byte(nil), it.Value...)
	}
	return snap, nil
}

// Keys returns the keys of the store under prefix, in order.
func (a *Adversary) Keys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for it, err := range a.inner.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		keys = append(keys, it.Key)
	}
	return keys, nil
}

// Drop deletes key behind the SDK's back.
func (a *Adversary) Drop(ctx context.Context, key string) error {
	return a.inner.Delete(ctx, key)
}

// DropPrefix deletes every key under prefix and returns how many it deleted.
func (a *Adversary) DropPrefix(ctx context.Context, prefix string) (int, error) {
	keys, err := a.Keys(ctx, prefix)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if err := a.inner.Delete(ctx, k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

// Wipe deletes every key of the store.
func (a *Adversary) Wipe(ctx context.Context) (int, error) { return a.DropPrefix(ctx, "") }

// Set writes value at key behind the SDK's back (a forged or replayed value).
func (a *Adversary) Set(ctx context.Context, key string, value []byte) error {
	_, err := a.inner.Put(ctx, key, value)
	return err
}

// Restore puts the keys under prefix back as they were in snap: keys written
// since are deleted, changed ones get their old value back, deleted ones
// return. An empty prefix restores the whole store (a backup put back).
func (a *Adversary) Restore(ctx context.Context, snap Snapshot, prefix string) error {
	keys, err := a.Keys(ctx, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, ok := snap[k]; !ok {
			if err := a.inner.Delete(ctx, k); err != nil {
				return err
			}
		}
	}
	for k, v := range snap {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if cur, err := a.inner.Get(ctx, k); err == nil && string(cur.Value) == string(v) {
			continue
		}
		if _, err := a.inner.Put(ctx, k, v); err != nil {
			return err
		}
	}
	return nil
}

// InjectList makes every later List whose prefix starts with match yield
// items first, before the real ones: keys outside the asked prefix, or out of
// order, as a store that breaks the List contract would.
func (a *Adversary) InjectList(match string, items ...stores.Item) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.extra[match] = append(a.extra[match], items...)
}

// AnswerGet makes every later Get of key answer it, whatever the store
// holds: another key's item, or a value longer than any store may hold, as
// a store that breaks the Get contract would.
func (a *Adversary) AnswerGet(key string, it stores.Item) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gets[key] = it
}

// FailAfterCommit makes the next n writes (Put, CompareAndSwap, Delete or a
// transaction) reach the inner store and then report an error even when they
// committed: the ambiguous outcome a lost connection gives.
func (a *Adversary) FailAfterCommit(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failAfter = n
}

// InNextTransaction makes fn run once, inside the next transaction, after it
// began and before its body: what fn writes through the store is newer than
// the snapshot that transaction reads on a store that reads from one
// (badger), the stale view a busy honest store gives.
func (a *Adversary) InNextTransaction(fn func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inTx = fn
}

// after turns the outcome of a committed write into an error while
// FailAfterCommit has writes left.
func (a *Adversary) after(op Op, key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failAfter <= 0 {
		return nil
	}
	a.failAfter--
	return fmt.Errorf("%s %q: %w", op, key, ErrInjectedAfter)
}

// Get reads through; see AnswerGet.
func (a *Adversary) Get(ctx context.Context, key string) (stores.Item, error) {
	a.mu.Lock()
	it, ok := a.gets[key]
	a.mu.Unlock()
	if ok {
		return it, nil
	}
	return a.inner.Get(ctx, key)
}

// Put writes through; see FailAfterCommit.
func (a *Adversary) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	v, err := a.inner.Put(ctx, key, value)
	if err != nil {
		return 0, err
	}
	return v, a.after(OpPut, key)
}

// CompareAndSwap writes through; see FailAfterCommit.
func (a *Adversary) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	v, err := a.inner.CompareAndSwap(ctx, key, expected, value)
	if err != nil {
		return 0, err
	}
	return v, a.after(OpCompareAndSwap, key)
}

// Delete deletes through; see FailAfterCommit.
func (a *Adversary) Delete(ctx context.Context, key string) error {
	if err := a.inner.Delete(ctx, key); err != nil {
		return err
	}
	return a.after(OpDelete, key)
}

// List lists through, after the items of InjectList.
func (a *Adversary) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	a.mu.Lock()
	var extra []stores.Item
	for match, items := range a.extra {
		if strings.HasPrefix(prefix, match) {
			extra = append(extra, items...)
		}
	}
	a.mu.Unlock()
	return func(yield func(stores.Item, error) bool) {
		for _, it := range extra {
			if !yield(it, nil) {
				return
			}
		}
		for it, err := range a.inner.List(ctx, prefix) {
			if !yield(it, err) {
				return
			}
		}
	}
}

// Capabilities reports the inner store's.
func (a *Adversary) Capabilities() stores.Capabilities { return a.inner.Capabilities() }

// Close closes the inner store.
func (a *Adversary) Close() error { return a.inner.Close() }

// advTx is an Adversary over a store with transactions.
type advTx struct {
	*Adversary
	tr stores.Transactor
}

// Update runs the inner transaction; see FailAfterCommit and InNextTransaction.
func (t *advTx) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	t.mu.Lock()
	hook := t.inTx
	t.inTx = nil
	t.mu.Unlock()
	body := fn
	if hook != nil {
		body = func(tx stores.Tx) error {
			hook()
			return fn(tx)
		}
	}
	if err := t.tr.Update(ctx, body); err != nil {
		return err
	}
	return t.after(OpUpdate, "")
}
