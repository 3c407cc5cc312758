package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// A rotation on a device of a hub is made on the hub first.
//
// A generation is named by its number alone: two devices that each rotated
// without hearing of the other's rotation would make the same number with
// two different keys, and the keyring merge of the next Sync could keep
// only one of them, leaving the records sealed with the other unreadable
// for good. So the hub, which every device of the vault reaches, decides
// the number: a device first brings its keyring and the hub's into
// agreement (as Sync does), makes the next generation from the hub's
// keyring, and commits it there in one transaction that checks every
// keyring entry it replaces (a compare-and-swap of the whole keyring: a
// rotation, or any change of a person, committed on the hub meanwhile by
// another device fails it with an error matching stores.ErrConflict,
// writing nothing). Only then does the device commit the same entries, the
// rotation mark and its ledger entries on its own store. A device that
// cannot reach its hub does not rotate (an error wrapping
// sequence.ErrOffline; nothing is written): it keeps sealing with the
// generation it knows, and learns the new one, from its keyring entry, at
// its next Sync.
//
// The other way round (generations made apart, told apart by a random id,
// every key of both kept for every person) would change the record
// envelope, the keyring layout and the merge, for a case (two owners
// rotating while apart) that waiting for the hub settles.

// rotatesOnHub reports whether v's rotations are made on a hub.
func (v *Vault) rotatesOnHub() bool { return v.hub != nil }

// readyToRotate is called by every rotation (newGeneration: RotateKeys,
// Revoke, and whatever else makes a generation), and by Revoke before it
// reads the entry it revokes, so that it revokes the latest: a device of a
// hub opened without it cannot
// rotate (errHubless); a device of a hub brings its keyring and the hub's
// into agreement, so that the rotation is made from the latest entries of
// both (an error wrapping sequence.ErrOffline when the hub is out of
// reach, nothing written on the device).
func (v *Vault) readyToRotate(ctx context.Context) error {
	if v.hubless {
		return fmt.Errorf("keys rotate on the hub: %w", errHubless)
	}
	if !v.rotatesOnHub() {
		return nil
	}
	if !isTransactor(v.hub.store) {
		return fmt.Errorf("a rotation on a device needs a hub with transactions (%s has none): %w",
			storeType(v.hub.store), stores.ErrNotSupported)
	}
	if err := (&syncRun{v: v, h: v.hub}).keyrings(ctx); err != nil {
		return fmt.Errorf("keys rotate on the hub: %w", err)
	}
	return nil
}

// rotationAuthority is the check of the keyring a rotation reads: by the
// hub's ledger for a device of a hub, else by the vault's.
func (v *Vault) rotationAuthority(ctx context.Context) (*authority, error) {
	// It hands out keys: the replays read every entry (people_ledger.go),
	// and on a device of a hub only the hub's ledger vouches (readyToRotate
	// has recorded there the changes this device made).
	if v.rotatesOnHub() {
		hs, err := v.hub.peopleState(ctx, true)
		if err != nil {
			return nil, err
		}
		return v.authorityOf(v.hub.store, peopleSource{st: hs, sure: true}), nil
	}
	return v.authority(ctx, true)
}

// keyringStore is the store a rotation reads the keyring from: the hub's
// for a device of a hub, else the vault's.
func (v *Vault) keyringStore() stores.Store {
	if v.rotatesOnHub() {
		return v.hub.store
	}
	return v.me.store
}

// keyringChange is a keyring entry a rotation replaces: old (as read from
// keyringStore) by val.
type keyringChange struct {
	key      string
	old, val []byte
}

// changeKeys returns the keys of changes, which a commit reads first, with
// the ledger's head, as the ledger's guard reads its person's entry: so
// commits of people and of records lock keyring rows in one order on
// PostgreSQL.
func changeKeys(changes []keyringChange) []string {
	keys := make([]string, len(changes))
	for i, c := range changes {
		keys[i] = c.key
	}
	return keys
}

// commitOnHub writes a rotation's keyring entries on the hub, in one
// transaction that fails with errPeopleChanged, writing nothing, if any of
// them is no longer as read (old nil: absent), with entries (the change of
// a person the rotation comes with: a revocation) appended to the hub's
// ledger, as Sync records there the people changes the hub learns from a
// device.
//
// It writes current too, the new generation sealed for currentGenKey, so
// that handles open on the hub's store learn it (rotate_current.go).
func (v *Vault) commitOnHub(ctx context.Context, changes []keyringChange, current []byte, entries []ledger.Entry) error {
	// currentGenKey is locked with the entries, in key order (lockKeys).
	keys := append(changeKeys(changes), v.prefix+currentGenKey)
	err := v.hub.ledger.UpdateKeys(ctx, keys, func(tx stores.Tx) error {
		for _, c := range changes {
			it, err := tx.Get(c.key)
			switch {
			case errors.Is(err, stores.ErrNotFound):
				if c.old != nil {
					return errEntryMoved
				}
			case err != nil:
				return err
			case !bytes.Equal(it.Value, c.old):
				return errEntryMoved
			}
			if err := tx.Put(c.key, c.val); err != nil {
				return err
			}
		}
		if err := tx.Put(v.prefix+currentGenKey, current); err != nil {
			return err
		}
		if len(entries) == 0 {
			return nil
		}
		_, err := v.hub.ledger.AppendTx(ctx, tx, entries...)
		return err
	})
	switch {
	case errors.Is(err, errEntryMoved):
		return errPeopleChanged
	case errors.Is(err, ledger.ErrUnpinned):
		return nil // committed; the hub's pin lags, as after any write
	case err != nil:
		return fmt.Errorf("keys rotate on the hub: %w", err)
	}
	return nil
}

// takesHubEntry decides, in the device's commit of a rotation made on the
// hub, whether the device's keyring entry cur (found or not) is replaced
// by the hub's new entry c.val. It is, when the device holds what the hub
// held (the usual case, after readyToRotate), or an entry c.val supersedes
// without losing a generation; else (the person changed on this device
// meanwhile) the device's entry stays, and the next Sync merges the two.
func takesHubEntry(cur stores.Item, found bool, c keyringChange) bool {
	if !found {
		return true
	}
	if bytes.Equal(cur.Value, c.old) {
		return true
	}
	return keyringNewer(c.val, cur.Value) && !losesGenerations(c.val, cur.Value)
}
