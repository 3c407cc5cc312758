package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/stores"
)

// ErrNotPermitted: the vault's person does not hold a role that allows the
// call (a reader writing a record, taking a number or appending an event;
// anyone but an owner granting or revoking). Nothing was written.
var ErrNotPermitted = errors.New("not permitted by this person's role")

// errReadOnly is the error of every write a reader's vault tries.
var errReadOnly = fmt.Errorf("a reader writes nothing: %w", ErrNotPermitted)

// readOnlyStore is a reader's view of the vault's store: every write (Put,
// CompareAndSwap, Delete, a write inside a transaction) fails with
// ErrNotPermitted, so no write path of the vault (records, numbers, the
// ledger, deferred numbering) can change the store. It keeps the optional
// interfaces of the store it wraps.
type readOnlyStore struct{ stores.Store }

func (readOnlyStore) Put(context.Context, string, []byte) (uint64, error) { return 0, errReadOnly }

func (readOnlyStore) CompareAndSwap(context.Context, string, uint64, []byte) (uint64, error) {
	return 0, errReadOnly
}

func (readOnlyStore) Delete(context.Context, string) error { return errReadOnly }

// readOnlyMark marks the readOnly wrappers (see writable).
func (readOnlyStore) readOnlyMark() {}

type (
	readOnlyTxStore struct {
		readOnlyStore
		tr stores.Transactor
	}
	readOnlyLockStore struct {
		readOnlyStore
		stores.Locker
	}
	readOnlyTxLockStore struct {
		readOnlyTxStore
		stores.Locker
	}
	readOnlyTx struct{ tx stores.Tx }
	// readOnlyPrefetchTx keeps a transaction's stores.Prefetcher.
	readOnlyPrefetchTx struct {
		readOnlyTx
		stores.Prefetcher
	}
)

// Update runs fn in a transaction whose writes fail with ErrNotPermitted.
func (s readOnlyTxStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.tr.Update(ctx, func(tx stores.Tx) error {
		var rt stores.Tx = readOnlyTx{tx}
		if p, ok := tx.(stores.Prefetcher); ok {
			rt = readOnlyPrefetchTx{readOnlyTx{tx}, p}
		}
		return fn(rt)
	})
}

func (t readOnlyTx) Get(key string) (stores.Item, error) { return t.tx.Get(key) }
func (readOnlyTx) Put(string, []byte) error              { return errReadOnly }
func (readOnlyTx) Delete(string) error                   { return errReadOnly }

// readOnly returns st as a reader's vault uses it.
func readOnly(st stores.Store) stores.Store {
	r := readOnlyStore{st}
	tr, isTr := st.(stores.Transactor)
	lk, isLk := st.(stores.Locker)
	switch {
	case isTr && isLk:
		return readOnlyTxLockStore{readOnlyTxStore{r, tr}, lk}
	case isTr:
		return readOnlyTxStore{r, tr}
	case isLk:
		return readOnlyLockStore{r, lk}
	}
	return r
}
