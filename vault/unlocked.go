package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
)

// DeriveIdentity pays the key derivation of cfg.User's secret once and
// returns what it unlocks: the X25519 identity that the person's keyring
// entry in vault cfg.Name is locked to. Open with Config.Identity set to
// it, and no Secret, opens the vault as that person without deriving again
// (an agent process keeps it so that many short commands skip the
// derivation, as ssh-agent keeps a key).
//
// The identity is as strong as the secret for this one vault and person
// (another vault, or another person's entry, does not open with it). It
// stops opening once the person's secret changes or they recover with a
// code (either makes a new key pair: derive it again with the new secret)
// and once the person is revoked. Keep it
// like the secret: it is a typed secret, printed as
// "crypto.Identity(REDACTED)", and its text form (crypto.EncodeIdentity)
// must not be logged; Wipe it when done.
//
// It reads the vault's header and the person's keyring entry and writes
// nothing. A wrong secret gives ErrWrongSecret after the same derivation;
// a person whose entry is locked to an identity already, or of keyring
// layout version 1 (see UpgradeKeyring), gives ErrInvalidArgument; a
// person without an entry, ErrNoAccess; a vault that does not exist,
// ErrNotFound.
func DeriveIdentity(ctx context.Context, cfg Config) (*crypto.Identity, error) {
	if err := CheckVaultName(cfg.Name); err != nil {
		return nil, fmt.Errorf("derive identity: %w", err)
	}
	if err := CheckCollectionName(cfg.User); err != nil {
		return nil, fmt.Errorf("derive identity of vault %q: user: %w", cfg.Name, err)
	}
	if cfg.Store == nil {
		return nil, fmt.Errorf("derive identity of vault %q: no store", cfg.Name)
	}
	if len(cfg.Secret) == 0 {
		return nil, fmt.Errorf("derive identity of vault %q: empty secret: %w", cfg.Name, ErrWrongSecret)
	}
	fail := func(err error) (*crypto.Identity, error) {
		return nil, fmt.Errorf("derive identity of vault %q for %q: %w", cfg.Name, cfg.User, err)
	}
	prefix := "v/" + cfg.Name + "/"
	hi, err := cfg.Store.Get(ctx, prefix+headerKey)
	if errors.Is(err, stores.ErrNotFound) {
		return fail(fmt.Errorf("no such vault: %w", ErrNotFound))
	}
	if err != nil {
		return fail(err)
	}
	ki, err := cfg.Store.Get(ctx, prefix+keyringPrefix+cfg.User)
	if errors.Is(err, stores.ErrNotFound) {
		return fail(ErrNoAccess)
	}
	if err != nil {
		return fail(err)
	}
	if !isKeyringV2(ki.Value) {
		return fail(fmt.Errorf("%w: a keyring entry of layout version 1 has no identity (see UpgradeKeyring)", ErrInvalidArgument))
	}
	e, err := decodeKeyring(ki.Value)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrTampered, err))
	}
	switch {
	case e.user != cfg.User:
		return fail(fmt.Errorf("the entry holds user %q: %w", e.user, ErrTampered))
	case e.revoked:
		return fail(ErrNoAccess)
	case e.lock != lockSecret:
		return fail(fmt.Errorf("%w: the person opens with an identity already, not a secret", ErrInvalidArgument))
	}
	if err := e.kdf.Check(cfg.InsecureAllowWeakKDF); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrWeakKDF, err))
	}
	if err := e.kdf.CheckCeiling(cfg.MaxKDF); err != nil { // before any derivation: the store chose these costs
		return fail(fmt.Errorf("%w: %w", ErrWeakKDF, err))
	}
	kek, err := crypto.DeriveUserKey(cfg.Secret, e.salt, e.kdf)
	if err != nil {
		return fail(err)
	}
	defer kek.Wipe()
	k, err := crypto.UnwrapKey(kek, e.boxPriv, wrapAD(cfg.Name, cfg.User, hi.Value, "box"))
	if err != nil {
		return fail(ErrWrongSecret)
	}
	return crypto.IdentityFromKey(k), nil
}

// unlockWithIdentity opens a secret-locked entry with the identity the
// secret unlocks (DeriveIdentity): the caller's, which must be the entry's.
func unlockWithIdentity(ctx context.Context, cfg Config, prefix string, header []byte, e *keyringEntry) (*member, error) {
	pub, err := cfg.Identity.PublicKey()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(pub, e.boxPub) {
		return nil, fmt.Errorf("user %q: the identity is not the one the secret unlocks: %w", cfg.User, ErrWrongSecret)
	}
	return unlockWithBox(ctx, cfg, prefix, header, e, cfg.Identity, false)
}
