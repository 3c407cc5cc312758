package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// A renewal cut between the hub's write and the device's.
//
// On a device of a hub a renewal is written on the hub first, then on the
// device (writeRenewal). A device that dies between the two leaves the hub
// with the renewal and the device without it: its next open takes the
// renewed keyring entry from the hub, but its own ledger never records the
// renewal (the entries are signed by the key it replaces, which nothing
// but that write held), so there the old key would sign on, vouched for by
// the entry's chain of renewals, as on a device that did not make it.
//
// So before the hub's write the device keeps a journal of the renewal
// (renewalJournalPrefix + the person's name, sealed): the new box public
// key, the old signing seed wrapped for it, and the ledger entries the
// renewal writes. The device's write of the renewal ends the journal in
// the same commit. A handle opened with the new keys that finds a journal
// its box key opens, for the renewal of the key its device's ledger still
// gives the person, writes those ledger entries there, signed by the old
// key, as the cut write would have (completeRenewal). A journal of a
// renewal the hub never took (its box key is not the entry's, on the hub
// as on the handle), or one the ledger records already, is dropped; a
// handle opened with the entry before the renewal (out of the hub's
// reach, with the old secret) keeps it for an open with the new one. The journal gives nothing to
// someone who held the old secret: the seed in it is wrapped for the new
// box key, and the seed is the one they held already.

// renewalJournalPrefix is where a device keeps the journal of a renewal
// in progress, per person.
const renewalJournalPrefix = "_renewing/"

// renewalJournalDone marks a journal ended by a compare-and-swap (a store
// without transactions), before it is deleted.
var renewalJournalDone = []byte("done")

// renewalJournal is a renewal the device has written on the hub and not
// yet on itself.
type renewalJournal struct {
	boxPub  []byte // the renewed entry's box public key
	oldSeed []byte // the signing seed it replaces, wrapped for boxPub
	entries []ledger.Entry
}

func (v *Vault) renewalJournalKey() string { return v.prefix + renewalJournalPrefix + v.user }

// encode returns j's plaintext.
func (j renewalJournal) encode() ([]byte, error) {
	b := codec.AppendString(nil, "noydb renewal journal v1")
	b = codec.AppendBytes(b, j.boxPub)
	b = codec.AppendBytes(b, j.oldSeed)
	b = codec.AppendUvarint(b, uint64(len(j.entries)))
	for _, e := range j.entries {
		enc, err := e.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = codec.AppendBytes(b, enc)
	}
	return b, nil
}

// decodeRenewalJournal parses a journal's plaintext.
func decodeRenewalJournal(b []byte) (renewalJournal, error) {
	r := codec.NewReader(b)
	var j renewalJournal
	if r.String(64) != "noydb renewal journal v1" {
		return j, errors.New("not a renewal journal")
	}
	j.boxPub, j.oldSeed = r.Bytes(256), r.Bytes(256)
	for range r.Count(4, 1) {
		var e ledger.Entry
		if err := e.UnmarshalBinary(r.Bytes(1 << 16)); err != nil {
			return j, err
		}
		j.entries = append(j.entries, e)
	}
	return j, r.End()
}

// writeRenewalJournal keeps, on the device, the journal of the renewal r
// whose ledger entries are es, oldSeed the signing key it replaces; it
// returns the item written, which the device's write of the renewal ends.
func (v *Vault) writeRenewalJournal(ctx context.Context, r renewal, oldSeed *crypto.Key, es []ledger.Entry) (stores.Item, error) {
	w, err := crypto.WrapKeyTo(r.entry.boxPub, oldSeed, wrapAD(v.name, v.user, v.me.header, "renewal/sign"))
	if err != nil {
		return stores.Item{}, closedIfWiped(err)
	}
	plain, err := renewalJournal{boxPub: r.entry.boxPub, oldSeed: w, entries: es}.encode()
	if err != nil {
		return stores.Item{}, err
	}
	key := v.renewalJournalKey()
	sealed, err := v.seal.Seal(key, plain)
	if err != nil {
		return stores.Item{}, err
	}
	ver, err := v.me.store.Put(ctx, key, sealed)
	if err != nil {
		return stores.Item{}, err
	}
	return stores.Item{Key: key, Value: sealed, Version: ver}, nil
}

// renewalEntries reports whether es are the ledger entries of a renewal
// of user's keys to signPub, of their keyring entry hashed to hash: a
// SecretChanged or a RecoveryCodeUsed, then the KeysRenewed, both about
// user, by nobody else. Someone who held the old secret can write a
// journal too (the box key it is wrapped for is public): they get the
// device to write nothing else, and nothing they cannot sign themselves
// with the old key they hold.
func renewalEntries(es []ledger.Entry, user string, signPub, hash []byte) bool {
	if len(es) != 2 {
		return false
	}
	first, last := es[0], es[1]
	return (first.Kind == ledger.SecretChanged || first.Kind == ledger.RecoveryCodeUsed) &&
		last.Kind == ledger.KeysRenewed && bytes.Equal(last.SigningKey, signPub) &&
		first.ID == user && last.ID == user && first.Actor == "" && last.Actor == "" &&
		bytes.Equal(first.CipherHash, hash) && bytes.Equal(last.CipherHash, hash) &&
		len(first.SigningKey) == 0 && first.Collection == "" && last.Collection == ""
}

