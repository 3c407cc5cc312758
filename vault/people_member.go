package vault

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
)

// member is the person a vault was opened as.
type member struct {
	dk     *crypto.Key
	salt   [crypto.SaltSize]byte
	header []byte
	store  vaultStore // the vault's own store, writable whatever the role

	// gens holds the data keys of every generation the entry wraps (the
	// first is dk); box is the person's X25519 identity, kept to unwrap a
	// generation a rotation adds later and to issue recovery codes (ownBox:
	// ours to wipe). Both are empty for a version 1 entry, which holds the
	// first generation only.
	gens   map[uint64]*crypto.Key
	cols   map[colGen]*crypto.Key // a limited person's collection keys
	box    *crypto.Identity
	ownBox bool

	// renewing is true while this handle writes a renewal of its person's
	// signing key (writeRenewal): the guard holds back every other commit
	// of the handle's ledgers meanwhile (renewalHold), so that none is
	// signed by the key the renewal replaces after the renewal's ledger
	// entry. It is the one thing a commit asks of the renewal: the wait
	// itself (renewalDone) is read only by a commit held back.
	renewing atomic.Bool
	// renewal serialises the handle's renewals; holdMu guards renewalDone,
	// closed when the renewal in progress ends (nil when none is).
	renewal     sync.Mutex
	holdMu      sync.Mutex
	renewalDone chan struct{}
	// onHold, if set (tests), is called when a commit starts waiting for
	// a renewal.
	onHold func()

	mu sync.Mutex // guards what follows, changed by people calls
	// retired are the box identities this handle held before renewing its
	// person's key pair (renew.go): an entry the store still serves from
	// before the renewal is unwrapped with them. Wiped with the member.
	retired []retiredBox
	// retiredSeeds are the signing keys this handle held before renewing
	// them: a commit that read one just before the renewal may still sign
	// with it (and fail: its head moved), so they are wiped with the
	// member, not at the renewal.
	retiredSeeds []*crypto.Key
	role         Role
	seed         *crypto.Key // the signing key; nil for a version 1 entry
	// recovery is what an open with a recovery code still writes (recovery.go).
	recovery *pendingRecovery
	entry    *keyringEntry // nil for a version 1 entry
	version  uint64        // the store version of the entry as last read or written
}

// wipe wipes the data keys and the signing key (a failed open).
func (m *member) wipe() {
	m.dk.Wipe()
	for _, k := range m.gens {
		k.Wipe()
	}
	for _, k := range m.cols {
		k.Wipe()
	}
	m.wipeSigner()
}

// takeRecovery returns the recovery an open has still to write, if any,
// and forgets it.
func (m *member) takeRecovery() *pendingRecovery {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.recovery
	m.recovery = nil
	return p
}

// wipeSigner wipes the signing key.
func (m *member) wipeSigner() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seed != nil {
		m.seed.Wipe()
	}
	if m.box != nil && m.ownBox {
		m.box.Wipe()
	}
	for _, r := range m.retired {
		r.id.Wipe()
	}
	for _, k := range m.retiredSeeds {
		k.Wipe()
	}
	if m.recovery != nil {
		m.recovery.renewal.wipe() // never written
		m.recovery = nil
	}
}

// retiredBox is a box identity of the person before a renewal, with its
// public key.
type retiredBox struct {
	pub []byte
	id  *crypto.Identity
}

// boxFor returns the box identity of the handle that unwraps what an entry
// with box public key pub holds: the current one, or one retired by a
// renewal of this handle. ok is false when it is neither: the person's key
// pair was renewed elsewhere (another handle or device) since the handle
// opened.
func (m *member) boxFor(pub []byte) (*crypto.Identity, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.retired {
		if bytes.Equal(r.pub, pub) {
			return r.id, true
		}
	}
	if m.entry != nil && !bytes.Equal(m.entry.boxPub, pub) {
		return m.box, false
	}
	return m.box, true
}

