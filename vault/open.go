package vault

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/stores"
)

// Config says which vault to open, on which store, as whom.
type Config struct {
	// Store holds the vault. Required.
	Store stores.Store
	// Name of the vault; see CheckVaultName.
	Name string
	// User names the key slot in the vault's keyring (and the actor in the ledger).
	User string
	// Secret unlocks the user's key slot. It is not kept by the vault.
	Secret []byte
	// Identity, for a person granted to an X25519 public key (Vault.Grant
	// with PublicKey), unlocks their key slot instead of a secret. Make one
	// with crypto.GenerateIdentity and give its public key to an owner.
	// A vault created with an Identity and no Secret is unlocked by it.
	// For a person who opens with a secret, the identity DeriveIdentity
	// unlocked from that secret opens too, without a key derivation.
	Identity *crypto.Identity
	// RecoveryCode, with NewSecret, opens the vault with one of the
	// person's recovery codes (see Vault.RecoveryCodes) instead of their
	// lost secret: Open checks the code's checksum first (a typo is
	// ErrBadRecoveryCode, before any store access or key derivation), then
	// marks the code used and replaces the person's secret with NewSecret,
	// with a ledger.RecoveryCodeUsed entry, before it returns the vault.
	// The old secret no longer opens (ErrWrongSecret); the code never
	// opens again (ErrRecoveryCodeUsed). Secret and Identity must be empty.
	// On a device of a hub (Hub set) the recovery is written on the hub
	// first, as a secret change is: out of the hub's reach Open fails with
	// an error matching sequence.ErrOffline and writes nothing (the code
	// stays unused); an open without Hub recovers on the device alone, and
	// the hub hears of it at the device's next Sync.
	//
	// A store is an adversary: one that serves the person's recovery entry
	// as it was before the code was used (a replay) is caught by the
	// ledger, which Open reads for an earlier RecoveryCodeUsed entry of the
	// code (ErrRecoveryCodeUsed and ErrTampered; this costs one read of the
	// ledger per recovery). A store that also drops the ledger's tail is
	// caught by a StateDir that saw it (ErrRollback); without one, or on a
	// device whose ledger never held the use (another device of a hub,
	// before the recovery entry reached it), the code opens once more and
	// the ledger then holds two RecoveryCodeUsed entries with the same
	// RequestID, which an audit shows.
	RecoveryCode string
	// NewSecret is the secret that replaces the lost one on an open with
	// RecoveryCode; it must not be empty. It is set only with RecoveryCode
	// (ErrInvalidArgument otherwise) and not kept by the vault.
	NewSecret []byte
	// KDF is the key-derivation cost used when this call creates the vault.
	// The zero value means crypto.DefaultKDF. An existing vault keeps the cost
	// recorded in its header.
	KDF crypto.KDFParams
	// MaxKDF is the most key derivation this opener will pay for: a vault
	// header asking for a higher time, memory or thread count is refused
	// with ErrKDFTooCostly (and ErrWeakKDF) before any derivation, so a store
	// cannot make opening hang or exhaust memory. A zero field means the
	// field of crypto.DefaultMaxKDF (10 passes, 1 GiB, 16 threads). Raise it
	// to open (or create) a vault made with higher costs.
	MaxKDF crypto.KDFParams
	// InsecureAllowWeakKDF accepts a header whose key-derivation cost is below
	// the safe minimum. It exists for tests, which cannot pay 64 MiB per open;
	// never set it in production: a store could then lower the cost of guessing
	// the secret.
	InsecureAllowWeakKDF bool
	// StateDir is a device-local folder (not on the store) where the vault
	// keeps its rollback pins: the highest number this device saw per series
	// and the last ledger head it saw, sealed, and the record that this
	// device has used the vault. Empty keeps the pins in memory, so rollbacks
	// are caught only while the process lives. Use one StateDir per store:
	// the folder knows vaults by name, so a second store holding a vault of
	// the same name looks like the first one replaced (ErrVaultLost).
	// Processes sharing a StateDir take turns writing it (except on Windows,
	// where one process at a time should use it).
	StateDir string
	// Hub, if set, makes this vault a device of a hub: a store with atomic
	// compare-and-swap (PostgreSQL for a fleet, badger for one server
	// process) that devices sync through. The device keeps working on Store,
	// offline or not. Open copies the vault's header and keyring from the hub
	// to a device that has never held the vault (so a user granted elsewhere
	// can open it here), or to a hub that does not hold it yet; a hub holding
	// another vault under the name is ErrHubMismatch. A vault that took
	// numbers before it had a hub seeds the hub's series to the device's
	// heads when it joins, so they continue there; a hub that holds the
	// vault already with a series behind the device's is refused with
	// ErrHubBehind, nothing written. The hub holds only sealed values and
	// needs no key.
	//
	// The counters of a device live on the hub (see Vault.Sequence): a hub
	// that cannot be reached makes numbering calls fail with
	// sequence.ErrOffline, and a device that holds the vault opens offline
	// and works locally. The device's store (and state folder) remember
	// that the vault is used with a hub: opened there later without one,
	// it takes no numbers (sequence.ErrOffline), since the device's own
	// counters would collide with the hub's.
	Hub stores.Store
	// HubTimeout bounds each operation of the hub (a read, a write, a
	// transaction) made by a call of the device's vault: a hub that has not
	// answered by then is taken for unreachable, and a Next or PutNumbered
	// fails with sequence.ErrOffline. Zero means DefaultHubTimeout; a
	// negative value sets none (only the caller's context bounds the call).
	HubTimeout time.Duration

	// role is the opener's role, set by Open for newVault (a reader's
	// vault writes through readOnly).
	role Role
}

