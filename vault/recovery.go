package vault

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// Errors of recovery codes; test them with errors.Is.
var (
	// ErrBadRecoveryCode: the text is not a recovery code (wrong length, a
	// character outside the alphabet, or a typo caught by its checksum).
	// It is found before the store is read or any key derived.
	ErrBadRecoveryCode = crypto.ErrBadRecoveryCode
	// ErrRecoveryCodeRefused: a well-formed code that does not open this
	// person's keyring: never issued to them, revoked, or replaced by a
	// later set. Nothing was written.
	ErrRecoveryCodeRefused = errors.New("recovery code refused (revoked, replaced or not issued to this person)")
	// ErrRecoveryCodeUsed: the code was used already; each opens once.
	// Nothing was written.
	ErrRecoveryCodeUsed = errors.New("recovery code already used")
)

// MaxRecoveryCodes is the most codes one RecoveryCodes call issues.
const MaxRecoveryCodes = 16

const (
	recoveryPrefix  = "_recovery/"
	recoveryMagic   = "NOYR"
	recoveryVersion = 2
	recoveryIDSize  = 16
)

// How an unused code holds the person's private key.
const (
	// slotDirect: the code's key wraps the person's X25519 private key
	// itself (every code of layout version 1). A renewal of the key pair
	// cannot re-wrap it without the code, so it drops such a code.
	slotDirect byte = 1
	// slotKeyPair: the code's key wraps an X25519 key pair of the code's
	// own, for whose public key the person's private key is wrapped; a
	// renewal re-wraps the new private key for it (renew.go).
	slotKeyPair byte = 2
)

// recoverySlot is one issued code: its id (a hash of the code), whether it
// was used, and, while unused, the key derived from the code (salt and
// cost of its own) and what it opens: the person's X25519 private key
// (box), wrapped directly by the code's key (slotDirect) or for the
// code's own public key pub, whose private key the code's key wraps (key).
type recoverySlot struct {
	id   []byte
	used bool
	salt []byte
	kdf  crypto.KDFParams
	form byte
	key  []byte
	pub  []byte
	box  []byte
}

// recoveryEntry is a person's set of recovery codes, stored at
// prefix + "_recovery/" + user (layout version 2):
//
//	"NOYR" [1] version (2)
//	string user
//	uvarint serial      (raised by every change; sync keeps the highest)
//	bytes box public key (the keyring entry's the codes unlock)
//	uvarint count, per code: bytes id, bool used,
//	    unused only: bytes salt, uvarint time, memory KiB, threads, [1] form,
//	        form 1 (slotDirect): bytes box private key wrapped by the code's key
//	        form 2 (slotKeyPair): bytes the code's private key wrapped by the
//	            code's key, bytes its public key, bytes the box private key
//	            wrapped for it
//	bytes MAC (of all that precedes, by a key derived from the data key,
//	    bound to the vault and header)
//
// Layout version 1 had no form byte: each unused code was of form 1. It
// is read still, and an entry read in it is written back in it (version
// 1); every change writes version 2.
type recoveryEntry struct {
	version byte // 0: the current layout; 1: layout version 1, as read
	user    string
	serial  uint64
	boxPub  []byte
	slots   []recoverySlot
	mac     []byte
}

func (r *recoveryEntry) body() []byte {
	version := byte(recoveryVersion)
	if r.version == 1 {
		version = 1
	}
	b := append([]byte(recoveryMagic), version)
	b = codec.AppendString(b, r.user)
	b = codec.AppendUvarint(b, r.serial)
	b = codec.AppendBytes(b, r.boxPub)
	b = codec.AppendUvarint(b, uint64(len(r.slots)))
	for _, s := range r.slots {
		b = codec.AppendBytes(b, s.id)
		b = codec.AppendBool(b, s.used)
		if !s.used {
			b = codec.AppendBytes(b, s.salt)
			b = codec.AppendUvarint(b, uint64(s.kdf.Time))
			b = codec.AppendUvarint(b, uint64(s.kdf.MemoryKiB))
			b = codec.AppendUvarint(b, uint64(s.kdf.Threads))
			if version > 1 {
				b = append(b, s.form)
			}
			if version > 1 && s.form == slotKeyPair {
				b = codec.AppendBytes(b, s.key)
				b = codec.AppendBytes(b, s.pub)
			}
			b = codec.AppendBytes(b, s.box)
		}
	}
	return b
}

func (r *recoveryEntry) encode() []byte { return codec.AppendBytes(r.body(), r.mac) }