// beginRenewal holds back the handle's other commits (renewing) until
// end is called, after a renewal in progress on the handle ended.
func (m *member) beginRenewal() (end func()) {
	m.renewal.Lock()
	done := make(chan struct{})
	m.holdMu.Lock()
	m.renewalDone = done
	m.renewing.Store(true)
	m.holdMu.Unlock()
	return func() {
		m.holdMu.Lock()
		m.renewing.Store(false)
		m.renewalDone = nil
		m.holdMu.Unlock()
		close(done)
		m.renewal.Unlock()
	}
}

// renewalHold is the guard's answer to a commit of a handle that renews
// its person's signing key meanwhile: a cas.Hold (matching
// stores.ErrConflict), so the commit, having written nothing, waits for
// the renewal outside its transaction (Await; the ledger with its store's
// lock released) and then runs again, signed with the new key, with its
// whole retry budget. No write of the handle fails because a renewal ran.
type renewalHold struct{ m *member }

func (h renewalHold) Error() string {
	return "the person's signing key is being renewed: " + stores.ErrConflict.Error()
}

// Unwrap makes the hold a conflict for callers that do not wait for it.
func (h renewalHold) Unwrap() error { return stores.ErrConflict }

// Await waits for the renewal in progress, if any, to end, or for ctx.
func (h renewalHold) Await(ctx context.Context) error {
	h.m.holdMu.Lock()
	done := h.m.renewalDone
	h.m.holdMu.Unlock()
	if done == nil {
		return nil
	}
	if h.m.onHold != nil {
		h.m.onHold()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// renewed makes r the handle's person's entry, box identity and signing
// key, retiring the ones before (the caller holds no lock).
func (m *member) renewed(r renewal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.box != nil && m.ownBox && m.entry != nil {
		m.retired = append(m.retired, retiredBox{pub: m.entry.boxPub, id: m.box})
	}
	if m.seed != nil {
		m.retiredSeeds = append(m.retiredSeeds, m.seed)
	}
	m.entry, m.box, m.ownBox, m.seed = r.entry, r.box, true, r.seed
}

// unlockEntry opens the keyring entry (layout version 2) of cfg.User with
// cfg's secret or identity: it checks the entry's cost against the
// opener's ceiling before any derivation, unwraps the data key, checks the
// entry's MAC and the granter's signature, and unwraps the signing key.
// A store that changed any field of the entry (a role raised, a grant
// forged) gives an error matching ErrTampered; a revoked person gets
// ErrNoAccess; a wrong secret or identity ErrWrongSecret.
func unlockEntry(ctx context.Context, cfg Config, prefix string, header, raw []byte) (*member, error) {
	e, err := decodeKeyring(raw)
	if err != nil {
		return nil, fmt.Errorf("keyring entry of %q: %w: %w", cfg.User, ErrTampered, err)
	}
	if e.user != cfg.User {
		return nil, fmt.Errorf("keyring entry of %q holds user %q: %w", cfg.User, e.user, ErrTampered)
	}
	if e.revoked {
		return nil, fmt.Errorf("user %q was revoked: %w", cfg.User, ErrNoAccess)
	}
	ad := func(p string) []byte { return wrapAD(cfg.Name, cfg.User, header, p) }
	switch e.lock {
	case lockSecret:
		if len(cfg.Secret) == 0 && cfg.Identity != nil {
			// The identity DeriveIdentity unlocked with the secret.
			return unlockWithIdentity(ctx, cfg, prefix, header, e)
		}
		if len(cfg.Secret) == 0 {
			return nil, fmt.Errorf("user %q opens with a secret: %w", cfg.User, ErrWrongSecret)
		}
		if err := e.kdf.Check(cfg.InsecureAllowWeakKDF); err != nil {
			return nil, fmt.Errorf("keyring entry of %q: %w: %w", cfg.User, ErrWeakKDF, err)
		}
		// Before any derivation: the store chose these costs.
		if err := e.kdf.CheckCeiling(cfg.MaxKDF); err != nil {
			return nil, fmt.Errorf("keyring entry of %q: %w: %w", cfg.User, ErrWeakKDF, err)
		}
		kek, err := crypto.DeriveUserKey(cfg.Secret, e.salt, e.kdf)
		if err != nil {
			return nil, err
		}
		k, err := crypto.UnwrapKey(kek, e.boxPriv, ad("box"))
		kek.Wipe()
		if err != nil {
			return nil, ErrWrongSecret
		}
		// The member keeps the private key (wiped with it): to unwrap the
		// generations later rotations add, and for RecoveryCodes.
		return unlockWithBox(ctx, cfg, prefix, header, e, crypto.IdentityFromKey(k), true)
	case lockIdentity:
		if cfg.Identity == nil {
			return nil, fmt.Errorf("user %q opens with an identity (Config.Identity): %w", cfg.User, ErrWrongSecret)
		}
		pub, err := cfg.Identity.PublicKey()
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(pub, e.boxPub) {
			return nil, fmt.Errorf("user %q: identity does not match: %w", cfg.User, ErrWrongSecret)
		}
	}
	return unlockWithBox(ctx, cfg, prefix, header, e, cfg.Identity, false)
}

// unlockWithBox finishes unlockEntry once the entry's X25519 private key
// box is known: it unwraps the data keys of every generation and the
// signing key, and checks the entry's MAC and grant. ownBox: box is the
// member's to keep and wipe (a secret's or a recovery code's), else the
// caller's (Config.Identity). On failure an own box is wiped.
func unlockWithBox(ctx context.Context, cfg Config, prefix string, header []byte, e *keyringEntry, box *crypto.Identity, ownBox bool) (*member, error) {
	gens := make(map[uint64]*crypto.Key, len(e.gens))
	cols := make(map[colGen]*crypto.Key, len(e.colKeys))
	fail := func(err error) (*member, error) {
		for _, k := range gens {
			k.Wipe()
		}
		for _, k := range cols {
			k.Wipe()
		}
		if ownBox {
			box.Wipe()
		}
		return nil, err
	}
	for _, g := range e.gens {
		k, err := e.unwrap(cfg.Name, header, box, g.key, genPurpose(g.gen))
		if err != nil {
			return fail(fmt.Errorf("keyring entry of %q: data key of generation %d: %w", cfg.User, g.gen, ErrTampered))
		}
		gens[g.gen] = k
	}
	for _, c := range e.colKeys {
		k, err := e.unwrap(cfg.Name, header, box, c.key, colPurpose(c.gen, c.name))
		if err != nil {
			return fail(fmt.Errorf("keyring entry of %q: key of collection %q, generation %d: %w", cfg.User, c.name, c.gen, ErrTampered))
		}
		cols[colGen{c.gen, c.name}] = k
	}
	dk := gens[e.macGen]
	if dk == nil {
		return fail(fmt.Errorf("keyring entry of %q: data key: %w", cfg.User, ErrTampered))
	}
	m := &member{dk: dk, header: header, role: e.role, entry: e, gens: gens, cols: cols, box: box, ownBox: ownBox}
	if err := e.verify(dk, cfg.Name, cfg.User, header); err != nil {
		m.wipe()
		return nil, err
	}
	var err error
	if m.seed, err = e.unwrap(cfg.Name, header, box, e.signPriv, "sign"); err != nil {
		m.wipe()
		return nil, fmt.Errorf("keyring entry of %q: signing key: %w", cfg.User, ErrTampered)
	}
	if pub, err := crypto.SigningPublicKey(m.seed); err != nil || !bytes.Equal(pub, e.signPub) {
		m.wipe()
		return nil, fmt.Errorf("keyring entry of %q: signing key: %w", cfg.User, ErrTampered)
	}
	// The entry's authority (its grant) is checked once the vault is
	// open, against its ledger (Vault.checkOpener).
	return m, nil
}
