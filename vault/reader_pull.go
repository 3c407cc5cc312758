package vault

import (
	"context"
	"fmt"

	"github.com/noydb-go/noydb/stores"
)

// A reader's vault writes nothing through its own handle (readOnlyStore).
// Its Sync still has to apply what it pulls from the hub on its device:
// the records, the RecordPulled entries, the sync cursors, the keyring.
// Sync does that through a pull view: a second vault over the device's
// own store, sharing the reader's data key and pins, used only by that
// Sync (pull and keyring copy) and released after it. The reader's
// handle stays read-only, and so does its view of the hub: the push of a
// reader is refused (ErrNotPermitted) whenever its device holds a change
// of a record of its own to push (a person who wrote offline and was made
// a reader since); with none, there is nothing to push.

// pullView returns the reader's device vault as a writer's, for Sync.
func (v *Vault) pullView() *Vault {
	cfg := Config{Store: v.me.store, Name: v.name, User: v.user, role: RoleWriter}
	pv := newVault(cfg, v.prefix, v.dk, v.pins)
	// The reader's generations too: a record a rotation sealed opens here.
	pv.sharesKey, pv.me, pv.keys = true, v.me, v.keys
	// The reader signs the entries of her pulls (ledger.RecordPulled...).
	pv.signAs = v.signAs
	v.syncs.mu.Lock()
	pv.syncs.policies, pv.syncs.merges, pv.syncs.numbered = v.syncs.policies, v.syncs.merges, v.syncs.numbered
	v.syncs.mu.Unlock()
	return pv
}

// release ends a pull view: its sequences and ledger close (the pins and
// the data key stay the reader's vault's).
func (v *Vault) release() {
	v.gate.Close()
	_ = v.seqs.Close()
	_ = v.ledger.Close()
	v.macer.Wipe()
	v.claims.Wipe()
	v.signers.wipe()
}

// readerKeyrings is keyrings for a reader: the keyring entries (signed
// and sealed by their makers, as the hub keeps them) are copied both ways
// through the hub's own store, so that a reader's secret change or
// recovery reaches the other devices.
func (s *syncRun) readerKeyrings(ctx context.Context) error {
	dh, err := s.v.store.Get(ctx, s.v.prefix+headerKey)
	if err != nil {
		return err
	}
	hub := writable(s.h.store)
	merge := keyringMerger(s.v.dk, s.v.name, dh.Value) // see keyring_merge.go
	if err := copyKeyringWith(ctx, s.v.store, hub, s.v.prefix, dh.Value, merge); err != nil {
		return err
	}
	return copyKeyringWith(ctx, hub, s.v.store, s.v.prefix, dh.Value, merge)
}

// refusePush is the push of a reader: ErrNotPermitted when the device's
// ledger holds a change of a record after the push cursor, else nothing.
func (s *syncRun) refusePush(ctx context.Context) error {
	from, err := s.loadPush(ctx)
	if err != nil {
		return err
	}
	n := 0
	for e, err := range s.v.ledger.Read(ctx, from+1) {
		if err != nil {
			return err
		}
		if isOwnRecordEntry(e) {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("%d changes on this device not pushed, and %q is a reader: %w", n, s.v.user, ErrNotPermitted)
	}
	return nil
}

// writable returns the store a readOnly wrapper holds (st itself if none),
// looking through the checking wrapper around it (store_checked.go): what
// the readOnly wrapper holds is checked already.
func writable(st stores.Store) stores.Store {
	if c, ok := st.(vaultStore); ok {
		if _, ro := c.unchecked().(interface{ readOnlyMark() }); ro {
			st = c.unchecked()
		}
	}
	switch r := st.(type) {
	case readOnlyStore:
		return r.Store
	case readOnlyTxStore:
		return r.Store
	case readOnlyLockStore:
		return r.Store
	case readOnlyTxLockStore:
		return r.Store
	}
	return st
}
