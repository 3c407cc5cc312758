package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// ledgerSigner signs the vault's ledger entries with the signing key of
// the person the vault was opened as (Vault.signAs): the device's person
// on both the device's vault and its hub-side vault, so that every device
// signs its own entries on the hub. A person without a signing key (a
// keyring entry of layout version 1) signs nothing.
type ledgerSigner struct {
	v *Vault
	c *signerCache
}

// signerCache holds the person's signing key expanded (crypto.Signer) for
// the seed it was made from: a new seed (UpgradeKeyring) makes a new one.
// The vault wipes it at Close.
type signerCache struct {
	mu   sync.Mutex
	seed *crypto.Key
	s    *crypto.Signer
}

// signer returns the Signer of seed.
func (c *signerCache) signer(seed *crypto.Key) (*crypto.Signer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seed != seed || c.s == nil {
		s, err := crypto.NewSigner(seed)
		if err != nil {
			return nil, err
		}
		c.s.Wipe()
		c.seed, c.s = seed, s
	}
	return c.s, nil
}

// wipe wipes the expanded key.
func (c *signerCache) wipe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Wipe()
	c.seed, c.s = nil, nil
}

// Public returns the person's signing key, nil when they have none.
func (s ledgerSigner) Public() []byte {
	m := s.v.signAs
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seed == nil || m.entry == nil {
		return nil
	}
	return m.entry.signPub
}

// Sign signs msg with the person's signing key.
func (s ledgerSigner) Sign(msg []byte) ([]byte, error) {
	m := s.v.signAs
	if m == nil {
		return nil, fmt.Errorf("no signing key: %w", ErrNotPermitted)
	}
	m.mu.Lock()
	seed := m.seed
	m.mu.Unlock()
	if seed == nil {
		return nil, fmt.Errorf("no signing key: %w", ErrNotPermitted)
	}
	if seed.Wiped() {
		return nil, closedIfWiped(crypto.ErrKeyWiped)
	}
	sg, err := s.c.signer(seed)
	if err != nil {
		return nil, closedIfWiped(err)
	}
	return sg.Sign(msg)
}

// ledgerOptions are the options of the vault's ledgers.
func (v *Vault) ledgerOptions() wire.LedgerOptions {
	return wire.LedgerOptions{
		Actor: v.user, Pins: v.pins, Signer: ledgerSigner{v: v, c: v.signers}, People: v.ledgerPeople,
		Guard: v.guard.check, GuardKeys: []string{v.guard.key}, Alone: v.alone,
	}
}

// ledgerPeople lists the keyring of the vault's store for the ledger's
// Verify: every person with a signing key whose entry passes the check of
// authority (people_ledger.go: its MAC, and a grant the ledger's people
// entries, or the keyring's chain of grants, vouch for). An entry that
// fails is left out, as are entries of layout version 1, which have no
// key: the ledger does not take a key from them, so an entry a person or
// a store planted cannot vouch for an author.
func (v *Vault) ledgerPeople(ctx context.Context) (map[string]wire.LedgerPerson, error) {
	if v.signAs == nil {
		return nil, nil
	}
	a, err := v.authority(ctx)
	if errors.Is(err, ErrTampered) {
		// Verify reports the ledger's problem itself, at its position:
		// the keyring's chains of grants vouch for its authors meanwhile.
		a, err = v.authorityOf(v.keyringStore0()), nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]wire.LedgerPerson{}
	kp := v.prefix + keyringPrefix
	for it, err := range stores.ListUnder(ctx, v.store, kp) {
		if err != nil {
			return nil, err
		}
		name := it.Key[len(kp):]
		if !isKeyringV2(it.Value) {
			continue
		}
		e, err := a.entry(ctx, name, it.Value)
		if err != nil {
			if !refused(err) {
				return nil, closedIfWiped(err)
			}
			continue
		}
		out[name] = wire.LedgerPerson{SigningKey: e.signPub, Renewed: e.renewedSignKeys(), Role: e.role.String(), Root: e.grantedBy == e.user,
			Revoked: e.revoked, GrantedBy: e.grantedBy, Collections: e.collections}
	}
	return out, nil
}

