package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// ErrHubMismatch: the hub holds another vault under this vault's name (its
// header differs from the device's), so the two cannot sync. Nothing was
// copied either way.
var ErrHubMismatch = errors.New("the hub holds another vault under this name")

// fetchFromHub copies the vault's header and the opener's keyring entry,
// when the device lacks it or holds it older, from the hub to the device
// store, before the device unlocks: a device that never held the vault
// gets what its person opens with, and a user granted on another device
// can open here. The other entries travel with Sync, which copies only
// those that pass the check of authority (people_ledger.go), and which
// the device cannot make before it unlocks. A hub without the vault copies nothing (openHub
// copies the other way once the device is unlocked). hub is cfg.Hub as
// wrapHub returns it. A hub that cannot be reached is no error for a
// device that holds the vault already: it opens offline. A device that does
// not hold it gets an error wrapping sequence.ErrOffline.
func fetchFromHub(ctx context.Context, cfg Config, hub stores.Store, prefix string) error {
	if !cfg.Hub.Capabilities().CASAtomic {
		return fmt.Errorf("a hub needs atomic compare-and-swap (%s has none): %w", storeType(cfg.Hub), stores.ErrNotSupported)
	}
	hh, err := hub.Get(ctx, prefix+headerKey)
	if errors.Is(err, stores.ErrNotFound) {
		return nil
	}
	if errors.Is(err, sequence.ErrOffline) {
		if _, derr := cfg.Store.Get(ctx, prefix+headerKey); derr == nil {
			return nil
		}
		return fmt.Errorf("this device does not hold the vault and cannot fetch it: %w", err)
	}
	if err != nil {
		return err
	}
	opener := func(name string, _ []byte) bool { return name == cfg.User }
	return copyKeyringAdmit(ctx, hub, cfg.Store, prefix, hh.Value, nil, opener)
}

// hubTimeout is cfg's HubTimeout with its default.
func hubTimeout(cfg Config) time.Duration {
	if cfg.HubTimeout == 0 {
		return DefaultHubTimeout
	}
	return cfg.HubTimeout
}

// openHub returns the hub-side vault, which shares dk with the device vault
// and reaches the hub through wrapHub. It makes sure the hub holds the
// device's vault (the same header, and every keyring entry the device
// holds): at once, or, when the hub cannot be reached (the device opens
// offline), before its first call that reaches the hub.
//
// dev is the device's vault: the device's counters, when it took numbers
// before it joined the hub, seed the hub's series when the vault first
// reaches the hub, and a hub whose series are behind them is refused with
// a *HubBehindError (see joinSeries).
func openHub(ctx context.Context, cfg Config, prefix string, dk *crypto.Key, dev *Vault) (*Vault, error) {
	dh, err := cfg.Store.Get(ctx, prefix+headerKey)
	if err != nil {
		return nil, err
	}
	link := &hubLink{device: cfg.Store, prefix: prefix, header: dh.Value, merge: keyringMerger(dk, cfg.Name, dh.Value)}
	// What the check before a fresh join read of the device's ledger,
	// for the join after it (both run under the link's lock).
	var whole *deviceFacts
	link.check = func(ctx context.Context) (err error) {
		whole, err = checkDeviceCounters(ctx, dev)
		return err
	}
	link.join = func(ctx context.Context, hub stores.Store, fresh bool) error {
		return joinSeries(ctx, cfg, prefix, dk, dh.Value, dev, hub, fresh, whole)
	}
	hub := wrapHub(cfg.Hub, hubTimeout(cfg), link)
	err = hubStore{inner: cfg.Hub, timeout: hubTimeout(cfg), link: link}.ready(ctx)
	if err != nil && !errors.Is(err, sequence.ErrOffline) {
		return nil, err
	}
	if err := markDevice(ctx, cfg.Store, prefix); err != nil {
		return nil, err
	}
	p, err := openHubPins(cfg, dh.Value, dk)
	if err != nil {
		return nil, err
	}
	hcfg := cfg
	hcfg.Store, hcfg.Hub, hcfg.StateDir = hub, nil, ""
	h := newVault(hcfg, prefix, dk, p)
	h.sharesKey = true
	return h, nil
}

// copyKeyringWith copies, from src to dst, the header (when dst has none)
// and the keyring entries dst lacks. header is src's header: dst must hold
// the same bytes, or none (ErrHubMismatch). Entries are created only where
// absent (compare-and-swap from nothing), so two copiers racing agree. It
// first offers each pair of entries held on both sides to merge (nil:
// none), which returns the entry to write in dst, or nil to keep the rule
// of the higher serial (see mergeKeyring; Sync merges, with the vault's
// key).
func copyKeyringWith(ctx context.Context, src, dst stores.Store, prefix string, header []byte, merge func(src, dst []byte) []byte) error {
	return copyKeyringAdmit(ctx, src, dst, prefix, header, merge, nil)
}

// copyKeyringAdmit is copyKeyringWith copying only the entries admit
// admits (nil: all), by person's name and stored bytes: Sync copies only
// those that pass the check of authority (people_ledger.go).
func copyKeyringAdmit(ctx context.Context, src, dst stores.Store, prefix string, header []byte,
	merge func(src, dst []byte) []byte, admit func(name string, raw []byte) bool) error {
	hk := prefix + headerKey
	switch it, err := dst.Get(ctx, hk); {
	case errors.Is(err, stores.ErrNotFound):
		if _, err := dst.CompareAndSwap(ctx, hk, 0, header); err != nil && !errors.Is(err, stores.ErrConflict) {
			return err
		}
		// A racing copier may have won: check what is there now.
		return copyKeyringAdmit(ctx, src, dst, prefix, header, merge, admit)
	case err != nil:
		return err
	case !bytes.Equal(it.Value, header):
		return ErrHubMismatch
	}
	return copyEntriesAdmit(ctx, src, dst, prefix, merge, admit)
}