// Format implements fmt.Formatter so that no verb (%v, %+v, %#v, %s, %x,
// ...) prints the secret: it shows the name, the user, the store's type,
// the costs and the state folder, and "REDACTED" for the secret.
func (c Config) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, c.String())
}

// String describes c without its secret.
func (c Config) String() string {
	hub := ""
	if c.Hub != nil {
		hub = ", Hub: " + storeType(c.Hub)
	}
	return fmt.Sprintf("vault.Config{Name: %q, User: %q, Secret: REDACTED, Store: %s%s, KDF: %+v, MaxKDF: %+v, StateDir: %q}",
		c.Name, c.User, storeType(c.Store), hub, c.KDF, c.MaxKDF, c.StateDir)
}

// GoString is String, so %#v does not print the secret either.
func (c Config) GoString() string { return c.String() }

// storeType names a store by its type only: a store's fields may hold
// credentials (a DSN with a password).
func storeType(st stores.Store) string {
	if st == nil {
		return "nil"
	}
	if c, ok := st.(vaultStore); ok {
		st = c.unchecked() // the wrapper is the vault's, not the caller's
	}
	return fmt.Sprintf("%T", st)
}

const (
	headerKey     = "_header"
	keyringPrefix = "_keyring/"
)

// Open opens the named vault, creating it on first use, and unlocks it with
// the user's secret. A wrong secret returns ErrWrongSecret after the same key
// derivation a right one costs. When two openers create the same vault at
// once, both end with the one data key that was committed first (on stores
// with atomic compare-and-swap; on others the last writer wins, so create a
// vault from one place before sharing it).
//
// With a StateDir, a vault this device has used is never created again: if
// the store has lost it (no header) or holds another vault under its name (a
// header with another salt), Open fails with ErrVaultLost (which matches
// ErrRollback) before any key derivation; Forget lifts that.
func Open(ctx context.Context, cfg Config) (*Vault, error) {
	if err := CheckVaultName(cfg.Name); err != nil {
		return nil, fmt.Errorf("open vault: %w", err)
	}
	if err := CheckCollectionName(cfg.User); err != nil {
		return nil, fmt.Errorf("open vault %q: user: %w", cfg.Name, err)
	}
	if cfg.Store == nil {
		return nil, fmt.Errorf("open vault %q: no store", cfg.Name)
	}
	// From here on, the vault reaches its store and its hub only through
	// the checking wrapper (store_checked.go).
	cfg.Store = checkStore(cfg.Store)
	if cfg.Hub != nil {
		cfg.Hub = checkStore(cfg.Hub)
	}
	ro, err := checkRecoveryConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("open vault %q: %w", cfg.Name, err)
	}
	if ro != nil {
		defer clear(ro.code)
	}
	if len(cfg.Secret) == 0 && cfg.Identity == nil && ro == nil {
		return nil, fmt.Errorf("open vault %q: empty secret: %w", cfg.Name, ErrWrongSecret)
	}
	kdf := cfg.KDF
	if kdf == (crypto.KDFParams{}) {
		kdf = crypto.DefaultKDF
	}
	if err := kdf.Check(cfg.InsecureAllowWeakKDF); err != nil {
		return nil, fmt.Errorf("open vault %q: %w: %w", cfg.Name, ErrWeakKDF, err)
	}
	prefix := "v/" + cfg.Name + "/"
	if cfg.Hub != nil {
		if err := fetchFromHub(ctx, cfg, wrapHub(cfg.Hub, hubTimeout(cfg), nil), prefix); err != nil {
			return nil, fmt.Errorf("open vault %q: hub: %w", cfg.Name, err)
		}
	}
	known, err := pins.Lookup(cfg.StateDir, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("open vault %q: state folder: %w", cfg.Name, err)
	}
	o := opener{cfg: cfg, kdf: kdf, prefix: prefix, known: known, recovery: ro}
	// Each round either opens an existing vault or tries to create it; losing
	// the creation race sends us round again to open what the winner wrote.
	for range 8 {
		m, err := o.attempt(ctx)
		if errors.Is(err, stores.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open vault %q: %w", cfg.Name, err)
		}
		dk, salt := m.dk, m.salt
		cfg.role = m.role
		// Pins in memory seal nothing; pins in a state folder take their
		// key over and wipe it when the last opener in this process closes.
		var pk *crypto.Key
		if cfg.StateDir != "" {
			pk = dk.Derive("noydb pins v1")
		}
		p, err := pins.Open(cfg.StateDir, cfg.Name, salt[:], pk)
		if err != nil {
			pk.Wipe()
			m.wipe()
			return nil, fmt.Errorf("open vault %q: %w", cfg.Name, err)
		}
		v := newVault(cfg, prefix, dk, p)
		m.store = checkStore(cfg.Store)
		v.me, v.signAs = m, m
		v.keys = m.genKeys(cfg, prefix)
		// Before the first write: the use of a recovery code is the
		// vault's own person's, and keeps a one-person vault so.
		if err := v.learnPeople(ctx); err != nil { // sole.go
			_ = v.Close()
			return nil, fmt.Errorf("open vault %q: %w", cfg.Name, closedIfWiped(err))
		}
		if cfg.Hub != nil {
			if v.hub, err = openHub(ctx, cfg, prefix, dk, v); err != nil {
				_ = v.Close()
				return nil, fmt.Errorf("open vault %q: hub: %w", cfg.Name, err)
			}
			v.hub.signAs = m
			v.hub.keys = v.keys
			if f := joinFlag(cfg); f != nil {
				f.Store(true) // hub_joined.go
			}
		} else if v.hubless, err = isDevice(ctx, cfg, prefix); err != nil {
			_ = v.Close()
			return nil, fmt.Errorf("open vault %q: %w", cfg.Name, err)
		} else if !v.hubless {
			v.joined = joinFlag(cfg)
		}
		// On a device of a hub, on the hub first (writeRenewal).
		if err := v.finishRecovery(ctx); err != nil {
			_ = v.Close()
			return nil, fmt.Errorf("open vault %q: recovery code: %w", cfg.Name, err)
		}
		if err := v.completeRenewal(ctx); err != nil { // renew_journal.go
			_ = v.Close()
			return nil, fmt.Errorf("open vault %q: %w", cfg.Name, err)
		}
		if err := v.checkOpener(ctx); err != nil { // people_ledger.go
			_ = v.Close()
			return nil, fmt.Errorf("open vault %q: %w", cfg.Name, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("open vault %q: creation kept racing: %w", cfg.Name, stores.ErrConflict)
}

type opener struct {
	cfg    Config
	kdf    crypto.KDFParams
	prefix string
	known  []byte // the salt this device knew the vault by, nil if none
	// recovery is set for an open with Config.RecoveryCode (recovery.go).
	recovery *recoveryOpen
}

// attempt opens or creates the vault and returns the opener's person.
func (o opener) attempt(ctx context.Context) (*member, error) {
	st := o.cfg.Store
	hi, err := st.Get(ctx, o.prefix+headerKey)
	if errors.Is(err, stores.ErrNotFound) {
		if o.recovery != nil {
			return nil, fmt.Errorf("no such vault to recover: %w", ErrNoAccess)
		}
		if o.known != nil {
			return nil, fmt.Errorf("the store has no such vault, but this device has used it "+
				"(restore the store, or call Forget to start over): %w", ErrVaultLost)
		}
		return o.create(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := o.checkKnown(hi.Value); err != nil {
		return nil, err
	}
	return o.unlock(ctx, hi.Value)
}

// unlock checks the stored header and unwraps the user's copy of the data key.
func (o opener) unlock(ctx context.Context, header []byte) (*member, error) {
	h, err := crypto.ParseHeader(header)
	if errors.Is(err, crypto.ErrKDFTooWeak) || errors.Is(err, crypto.ErrKDFTooCostly) {
		return nil, fmt.Errorf("%w: %w", ErrWeakKDF, err)
	}
	if err != nil {
		return nil, fmt.Errorf("vault header: %w", err)
	}
	if err := h.KDF.Check(o.cfg.InsecureAllowWeakKDF); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWeakKDF, err)
	}
	// Before any derivation: the store chose these costs.
	if err := h.KDF.CheckCeiling(o.cfg.MaxKDF); err != nil {
		return nil, fmt.Errorf("vault header: %w: %w", ErrWeakKDF, err)
	}
	ki, err := o.cfg.Store.Get(ctx, o.prefix+keyringPrefix+o.cfg.User)
	if err != nil && !errors.Is(err, stores.ErrNotFound) {
		return nil, err
	}
	if o.recovery != nil {
		switch {
		case errors.Is(err, stores.ErrNotFound):
			return nil, fmt.Errorf("user %q: %w", o.cfg.User, ErrNoAccess)
		case !isKeyringV2(ki.Value):
			return nil, fmt.Errorf("user %q has a keyring entry of layout version 1: %w", o.cfg.User, ErrRecoveryCodeRefused)
		}
		m, err := o.recoverEntry(ctx, header, ki.Value)
		if err != nil {
			return nil, err
		}
		m.salt, m.version = h.Salt, ki.Version
		return m, nil
	}
	if err == nil && isKeyringV2(ki.Value) {
		m, err := unlockEntry(ctx, o.cfg, o.prefix, header, ki.Value)
		if err != nil {
			return nil, err
		}
		m.salt, m.version = h.Salt, ki.Version
		return m, nil
	}
	if len(o.cfg.Secret) == 0 {
		if err != nil {
			return nil, fmt.Errorf("user %q: %w", o.cfg.User, ErrNoAccess)
		}
		return nil, fmt.Errorf("user %q opens with a secret: %w", o.cfg.User, ErrWrongSecret)
	}
	if errors.Is(err, stores.ErrNotFound) {
		m, err := o.adopt(ctx, header)
		if err != nil {
			return nil, err
		}
		m.salt = h.Salt
		return m, nil
	}
	// A keyring entry of layout version 1: the data key wrapped by the
	// secret's key, with the header's salt and cost. Its holder is an owner
	// (version 1 had no roles) until UpgradeKeyring rewrites it.
	kek, err := crypto.DeriveUserKey(o.cfg.Secret, h.Salt[:], h.KDF)
	if err != nil {
		return nil, err
	}
	defer kek.Wipe()
	dk, err := crypto.UnwrapKey(kek, ki.Value, keyringAD(o.cfg.Name, o.cfg.User, header))
	if err != nil {
		return nil, ErrWrongSecret
	}
	return &member{dk: dk, salt: h.Salt, role: RoleOwner, header: header, version: ki.Version}, nil
}

// adopt handles a header without a key slot for this user. Only a vault that
// holds its header and nothing else may be finished here: its creator crashed
// between header and keyring (possible only on stores without transactions),
// so no data key was ever used. Anything else (records, ledger, counters,
// another user's key slot) means a data key exists that this user was never
// given, or that a store deleted this user's slot: either way the user has no
// access, and writing a new data key would re-key the vault behind its
// owners' backs and fork its history. Nothing is written then.
func (o opener) adopt(ctx context.Context, header []byte) (*member, error) {
	for it, err := range o.cfg.Store.List(ctx, o.prefix) {
		if err != nil {
			return nil, err
		}
		if it.Key == o.prefix+headerKey {
			continue
		}
		return nil, fmt.Errorf("user %q: %w", o.cfg.User, ErrNoAccess)
	}
	m, e, err := o.creator(header)
	if err != nil {
		return nil, err
	}
	v, err := o.cfg.Store.CompareAndSwap(ctx, o.prefix+keyringPrefix+o.cfg.User, 0, e.encode())
	if err != nil {
		m.wipe()
		return nil, err
	}
	m.version = v
	return m, nil
}

// creator makes the data key of a new vault and its creator's keyring
// entry (an owner, granted by themselves), locked by the opener's secret
// (with a salt of its own and the opener's cost) or, without a secret, by
// its identity.
func (o opener) creator(header []byte) (*member, *keyringEntry, error) {
	dk, err := crypto.GenerateKey()
	if err != nil {
		return nil, nil, err
	}
	spec := entrySpec{
		vault: o.cfg.Name, user: o.cfg.User, grantedBy: o.cfg.User, header: header,
		role: RoleOwner, at: time.Now(), serial: 1, dk: dk,
	}
	if len(o.cfg.Secret) == 0 {
		if spec.pub, err = o.cfg.Identity.PublicKey(); err != nil {
			dk.Wipe()
			return nil, nil, err
		}
	} else {
		spec.salt, spec.kdf = make([]byte, crypto.SaltSize), o.kdf
		if _, err := rand.Read(spec.salt); err != nil {
			dk.Wipe()
			return nil, nil, err
		}
		if spec.kek, err = crypto.DeriveUserKey(o.cfg.Secret, spec.salt, o.kdf); err != nil {
			dk.Wipe()
			return nil, nil, err
		}
		defer spec.kek.Wipe()
	}
	e, seed, err := spec.build()
	if err != nil {
		dk.Wipe()
		return nil, nil, err
	}
	m := &member{dk: dk, seed: seed, role: RoleOwner, entry: e, header: header, gens: map[uint64]*crypto.Key{1: dk}}
	// The box key, to unwrap the generations later rotations add.
	if spec.kek != nil {
		k, err := crypto.UnwrapKey(spec.kek, e.boxPriv, wrapAD(o.cfg.Name, o.cfg.User, header, "box"))
		if err != nil {
			m.wipe()
			return nil, nil, err
		}
		m.box, m.ownBox = crypto.IdentityFromKey(k), true
	} else {
		m.box = o.cfg.Identity
	}
	return m, e, nil
}

func (o opener) create(ctx context.Context) (*member, error) {
	// A vault this opener could not open again is not created.
	if err := o.kdf.CheckCeiling(o.cfg.MaxKDF); err != nil {
		return nil, fmt.Errorf("cost for a new vault: %w: %w", ErrWeakKDF, err)
	}
	h, err := crypto.NewHeader(o.kdf)
	if err != nil {
		return nil, err
	}
	hb, err := h.MarshalBinary()
	if err != nil {
		return nil, err
	}
	m, e, err := o.creator(hb)
	if err != nil {
		return nil, err
	}
	m.salt = h.Salt
	wrapped := e.encode()
	hk, kk := o.prefix+headerKey, o.prefix+keyringPrefix+o.cfg.User
	st := o.cfg.Store
	if tr, ok := st.(stores.Transactor); ok {
		err = tr.Update(ctx, func(tx stores.Tx) error {
			for _, k := range []string{hk, kk} {
				if _, err := tx.Get(k); !errors.Is(err, stores.ErrNotFound) {
					if err == nil {
						err = stores.ErrConflict
					}
					return err
				}
			}
			if err := tx.Put(hk, hb); err != nil {
				return err
			}
			return tx.Put(kk, wrapped)
		})
		if err != nil {
			m.wipe()
			return nil, err
		}
		it, err := st.Get(ctx, kk)
		if err != nil {
			m.wipe()
			return nil, err
		}
		m.version = it.Version
		return m, nil
	}
	if _, err := st.CompareAndSwap(ctx, hk, 0, hb); err != nil {
		m.wipe()
		return nil, err
	}
	if m.version, err = st.CompareAndSwap(ctx, kk, 0, wrapped); err != nil {
		m.wipe()
		return nil, err
	}
	return m, nil
}

// checkKnown refuses, before any key derivation, a header whose salt is not
// the one this device knew the vault by: the vault was replaced.
func (o opener) checkKnown(header []byte) error {
	if o.known == nil {
		return nil
	}
	h, err := crypto.ParseHeader(header)
	if err != nil {
		return nil // unlock reports it
	}
	if !bytes.Equal(h.Salt[:], o.known) {
		return fmt.Errorf("the store holds another vault under this name than the one this device has used "+
			"(restore the store, or call Forget to accept the new one): %w", ErrVaultLost)
	}
	return nil
}

// Forget erases what this device knows of the vault named name from the
// state folder stateDir: the record that it used the vault, and its rollback
// pins. It is the explicit way to accept a vault that the store really lost
// or that was re-created elsewhere after Open failed with ErrVaultLost or
// ErrStateLost: the next Open creates or adopts the vault as on first use,
// and rollback protection starts over from what the store then holds. It
// fails while the vault is open in this process.
func Forget(stateDir, name string) error {
	if err := CheckVaultName(name); err != nil {
		return fmt.Errorf("forget vault: %w", err)
	}
	if err := pins.Forget(stateDir, name); err != nil {
		return err
	}
	return pins.Forget(stateDir, hubPinsName(name))
}

// Used reports whether the state folder stateDir records that this device
// has used the vault named name (false without a folder).
func Used(stateDir, name string) (bool, error) {
	if err := CheckVaultName(name); err != nil {
		return false, err
	}
	id, err := pins.Lookup(stateDir, name)
	return id != nil, err
}

// keyringAD binds a wrapped data key to its vault, its user and the exact
// header bytes, so a header edited by the store (salt or cost) cannot unlock.
func keyringAD(vaultName, user string, header []byte) []byte {
	return crypto.KeyAD(vaultName, keyringPrefix+user+"\x00"+string(header))
}
