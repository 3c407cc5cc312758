package vault

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/stores"
)

// ErrHubMismatch: the hub holds another vault under this vault's name (its
// header differs from the device's), so the two cannot sync. Nothing was
// copied either way.
var ErrHubMismatch = errors.New("the hub holds another vault under this name")

// fetchFromHub copies the vault's header and the keyring entries the device
// lacks from the hub to the device store, before the device unlocks: a device
// that never held the vault gets it whole, and a user granted on another
// device can open here. A hub without the vault copies nothing (openHub
// copies the other way once the device is unlocked).
func fetchFromHub(ctx context.Context, cfg Config, prefix string) error {
	if !cfg.Hub.Capabilities().CASAtomic {
		return fmt.Errorf("a hub needs atomic compare-and-swap (%s has none): %w", storeType(cfg.Hub), stores.ErrNotSupported)
	}
	hh, err := cfg.Hub.Get(ctx, prefix+headerKey)
	if errors.Is(err, stores.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return copyKeyring(ctx, cfg.Hub, cfg.Store, prefix, hh.Value)
}

// openHub makes sure the hub holds the device's vault (the same header, and
// every keyring entry the device holds) and returns the hub-side vault,
// which shares dk with the device vault.
func openHub(ctx context.Context, cfg Config, prefix string, dk *crypto.Key) (*Vault, error) {
	dh, err := cfg.Store.Get(ctx, prefix+headerKey)
	if err != nil {
		return nil, err
	}
	if err := copyKeyring(ctx, cfg.Store, cfg.Hub, prefix, dh.Value); err != nil {
		return nil, err
	}
	// The hub's feed head is pinned in the state folder, under a name no
	// vault can have ('/' is not allowed in vault names) and the header's
	// hash as identity, so a hub serving an older feed is ErrRollback.
	var pk *crypto.Key
	if cfg.StateDir != "" {
		pk = dk.Derive("noydb hub pins v1")
	}
	id := sha256.Sum256(dh.Value)
	p, err := pins.Open(cfg.StateDir, cfg.Name+"/hub", id[:], pk)
	if err != nil {
		pk.Wipe()
		return nil, err
	}
	hcfg := cfg
	hcfg.Store, hcfg.Hub, hcfg.StateDir = cfg.Hub, nil, ""
	h := newVault(hcfg, prefix, dk, p)
	h.sharesKey = true
	return h, nil
}

// copyKeyring copies, from src to dst, the header (when dst has none) and
// the keyring entries dst lacks. header is src's header: dst must hold the
// same bytes, or none (ErrHubMismatch). Entries are created only where
// absent (compare-and-swap from nothing), so two copiers racing agree.
func copyKeyring(ctx context.Context, src, dst stores.Store, prefix string, header []byte) error {
	hk := prefix + headerKey
	switch it, err := dst.Get(ctx, hk); {
	case errors.Is(err, stores.ErrNotFound):
		if _, err := dst.CompareAndSwap(ctx, hk, 0, header); err != nil && !errors.Is(err, stores.ErrConflict) {
			return err
		}
		// A racing copier may have won: check what is there now.
		return copyKeyring(ctx, src, dst, prefix, header)
	case err != nil:
		return err
	case !bytes.Equal(it.Value, header):
		return ErrHubMismatch
	}
	kp := prefix + keyringPrefix
	for it, err := range src.List(ctx, kp) {
		if err != nil {
			return err
		}
		if !strings.HasPrefix(it.Key, kp) {
			continue
		}
		_, err := dst.Get(ctx, it.Key)
		if err == nil {
			continue
		}
		if !errors.Is(err, stores.ErrNotFound) {
			return err
		}
		if _, err := dst.CompareAndSwap(ctx, it.Key, 0, it.Value); err != nil && !errors.Is(err, stores.ErrConflict) {
			return err
		}
	}
	return nil
}