func decodeRecovery(b []byte) (*recoveryEntry, error) {
	if !bytes.HasPrefix(b, []byte(recoveryMagic)) {
		return nil, &codec.Error{Why: "not a recovery entry"}
	}
	rd := codec.NewReader(b[len(recoveryMagic):])
	version := rd.Byte()
	if rd.Err() == nil && version != 1 && version != recoveryVersion {
		rd.Failf("unknown version %d", version)
	}
	r := &recoveryEntry{user: rd.String(maxKeyringName), serial: rd.Uvarint(), boxPub: rd.Bytes(crypto.PublicKeySize)}
	if version == 1 {
		r.version = 1
	}
	n := rd.Count(MaxRecoveryCodes*maxKeyringList, 2)
	for range n {
		s := recoverySlot{id: rd.Bytes(recoveryIDSize), used: rd.Bool()}
		if !s.used {
			s.salt = rd.Bytes(crypto.SaltSize)
			tm, mem, th := rd.Uvarint(), rd.Uvarint(), rd.Uvarint()
			if tm > math.MaxUint32 || mem > math.MaxUint32 || th > math.MaxUint8 {
				rd.Fail("key derivation cost out of range")
			}
			s.kdf = crypto.KDFParams{Time: uint32(tm), MemoryKiB: uint32(mem), Threads: uint8(th)}
			s.form = slotDirect
			if version > 1 {
				s.form = rd.Byte()
			}
			switch s.form {
			case slotDirect:
			case slotKeyPair:
				s.key = rd.Bytes(maxKeyringWrapped)
				s.pub = rd.Bytes(crypto.PublicKeySize)
			default:
				rd.Failf("unknown form %d", s.form)
			}
			s.box = rd.Bytes(maxKeyringWrapped)
		}
		r.slots = append(r.slots, s)
	}
	r.mac = rd.Bytes(64)
	if err := rd.End(); err != nil {
		return nil, err
	}
	return r, nil
}

// recoveryMAC is the MAC of r's body by a key derived from dk.
func recoveryMAC(dk *crypto.Key, vaultName string, header, body []byte) []byte {
	mk := dk.Derive("noydb recovery v1")
	defer mk.Wipe()
	return mk.MAC([]byte(vaultName), header, body)
}

func (r *recoveryEntry) seal(dk *crypto.Key, vaultName string, header []byte) {
	r.mac = recoveryMAC(dk, vaultName, header, r.body())
}

func (r *recoveryEntry) verify(dk *crypto.Key, vaultName, user string, header []byte) error {
	if r.user != user || !crypto.EqualMAC(r.mac, recoveryMAC(dk, vaultName, header, r.body())) {
		return fmt.Errorf("recovery entry of %q: %w", user, ErrTampered)
	}
	return nil
}

// recoverySerial is the serial of a stored recovery entry (0 if it does
// not decode); sync keeps the entry with the higher one.
func recoverySerial(b []byte) uint64 {
	r, err := decodeRecovery(b)
	if err != nil {
		return 0
	}
	return r.serial
}

// recoveryID names a code in its entry without revealing it: a hash of
// its canonical form (the code holds 130 random bits, so the hash cannot
// be searched).
func recoveryID(code []byte) []byte {
	h := sha256.Sum256(append([]byte("noydb recovery id v1\x00"), code...))
	return h[:recoveryIDSize]
}

func recoveryPurpose(id []byte) string { return "recovery/" + hex.EncodeToString(id) }

// recoveryBoxPurpose is the purpose of the wrap of the person's private
// key for the public key of the code of id (slotKeyPair).
func recoveryBoxPurpose(id []byte) string { return "recovery-box/" + hex.EncodeToString(id) }

// newSlot returns the slot of a code whose key is kek: a key pair of the
// code's own, its private key wrapped by kek, and the person's private
// key box wrapped for its public key.
func newSlot(vaultName, user string, header, id, salt []byte, kdf crypto.KDFParams, kek, box *crypto.Key) (recoverySlot, error) {
	sid, err := crypto.GenerateIdentity()
	if err != nil {
		return recoverySlot{}, err
	}
	defer sid.Wipe()
	s := recoverySlot{id: id, salt: salt, kdf: kdf, form: slotKeyPair}
	if s.pub, err = sid.PublicKey(); err != nil {
		return recoverySlot{}, err
	}
	if s.key, err = crypto.WrapKey(kek, sid.Key(), wrapAD(vaultName, user, header, recoveryPurpose(id))); err != nil {
		return recoverySlot{}, err
	}
	if s.box, err = crypto.WrapKeyTo(s.pub, box, wrapAD(vaultName, user, header, recoveryBoxPurpose(id))); err != nil {
		return recoverySlot{}, err
	}
	return s, nil
}

// open returns the person's private key the slot holds, with kek, the
// key derived from its code; an error when it does not open.
func (s recoverySlot) open(vaultName, user string, header []byte, kek *crypto.Key) (*crypto.Key, error) {
	ad := func(p string) []byte { return wrapAD(vaultName, user, header, p) }
	if s.form == slotDirect {
		return crypto.UnwrapKey(kek, s.box, ad(recoveryPurpose(s.id)))
	}
	sk, err := crypto.UnwrapKey(kek, s.key, ad(recoveryPurpose(s.id)))
	if err != nil {
		return nil, err
	}
	sid := crypto.IdentityFromKey(sk)
	defer sid.Wipe()
	return crypto.UnwrapKeyWith(sid, s.box, ad(recoveryBoxPurpose(s.id)))
}

