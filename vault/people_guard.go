package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/stores"
)

// errRevokedSince is the ErrNoAccess of a handle whose person's keyring
// entry, checked under its MAC, says they were revoked (or revoked and
// granted again) since it opened: a record sealed under a generation they
// never held is then out of their reach, not altered by the store.
var errRevokedSince = fmt.Errorf("%w", ErrNoAccess)

// personGuard is the ledger's Guard (wire.LedgerOptions.Guard): before a
// commit that appends is written, it reads the keyring entry of the
// vault's person as that commit sees it and refuses the commit when the
// person was revoked, or revoked and granted again (a new signing key),
// since the handle opened. Without it, a handle opened before a
// revocation by another owner would go on taking numbers and appending
// events sealed with the first generation's key, which the revocation
// cannot take back; Verify would then refuse the ledger from the first
// such entry on. Records are refused earlier, by the current generation
// (rotate_current.go); the guard covers everything that appends.
//
// The entry's bytes are only decoded, not checked against the data key:
// a store that forges a "not revoked" entry helps only the revoked person's
// entries in, which Verify still refuses, and one that forges "revoked"
// can refuse writes anyway. The decoded fields are kept for as long as the
// stored bytes stay the same, so a commit costs a read (fetched with the
// ledger's head where reads are round trips) and a byte comparison.
type personGuard struct {
	v   *Vault
	key string // the person's keyring entry

	mu      sync.Mutex
	raw     []byte // the entry as last decoded
	revoked bool
	signPub []byte
	bad     error // why raw does not decode
}

// newPersonGuard returns the guard of v, whose person is user.
func newPersonGuard(v *Vault, user string) *personGuard {
	return &personGuard{v: v, key: v.prefix + keyringPrefix + user}
}

// check is the Guard: get reads through the commit.
func (g *personGuard) check(get func(key string) (stores.Item, error)) error {
	m := g.v.signAs
	if m == nil {
		return nil // a vault without people (tests, internal stores)
	}
	if m.renewing.Load() {
		return renewalHold{m}
	}
	if err := g.checkUnsigned(m, get); err != nil {
		return err
	}
	it, err := get(g.key)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return fmt.Errorf("user %q has no keyring entry any more: %w", g.v.user, ErrNoAccess)
	case err != nil:
		return err
	case !isKeyringV2(it.Value):
		return nil // layout version 1: no revocation, no signing key
	}
	revoked, signPub, err := g.decoded(it.Value)
	if err != nil {
		return err
	}
	if revoked {
		return fmt.Errorf("user %q was revoked: %w", g.v.user, ErrNoAccess)
	}
	if !m.holds(signPub) {
		return fmt.Errorf("user %q renewed their keys elsewhere (a secret change, a recovery), or was revoked and "+
			"granted again, since this handle opened, or another grant of theirs reached the store first: "+
			"open the vault again: %w", g.v.user, ErrNoAccess)
	}
	return nil
}

// checkUnsigned refuses a commit of a handle without a signing key (its
// person's keyring entry was of layout version 1 when it opened) once the
// ledger is signed: an owner upgraded their entry since, and an unsigned
// entry after a signed one fails Verify for good. The person upgrades
// their own entry first (UpgradeKeyring), or, if another handle did it
// already, opens the vault again.
func (g *personGuard) checkUnsigned(m *member, get func(key string) (stores.Item, error)) error {
	m.mu.Lock()
	legacy := m.seed == nil || m.entry == nil
	m.mu.Unlock()
	if !legacy || g.v.ledger == nil {
		return nil
	}
	signed, err := g.v.ledger.HeadSigned(get)
	if err != nil {
		return err
	}
	if signed {
		return fmt.Errorf("%w: user %q opened with a keyring entry of layout version 1, which has no signing key, "+
			"and the vault's ledger is signed since its first upgraded entry: call UpgradeKeyring, "+
			"or open the vault again if this person's entry was upgraded since", ErrNotPermitted, g.v.user)
	}
	return nil
}

// decoded returns the fields of the entry raw that check needs, decoding
// it only when it differs from the one decoded last.
func (g *personGuard) decoded(raw []byte) (revoked bool, signPub []byte, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.raw == nil || !bytes.Equal(g.raw, raw) {
		e, err := decodeKeyring(raw)
		g.raw = bytes.Clone(raw)
		g.bad, g.revoked, g.signPub = nil, false, nil
		switch {
		case err != nil:
			g.bad = fmt.Errorf("keyring entry of %q: %w: %w", g.v.user, ErrTampered, err)
		case e.user != g.v.user:
			g.bad = fmt.Errorf("keyring entry of %q names %q: %w", g.v.user, e.user, ErrTampered)
		default:
			g.revoked, g.signPub = e.revoked, e.signPub
		}
	}
	return g.revoked, g.signPub, g.bad
}

// mayWrite asks the guard, with plain reads, before a write on a store
// without transactions: there a record (or a handoff entry, or a pass's
// batch) is written before its ledger entry, whose commit would be refused
// only after it. On a store with transactions the commit asks the guard
// itself, inside the transaction, and mayWrite does nothing. Between this
// read and the write, a revocation committed by another handle is not
// seen: the record is written, its ledger commit (which asks the guard
// again) is refused, and the record stays without a ledger entry, which
// Verify, walking the ledger, does not see (documented at Revoke).
func (v *Vault) mayWrite(ctx context.Context) error {
	if _, ok := v.store.(stores.Transactor); ok && v.store.Capabilities().Transactions {
		return nil
	}
	return v.mayWriteNow(ctx)
}

// mayWriteNow asks the guard with plain reads, on any store: for writes
// made before the commit that asks it (a device's Settle copies handoff
// entries to the hub before the hub's pass).
func (v *Vault) mayWriteNow(ctx context.Context) error {
	return v.guard.checkNow(ctx, func(key string) (stores.Item, error) { return v.store.Get(ctx, key) })
}

// mayChangePeople asks the guard, with plain reads of the store people
// changes are written to (v.me.store: a reader's own), before a change
// written without a transaction: its keyring entry goes first, and the
// ledger entry's commit, which asks the guard, only after it. Between
// this read and the write, a revocation committed by another handle is
// not seen (as for mayWrite).
func (v *Vault) mayChangePeople(ctx context.Context) error {
	return v.guard.checkNow(ctx, func(key string) (stores.Item, error) { return v.me.store.Get(ctx, key) })
}

// checkNow asks the guard with plain reads, before a write made without a
// transaction: a renewal of the handle's signing key in progress is
// waited for (renewalHold), then the guard asked again.
func (g *personGuard) checkNow(ctx context.Context, get func(key string) (stores.Item, error)) error {
	for {
		err := g.check(get)
		h := cas.HoldOf(err)
		if h == nil {
			return err
		}
		if err := h.Await(ctx); err != nil {
			return err
		}
	}
}

// holds reports whether signPub, the signing key of the person's keyring
// entry as stored now, is the one m opened with: a person revoked and
// granted again has a new one, and a handle opened before is not theirs
// any more. A handle without a signing key (layout version 1) holds any.
func (m *member) holds(signPub []byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seed == nil || m.entry == nil {
		return true
	}
	return bytes.Equal(m.entry.signPub, signPub)
}
