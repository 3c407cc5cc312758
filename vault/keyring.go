package vault

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
)

// Role is what a person may do in a vault.
type Role uint8

// The roles. The values are part of the stored keyring layout and never change.
const (
	// RoleOwner may do everything, including granting and revoking people.
	RoleOwner Role = 1
	// RoleWriter may read and write records, take numbers and append events.
	RoleWriter Role = 2
	// RoleReader may only read: records, series, the ledger. Every write
	// of a reader's vault fails with ErrNotPermitted. On a device of a hub
	// a reader's Sync pulls (it applies the hub's changes on the device)
	// and pushes nothing (see reader_pull.go).
	RoleReader Role = 3
)

// Valid reports whether r is one of the defined roles.
func (r Role) Valid() bool { return r >= RoleOwner && r <= RoleReader }

// String returns "owner", "writer" or "reader".
func (r Role) String() string {
	switch r {
	case RoleOwner:
		return "owner"
	case RoleWriter:
		return "writer"
	case RoleReader:
		return "reader"
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// ParseRole reads the name of a role (as String writes it); anything else
// is an error matching ErrInvalidArgument.
func ParseRole(s string) (Role, error) {
	for _, r := range []Role{RoleOwner, RoleWriter, RoleReader} {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown role %q (owner, writer or reader)", ErrInvalidArgument, s)
}

// How a keyring entry's X25519 private key is held.
const (
	lockNone     byte = 0 // a revoked entry: no key at all
	lockSecret   byte = 1 // wrapped by a key derived from the person's secret
	lockIdentity byte = 2 // held by the person (Config.Identity)
)

// keyringMagic starts every keyring entry of version 2 and later. A version
// 1 entry is a bare crypto.WrapKey envelope, which starts with
// crypto.EnvelopeVersion (1), never with 'N'.
const keyringMagic = "NOYK"

// keyringVersion is the layout version written after the magic for an
// entry whose box key pair is the one its grant names; keyringRenewedVersion
// for one whose person renewed it since (see renew.go), which adds the
// grant's box public key and the renewal's signature;
// keyringSignRenewedVersion for one whose person renewed their signing key
// too, which adds the grant's signing key and the chain of renewals from
// it to the current one.
const (
	keyringVersion            = 2
	keyringRenewedVersion     = 3
	keyringSignRenewedVersion = 4
)

// Limits of the keyring layout, checked before anything is allocated.
const (
	maxKeyringName    = 1 << 10
	maxKeyringList    = 1 << 12
	maxKeyringWrapped = 256
)

// wrappedGen is the data key of one generation, wrapped for the person.
type wrappedGen struct {
	gen uint64
	key []byte
}

// wrappedCol is a collection's key of one generation, wrapped for the person.
type wrappedCol struct {
	name string
	gen  uint64
	key  []byte
}

// keyringEntry is one person's slot in a vault's keyring (layout version 2):
//
//	"NOYK" [1] version (2)
//	string user
//	uvarint serial       (raised by every change; sync keeps the highest)
//	[1] role, bool revoked
//	string granted-by, varint granted-at (Unix nanoseconds)
//	uvarint count, strings: the collections the person may read (none: all)
//	bytes box public key (X25519), bytes signing public key (Ed25519)
//	[1] lock; for a secret lock: bytes salt, uvarint time, memory KiB, threads
//	bytes box private key wrapped by the secret's key (secret lock only)
//	uvarint count, (uvarint generation, bytes wrapped data key)...
//	uvarint count, (string collection, uvarint generation, bytes wrapped key)...
//	bytes signing key seed, wrapped
//	bytes granter's signature of the grant statement
//	version 3 only: bytes the grant's box public key (X25519), bytes the
//	    person's signature of the renewal statement (renew.go), both empty
//	    when an owner granted the renewed key since,
//	    uvarint count, (bytes public key, bytes private key wrapped for the
//	    box public key)...: the person's earlier box key pairs
//	uvarint MAC generation, bytes MAC (HMAC-SHA256 of all that precedes)
//
// Data keys, collection keys and the signing seed are wrapped for the box
// public key (crypto.WrapKeyTo), so an owner can wrap a new generation for
// every person without knowing their secrets. Every wrap is bound to the
// vault, the user, the header and its purpose; the MAC, keyed by the data
// key of generation macGen, covers the whole entry bound to vault, user
// and header, so a store (which holds no key) cannot change a field.
type keyringEntry struct {
	user        string
	serial      uint64
	role        Role
	revoked     bool
	grantedBy   string
	grantedAt   int64
	collections []string
	boxPub      []byte
	signPub     []byte
	lock        byte
	salt        []byte
	kdf         crypto.KDFParams
	boxPriv     []byte
	gens        []wrappedGen
	colKeys     []wrappedCol
	signPriv    []byte
	grantSig    []byte
	// grantBox is the box public key the grant statement names when the
	// person renewed their key pair since (boxPub is then the new one,
	// and renewSig their signature of it); nil when not renewed.
	grantBox []byte
	renewSig []byte
	// prev are the person's box key pairs before renewals, their private
	// keys wrapped for boxPub: a wrap a rotation made for an earlier key
	// pair, before it saw the renewal, merged into the entry by a sync
	// (keyring_merge.go), still opens.
	prev []prevBox
	// grantSign is the signing key the grant statement names when the
	// person renewed their signing key since (signPub is then the current
	// one, the last of signRenewals, each signed by the key before it);
	// nil when not renewed.
	grantSign    []byte
	signRenewals []signRenewal
	macGen       uint64
	mac          []byte
}

// prevBox is one of the person's earlier box key pairs: its public key and
// its private key wrapped for the entry's current box public key.
type prevBox struct {
	pub, key []byte
}

// signRenewal is one renewal of a person's signing key: the new key and
// the signature, by the key it replaces, of the signing renewal statement
// (renew.go).
type signRenewal struct {
	pub, sig []byte
}

// grantSignKey is the signing key e's grant statement names.
func (e *keyringEntry) grantSignKey() []byte {
	if e.grantSign != nil {
		return e.grantSign
	}
	return e.signPub
}

// signKeys returns every signing key e's person held since its grant, in
// order: the grant's, then each renewal's (the last is signPub).
func (e *keyringEntry) signKeys() [][]byte {
	keys := [][]byte{e.grantSignKey()}
	for _, r := range e.signRenewals {
		keys = append(keys, r.pub)
	}
	return keys
}

// renewedSignKeys returns the signing keys e's person held since its
// grant before the current one, oldest first (nil: not renewed).
func (e *keyringEntry) renewedSignKeys() [][]byte {
	if len(e.signRenewals) == 0 {
		return nil
	}
	keys := e.signKeys()
	return keys[:len(keys)-1]
}

// renewedFrom reports whether key is one of the signing keys e's person
// held before a renewal since its grant.
func (e *keyringEntry) renewedFrom(key []byte) bool {
	return slices.ContainsFunc(e.renewedSignKeys(), func(k []byte) bool { return bytes.Equal(k, key) })
}

// prevPurpose is the purpose of the wrap of the earlier box private key
// whose public key is pub.
func prevPurpose(pub []byte) string { return "box/prev/" + hex.EncodeToString(pub) }

// grantBoxKey is the box public key e's grant statement names.
func (e *keyringEntry) grantBoxKey() []byte {
	if e.grantBox != nil {
		return e.grantBox
	}
	return e.boxPub
}

// isKeyringV2 reports whether b is a keyring entry of version 2 or later
// (else it is a version 1 bare wrapped key).
func isKeyringV2(b []byte) bool { return bytes.HasPrefix(b, []byte(keyringMagic)) }

// body returns the encoding of e up to, not including, its MAC.
func (e *keyringEntry) body() []byte {
	version := byte(keyringVersion)
	switch {
	case len(e.signRenewals) > 0:
		version = keyringSignRenewedVersion
	case e.renewSig != nil || len(e.prev) > 0:
		version = keyringRenewedVersion
	}
	b := append([]byte(keyringMagic), version)
	b = codec.AppendString(b, e.user)
	b = codec.AppendUvarint(b, e.serial)
	b = append(b, byte(e.role))
	b = codec.AppendBool(b, e.revoked)
	b = codec.AppendString(b, e.grantedBy)
	b = codec.AppendVarint(b, e.grantedAt)
	b = codec.AppendUvarint(b, uint64(len(e.collections)))
	for _, c := range e.collections {
		b = codec.AppendString(b, c)
	}
	b = codec.AppendBytes(b, e.boxPub)
	b = codec.AppendBytes(b, e.signPub)
	b = append(b, e.lock)
	if e.lock == lockSecret {
		b = codec.AppendBytes(b, e.salt)
		b = codec.AppendUvarint(b, uint64(e.kdf.Time))
		b = codec.AppendUvarint(b, uint64(e.kdf.MemoryKiB))
		b = codec.AppendUvarint(b, uint64(e.kdf.Threads))
		b = codec.AppendBytes(b, e.boxPriv)
	}
	b = codec.AppendUvarint(b, uint64(len(e.gens)))
	for _, g := range e.gens {
		b = codec.AppendUvarint(b, g.gen)
		b = codec.AppendBytes(b, g.key)
	}
	b = codec.AppendUvarint(b, uint64(len(e.colKeys)))
	for _, c := range e.colKeys {
		b = codec.AppendString(b, c.name)
		b = codec.AppendUvarint(b, c.gen)
		b = codec.AppendBytes(b, c.key)
	}
	b = codec.AppendBytes(b, e.signPriv)
	b = codec.AppendBytes(b, e.grantSig)
	if version >= keyringRenewedVersion {
		b = codec.AppendBytes(b, e.grantBox)
		b = codec.AppendBytes(b, e.renewSig)
		b = codec.AppendUvarint(b, uint64(len(e.prev)))
		for _, p := range e.prev {
			b = codec.AppendBytes(b, p.pub)
			b = codec.AppendBytes(b, p.key)
		}
	}
	if version >= keyringSignRenewedVersion {
		b = codec.AppendBytes(b, e.grantSign)
		b = codec.AppendUvarint(b, uint64(len(e.signRenewals)))
		for _, r := range e.signRenewals {
			b = codec.AppendBytes(b, r.pub)
			b = codec.AppendBytes(b, r.sig)
		}
	}
	return codec.AppendUvarint(b, e.macGen)
}

// encode returns the whole entry, MAC included.
func (e *keyringEntry) encode() []byte { return codec.AppendBytes(e.body(), e.mac) }

// keyringLayoutVersion reads the layout version of an entry (after the magic):
// 2, 3 or 4, anything else fails r.
func keyringLayoutVersion(r *codec.Reader) byte {
	v := r.Byte()
	if r.Err() == nil && (v < keyringVersion || v > keyringSignRenewedVersion) {
		r.Failf("unknown version %d", v)
	}
	return v
}

// decodeKeyring reads a version 2, 3 or 4 entry. It checks the layout only, not the
// MAC (see keyMAC); a bad layout is a *codec.Error (matching ErrCorrupt),
// which callers report as tampering.
func decodeKeyring(b []byte) (*keyringEntry, error) {
	if !isKeyringV2(b) {
		return nil, &codec.Error{Why: "not a keyring entry of version 2"}
	}
	r := codec.NewReader(b[len(keyringMagic):])
	version := keyringLayoutVersion(&r)
	e := &keyringEntry{}
	e.user = r.String(maxKeyringName)
	e.serial = r.Uvarint()
	e.role = Role(r.Byte())
	e.revoked = r.Bool()
	e.grantedBy = r.String(maxKeyringName)
	e.grantedAt = r.Varint()
	n := r.Count(maxKeyringList, 1)
	for range n {
		e.collections = append(e.collections, r.String(maxKeyringName))
	}
	e.boxPub = r.Bytes(crypto.PublicKeySize)
	e.signPub = r.Bytes(crypto.SigningKeySize)
	e.lock = r.Byte()
	switch e.lock {
	case lockSecret:
		e.salt = r.Bytes(crypto.SaltSize)
		tm, mem, th := r.Uvarint(), r.Uvarint(), r.Uvarint()
		if tm > math.MaxUint32 || mem > math.MaxUint32 || th > math.MaxUint8 {
			r.Fail("key derivation cost out of range")
		}
		e.kdf = crypto.KDFParams{Time: uint32(tm), MemoryKiB: uint32(mem), Threads: uint8(th)}
		e.boxPriv = r.Bytes(maxKeyringWrapped)
	case lockNone, lockIdentity:
	default:
		r.Failf("unknown lock %d", e.lock)
	}
	n = r.Count(maxKeyringList, 2)
	for range n {
		e.gens = append(e.gens, wrappedGen{gen: r.Uvarint(), key: r.Bytes(maxKeyringWrapped)})
	}
	n = r.Count(maxKeyringList, 3)
	for range n {
		e.colKeys = append(e.colKeys, wrappedCol{name: r.String(maxKeyringName), gen: r.Uvarint(), key: r.Bytes(maxKeyringWrapped)})
	}
	e.signPriv = r.Bytes(maxKeyringWrapped)
	e.grantSig = r.Bytes(crypto.SignatureSize)
	if version >= keyringRenewedVersion {
		e.grantBox = r.Bytes(crypto.PublicKeySize)
		e.renewSig = r.Bytes(crypto.SignatureSize)
		switch {
		case r.Err() != nil:
		case len(e.grantBox) == 0 && len(e.renewSig) == 0:
			// Not renewed since the last grant (an owner's grant since
			// names the current key), with earlier key pairs kept.
			e.grantBox, e.renewSig = nil, nil
		case len(e.grantBox) != crypto.PublicKeySize || len(e.renewSig) != crypto.SignatureSize:
			r.Fail("renewal of the wrong size")
		}
		n = r.Count(maxKeyringList, 2)
		for range n {
			e.prev = append(e.prev, prevBox{pub: r.Bytes(crypto.PublicKeySize), key: r.Bytes(maxKeyringWrapped)})
		}
		if r.Err() == nil && version == keyringRenewedVersion && e.renewSig == nil && len(e.prev) == 0 {
			r.Fail("version 3 holding nothing of it")
		}
	}
	if version >= keyringSignRenewedVersion {
		e.grantSign = r.Bytes(crypto.SigningKeySize)
		n = r.Count(maxKeyringList, 2)
		for range n {
			e.signRenewals = append(e.signRenewals, signRenewal{pub: r.Bytes(crypto.SigningKeySize), sig: r.Bytes(crypto.SignatureSize)})
		}
		switch {
		case r.Err() != nil:
		case len(e.signRenewals) == 0:
			r.Fail("version 4 holding no renewal of the signing key")
		case len(e.grantSign) != crypto.SigningKeySize:
			r.Fail("grant's signing key of the wrong size")
		}
		for _, sr := range e.signRenewals {
			if r.Err() == nil && (len(sr.pub) != crypto.SigningKeySize || len(sr.sig) != crypto.SignatureSize) {
				r.Fail("renewal of the signing key of the wrong size")
			}
		}
	}
	e.macGen = r.Uvarint()
	e.mac = r.Bytes(64)
	if err := r.End(); err != nil {
		return nil, err
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	return e, nil
}

// check refuses a decoded entry whose fields contradict one another.
func (e *keyringEntry) check() error {
	bad := func(why string) error { return &codec.Error{Why: why} }
	switch {
	case !e.role.Valid():
		return bad("unknown role")
	case e.revoked != (e.lock == lockNone):
		return bad("revoked entries, and only they, hold no lock")
	case e.lock == lockSecret && len(e.salt) != crypto.SaltSize:
		return bad("salt length")
	case e.renewSig != nil && (e.lock == lockIdentity || bytes.Equal(e.grantBox, e.boxPub)):
		return bad("a renewal of a key pair the person does not hold, or to the same key")
	case len(e.prev) > 0 && e.lock == lockIdentity:
		return bad("earlier key pairs of a person who holds their own")
	case len(e.signRenewals) > 0 && (e.lock == lockIdentity || !bytes.Equal(e.signRenewals[len(e.signRenewals)-1].pub, e.signPub)):
		return bad("a renewal of the signing key of a person who holds their own, or not ending at the current key")
	case !slices.IsSorted(e.collections) || len(slices.Compact(slices.Clone(e.collections))) != len(e.collections):
		return bad("collections not sorted and unique")
	case !slices.IsSortedFunc(e.gens, func(a, b wrappedGen) int { return cmpU(a.gen, b.gen) }):
		return bad("generations out of order")
	}
	for _, c := range e.colKeys {
		if _, ok := slices.BinarySearch(e.collections, c.name); !ok {
			return bad("a collection key of a collection the person is not limited to")
		}
	}
	return nil
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keyringSerial returns the serial of a stored keyring entry: 0 for a
// version 1 entry or one that does not decode. Sync copies an entry over
// another when its serial is higher.
func keyringSerial(b []byte) uint64 {
	if !isKeyringV2(b) {
		return 0
	}
	r := codec.NewReader(b[len(keyringMagic):])
	keyringLayoutVersion(&r)
	r.String(maxKeyringName)
	s := r.Uvarint()
	if r.Err() != nil {
		return 0
	}
	return s
}

// keyringNewer reports whether the keyring entry src should replace dst
// on a copy between stores (see copyKeyringWith). Between two entries of one
// person that decode and hold the same grant, a revocation replaces any
// other entry of the grant it revokes and is replaced by none (only by a
// new grant, whose serial is above the revocation's). Else the higher
// serial wins. A serial alone would let a person undo a revocation:
// secret changes made on their own device while an owner revoked them
// raise it past the revocation's. (Two different grants are still told
// apart by serial only: the copy does not check grant signatures, so a
// later grant time cannot be trusted here.)
func keyringNewer(src, dst []byte) bool {
	if isKeyringV2(src) && isKeyringV2(dst) {
		es, serr := decodeKeyring(src)
		ed, derr := decodeKeyring(dst)
		if serr == nil && derr == nil && es.user == ed.user {
			if es.revoked != ed.revoked && sameGrantStatement(es, ed) {
				return es.revoked
			}
		}
	}
	return keyringSerial(src) > keyringSerial(dst)
}

// sameGrantStatement reports whether a and b hold the same grant: what
// the granter signed (grantStatement) and the signature. A revocation
// keeps the grant it revokes.
func sameGrantStatement(a, b *keyringEntry) bool {
	return a.user == b.user && a.role == b.role && a.grantedBy == b.grantedBy && a.grantedAt == b.grantedAt &&
		slices.Equal(a.collections, b.collections) && bytes.Equal(a.grantBoxKey(), b.grantBoxKey()) &&
		bytes.Equal(a.grantSignKey(), b.grantSignKey()) && bytes.Equal(a.grantSig, b.grantSig)
}

// wrapAD is the associated data of one wrap in a person's entry: the
// entry's binding (vault, user, header) and the wrap's purpose.
func wrapAD(vaultName, user string, header []byte, purpose string) []byte {
	return crypto.KeyAD(vaultName, keyringPrefix+user+"\x00"+string(header)+"\x00"+purpose)
}

func genPurpose(gen uint64) string { return "gen/" + strconv.FormatUint(gen, 10) }

// colPurpose is the purpose of the wrap of a collection's key of gen.
func colPurpose(gen uint64, coll string) string {
	return "col/" + strconv.FormatUint(gen, 10) + "/" + coll
}

// keyMAC is the MAC of e's body under the data key dk of e.macGen, bound
// to the vault and header.
func keyMAC(dk *crypto.Key, vaultName string, header []byte, body []byte) []byte {
	mk := dk.Derive("noydb keyring v2")
	defer mk.Wipe()
	return mk.MAC([]byte(vaultName), header, body)
}

// grantStatement is what the granter signs: who was given which role, by
// whom, when, with which public keys, in which vault. The public keys are
// the grant's (grantBoxKey, grantSignKey): a renewal since changes boxPub
// and signPub, not what the granter signed.
func grantStatement(vaultName string, header []byte, e *keyringEntry) []byte {
	b := codec.AppendString(nil, "noydb grant v1")
	b = codec.AppendString(b, vaultName)
	b = codec.AppendBytes(b, header)
	b = codec.AppendString(b, e.user)
	b = append(b, byte(e.role))
	b = codec.AppendString(b, e.grantedBy)
	b = codec.AppendVarint(b, e.grantedAt)
	b = codec.AppendUvarint(b, uint64(len(e.collections)))
	for _, c := range e.collections {
		b = codec.AppendString(b, c)
	}
	b = codec.AppendBytes(b, e.grantBoxKey())
	return codec.AppendBytes(b, e.grantSignKey())
}

// seal sets e's MAC with dk (generation e.macGen).
func (e *keyringEntry) seal(dk *crypto.Key, vaultName string, header []byte) {
	e.mac = keyMAC(dk, vaultName, header, e.body())
}

// verify checks e's MAC with dk and that e names user.
func (e *keyringEntry) verify(dk *crypto.Key, vaultName, user string, header []byte) error {
	if e.user != user {
		return fmt.Errorf("keyring entry of %q holds user %q: %w", user, e.user, ErrTampered)
	}
	if !crypto.EqualMAC(e.mac, keyMAC(dk, vaultName, header, e.body())) {
		return fmt.Errorf("keyring entry of %q: %w", user, ErrTampered)
	}
	if !e.signChainHolds(vaultName, header) {
		return fmt.Errorf("keyring entry of %q: renewal of the signing key not signed by the key it replaces: %w", user, ErrTampered)
	}
	if e.renewSig != nil && !crypto.VerifySignature(e.signPub, renewalStatement(vaultName, header, e), e.renewSig) {
		return fmt.Errorf("keyring entry of %q: renewal of the box key not signed by the person: %w", user, ErrTampered)
	}
	return nil
}

// entrySpec describes the entry of a person that build makes: a fresh box
// key pair (unless pub is given: a person holding their own identity), a
// fresh signing key, the data key dk as generation 1, granted by grantedBy
// (signing with granterSeed, or with the new signing key when the person
// grants themselves, as a vault's creator does). For a secret lock, kek is
// the key derived from the secret with salt and kdf.
type entrySpec struct {
	vault, user, grantedBy string
	header                 []byte
	role                   Role
	collections            []string
	at                     time.Time
	serial                 uint64
	// Exactly one of: a secret's key (with salt, kdf), or a public key.
	kek  *crypto.Key
	salt []byte
	kdf  crypto.KDFParams
	pub  []byte
	// The keys: dk is generation 1; later holds the later generations
	// (rotations) the person gets too, unless they are limited to some
	// collections: they get generation 1 only, and their collections'
	// keys of later generations are added by wrapNew.
	dk          *crypto.Key
	later       map[uint64]*crypto.Key
	granterSeed *crypto.Key // nil: the person signs their own grant
}

// wrapNew adds to e the key of a new generation gen, wrapped for the
// person: the data key k itself, or, for a person limited to some
// collections, the key of each of their collections derived from k. The
// caller seals e afterwards.
func (e *keyringEntry) wrapNew(vaultName string, header []byte, gen uint64, k *crypto.Key) error {
	ad := func(p string) []byte { return wrapAD(vaultName, e.user, header, p) }
	if len(e.collections) == 0 {
		w, err := crypto.WrapKeyTo(e.boxPub, k, ad(genPurpose(gen)))
		if err != nil {
			return err
		}
		e.gens = append(slices.Clone(e.gens), wrappedGen{gen: gen, key: w})
		return nil
	}
	cols := slices.Clone(e.colKeys)
	for _, c := range e.collections {
		ck := crypto.CollectionKey(k, c)
		w, err := crypto.WrapKeyTo(e.boxPub, ck, ad(colPurpose(gen, c)))
		ck.Wipe()
		if err != nil {
			return err
		}
		cols = append(cols, wrappedCol{name: c, gen: gen, key: w})
	}
	e.colKeys = cols
	return nil
}

// build returns the sealed entry of spec and the person's signing seed
// (which the caller wipes).
func (s entrySpec) build() (*keyringEntry, *crypto.Key, error) {
	e := &keyringEntry{
		user: s.user, serial: s.serial, role: s.role, grantedBy: s.grantedBy,
		grantedAt: s.at.UnixNano(), collections: slices.Clone(s.collections), macGen: 1,
	}
	ad := func(p string) []byte { return wrapAD(s.vault, s.user, s.header, p) }
	if s.pub != nil {
		e.lock, e.boxPub = lockIdentity, slices.Clone(s.pub)
	} else {
		id, err := crypto.GenerateIdentity()
		if err != nil {
			return nil, nil, err
		}
		defer id.Wipe()
		if e.boxPub, err = id.PublicKey(); err != nil {
			return nil, nil, err
		}
		e.lock, e.salt, e.kdf = lockSecret, slices.Clone(s.salt), s.kdf
		if e.boxPriv, err = crypto.WrapKey(s.kek, id.Key(), ad("box")); err != nil {
			return nil, nil, err
		}
	}
	seed, err := crypto.GenerateKey()
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*keyringEntry, *crypto.Key, error) { seed.Wipe(); return nil, nil, err }
	if e.signPub, err = crypto.SigningPublicKey(seed); err != nil {
		return fail(err)
	}
	if e.signPriv, err = crypto.WrapKeyTo(e.boxPub, seed, ad("sign")); err != nil {
		return fail(err)
	}
	w, err := crypto.WrapKeyTo(e.boxPub, s.dk, ad(genPurpose(1)))
	if err != nil {
		return fail(err)
	}
	e.gens = []wrappedGen{{gen: 1, key: w}}
	for _, n := range slices.Sorted(maps.Keys(s.later)) {
		if n <= 1 || len(s.collections) > 0 {
			continue
		}
		w, err := crypto.WrapKeyTo(e.boxPub, s.later[n], ad(genPurpose(n)))
		if err != nil {
			return fail(err)
		}
		e.gens = append(e.gens, wrappedGen{gen: n, key: w})
	}
	signer := s.granterSeed
	if signer == nil {
		signer = seed
	}
	if e.grantSig, err = crypto.Sign(signer, grantStatement(s.vault, s.header, e)); err != nil {
		return fail(err)
	}
	e.seal(s.dk, s.vault, s.header)
	return e, seed, nil
}