// renewed returns r for the person's renewed key pair (renew.go): the
// private key box (public key pub) wrapped for each unused code's own
// public key. An unused code of form slotDirect, which only its code
// could re-wrap, is dropped: it stops working (its holder gets
// ErrRecoveryCodeRefused). The caller seals the result.
func (r *recoveryEntry) renewed(vaultName string, header, pub []byte, box *crypto.Key) (*recoveryEntry, error) {
	nr := &recoveryEntry{user: r.user, serial: r.serial + 1, boxPub: pub}
	for _, s := range r.slots {
		switch {
		case s.used:
			nr.slots = append(nr.slots, recoverySlot{id: s.id, used: true})
		case s.form == slotKeyPair:
			w, err := crypto.WrapKeyTo(s.pub, box, wrapAD(vaultName, r.user, header, recoveryBoxPurpose(s.id)))
			if err != nil {
				return nil, err
			}
			s.box = w
			nr.slots = append(nr.slots, s)
		}
	}
	return nr, nil
}

// deriveRecoveryKey derives the key of a code. It is a variable so that
// a test can count derivations (a typo must run none).
var deriveRecoveryKey = crypto.DeriveUserKey

// RecoveryCodes issues n one-time recovery codes (1 to MaxRecoveryCodes)
// for the vault's person and returns them, in the written form a person
// types (seven groups of four characters; 130 random bits and a checksum
// each). The SDK keeps no copy and never prints them: show them once and
// tell the person to store them safely. A new set replaces the person's
// earlier one: its unused codes stop working.
//
// Each code opens the vault once, as this person, together with a new
// secret that replaces the current one (Config.RecoveryCode and
// Config.NewSecret). The codes keep working across the person's secret
// changes and recoveries, each of which makes them a new key pair (each
// code holds a key pair of its own, for which the person's current
// private key is wrapped: renew.go); a code issued by a version that
// wrapped the private key with the code itself is dropped by the first
// of them. Codes are the person's own: only a person who opens
// with a secret issues them, for themselves (an owner cannot issue codes
// for another person, since that would need the person's private key; an
// owner helps a person who lost everything by revoking and granting them
// again). A person who opens with an identity, or whose keyring entry is
// of layout version 1 (UpgradeKeyring first), gets ErrInvalidArgument.
//
// Each code costs one key derivation at the vault's cost. The set is
// written with a ledger.RecoveryCodesIssued entry; it travels to the
// other devices of a hub with Sync. Bad input (n out of range, a cancelled
// ctx) writes nothing.
func (v *Vault) RecoveryCodes(ctx context.Context, n int) ([]string, error) {
	codes, err := v.recoveryCodes(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("recovery codes of %q: %w", v.user, err)
	}
	return codes, nil
}