// copyEntries is copyKeyringWith without the header: it copies the
// keyring entries (and recovery codes) dst lacks, and replaces or merges
// those it holds older.
func copyEntries(ctx context.Context, src, dst stores.Store, prefix string, merge func(src, dst []byte) []byte) error {
	return copyEntriesAdmit(ctx, src, dst, prefix, merge, nil)
}

// copyEntriesAdmit is copyEntries copying only the entries admit admits
// (nil: all).
func copyEntriesAdmit(ctx context.Context, src, dst stores.Store, prefix string, merge func(src, dst []byte) []byte,
	admit func(name string, raw []byte) bool) error {
	kp := prefix + keyringPrefix
	for it, err := range src.List(ctx, kp) {
		if err != nil {
			return err
		}
		if !strings.HasPrefix(it.Key, kp) {
			continue
		}
		if admit != nil && !admit(it.Key[len(kp):], it.Value) {
			continue
		}
		if err := copyEntry(ctx, dst, it.Key, it.Value, merge); err != nil {
			return err
		}
	}
	return copyRecovery(ctx, src, dst, prefix) // recovery codes travel with the keyring
}

// copyEntry writes src, a keyring entry of another store, at key in dst:
// where dst has none, or merged with dst's, or in place of an older one
// (see copyEntries). A write that loses a race with another writer of
// dst is decided again from what dst then holds, within the retry budget
// of internal/cas (an error matching ErrContention when it is spent): a
// copy given up at the first lost race would leave the device without a
// generation the hub's entry gives its person, and its next pull would
// take the records sealed with it for records the hub tampered with.
func copyEntry(ctx context.Context, dst stores.Store, key string, src []byte, merge func(src, dst []byte) []byte) error {
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		cur, err := dst.Get(ctx, key)
		if errors.Is(err, stores.ErrNotFound) {
			_, err = dst.CompareAndSwap(ctx, key, 0, src)
			return err
		}
		if err != nil {
			return err
		}
		if m := mergeOrNil(merge, src, cur.Value); m != nil {
			if bytes.Equal(m, cur.Value) {
				return nil // dst's entry stays
			}
			_, err = dst.CompareAndSwap(ctx, key, cur.Version, m)
			return err
		}
		// A newer entry (a secret changed, a person revoked) replaces an
		// older one, unless it would lose a generation that only a merge
		// keeps, which this copy cannot make (no key): Sync does.
		if keyringNewer(src, cur.Value) && (merge != nil || !losesGenerations(src, cur.Value)) {
			_, err = dst.CompareAndSwap(ctx, key, cur.Version, src)
		}
		return err
	})
	return err
}

func mergeOrNil(merge func(src, dst []byte) []byte, src, dst []byte) []byte {
	if merge == nil {
		return nil
	}
	return merge(src, dst)
}

// hubPinsName is the name under which a device's state folder keeps the
// rollback pins of the hub's copy of the vault named name: the hub's
// counters and ledger head, which differ from the device's own.
func hubPinsName(name string) string { return name + "\x00hub" }

// openHubPins opens the rollback pins of the hub-side vault: in the
// device's state folder when it has one (so a hub serving older counters or
// an older ledger head is caught across restarts of the device), sealed with
// a key of their own derived from dk; else in memory.
func openHubPins(cfg Config, header []byte, dk *crypto.Key) (*pins.Set, error) {
	if cfg.StateDir == "" {
		return pins.Open("", cfg.Name, nil, nil)
	}
	h, err := crypto.ParseHeader(header)
	if err != nil {
		return nil, fmt.Errorf("vault header: %w", err)
	}
	// pins.Open takes the key over and wipes it when done.
	return pins.Open(cfg.StateDir, hubPinsName(cfg.Name), h.Salt[:], dk.Derive("noydb hub pins v1"))
}

// deviceKey marks, on a device's store, a vault opened there with a hub.
const deviceKey = "_device"

// errHubless: a device of a hub opened without it.
var errHubless = fmt.Errorf("this vault is a device of a hub and was opened without Config.Hub: "+
	"its numbers are on the hub (open it with the hub, or write through NumberingOf): %w", sequence.ErrOffline)

// markDevice records on the device's store that the vault is used there as
// a device of a hub, so that opened later without the hub (an app that
// could not reach it at start) it does not take numbers from the device's
// own counters, which would collide with the hub's.
func markDevice(ctx context.Context, device stores.Store, prefix string) error {
	_, err := device.Get(ctx, prefix+deviceKey)
	if errors.Is(err, stores.ErrNotFound) {
		_, err = device.Put(ctx, prefix+deviceKey, []byte{1})
	}
	return err
}

// isDevice reports whether the vault, opened without a hub, is a device of
// one: its store carries the mark of markDevice, or its state folder holds
// pins of the hub's copy.
func isDevice(ctx context.Context, cfg Config, prefix string) (bool, error) {
	_, err := cfg.Store.Get(ctx, prefix+deviceKey)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, stores.ErrNotFound) {
		return false, err
	}
	id, err := pins.Lookup(cfg.StateDir, hubPinsName(cfg.Name))
	return id != nil, err
}