// hubPeople appends to the hub's ledger (the sync feed, whose entries
// each device's person signs) the changes of people this device's keyring
// holds and the hub's ledger does not record yet: a PersonGranted entry
// (role, signing key and collections) for a person granted here whose
// grant the hub's ledger lacks (it names them not at all, as revoked, or
// with another key, role or collections); a PersonRevoked entry for a
// person revoked here whose key the hub's ledger has not revoked; both, in
// that order, for a person revoked and granted again here since the last
// sync (the hub's ledger holds the first grant, not revoked). Each key
// then has a position in the hub's ledger: Verify checks a person's
// entries with the key they held then (after a re-grant the keyring holds
// only the new one), and refuses their entries after a revocation, such
// as the pushes of a handle opened before it. The hub's ledger has no
// other way to learn them: the keyring entry travels by itself (with this
// Sync, or before it with the link of any handle opened on this device
// with the hub, the person's own included), and the people entries of the
// device's own ledger stay there. What decides is the hub's ledger, not
// the hub's keyring: an entry the link copied there already is recorded
// all the same. (A person the hub's ledger does not introduce, granted
// before this was recorded, is taken from the keyring; so is a grant the
// hub's ledger records later than the person's first entries there.) Only
// an owner's device records them (only owners change people), and not the
// self-granted root of the keyring, nor an entry the hub's keyring holds
// newer or as new but other (changed on another device since: its Sync
// records that). Sync calls
// it before it copies the keyring to the hub; a crash between the two
// leaves the change recorded, and the next sync finds it recorded.
func (s *syncRun) hubPeople(ctx context.Context) error {
	if s.v.Role() != RoleOwner {
		return nil
	}
	// The owner's signature vouches for what it records: only entries that
	// pass the check by this device's ledger (or the keyring's chain of
	// grants) are recorded, never one a hub or a person planted here; and
	// a revocation only when this device's ledger records it.
	a, err := s.v.authority(ctx)
	if err != nil {
		return err
	}
	own := a.sources[0].st
	hub, err := s.h.peopleState(ctx)
	if err != nil {
		return feedErr(err)
	}
	var changes []recordedEntry
	for k, err := range s.v.deviceEntries(ctx) {
		if err != nil {
			return err
		}
		it, name, e := k.it, k.name, k.e
		change := recordedEntry{key: it.Key, val: it.Value}
		if e.revoked {
			p, _ := own.Person(name)
			if !slices.ContainsFunc(p.RevokedKeys, func(k []byte) bool { return bytes.Equal(k, e.signPub) }) {
				continue
			}
		} else if err := a.check(ctx, e, 0); err != nil {
			if !refused(err) {
				return err
			}
			continue
		}
		switch cur, err := s.h.store.Get(ctx, it.Key); {
		case errors.Is(err, stores.ErrNotFound):
		case err != nil:
			return err
		case !bytes.Equal(cur.Value, it.Value) && !keyringNewer(it.Value, cur.Value):
			continue // changed on another device since (its Sync records it), or granted there too
		}
		h, named := hub.Person(name)
		endedOnHub := named && slices.ContainsFunc(h.RevokedKeys, func(k []byte) bool { return bytes.Equal(k, e.signPub) })
		if e.revoked {
			if !endedOnHub {
				change.entries = []ledger.Entry{{Kind: ledger.PersonRevoked, ID: e.user, CipherHash: hashOf(it.Value),
					SigningKey: e.signPub}}
				changes = append(changes, change)
			}
			continue
		}
		switch {
		case endedOnHub:
			continue // an entry from before a revocation the hub's ledger holds
		case !named && e.grantedBy == e.user:
			continue // the keyring's root
		case named && !h.Revoked && bytes.Equal(h.Key, e.signPub) && h.Role == e.role.String() &&
			slices.Equal(h.Collections, limitOf(e.collections)):
			continue // recorded
		}
		if named && !h.Revoked && len(h.Key) > 0 && !bytes.Equal(h.Key, e.signPub) {
			// Revoked and granted again here since the last sync (a grant
			// makes a key of its own, and a person not revoked is not
			// granted again): the revocation ends the first key at its
			// position, so the pushes of a handle holding it fail Verify.
			// The revoked entry was replaced here: it has no bytes left to
			// hash.
			change.entries = append(change.entries, ledger.Entry{Kind: ledger.PersonRevoked, ID: e.user, SigningKey: h.Key})
		}
		change.entries = append(change.entries, ledger.Entry{Kind: ledger.PersonGranted, ID: e.user, Reason: e.role.String(),
			CipherHash: hashOf(it.Value), SigningKey: e.signPub, Partition: e.collections})
		changes = append(changes, change)
	}
	if len(changes) == 0 {
		return nil
	}
	keys := make([]string, len(changes))
	for i, c := range changes {
		keys[i] = c.key
	}
	// The hub's keyring entries are read again in the commit that records
	// them (see recordedEntry).
	err = s.h.ledger.UpdateKeys(ctx, keys, func(tx stores.Tx) error {
		var entries []ledger.Entry
		for _, c := range changes {
			cur, err := tx.Get(c.key)
			switch {
			case errors.Is(err, stores.ErrNotFound):
				if err := tx.Put(c.key, c.val); err != nil {
					return err
				}
			case err != nil:
				return err
			case !bytes.Equal(cur.Value, c.val) && !keyringNewer(c.val, cur.Value):
				continue // changed on another device, or granted there too, since it was read
			}
			entries = append(entries, c.entries...)
		}
		if len(entries) == 0 {
			return nil
		}
		_, err := s.h.ledger.AppendTx(ctx, tx, entries...)
		return err
	})
	return closedIfWiped(err)
}

