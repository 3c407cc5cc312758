package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"

	"github.com/noydb-go/noydb/stores"
)

// envHub names the hub a device syncs through, like --hub.
const envHub = "NOYDB_HUB"

// parseHubSpec parses a --hub value: a store with atomic compare-and-swap
// and transactions, so badger:DIR or a postgres:// URL. A file: folder has
// no atomic compare-and-swap and a mem: store keeps nothing after the
// command: both are refused as usage errors.
func parseHubSpec(s string) (storeSpec, error) {
	spec, err := parseStoreSpec(s)
	if err != nil {
		return storeSpec{}, usagef("--hub %q: want badger:DIR or a postgres:// URL", redactLocation(s))
	}
	switch spec.kind {
	case "file":
		return storeSpec{}, usagef("--hub %s: a file: store has no atomic compare-and-swap, which a hub needs: use badger:DIR or a postgres:// URL", spec)
	case "mem":
		return storeSpec{}, usagef("--hub mem: keeps nothing after the command ends: use badger:DIR or a postgres:// URL")
	}
	return spec, nil
}

// parsedHub parses --hub; ok is false when no hub is set.
func (a *app) parsedHub() (spec storeSpec, ok bool, err error) {
	if a.hubSpec == "" {
		return storeSpec{}, false, nil
	}
	spec, err = parseHubSpec(a.hubSpec)
	return spec, err == nil, err
}

// hubState is the hub of a run: the store it opened, or why it could not.
type hubState struct {
	spec storeSpec
	// store is the hub, or an unreachableHub when it could not be opened.
	store stores.Store
	// offline says why the hub could not be reached (nil: it was opened),
	// wrapping stores.ErrUnavailable; reason says it for people.
	offline error
	reason  string
}

// openHub opens --hub for a vault about to open, when one is set (nil
// otherwise). A hub that cannot be reached (a folder that does not exist,
// or that another process holds past --wait; a server that does not
// answer) is no error here: the vault then opens with an unreachableHub,
// so that it works offline as a device (its records locally, no numbers)
// and whatever needs the hub fails with sequence.ErrOffline. A hub that is
// the device's own store is a usage error. mustExist keeps a badger hub
// folder from being created: only 'noydb init' and --create make one.
func (a *app) openHub(ctx context.Context, device storeSpec, mustExist bool) (*hubState, error) {
	spec, ok, err := a.parsedHub()
	if err != nil || !ok {
		return nil, err
	}
	if hl, err := spec.location(); err == nil {
		if dl, err := device.location(); err == nil && dl == hl {
			return nil, usagef("--hub %s is this device's own store (--store): a hub is another store that devices sync through", spec)
		}
	}
	if a.hub != nil {
		return a.hub, nil
	}
	h := &hubState{spec: spec}
	st, err := a.openWaiting(ctx, spec, mustExist)
	var missing *missingStoreError
	switch {
	case err == nil:
		h.store = st
	case errors.As(err, &missing):
		h.reason = fmt.Sprintf("hub %s does not exist (not mounted? 'noydb init' or --create makes a new hub there)", spec)
	case errors.Is(err, stores.ErrLocked):
		h.reason = fmt.Sprintf("hub %s is in use by another process", spec)
	case errors.Is(err, stores.ErrUnavailable):
		h.reason = fmt.Sprintf("hub %s cannot be reached (%v)", spec, err)
	default:
		return nil, fmt.Errorf("hub: %w", err)
	}
	if h.reason != "" {
		h.offline = fmt.Errorf("%s: %w", h.reason, stores.ErrUnavailable)
		h.store = unreachableHub{err: h.offline}
	}
	a.hub = h
	return h, nil
}

// String names the hub as the user wrote it, without a password.
func (h *hubState) String() string { return h.spec.String() }

// absHub makes a badger hub folder of the config file absolute, as the
// config file's folders must be.
func absHub(value string) error {
	spec, err := parseHubSpec(value)
	if err != nil {
		return err
	}
	if spec.dir != "" && !filepath.IsAbs(spec.dir) {
		return usagef("hub %q: want an absolute folder, as in badger:%s", value, filepath.Join(string(filepath.Separator)+"srv", "hub"))
	}
	return nil
}

// unreachableHub stands in for a hub the command could not open: every
// call fails with its error, which wraps stores.ErrUnavailable, so the
// vault takes it for a hub that does not answer (sequence.ErrOffline). It
// reports a hub's capabilities, so that what needs the hub is refused as
// offline, not as unsupported.
type unreachableHub struct{ err error }

func (u unreachableHub) Get(context.Context, string) (stores.Item, error) {
	return stores.Item{}, u.err
}

func (u unreachableHub) Put(context.Context, string, []byte) (uint64, error) { return 0, u.err }

func (u unreachableHub) CompareAndSwap(context.Context, string, uint64, []byte) (uint64, error) {
	return 0, u.err
}

func (u unreachableHub) Delete(context.Context, string) error { return u.err }

func (u unreachableHub) List(context.Context, string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) { yield(stores.Item{}, u.err) }
}

func (u unreachableHub) Capabilities() stores.Capabilities {
	return stores.Capabilities{CASAtomic: true, Transactions: true, Durable: true, Shared: true}
}

func (u unreachableHub) Close() error { return nil }

func (u unreachableHub) Update(context.Context, func(stores.Tx) error) error { return u.err }

func (u unreachableHub) Lock(context.Context, string) (func(), error) { return nil, u.err }

func (u unreachableHub) TryLock(context.Context, string) (func(), error) { return nil, u.err }
