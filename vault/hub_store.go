package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// DefaultHubTimeout is the longest a call of a device's vault waits for one
// operation of its hub (Config.HubTimeout zero) before it takes the hub for
// unreachable.
const DefaultHubTimeout = 30 * time.Second

// hubStore is the hub as the hub-side vault sees it: every call runs under
// the hub's own timeout, and an error saying the hub could not be reached
// (stores.ErrUnavailable, a network error, that timeout) comes back
// wrapping sequence.ErrOffline as well as its cause. Answers of the hub
// (not found, conflict, tampered) pass unchanged.
type hubStore struct {
	inner   stores.Store
	timeout time.Duration // <= 0: none
	link    *hubLink      // nil: nothing to do before the first call
}

// hubInner returns the hub's store under the wrapper.
func (h hubStore) hubInner() stores.Store { return h.inner }

// hubLink makes sure, before the first call that reaches the hub, that the
// hub holds the device's vault: its header and every keyring entry of the
// device (copyKeyring). Open tries it at once; a device that opened offline
// tries again at its first call of the hub.
type hubLink struct {
	device stores.Store
	prefix string
	header []byte // the device's header
	// merge merges an entry of the device with the hub's (see
	// mergeKeyring); nil: none.
	merge func(src, dst []byte) []byte
	// join, when set, brings the device's series to the hub before the
	// header is copied (see joinSeries): fresh is true when the hub does
	// not hold the vault yet (the device's heads seed the hub's series),
	// false when it does (a hub series behind the device's is refused,
	// with nothing written). hub is the inner hub store, under the
	// hub's timeout.
	join func(ctx context.Context, hub stores.Store, fresh bool) error
	// check, when set, runs before a fresh join writes anything on the
	// hub: its error refuses the join (see joinSeries).
	check func(ctx context.Context) error

	mu   sync.Mutex
	done atomic.Bool
}

// ensure copies the device's header and keyring to hub (the inner hub
// store) unless done already.
func (l *hubLink) ensure(ctx context.Context, hub stores.Store) error {
	if l == nil || l.done.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done.Load() {
		return nil
	}
	if l.join != nil {
		if err := l.joinSeries(ctx, hub); err != nil {
			return err
		}
	}
	if err := copyKeyringWith(ctx, l.device, hub, l.prefix, l.header, l.merge); err != nil {
		return err
	}
	l.done.Store(true)
	return nil
}

// joinSeries runs the link's join before the header is copied. A hub
// without the vault gets the device's keyring entries first (the hub's
// commits check that the device's person is in its keyring), then the
// seeds of its series; only then does copyKeyringWith write the header,
// which makes the vault visible to other devices, so none of them can take
// a number on the hub before the seeds are there. A join cut short leaves
// no header: the next one seeds again (a seed never rewinds). A hub
// holding the vault under another header is ErrHubMismatch, before join.
func (l *hubLink) joinSeries(ctx context.Context, hub stores.Store) error {
	it, err := hub.Get(ctx, l.prefix+headerKey)
	fresh := errors.Is(err, stores.ErrNotFound)
	switch {
	case fresh:
		if l.check != nil {
			if err := l.check(ctx); err != nil {
				return err
			}
		}
		if err := claimHub(ctx, hub, l.prefix, l.header); err != nil {
			return err
		}
		if err := copyEntries(ctx, l.device, hub, l.prefix, l.merge); err != nil {
			return err
		}
	case err != nil:
		return err
	case !bytes.Equal(it.Value, l.header):
		return ErrHubMismatch
	}
	return l.join(ctx, hub, fresh)
}

// joinKey, on a hub, holds the header of the vault whose join claimed the
// vault's name there before its header was written (see claimHub).
const joinKey = "_joining"

// claimHub claims the vault's name on hub for the vault of header before a
// fresh join writes anything: the header is written last, so without the
// claim a second vault of the same name, joining at once or after a join
// cut short, took the hub for fresh too and wrote its keyring entries over
// the first's. A claim by another vault is ErrHubMismatch, nothing written.
func claimHub(ctx context.Context, hub stores.Store, prefix string, header []byte) error {
	key := prefix + joinKey
	if _, err := hub.CompareAndSwap(ctx, key, 0, header); err == nil {
		return nil
	} else if !errors.Is(err, stores.ErrConflict) {
		return err
	}
	it, err := hub.Get(ctx, key)
	if err != nil {
		return err
	}
	if !bytes.Equal(it.Value, header) {
		return ErrHubMismatch
	}
	return nil
}

// ready runs the link's ensure under the hub's timeout.
func (h hubStore) ready(ctx context.Context) error {
	if h.link == nil || h.link.done.Load() {
		return nil
	}
	c, cancel := h.call(ctx)
	defer cancel()
	return classify(ctx, c, h.link.ensure(c, h.inner))
}

// The variants of hubStore keep the optional interfaces of the hub.
type (
	hubTxStore struct {
		hubStore
		tr stores.Transactor
	}
	hubLockStore struct {
		hubStore
		lk stores.Locker
	}
	hubTxLockStore struct {
		hubTxStore
		lk stores.Locker
	}
)

// wrapHub returns st as the hub-side vault uses it, with the same optional
// interfaces (stores.Transactor, stores.Locker) as st.
func wrapHub(st stores.Store, timeout time.Duration, link *hubLink) stores.Store {
	h := hubStore{inner: st, timeout: timeout, link: link}
	tr, isTr := st.(stores.Transactor)
	lk, isLk := st.(stores.Locker)
	switch {
	case isTr && isLk:
		return hubTxLockStore{hubTxStore{h, tr}, lk}
	case isTr:
		return hubTxStore{h, tr}
	case isLk:
		return hubLockStore{h, lk}
	}
	return h
}