// recordedEntry is a change of a person that hubPeople records on the
// hub's ledger: the device's keyring entry (key, val) and the entries
// recording it.
//
// The hub's keyring entry of the person is read again in the commit that
// records it, and one the hub lacks is written in that commit: from the
// commit on, the hub's keyring holds the grant its ledger records. Were the
// entry copied after it (with the rest of the keyring), the window between
// the two would let another device's grant of the same person in: a
// handle of the person opened there copies that device's entry to the hub
// where it finds none, then writes through the hub with its key, under a
// ledger that records the other key (every pull then failed with "bad
// signature" on an honest hub). With the entry there, that handle's copy
// keeps the hub's (a grant made apart is never newer), and its commits
// get ErrNoAccess (personGuard). An entry the hub holds in another state,
// not older than the device's, was changed on another device meanwhile:
// not recorded (its Sync records it).
type recordedEntry struct {
	key     string
	val     []byte
	entries []ledger.Entry
}

// devicePeople is hubPeople the other way: it appends to the device's own
// ledger the changes of people the keyring copied from the hub brought
// (made on other devices) that this ledger contradicts: a revocation of a
// key this ledger holds as the person's current one, and the grant of a
// person this ledger names with another key (granted again elsewhere
// after a revocation), as revoked, or with another role or collections.
// Without them the device's Verify would hold the keyring's new key
// against the ledger's old one ("keyring signing key differs"), and the
// person's entries signed here with the new key against the old one. A
// person this ledger does not name needs nothing (Verify takes them from
// the keyring). A grant made here that lost to another device's grant of
// the same person, made before either heard of the other (the keyring
// copied from the hub holds the other, and the hub's ledger never named
// this one's key: see preferLedger), is recorded as revoked, before the
// winner's grant; so is a grant the hub's ledger revoked, when the
// keyring holds a later grant's revocation. Only a change the hub's ledger vouches for is recorded
// (a, the check of the hub's keyring), and only on an owner's device (only
// owners change people; a writer's or reader's device records nothing, a
// limit the README's threat table names). Sync calls it after it copies
// the hub's keyring to the device; a crash before it runs leaves the next
// sync to record the same, since it compares the keyring with the ledger.
func (s *syncRun) devicePeople(ctx context.Context, a *authority) error {
	if s.v.Role() != RoleOwner {
		return nil
	}
	own, err := s.v.peopleState(ctx)
	if err != nil {
		return err
	}
	hub := a.sources[0].st
	var entries []ledger.Entry
	for k, err := range s.v.deviceEntries(ctx) {
		if err != nil {
			return err
		}
		it, name, e := k.it, k.name, k.e
		p, named := own.Person(name)
		if !named || p.Seq == 0 || e.grantedBy == e.user {
			continue
		}
		revokedOnHub := func(key []byte) bool {
			h, _ := hub.Person(name)
			return slices.ContainsFunc(h.RevokedKeys, func(k []byte) bool { return bytes.Equal(k, key) })
		}
		// The grant this ledger holds never reached the hub's ledger: once
		// the keyring holds another, it lost to that one.
		h, _ := hub.Person(name)
		lost := !p.Revoked && !namesKey(h, p.Key)
		current := !p.Revoked && bytes.Equal(p.Key, e.signPub)
		if e.revoked {
			switch {
			case current && revokedOnHub(e.signPub):
				entries = append(entries, ledger.Entry{Kind: ledger.PersonRevoked, ID: name, CipherHash: hashOf(it.Value),
					SigningKey: e.signPub})
			case !current && !p.Revoked && (revokedOnHub(p.Key) || lost && revokedOnHub(e.signPub)):
				entries = append(entries, ledger.Entry{Kind: ledger.PersonRevoked, ID: name, SigningKey: p.Key})
			}
			continue
		}
		if current && p.Role == e.role.String() && slices.Equal(p.Collections, limitOf(e.collections)) {
			continue
		}
		if err := a.check(ctx, e, 0); err != nil {
			if !refused(err) {
				return err
			}
			continue
		}
		if !p.Revoked && !bytes.Equal(p.Key, e.signPub) {
			if !revokedOnHub(p.Key) && !lost {
				continue // the hub's ledger does not end the key this one holds
			}
			entries = append(entries, ledger.Entry{Kind: ledger.PersonRevoked, ID: name, SigningKey: p.Key})
		}
		entries = append(entries, ledger.Entry{Kind: ledger.PersonGranted, ID: name, Reason: e.role.String(),
			CipherHash: hashOf(it.Value), SigningKey: e.signPub, Partition: e.collections})
	}
	if len(entries) == 0 {
		return nil
	}
	_, err = s.v.ledger.Append(ctx, entries...)
	return closedIfWiped(err)
}

