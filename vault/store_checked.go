package vault

import (
	"context"
	"fmt"
	"iter"

	"github.com/noydb-go/noydb/stores"
)

// The vault reaches a store, and a hub, only through one checking wrapper,
// made once by checkStore where Open takes the store (Config.Store and
// Config.Hub), so that what a store answers is checked in one place rather
// than by each call site, and a new call site cannot forget it:
//
//   - a listing (List, ListAfter) yields only keys under the prefix asked
//     for, in strictly ascending order, each once: a key outside the
//     prefix, out of order or repeated ends the listing with an error
//     wrapping stores.ErrMisbehaving, so a caller that slices the prefix
//     off a listed key never meets a key the store invented;
//   - a Get answers for the key asked, GetMany for keys asked (see
//     stores.GetMany);
//   - no value read is longer than stores.MaxValueLen (else
//     stores.ErrMisbehaving), and no key or value written is invalid or
//     too large (stores.ErrInvalidKey, stores.ErrTooLarge, before the
//     store is asked).
//
// Inside a transaction (stores.Transactor.Update) the store's own Tx is
// handed on unwrapped: its reads name their keys, and its writes are
// checked by the store (its contract, which storetest checks), so the
// commit path pays nothing for the wrapper.
//
// Every field of the vault that holds a store has the type vaultStore,
// which only checkStore's wrappers implement, so a raw store cannot be put
// there; TestVaultReachesStoresOnlyChecked walks open vaults to see that
// no raw store is reachable any other way.

// vaultStore is a store as the vault reaches it: one of checkStore's
// wrappers. It keeps the optional interfaces stores.Transactor and
// stores.Locker of the store it wraps, and always has the bulk paths
// (stores.RangeLister, stores.MultiGetter), which fall back on List and Get
// when the wrapped store lacks them.
type vaultStore interface {
	stores.Store
	stores.RangeLister
	stores.MultiGetter
	// unchecked returns the wrapped store, for naming its type only.
	unchecked() stores.Store
}

// checkedStore is checkStore's wrapper of a store without transactions or
// locks; the variants below add them.
type checkedStore struct{ inner stores.Store }

type (
	checkedTxStore struct {
		checkedStore
		tr stores.Transactor
	}
	checkedLockStore struct {
		checkedStore
		lk stores.Locker
	}
	checkedTxLockStore struct {
		checkedTxStore
		lk stores.Locker
	}
)

// checkStore returns st as the vault reaches it (see above), with the same
// optional interfaces (stores.Transactor, stores.Locker) as st. A store
// checkStore returned is returned as it is.
func checkStore(st stores.Store) vaultStore {
	if c, ok := st.(vaultStore); ok {
		return c
	}
	c := checkedStore{inner: st}
	tr, isTr := st.(stores.Transactor)
	lk, isLk := st.(stores.Locker)
	switch {
	case isTr && isLk:
		return checkedTxLockStore{checkedTxStore{c, tr}, lk}
	case isTr:
		return checkedTxStore{c, tr}
	case isLk:
		return checkedLockStore{c, lk}
	}
	return c
}

func (c checkedStore) unchecked() stores.Store { return c.inner }

// checkRead refuses a value longer than any store may hold.
func checkRead(op, key string, value []byte) error {
	if len(value) > stores.MaxValueLen {
		return fmt.Errorf("%s %q: a value of %d bytes, above the limit of %d: %w", op, key, len(value), stores.MaxValueLen, stores.ErrMisbehaving)
	}
	return nil
}

// checkWrite refuses an invalid key or a value too large before the
// store is asked.
func checkWrite(key string, value []byte) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	return stores.CheckValue(value)
}

// Get implements stores.Store: the item must be the key's.
func (c checkedStore) Get(ctx context.Context, key string) (stores.Item, error) {
	it, err := c.inner.Get(ctx, key)
	if err != nil {
		return stores.Item{}, err
	}
	if it.Key != key {
		return stores.Item{}, fmt.Errorf("get %q returned key %q: %w", key, it.Key, stores.ErrMisbehaving)
	}
	if err := checkRead("get", key, it.Value); err != nil {
		return stores.Item{}, err
	}
	return it, nil
}

// Put implements stores.Store.
func (c checkedStore) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := checkWrite(key, value); err != nil {
		return 0, err
	}
	return c.inner.Put(ctx, key, value)
}

// CompareAndSwap implements stores.Store.
func (c checkedStore) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	if err := checkWrite(key, value); err != nil {
		return 0, err
	}
	return c.inner.CompareAndSwap(ctx, key, expected, value)
}

// Delete implements stores.Store.
func (c checkedStore) Delete(ctx context.Context, key string) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	return c.inner.Delete(ctx, key)
}

// List implements stores.Store: only keys under prefix, strictly
// ascending, values within the limit, or an error wrapping
// stores.ErrMisbehaving that ends the listing.
func (c checkedStore) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		prev, first := "", true
		for it, err := range c.inner.List(ctx, prefix) {
			if err == nil {
				err = checkListed(prefix, prev, first, it)
			}
			if err != nil {
				yield(stores.Item{}, err)
				return
			}
			prev, first = it.Key, false
			if !yield(it, nil) {
				return
			}
		}
	}
}

// checkListed checks it, listed under prefix after prev (none when first).
func checkListed(prefix, prev string, first bool, it stores.Item) error {
	if err := stores.CheckListed(prefix, it.Key); err != nil {
		return err
	}
	if !first && it.Key <= prev {
		return fmt.Errorf("list %q yielded key %q after %q: %w", prefix, it.Key, prev, stores.ErrMisbehaving)
	}
	return checkRead("list", it.Key, it.Value)
}

// ListAfter implements stores.RangeLister through stores.ListAfter (which
// checks the range and order), checking the values' sizes.
func (c checkedStore) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for it, err := range stores.ListAfter(ctx, c.inner, prefix, after) {
			if err == nil {
				err = checkRead("list", it.Key, it.Value)
			}
			if err != nil {
				yield(stores.Item{}, err)
				return
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}

// GetMany implements stores.MultiGetter through stores.GetMany (which
// checks the keys answered), checking the values' sizes.
func (c checkedStore) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	items, err := stores.GetMany(ctx, c.inner, keys)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if err := checkRead("get", it.Key, it.Value); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// Capabilities implements stores.Store.
func (c checkedStore) Capabilities() stores.Capabilities { return c.inner.Capabilities() }

// Close implements stores.Store: it closes the wrapped store (the vault
// itself never closes its store).
func (c checkedStore) Close() error { return c.inner.Close() }

// Update implements stores.Transactor; fn gets the store's own Tx.
func (c checkedTxStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return c.tr.Update(ctx, fn)
}

// Lock implements stores.Locker.
func (c checkedLockStore) Lock(ctx context.Context, name string) (func(), error) {
	return c.lk.Lock(ctx, name)
}

// TryLock implements stores.Locker.
func (c checkedLockStore) TryLock(ctx context.Context, name string) (func(), error) {
	return c.lk.TryLock(ctx, name)
}

// Lock implements stores.Locker.
func (c checkedTxLockStore) Lock(ctx context.Context, name string) (func(), error) {
	return c.lk.Lock(ctx, name)
}

// TryLock implements stores.Locker.
func (c checkedTxLockStore) TryLock(ctx context.Context, name string) (func(), error) {
	return c.lk.TryLock(ctx, name)
}