// errHubTimeout is the cause of the hub's own timeout.
var errHubTimeout = errors.New("the hub did not answer in time")

// call returns ctx bounded by the hub's timeout and its cancel function.
func (h hubStore) call(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, h.timeout, errHubTimeout)
}

// classify returns err wrapping sequence.ErrOffline when it says the hub
// could not be reached: caller is the caller's context, hctx the one the
// call ran under.
func classify(caller, hctx context.Context, err error) error {
	if err == nil || errors.Is(err, sequence.ErrOffline) {
		return err
	}
	if caller.Err() == nil && hctx.Err() != nil && errors.Is(context.Cause(hctx), errHubTimeout) {
		return fmt.Errorf("hub: %w: %w: %w", sequence.ErrOffline, errHubTimeout, err)
	}
	if Unreachable(err) {
		return fmt.Errorf("hub: %w: %w", sequence.ErrOffline, err)
	}
	return err
}

// Unreachable reports whether err says a store could not be reached, as
// opposed to an answer of the store: it wraps stores.ErrUnavailable (a
// PostgreSQL server down, a broken connection) or a network error. A done
// context is the caller's own and is not unreachable; the hub's own
// timeout (Config.HubTimeout) is, and a device's vault reports it wrapping
// sequence.ErrOffline.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, stores.ErrUnavailable) {
		return true
	}
	// context.DeadlineExceeded is a net.Error (a timeout) too, but a done
	// context is the caller's.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// Get implements stores.Store.
func (h hubStore) Get(ctx context.Context, key string) (stores.Item, error) {
	if err := h.ready(ctx); err != nil {
		return stores.Item{}, err
	}
	c, cancel := h.call(ctx)
	defer cancel()
	it, err := h.inner.Get(c, key)
	return it, classify(ctx, c, err)
}

// Put implements stores.Store.
func (h hubStore) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := h.ready(ctx); err != nil {
		return 0, err
	}
	c, cancel := h.call(ctx)
	defer cancel()
	ver, err := h.inner.Put(c, key, value)
	return ver, classify(ctx, c, err)
}

// CompareAndSwap implements stores.Store.
func (h hubStore) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	if err := h.ready(ctx); err != nil {
		return 0, err
	}
	c, cancel := h.call(ctx)
	defer cancel()
	ver, err := h.inner.CompareAndSwap(c, key, expected, value)
	return ver, classify(ctx, c, err)
}

// Delete implements stores.Store.
func (h hubStore) Delete(ctx context.Context, key string) error {
	if err := h.ready(ctx); err != nil {
		return err
	}
	c, cancel := h.call(ctx)
	defer cancel()
	return classify(ctx, c, h.inner.Delete(c, key))
}

// List implements stores.Store; the hub's timeout bounds the whole listing.
func (h hubStore) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		if err := h.ready(ctx); err != nil {
			yield(stores.Item{}, err)
			return
		}
		c, cancel := h.call(ctx)
		defer cancel()
		for it, err := range h.inner.List(c, prefix) {
			if !yield(it, classify(ctx, c, err)) {
				return
			}
		}
	}
}

// Capabilities implements stores.Store.
func (h hubStore) Capabilities() stores.Capabilities { return h.inner.Capabilities() }

// Close does nothing: the hub store belongs to the caller of Open.
func (h hubStore) Close() error { return nil }

// Update implements stores.Transactor; the hub's timeout bounds the whole
// transaction.
func (h hubTxStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if err := h.ready(ctx); err != nil {
		return err
	}
	c, cancel := h.call(ctx)
	defer cancel()
	return classify(ctx, c, h.tr.Update(c, fn))
}

// Lock implements stores.Locker. Waiting for another holder is not the
// hub's timeout: only ctx bounds it.
func (h hubLockStore) Lock(ctx context.Context, name string) (func(), error) {
	if err := h.ready(ctx); err != nil {
		return nil, err
	}
	u, err := h.lk.Lock(ctx, name)
	return u, classify(ctx, ctx, err)
}

// TryLock implements stores.Locker.
func (h hubLockStore) TryLock(ctx context.Context, name string) (func(), error) {
	if err := h.ready(ctx); err != nil {
		return nil, err
	}
	u, err := h.lk.TryLock(ctx, name)
	return u, classify(ctx, ctx, err)
}

// Lock implements stores.Locker (see hubLockStore.Lock).
func (h hubTxLockStore) Lock(ctx context.Context, name string) (func(), error) {
	return hubLockStore{h.hubStore, h.lk}.Lock(ctx, name)
}

// TryLock implements stores.Locker.
func (h hubTxLockStore) TryLock(ctx context.Context, name string) (func(), error) {
	return hubLockStore{h.hubStore, h.lk}.TryLock(ctx, name)
}

// ListAfter implements stores.RangeLister through stores.ListAfter on the
// hub, so a device's reads of the hub's feed keep the hub's range listing;
// the hub's timeout bounds the whole listing.
func (h hubStore) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		if err := h.ready(ctx); err != nil {
			yield(stores.Item{}, err)
			return
		}
		c, cancel := h.call(ctx)
		defer cancel()
		for it, err := range stores.ListAfter(c, h.inner, prefix, after) {
			if !yield(it, classify(ctx, c, err)) {
				return
			}
		}
	}
}

// GetMany implements stores.MultiGetter through stores.GetMany on the hub
// (one round trip on PostgreSQL), under the hub's timeout.
func (h hubStore) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	if err := h.ready(ctx); err != nil {
		return nil, err
	}
	c, cancel := h.call(ctx)
	defer cancel()
	items, err := stores.GetMany(c, h.inner, keys)
	return items, classify(ctx, c, err)
}