// keyringItem is a stored keyring entry of the current layout whose MAC
// holds: its value, its person's name and the entry.
type keyringItem struct {
	it   stores.Item
	name string
	e    *keyringEntry
}

// deviceEntries yields the keyring entries of the device's store of the
// current layout whose MAC holds (others are skipped: the people checks
// refuse them), or the error of the listing (or ErrClosed).
func (v *Vault) deviceEntries(ctx context.Context) iter.Seq2[keyringItem, error] {
	return func(yield func(keyringItem, error) bool) {
		kp := v.prefix + keyringPrefix
		for it, err := range stores.ListUnder(ctx, v.store, kp) {
			if err != nil {
				yield(keyringItem{}, err)
				return
			}
			name := it.Key[len(kp):]
			if !isKeyringV2(it.Value) {
				continue
			}
			e, err := v.readEntryHeader(name, it.Value, v.header())
			if errors.Is(err, ErrClosed) {
				yield(keyringItem{}, err)
				return
			}
			if err == nil && !yield(keyringItem{it: it, name: name, e: e}, nil) {
				return
			}
		}
	}
}

// limitOf is the collections a person is limited to as a ledger replay
// holds them (nil: all).
func limitOf(cols []string) []string {
	if len(cols) == 0 {
		return nil
	}
	return cols
}

// upgradeOnHub makes the upgrade of the person's keyring entry of layout
// version 1 (old) to val, the entry introducing their signing key, on the
// hub first when the vault is a device of one: the entry and its
// KeyringUpgraded ledger entry (e, signed with the new key) in one hub
// commit, before the device writes them and before any entry signed with
// that key reaches the hub. The hub's ledger, begun unsigned by the
// vault's version 1 writes, then introduces the key at its position, so
// Verify on the hub knows the person's later entries; before, the
// upgrade stayed in the device's ledger and the hub's Verify said
// "unknown signer". Out of reach of the hub nothing is written (an error
// wrapping sequence.ErrOffline), as for a rotation; a device of a hub
// opened without it does not upgrade (errHubless). When the device's
// write fails after the hub's, the hub holds the upgraded entry: a Sync
// brings it, and the vault opened again uses it.
func (v *Vault) upgradeOnHub(ctx context.Context, key string, old, val []byte, e ledger.Entry) error {
	if v.hubless {
		return fmt.Errorf("upgrade keyring: %w", errHubless)
	}
	if v.hub == nil {
		return nil
	}
	err := v.hub.ledger.UpdateKeys(ctx, []string{key}, func(tx stores.Tx) error {
		switch it, err := tx.Get(key); {
		case errors.Is(err, stores.ErrNotFound):
		case err != nil:
			return err
		case !bytes.Equal(it.Value, old):
			return errEntryMoved
		}
		if err := tx.Put(key, val); err != nil {
			return err
		}
		_, err := v.hub.ledger.AppendTx(ctx, tx, e)
		return err
	})
	if errors.Is(err, errEntryMoved) {
		return fmt.Errorf("upgrade keyring on the hub: %w", errPeopleChanged)
	}
	if err != nil {
		return fmt.Errorf("upgrade keyring on the hub: %w", closedIfWiped(err))
	}
	return nil
}
