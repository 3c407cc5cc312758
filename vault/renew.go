package vault

import (
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
)

// Renewal of a person's box key pair.
//
// Everything a person holds (each generation's data key, their
// collections' keys, their signing key) is wrapped in their keyring entry
// for their X25519 box public key; the private key is wrapped by a key
// derived from their secret, and, through a key of each recovery code, in
// their recovery entry. Were that key pair kept for ever, whoever ever
// unwrapped its private key (someone who knew an old secret, or holds a
// revoked or used recovery code) and kept a copy of the store from then
// (the keyring or recovery entry that the old secret or code opened)
// would read everything wrapped for the person afterwards: every later
// generation, so every record written after.
//
// So a secret change (ChangeSecret) and an open with a recovery code make
// a new key pair, and re-wrap for its public key everything the entry
// holds (renew): afterwards the old secret and every code that is not
// live any more unwrap only the old private key, which opens the wraps of
// the entries of then, and nothing the vault wraps later (a new
// generation is wrapped for the entry's current box key; a record written
// with it opens with no key the old private key unwraps). The codes still
// live keep working: each wraps a key pair of its own, and the person's
// current private key is wrapped for each live code's public key in the
// recovery entry, so a renewal re-wraps it for them without the codes
// (recovery.go); revoking or using a code drops its wrap.
//
// The grant statement an owner signed names the box key of the grant, so
// the renewed entry keeps it (grantBox) and adds the person's own
// signature, by their signing key (the one the grant names, which the
// ledger vouches for), of the new box key bound to that grant
// (renewSig). Every read of an entry checks that signature with its MAC
// (keyringEntry.verify): someone who holds a generation's key and can
// write the store (any person of the vault can recompute the MAC) cannot
// swap a person's box key for one of their own, which the next rotation
// would wrap the new generation for.
//
// What this does not close (the README's threat table): the signing key
// is kept, and its seed is wrapped for the old box key too. Someone who
// unwrapped the old private key and can write the store can sign a
// renewal to a key pair of their own, or put back the whole entry as it
// was before the change; until the person's next open refuses the entry,
// a rotation would wrap its new generation for that key. Closing it takes
// a new signing key at each renewal, recorded in the ledger (signed by the
// old one) so that the authority check refuses an entry with the old one.

// unwrap unwraps the wrap w in e (of purpose) with box, e's current box
// identity: a wrap for the current key pair, or for an earlier one (a
// rotation that had not seen a renewal, merged in by a sync), whose
// private key e holds wrapped for the current one (prev).
func (e *keyringEntry) unwrap(vaultName string, header []byte, box *crypto.Identity, w []byte, purpose string) (*crypto.Key, error) {
	ad := func(p string) []byte { return wrapAD(vaultName, e.user, header, p) }
	k, err := crypto.UnwrapKeyWith(box, w, ad(purpose))
	if err == nil || len(e.prev) == 0 {
		return k, err
	}
	for i := len(e.prev) - 1; i >= 0; i-- {
		pk, perr := crypto.UnwrapKeyWith(box, e.prev[i].key, ad(prevPurpose(e.prev[i].pub)))
		if perr != nil {
			continue
		}
		id := crypto.IdentityFromKey(pk)
		k, perr = crypto.UnwrapKeyWith(id, w, ad(purpose))
		id.Wipe()
		if perr == nil {
			return k, nil
		}
	}
	return nil, err
}

// renewalStatement is what a person signs to renew their box key: the
// new box public key of e bound to e's grant (its statement and the
// granter's signature) in its vault.
func renewalStatement(vaultName string, header []byte, e *keyringEntry) []byte {
	b := codec.AppendString(nil, "noydb box renewal v1")
	b = codec.AppendBytes(b, grantStatement(vaultName, header, e))
	b = codec.AppendBytes(b, e.grantSig)
	return codec.AppendBytes(b, e.boxPub)
}

// renewal is a person's keyring entry renewed: the entry (not sealed yet)
// and its new box identity, the caller's to keep or wipe.
type renewal struct {
	entry *keyringEntry
	box   *crypto.Identity
}

// renew returns e (a secret-locked entry, not revoked) with a new box key
// pair: every wrap of e re-wrapped from old (e's current box identity)
// for the new public key, the private key locked by kek (derived from
// the secret with salt at e's cost), the serial raised, and the renewal
// signed with seed (the person's signing key). The caller seals it.
func (e *keyringEntry) renew(vaultName string, header []byte, old *crypto.Identity, seed, kek *crypto.Key, salt []byte) (renewal, error) {
	id, err := crypto.GenerateIdentity()
	if err != nil {
		return renewal{}, err
	}
	fail := func(err error) (renewal, error) { id.Wipe(); return renewal{}, err }
	pub, err := id.PublicKey()
	if err != nil {
		return fail(err)
	}
	ad := func(p string) []byte { return wrapAD(vaultName, e.user, header, p) }
	rewrap := func(w []byte, purpose string) ([]byte, error) {
		k, err := e.unwrap(vaultName, header, old, w, purpose)
		if err != nil {
			return nil, err
		}
		defer k.Wipe()
		return crypto.WrapKeyTo(pub, k, ad(purpose))
	}
	ne := *e
	ne.serial, ne.salt = e.serial+1, salt
	ne.grantBox = e.grantBoxKey()
	ne.boxPub = pub
	ne.gens = make([]wrappedGen, len(e.gens))
	for i, g := range e.gens {
		w, err := rewrap(g.key, genPurpose(g.gen))
		if err != nil {
			return fail(err)
		}
		ne.gens[i] = wrappedGen{gen: g.gen, key: w}
	}
	ne.colKeys = make([]wrappedCol, len(e.colKeys))
	for i, c := range e.colKeys {
		w, err := rewrap(c.key, colPurpose(c.gen, c.name))
		if err != nil {
			return fail(err)
		}
		ne.colKeys[i] = wrappedCol{name: c.name, gen: c.gen, key: w}
	}
	if ne.signPriv, err = rewrap(e.signPriv, "sign"); err != nil {
		return fail(err)
	}
	// The earlier key pairs, and the one replaced, for the new one.
	ne.prev = make([]prevBox, 0, len(e.prev)+1)
	for _, p := range e.prev {
		w, err := rewrap(p.key, prevPurpose(p.pub))
		if err != nil {
			return fail(err)
		}
		ne.prev = append(ne.prev, prevBox{pub: p.pub, key: w})
	}
	w, err := crypto.WrapKeyTo(pub, old.Key(), ad(prevPurpose(e.boxPub)))
	if err != nil {
		return fail(err)
	}
	ne.prev = append(ne.prev, prevBox{pub: e.boxPub, key: w})
	if ne.boxPriv, err = crypto.WrapKey(kek, id.Key(), ad("box")); err != nil {
		return fail(err)
	}
	ne.renewSig = nil
	if ne.renewSig, err = crypto.Sign(seed, renewalStatement(vaultName, header, &ne)); err != nil {
		return fail(err)
	}
	return renewal{entry: &ne, box: id}, nil
}