// dropRenewalJournal deletes the device's journal of a renewal, if any:
// it is ended, or was never taken by the hub. A failure leaves it for the
// next open, which drops it.
func (v *Vault) dropRenewalJournal(ctx context.Context) {
	_ = v.me.store.Delete(ctx, v.renewalJournalKey())
}

// hubTookRenewal reports whether the hub may hold the renewal to the box
// public key boxPub of the handle's person: its keyring entry there has
// that key, or the hub cannot say (out of reach, or a device opened
// without it). Only a renewal the hub answers it does not hold is
// dropped: the journal of one it took is what finishes it on the device.
func (v *Vault) hubTookRenewal(ctx context.Context, boxPub []byte) bool {
	if v.hub == nil {
		return true // a device opened without its hub cannot tell
	}
	it, err := v.hub.store.Get(ctx, v.prefix+keyringPrefix+v.user)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return false
	case err != nil:
		return true
	}
	he, err := decodeKeyring(it.Value)
	return err == nil && bytes.Equal(he.boxPub, boxPub)
}

// completeRenewal finishes, on the device, a renewal of the handle's
// person cut after the hub's write (see the comment at the top): it writes
// the journal's ledger entries on the device's ledger, signed by the key
// the renewal replaced, when the handle's entry is the renewed one and the
// device's ledger still gives the person that key; any other journal is
// dropped. It costs one read when there is no journal.
func (v *Vault) completeRenewal(ctx context.Context) error {
	m := v.me
	if m == nil || v.hub == nil && !v.hubless {
		return nil
	}
	key := v.renewalJournalKey()
	it, err := m.store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	e, box := m.entry, m.box
	m.mu.Unlock()
	plain, err := v.seal.Open(key, it.Value)
	if err != nil {
		v.dropRenewalJournal(ctx) // a done mark, or not this vault's
		return nil
	}
	j, err := decodeRenewalJournal(plain)
	if err != nil {
		v.dropRenewalJournal(ctx)
		return nil
	}
	if e == nil || box == nil || len(e.signRenewals) == 0 || !bytes.Equal(j.boxPub, e.boxPub) {
		// The handle opened with another entry than the renewed one: an
		// open with the old secret out of the hub's reach, or while the
		// renewal is under way. The journal is kept for an open with the
		// renewed entry unless the hub shows it never took the renewal.
		if !v.hubTookRenewal(ctx, j.boxPub) {
			v.dropRenewalJournal(ctx)
		}
		return nil
	}
	seed, err := crypto.UnwrapKeyWith(box, j.oldSeed, wrapAD(v.name, v.user, m.header, "renewal/sign"))
	if err != nil {
		v.dropRenewalJournal(ctx)
		return nil
	}
	defer seed.Wipe()
	pub, err := crypto.SigningPublicKey(seed)
	if err != nil {
		return err
	}
	// The key the entry's last renewal replaced.
	replaced := e.grantSignKey()
	if n := len(e.signRenewals); n > 1 {
		replaced = e.signRenewals[n-2].pub
	}
	cur, err := m.store.Get(ctx, v.prefix+keyringPrefix+v.user)
	if err != nil {
		return err
	}
	if !bytes.Equal(pub, replaced) || !renewalEntries(j.entries, v.user, e.signPub, hashOf(cur.Value)) {
		v.dropRenewalJournal(ctx)
		return nil
	}
	ps, err := v.peopleState(ctx)
	if err != nil {
		return err
	}
	// A device's ledger may not know the person (their grant and their
	// renewals made elsewhere are on the hub's): it is the one the
	// journal's entries introduce the new key to, unless it gives them
	// another key (it recorded the renewal, or knows them otherwise).
	if p, ok := ps.Person(v.user); ok && !bytes.Equal(p.Key, pub) {
		v.dropRenewalJournal(ctx)
		return nil
	}
	opts := v.ledgerOptions()
	opts.Signer, opts.Guard, opts.GuardKeys = seedSigner{seed: seed, pub: pub}, nil, nil
	l := newLedger()(m.store, v.seal, v.macer, v.prefix, opts)
	defer func() { _ = l.Close() }()
	// Ending the journal in the same commit: a second handle finishing it
	// at once finds it changed and writes nothing.
	err = commitEntries(ctx, m.store, l, []entryWrite{{key: key, old: it, val: renewalJournalDone}}, j.entries, errPeopleChanged)
	if errors.Is(err, errPeopleChanged) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish the renewal of %q's keys on this device: %w", v.user, err)
	}
	v.dropRenewalJournal(ctx)
	return nil
}
