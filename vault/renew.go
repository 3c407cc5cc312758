package vault

import (
	"slices"

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
// The signing key is renewed too. Its seed was wrapped for the old box
// key, so whoever unwrapped the old private key holds it: with write
// access to the store they could sign a renewal to a key pair of their
// own, or put back the whole entry as it was before the change, and a
// rotation would wrap its new generation for them. So a renewal makes a
// new Ed25519 seed (wrapped for the new box key only) and records it in
// the ledger: a ledger.KeysRenewed entry naming the new key, the last of
// its commit, signed by the key it replaces. From the next entry on the
// ledger gives the person the new key only, so the authority check
// (people_ledger.go) refuses an entry with the old one (put back, or a
// renewal the old key signed afterwards), and the old key signs nothing
// valid. The entry keeps the signing key the grant names (grantSign:
// the grant's signature still holds) and the chain of renewals from it to
// the current key, each signed by the key it replaces (signChainHolds,
// checked with the MAC on every read): a keyring read without a ledger
// (a chain of grants) still tells the person's keys from a stranger's.
//
// A handle writes the renewal's ledger entries with the key it replaces,
// through a ledger of its own (renewalLedger), while its other commits
// wait outside their commits (member.renewing, renewalHold); then it
// signs with the new key.

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

// signRenewalStatement is what a person signs, with the signing key it
// replaces, to renew their signing key: the new key pub, the n-th renewal
// since e's grant (its statement and the granter's signature).
func signRenewalStatement(vaultName string, header []byte, e *keyringEntry, n int, pub []byte) []byte {
	b := codec.AppendString(nil, "noydb signing key renewal v1")
	b = codec.AppendBytes(b, grantStatement(vaultName, header, e))
	b = codec.AppendBytes(b, e.grantSig)
	b = codec.AppendUvarint(b, uint64(n))
	return codec.AppendBytes(b, pub)
}

// signChainHolds reports whether each renewal of e's signing key is
// signed by the key before it, from the grant's.
func (e *keyringEntry) signChainHolds(vaultName string, header []byte) bool {
	key := e.grantSignKey()
	for i, r := range e.signRenewals {
		if !crypto.VerifySignature(key, signRenewalStatement(vaultName, header, e, i, r.pub), r.sig) {
			return false
		}
		key = r.pub
	}
	return true
}

// renewal is a person's keyring entry renewed: the entry (not sealed yet),
// its new box identity and signing seed, the caller's to keep or wipe,
// and the signing key it replaces.
type renewal struct {
	entry   *keyringEntry
	box     *crypto.Identity
	seed    *crypto.Key
	oldSign []byte
}

// wipe wipes the new keys (a renewal not written).
func (r renewal) wipe() {
	r.box.Wipe()
	r.seed.Wipe()
}

// renew returns e (a secret-locked entry, not revoked) with a new box key
// pair and a new signing key: every wrap of e re-wrapped from old (e's
// current box identity) for the new public key, the private key locked by
// kek (derived from the secret with salt at e's cost), the new signing
// seed wrapped for it, the serial raised, the renewal of the signing key
// signed with seed (the person's signing key, which it replaces) and the
// renewal of the box key with the new one. The caller seals it.
func (e *keyringEntry) renew(vaultName string, header []byte, old *crypto.Identity, seed, kek *crypto.Key, salt []byte) (renewal, error) {
	id, err := crypto.GenerateIdentity()
	if err != nil {
		return renewal{}, err
	}
	nseed, err := crypto.GenerateKey()
	if err != nil {
		id.Wipe()
		return renewal{}, err
	}
	fail := func(err error) (renewal, error) { id.Wipe(); nseed.Wipe(); return renewal{}, err }
	pub, err := id.PublicKey()
	if err != nil {
		return fail(err)
	}
	signPub, err := crypto.SigningPublicKey(nseed)
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
	if ne.signPriv, err = crypto.WrapKeyTo(pub, nseed, ad("sign")); err != nil {
		return fail(err)
	}
	// The new signing key, signed by the one it replaces.
	ne.grantSign = e.grantSignKey()
	stmt := signRenewalStatement(vaultName, header, &ne, len(e.signRenewals), signPub)
	sig, err := crypto.Sign(seed, stmt)
	if err != nil {
		return fail(err)
	}
	ne.signRenewals = append(slices.Clone(e.signRenewals), signRenewal{pub: signPub, sig: sig})
	ne.signPub = signPub
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
	if ne.renewSig, err = crypto.Sign(nseed, renewalStatement(vaultName, header, &ne)); err != nil {
		return fail(err)
	}
	return renewal{entry: &ne, box: id, seed: nseed, oldSign: e.signPub}, nil
}