func (v *Vault) recoveryCodes(ctx context.Context, n int) ([]string, error) {
	if n < 1 || n > MaxRecoveryCodes {
		return nil, fmt.Errorf("%w: %d codes (1 to %d)", ErrInvalidArgument, n, MaxRecoveryCodes)
	}
	if err := v.enter(ctx); err != nil {
		return nil, err
	}
	defer v.exit()
	if err := v.checkStillHeld(ctx, false); err != nil {
		return nil, err
	}
	e, box, err := v.ownSecretEntry()
	if err != nil {
		return nil, err
	}
	// The codes open the key pair this handle holds: one renewed since
	// by another handle (a secret change, a recovery) is not the entry's.
	it, err := v.me.store.Get(ctx, v.prefix+keyringPrefix+v.user)
	if err != nil {
		return nil, err
	}
	if cur, err := v.readEntry(v.user, it.Value); err != nil {
		return nil, err
	} else if !bytes.Equal(cur.boxPub, e.boxPub) {
		return nil, fmt.Errorf("the key pair was renewed (a secret change or a recovery) since this handle opened: open the vault again: %w", errRevokedSince)
	}
	old, prev, err := v.readRecovery(ctx)
	if err != nil {
		return nil, err
	}
	h, err := crypto.ParseHeader(v.me.header)
	if err != nil {
		return nil, fmt.Errorf("vault header: %w", err)
	}
	r := &recoveryEntry{user: v.user, serial: 1, boxPub: e.boxPub}
	if prev != nil {
		r.serial = prev.serial + 1
		for _, s := range prev.slots {
			if s.used { // keep used ids: a used code says so
				r.slots = append(r.slots, recoverySlot{id: s.id, used: true})
			}
		}
	}
	codes := make([]string, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		text, err := crypto.NewRecoveryCode()
		if err != nil {
			return nil, err
		}
		code, err := crypto.ParseRecoveryCode(text)
		if err != nil {
			return nil, err
		}
		id, salt := recoveryID(code), make([]byte, crypto.SaltSize)
		if _, err := rand.Read(salt); err != nil {
			return nil, err
		}
		kek, err := deriveRecoveryKey(code, salt, h.KDF)
		clear(code)
		if err != nil {
			return nil, err
		}
		s, err := newSlot(v.name, v.user, v.me.header, id, salt, h.KDF, kek, box)
		kek.Wipe()
		if err != nil {
			return nil, closedIfWiped(err)
		}
		r.slots = append(r.slots, s)
		codes = append(codes, text)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.seal(v.dk, v.name, v.me.header)
	val := r.encode()
	err = v.writeEntries(ctx, []entryWrite{{key: v.recoveryKey(), old: old, val: val}},
		ledger.Entry{Kind: ledger.RecoveryCodesIssued, ID: v.user, Number: uint64(n), CipherHash: hashOf(val)}, errPeopleChanged)
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// RevokeRecoveryCodes revokes every unused recovery code of the vault's
// person (ErrNotFound when they hold none). It is written with a
// ledger.RecoveryCodesRevoked entry and reaches the other devices of a
// hub with Sync; a code used on a device that has not synced yet still
// opens there (sync first).
func (v *Vault) RevokeRecoveryCodes(ctx context.Context) error {
	if err := v.revokeRecoveryCodes(ctx); err != nil {
		return fmt.Errorf("revoke recovery codes of %q: %w", v.user, err)
	}
	return nil
}

func (v *Vault) revokeRecoveryCodes(ctx context.Context) error {
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	if err := v.checkStillHeld(ctx, false); err != nil {
		return err
	}
	old, prev, err := v.readRecovery(ctx)
	if err != nil {
		return err
	}
	unused := 0
	if prev != nil {
		for _, s := range prev.slots {
			if !s.used {
				unused++
			}
		}
	}
	if unused == 0 {
		return fmt.Errorf("no unused recovery codes: %w", ErrNotFound)
	}
	r := &recoveryEntry{user: v.user, serial: prev.serial + 1, boxPub: prev.boxPub}
	for _, s := range prev.slots {
		if s.used {
			r.slots = append(r.slots, recoverySlot{id: s.id, used: true})
		}
	}
	r.seal(v.dk, v.name, v.me.header)
	val := r.encode()
	return v.writeEntries(ctx, []entryWrite{{key: v.recoveryKey(), old: old, val: val}},
		ledger.Entry{Kind: ledger.RecoveryCodesRevoked, ID: v.user, Number: uint64(unused), CipherHash: hashOf(val)}, errPeopleChanged)
}

func (v *Vault) recoveryKey() string { return v.prefix + recoveryPrefix + v.user }

// ownSecretEntry returns the person's keyring entry and private key when
// they open with a secret.
func (v *Vault) ownSecretEntry() (*keyringEntry, *crypto.Key, error) {
	v.me.mu.Lock()
	defer v.me.mu.Unlock()
	switch {
	case v.me.entry == nil:
		return nil, nil, fmt.Errorf("%w: %q has a keyring entry of layout version 1 (call UpgradeKeyring)", ErrInvalidArgument, v.user)
	case v.me.entry.revoked:
		return nil, nil, fmt.Errorf("user %q was revoked: %w", v.user, ErrNoAccess)
	case v.me.entry.lock != lockSecret:
		return nil, nil, fmt.Errorf("%w: %q opens with an identity, not a secret", ErrInvalidArgument, v.user)
	case v.me.box == nil:
		return nil, nil, fmt.Errorf("%w: %q upgraded the keyring entry in this handle: open the vault again first", ErrInvalidArgument, v.user)
	}
	return v.me.entry, v.me.box.Key(), nil
}

// readRecovery reads and checks the person's recovery entry (nil, and a
// zero Item, when there is none).
func (v *Vault) readRecovery(ctx context.Context) (stores.Item, *recoveryEntry, error) {
	it, err := v.me.store.Get(ctx, v.recoveryKey())
	if errors.Is(err, stores.ErrNotFound) {
		return stores.Item{}, nil, nil
	}
	if err != nil {
		return stores.Item{}, nil, err
	}
	r, err := decodeRecovery(it.Value)
	if err != nil {
		return stores.Item{}, nil, fmt.Errorf("recovery entry of %q: %w: %w", v.user, ErrTampered, err)
	}
	if err := r.verify(v.dk, v.name, v.user, v.me.header); err != nil {
		return stores.Item{}, nil, closedIfWiped(err)
	}
	return it, r, nil
}

// recoveryOpen is what Open does with Config.RecoveryCode: the code's
// canonical form and the new secret.
type recoveryOpen struct {
	code      []byte
	newSecret []byte
}

// checkRecoveryConfig checks the recovery fields of cfg before anything is
// read: a code with a secret or an identity, or without a new secret, is
// ErrInvalidArgument; a mistyped code ErrBadRecoveryCode.
func checkRecoveryConfig(cfg Config) (*recoveryOpen, error) {
	if cfg.RecoveryCode == "" {
		if cfg.NewSecret != nil {
			return nil, fmt.Errorf("%w: NewSecret without RecoveryCode (use ChangeSecret)", ErrInvalidArgument)
		}
		return nil, nil
	}
	switch {
	case len(cfg.Secret) > 0 || cfg.Identity != nil:
		return nil, fmt.Errorf("%w: a recovery code opens without a secret or identity", ErrInvalidArgument)
	case len(cfg.NewSecret) == 0:
		return nil, fmt.Errorf("%w: a recovery code opens only with the new secret that replaces the lost one (NewSecret)", ErrInvalidArgument)
	}
	code, err := crypto.ParseRecoveryCode(cfg.RecoveryCode)
	if err != nil {
		return nil, err
	}
	return &recoveryOpen{code: code, newSecret: cfg.NewSecret}, nil
}

// recoverEntry unlocks the person's keyring entry raw with a recovery
// code: it finds the code's slot (by id, before any derivation), checks
// the costs against the opener's ceiling, derives the code's key, unwraps
// the person's private key and then everything unlockEntry checks. The
// member it returns carries the entry changes that Open writes (see
// finishRecovery).
func (o opener) recoverEntry(ctx context.Context, header, raw []byte) (*member, error) {
	ro := o.recovery
	e, err := decodeKeyring(raw)
	if err != nil {
		return nil, fmt.Errorf("keyring entry of %q: %w: %w", o.cfg.User, ErrTampered, err)
	}
	switch {
	case e.user != o.cfg.User:
		return nil, fmt.Errorf("keyring entry of %q holds user %q: %w", o.cfg.User, e.user, ErrTampered)
	case e.revoked:
		return nil, fmt.Errorf("user %q was revoked: %w", o.cfg.User, ErrNoAccess)
	case e.lock != lockSecret:
		return nil, fmt.Errorf("user %q opens with an identity: %w", o.cfg.User, ErrRecoveryCodeRefused)
	}
	rk := o.prefix + recoveryPrefix + o.cfg.User
	it, err := o.cfg.Store.Get(ctx, rk)
	if errors.Is(err, stores.ErrNotFound) {
		return nil, fmt.Errorf("user %q holds no recovery codes: %w", o.cfg.User, ErrRecoveryCodeRefused)
	}
	if err != nil {
		return nil, err
	}
	r, err := decodeRecovery(it.Value)
	if err != nil {
		return nil, fmt.Errorf("recovery entry of %q: %w: %w", o.cfg.User, ErrTampered, err)
	}
	id := recoveryID(ro.code)
	slot := -1
	for i, s := range r.slots {
		if bytes.Equal(s.id, id) {
			slot = i
		}
	}
	switch {
	case slot < 0:
		return nil, ErrRecoveryCodeRefused
	case r.slots[slot].used:
		return nil, ErrRecoveryCodeUsed
	case !bytes.Equal(r.boxPub, e.boxPub):
		// A set issued before the person was revoked and granted again.
		return nil, ErrRecoveryCodeRefused
	}
	s := r.slots[slot]
	// Before any derivation: the store chose these costs. The new secret
	// is derived at the entry's cost.
	for _, p := range []crypto.KDFParams{s.kdf, e.kdf} {
		if err := p.Check(o.cfg.InsecureAllowWeakKDF); err != nil {
			return nil, fmt.Errorf("recovery entry of %q: %w: %w", o.cfg.User, ErrWeakKDF, err)
		}
		if err := p.CheckCeiling(o.cfg.MaxKDF); err != nil {
			return nil, fmt.Errorf("recovery entry of %q: %w: %w", o.cfg.User, ErrWeakKDF, err)
		}
	}
	kek, err := deriveRecoveryKey(ro.code, s.salt, s.kdf)
	if err != nil {
		return nil, err
	}
	k, err := s.open(o.cfg.Name, o.cfg.User, header, kek)
	kek.Wipe()
	if err != nil {
		return nil, fmt.Errorf("recovery entry of %q: %w", o.cfg.User, ErrTampered)
	}
	m, err := unlockWithBox(ctx, o.cfg, o.prefix, header, e, crypto.IdentityFromKey(k), true)
	if err != nil {
		return nil, err
	}
	if err := r.verify(m.dk, o.cfg.Name, o.cfg.User, header); err != nil {
		m.wipe()
		return nil, err
	}
	// The new keyring entry (new secret) and recovery entry (code used).
	salt := make([]byte, crypto.SaltSize)
	if _, err := rand.Read(salt); err != nil {
		m.wipe()
		return nil, err
	}
	nkek, err := crypto.DeriveUserKey(ro.newSecret, salt, e.kdf)
	if err != nil {
		m.wipe()
		return nil, err
	}
	// A new key pair, everything re-wrapped for it (renew.go): the code
	// used, and any code or secret not live any more, opens nothing
	// wrapped for the person from now on.
	m.mu.Lock()
	seed := m.seed
	m.mu.Unlock()
	ren, err := e.renew(o.cfg.Name, header, m.box, seed, nkek, salt)
	nkek.Wipe()
	if err != nil {
		m.wipe()
		return nil, err
	}
	// The member keeps the keys of the entry it opened until the renewal
	// is written (finishRecovery): the vault's first commits (a hub's
	// join) are signed by the key the ledgers still give the person, and
	// the renewal's own by the key it replaces.
	ne := ren.entry
	ne.seal(m.dk, o.cfg.Name, header)
	used := *r
	used.slots = slices.Clone(r.slots)
	used.slots[slot] = recoverySlot{id: s.id, used: true}
	nr, err := used.renewed(o.cfg.Name, header, ne.boxPub, ren.box.Key())
	if err != nil {
		ren.wipe()
		m.wipe()
		return nil, err
	}
	nr.seal(m.dk, o.cfg.Name, header)
	m.recovery = &pendingRecovery{
		id: s.id, renewal: ren, oldSeed: seed,
		writes: []entryWrite{
			{key: rk, old: it, val: nr.encode(), hub: hubSerial},
			{key: o.prefix + keyringPrefix + o.cfg.User, old: stores.Item{Key: o.prefix + keyringPrefix + o.cfg.User, Value: raw}, val: ne.encode(), hub: hubSame},
		},
	}
	return m, nil
}

// pendingRecovery is what an open with a recovery code still has to
// write once the vault is built: the code marked used and the keyring
// entry locked by the new secret.
type pendingRecovery struct {
	id     []byte
	writes []entryWrite
	// renewal is the renewal of the person's keys the open made (the
	// member takes its keys once it is written; wiped with the member
	// if it never is), oldSeed the signing key it replaces, the
	// member's, which signs its ledger entries.
	renewal renewal
	oldSeed *crypto.Key
}

// finishRecovery writes the pending recovery of an open: both entries and
// a ledger.RecoveryCodeUsed entry (after reading the ledger for an earlier
// use of the code, which a replayed recovery entry would hide), in one commit on stores with
// transactions (on others: the code is marked used first, then the
// keyring entry, then the ledger entry; a crash between may burn the code
// without changing the secret). Racing another use of the same code, one
// of the two wins and the other gets ErrRecoveryCodeUsed. On a device of a
// hub it is written on the hub first, as a secret change is
// (writeRenewal): out of the hub's reach nothing is written, and the open
// fails (an open without Config.Hub recovers on the device alone). Once
// written, the handle holds the renewed keys.
func (v *Vault) finishRecovery(ctx context.Context) error {
	p := v.me.takeRecovery()
	if p == nil {
		return nil
	}
	written := false
	defer func() {
		if !written {
			p.renewal.wipe()
		}
	}()
	// A store replaying the recovery entry as it was before this code was
	// used: the ledger this device holds records the use.
	hexID := hex.EncodeToString(p.id)
	for e, err := range v.ledger.Read(ctx, 1) {
		if err != nil {
			return err
		}
		if e.Kind == ledger.RecoveryCodeUsed && e.ID == v.user && e.RequestID == hexID {
			return fmt.Errorf("%w: the ledger records its use at position %d, so the store served an older recovery entry: %w",
				ErrRecoveryCodeUsed, e.Seq, ErrTampered)
		}
	}
	keyring := p.writes[1]
	// The keyring entry as the store holds it now (its version).
	it, err := v.me.store.Get(ctx, keyring.key)
	if err != nil {
		return err
	}
	if !bytes.Equal(it.Value, keyring.old.Value) {
		return errPeopleChanged
	}
	p.writes[1].old = it
	val := p.writes[1].val
	err = v.writeRenewal(ctx, p.writes, []ledger.Entry{
		{Kind: ledger.RecoveryCodeUsed, ID: v.user, RequestID: hexID, CipherHash: hashOf(val)},
		{Kind: ledger.KeysRenewed, ID: v.user, CipherHash: hashOf(val), SigningKey: p.renewal.entry.signPub},
	}, errPeopleChanged, p.renewal, p.oldSeed, func() { written = true; v.me.renewed(p.renewal) })
	if errors.Is(err, errPeopleChanged) {
		// Another use of this person's codes won: was it this code?
		if it, gerr := v.me.store.Get(ctx, p.writes[0].key); gerr == nil {
			if r, derr := decodeRecovery(it.Value); derr == nil {
				for _, s := range r.slots {
					if s.used && bytes.Equal(s.id, p.id) {
						return ErrRecoveryCodeUsed
					}
				}
			}
		}
	}
	return err
}

// copyRecovery copies, from src to dst, the recovery entries dst lacks or
// holds older (a lower serial) than src: codes issued, used or revoked on
// one device reach the others with Sync. Like copyKeyringWith, it writes by
// compare-and-swap, so racing copiers agree.
func copyRecovery(ctx context.Context, src, dst stores.Store, prefix string) error {
	rp := prefix + recoveryPrefix
	for it, err := range src.List(ctx, rp) {
		if err != nil {
			return err
		}
		cur, err := dst.Get(ctx, it.Key)
		var ver uint64
		switch {
		case errors.Is(err, stores.ErrNotFound):
		case err != nil:
			return err
		case recoverySerial(it.Value) <= recoverySerial(cur.Value):
			continue
		default:
			ver = cur.Version
		}
		if _, err := dst.CompareAndSwap(ctx, it.Key, ver, it.Value); err != nil && !errors.Is(err, stores.ErrConflict) {
			return err
		}
	}
	return nil
}

// entryWrite replaces the value at key, which must still be old (a zero
// Item: absent), with val. In a renewal (writeRenewal), hub says whether
// and how it is written on the hub first (see hubWrites).
type entryWrite struct {
	key string
	old stores.Item
	val []byte
	hub hubRule
}

// hubRule says what a renewal's write on the hub replaces.
type hubRule uint8

const (
	notOnHub  hubRule = iota // the write reaches the hub with a Sync
	hubSame                  // the hub must hold what the device held
	hubSerial                // the hub may hold a recovery entry of no higher serial, or none
)

// writeEntries is writePeople for several entries: all of ws and the
// ledger entry e in one transaction on a store with transactions; else
// by compare-and-swap of each entry in order, then the ledger entry. An
// entry changed meanwhile gives changed, writing nothing (on a store with
// transactions; else nothing after it).
func (v *Vault) writeEntries(ctx context.Context, ws []entryWrite, e ledger.Entry, changed error) error {
	if len(ws) == 1 {
		w := ws[0]
		err := v.writePeople(ctx, w.key, w.old, w.val, e)
		if errors.Is(err, errPeopleChanged) || errors.Is(err, ErrPersonExists) {
			return changed
		}
		return err
	}
	l := v.ledger
	if v.me.store != v.store {
		l = newLedger()(v.me.store, v.seal, v.macer, v.prefix, v.ledgerOptions())
		defer func() { _ = l.Close() }()
	}
	if !transactional(v.me.store) {
		if err := v.mayChangePeople(ctx); err != nil { // see writePeople
			return err
		}
	}
	return commitEntries(ctx, v.me.store, l, ws, []ledger.Entry{e}, changed)
}

// commitEntries writes ws in st and appends es to l, st's ledger: in one
// transaction on a store with transactions; else by compare-and-swap of
// each entry in order, then the ledger entries (see writeEntries).
func commitEntries(ctx context.Context, st stores.Store, l writableLedger, ws []entryWrite, es []ledger.Entry, changed error) error {
	if transactional(st) {
		keys := make([]string, len(ws))
		for i, w := range ws {
			keys[i] = w.key
		}
		err := l.UpdateKeys(ctx, keys, func(tx stores.Tx) error {
			for _, w := range ws {
				it, err := tx.Get(w.key)
				switch {
				case errors.Is(err, stores.ErrNotFound):
					if w.old.Value != nil {
						return errEntryMoved
					}
				case err != nil:
					return err
				case !bytes.Equal(it.Value, w.old.Value):
					return errEntryMoved
				}
				if err := tx.Put(w.key, w.val); err != nil {
					return err
				}
			}
			_, err := l.AppendTx(ctx, tx, es...)
			return err
		})
		if errors.Is(err, errEntryMoved) {
			return changed
		}
		return closedIfWiped(err)
	}
	for _, w := range ws {
		if _, err := st.CompareAndSwap(ctx, w.key, w.old.Version, w.val); err != nil {
			if errors.Is(err, stores.ErrConflict) {
				return changed
			}
			return err
		}
	}
	_, err := l.Append(ctx, es...)
	return closedIfWiped(err)
}

// writeRenewal writes the renewal r of the handle's person's keys: ws (their
// keyring entry renewed, then their recovery entry) and the ledger entries
// es, the last a ledger.KeysRenewed naming r's new signing key, signed by
// oldSeed, the key it replaces (renew.go). It writes through a ledger of
// its own that signs with oldSeed and asks no guard (the keyring entry,
// compared with the one read, shows the person still holds it), while the
// handle's other commits wait (member.renewing); done, called once the
// renewal is written, makes the handle sign with the new key before they
// go on. An entry changed meanwhile gives changed, writing nothing (on a
// store with transactions).
//
// On a device of a hub the renewal is made on the hub first, as other
// changes of people are: the writes of ws marked for it (hubWrites: the
// keyring entry, and for a recovery the recovery entry with the code
// marked used) and the same ledger entries on the hub's ledger, so that
// the hub's ledger gives the person the new key before any entry it signs
// reaches the hub, and other devices' syncs take the renewed entry. Out of
// reach of the hub nothing is written. A device of a hub opened without
// it (Config.Hub unset) renews on its own: the entry reaches the hub with
// its next Sync, and the hub's ledger, which does not record that
// renewal, holds the person to the chain of renewals the entry carries
// (each signed by the key it replaced: see authority.check), a limit the
// README's threat table names. A secret change's recovery entry reaches
// the hub with the next Sync. A failure of the device's write after the
// hub's leaves the renewal on the hub: the person opens again with the
// new secret.
func (v *Vault) writeRenewal(ctx context.Context, ws []entryWrite, es []ledger.Entry, changed error, r renewal, oldSeed *crypto.Key, done func()) error {
	signer := seedSigner{seed: oldSeed, pub: r.oldSign}
	var hl writableLedger
	var hst stores.Store
	var hws []entryWrite
	if h := v.hub; h != nil {
		opts := h.ledgerOptions()
		opts.Signer, opts.Guard, opts.GuardKeys = signer, nil, nil
		// A reader's hub-side vault writes nothing but the person's own
		// changes (as its Sync copies their keyring entry).
		hst = writable(h.store)
		var err error
		if hws, err = hubWrites(ctx, hst, ws, changed); err != nil {
			return fmt.Errorf("on the hub: %w", feedErr(err))
		}
		hl = newLedger()(hst, h.seal, h.macer, h.prefix, opts)
		defer func() { _ = hl.Close() }()
	}
	opts := v.ledgerOptions()
	opts.Signer, opts.Guard, opts.GuardKeys = signer, nil, nil
	l := newLedger()(v.me.store, v.seal, v.macer, v.prefix, opts)
	defer func() { _ = l.Close() }()
	// The handle's other commits wait from here to the new key: the
	// ledgers are made (and closed) outside the window.
	defer v.me.beginRenewal()()
	if hl != nil {
		// The device's journal of the renewal, for a device cut off
		// between the hub's write and its own (renew_journal.go).
		jit, err := v.writeRenewalJournal(ctx, r, oldSeed, es)
		if err != nil {
			return err
		}
		if err := commitEntries(ctx, hst, hl, hws, es, changed); err != nil {
			// Only a refusal says the hub did not take the renewal: after
			// any other failure (a reply lost after the hub's commit) the
			// journal stays, and the next open finishes the renewal or,
			// finding the hub without it, drops the journal.
			if errors.Is(err, changed) {
				v.dropRenewalJournal(ctx)
			}
			return fmt.Errorf("on the hub: %w", feedErr(err))
		}
		ws = append(slices.Clone(ws), entryWrite{key: jit.Key, old: jit, val: renewalJournalDone})
	}
	// On a failure the journal stays: the next open finishes the renewal.
	if err := commitEntries(ctx, v.me.store, l, ws, es, changed); err != nil {
		return err
	}
	if hl != nil {
		v.dropRenewalJournal(ctx) // ended by the commit
	}
	if done != nil {
		done()
	}
	return nil
}

// hubWrites returns the writes of ws marked for the hub (entryWrite.hub),
// each to replace what the hub holds now: the person's keyring entry
// (hubSame) only as the device held it, which Open and a secret change
// bring into agreement first; their recovery entry (hubSerial), which
// travels with the keyring by serial, over any the hub holds of no
// higher serial, or none. Anything else gives changed: the person's
// entries changed elsewhere since the device last heard.
func hubWrites(ctx context.Context, hub stores.Store, ws []entryWrite, changed error) ([]entryWrite, error) {
	var out []entryWrite
	for _, w := range ws {
		if w.hub == notOnHub {
			continue
		}
		it, err := hub.Get(ctx, w.key)
		switch {
		case errors.Is(err, stores.ErrNotFound):
			if w.hub == hubSame && w.old.Value != nil {
				return nil, changed
			}
			it = stores.Item{}
		case err != nil:
			return nil, err
		case bytes.Equal(it.Value, w.old.Value):
		case w.hub != hubSerial || recoverySerial(it.Value) > recoverySerial(w.old.Value):
			return nil, changed
		}
		w.old = it
		out = append(out, w)
	}
	return out, nil
}

// seedSigner signs a ledger's commits with one signing key.
type seedSigner struct {
	seed *crypto.Key
	pub  []byte
}

// Public returns the signing key.
func (s seedSigner) Public() []byte { return s.pub }

// Sign signs msg.
func (s seedSigner) Sign(msg []byte) ([]byte, error) { return crypto.Sign(s.seed, msg) }
