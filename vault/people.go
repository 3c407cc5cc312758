package vault

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// ErrPersonExists: Grant named a person who already has access (revoke
// them first to grant another role). Nothing was written.
var ErrPersonExists = errors.New("person already has access to the vault")

// Credential is how a granted person will open the vault: a secret they
// share with the owner (Secret), or an X25519 public key whose private key
// only they hold (PublicKey). Its zero value is no credential; make one
// with Secret or PublicKey. It never prints its secret.
type Credential struct {
	secret []byte
	pub    []byte
}

// Secret returns the credential of a person who opens with secret
// (Config.Secret). The vault keeps no copy of it.
func Secret(secret []byte) Credential { return Credential{secret: slices.Clone(secret)} }

// PublicKey returns the credential of a person who opens with the X25519
// identity whose public key is pub (Config.Identity; crypto.ParsePublicKey
// reads the text form). The owner never learns their private key.
func PublicKey(pub []byte) Credential { return Credential{pub: slices.Clone(pub)} }

// String describes c without its secret.
func (c Credential) String() string {
	switch {
	case c.pub != nil:
		return "vault.PublicKey(" + crypto.EncodePublicKey(c.pub) + ")"
	case c.secret != nil:
		return "vault.Secret(REDACTED)"
	}
	return "vault.Credential(none)"
}

// GoString is String.
func (c Credential) GoString() string { return c.String() }

// Person is one entry of a vault's keyring, as People lists it.
type Person struct {
	// Name is the person's user name (Config.User).
	Name string
	// Role is what the person may do.
	Role Role
	// GrantedBy and GrantedAt say who granted the role, and when (the
	// granter's clock). Both are zero for a keyring entry of layout version
	// 1 (Legacy).
	GrantedBy string
	GrantedAt time.Time
	// Collections limits the person to these collections; empty means all.
	Collections []string
	// Revoked is true once Revoke removed the person's access.
	Revoked bool
	// Identity is true for a person who opens with an X25519 identity
	// rather than a secret.
	Identity bool
	// Legacy is true for a keyring entry of layout version 1: its holder
	// is an owner and has no signing key until UpgradeKeyring.
	Legacy bool
	// SigningKey is the person's Ed25519 public key (nil when Legacy).
	SigningKey []byte
}

// Role returns the role of the person the vault was opened as.
func (v *Vault) Role() Role {
	v.me.mu.Lock()
	defer v.me.mu.Unlock()
	return v.me.role
}

// People lists the vault's keyring: every person granted access, revoked
// ones included, by name. Every entry is checked: one a store altered, or
// one whose grant no owner signed at its place in the ledger (a person
// planted, or granted themselves; see the vault's documentation on
// people), is an error matching ErrTampered, and so is an entry of layout
// version 1 in a vault of the current layout.
func (v *Vault) People(ctx context.Context) ([]Person, error) {
	if err := v.enter(ctx); err != nil {
		return nil, fmt.Errorf("people: %w", err)
	}
	defer v.exit()
	a, err := v.authority(ctx)
	if err != nil {
		return nil, fmt.Errorf("people: %w", err)
	}
	var out []Person
	kp := v.prefix + keyringPrefix
	for it, err := range stores.ListUnder(ctx, v.me.store, kp) {
		if err != nil {
			return nil, fmt.Errorf("people: %w", err)
		}
		name := it.Key[len(kp):]
		e, err := v.checkedEntry(ctx, a, name, it.Value)
		if errors.Is(err, errLedgerRevoked) {
			// The ledger revoked the grant the entry holds: as revoked.
			if e, err = decodeKeyring(it.Value); err == nil {
				e.revoked = true
			}
		}
		if err != nil {
			return nil, fmt.Errorf("people: %w", err)
		}
		if e == nil {
			out = append(out, Person{Name: name, Role: RoleOwner, Legacy: true})
			continue
		}
		out = append(out, Person{
			Name: name, Role: e.role, GrantedBy: e.grantedBy, GrantedAt: time.Unix(0, e.grantedAt).UTC(),
			Collections: e.collections, Revoked: e.revoked, Identity: e.lock == lockIdentity,
			SigningKey: e.signPub,
		})
	}
	return out, nil
}

// readEntry decodes and checks the stored entry of user.
func (v *Vault) readEntry(user string, raw []byte) (*keyringEntry, error) {
	e, err := decodeKeyring(raw)
	if err != nil {
		return nil, fmt.Errorf("keyring entry of %q: %w: %w", user, ErrTampered, err)
	}
	if err := e.verify(v.dk, v.name, user, v.me.header); err != nil {
		return nil, closedIfWiped(err)
	}
	return e, nil
}

// Grant gives user access to the vault with role, opening with cred (a
// Secret or a PublicKey). Only an owner grants (ErrNotPermitted otherwise;
// an owner whose keyring entry is of layout version 1 calls UpgradeKeyring
// first, to get the signing key a grant is signed with). The new keyring
// entry holds the data key wrapped for the person, a signing key of their
// own, and the grant signed by the granter; it is written together with a
// ledger.PersonGranted entry, in one commit on stores with transactions.
// A person granted on a device of a hub opens on the others after Sync.
//
// Given collections, the person may use only those (a writer or reader;
// an owner cannot be limited: ErrInvalidArgument), enforced by keys: they
// hold the first generation's data key, for the vault's internal values
// (counters, ledger entries, sync state), and, from a new generation on,
// only their collections' own keys, never a generation's data key. So the
// grant rotates the keys (see RotateKeys: an owner on a store with
// transactions, else stores.ErrNotSupported) and waits, honouring ctx,
// until every record is re-sealed with the new generation, whose records
// are sealed with their collection's key: afterwards the person cannot
// open a record of another collection even with the raw store and every
// key their keyring entry holds. Later rotations wrap their collections'
// keys of the new generation for them. Through the API a call on another
// collection fails with ErrNotPermitted before touching the store. What
// they can still read with the raw store: the ledger's metadata
// (collection names, record ids, revisions, numbers, hashes), sealed by
// the first generation. When ctx ends before the re-sealing, Grant returns
// its error with the person granted and the re-sealing continuing in the
// background (Vault.Rotation; ResumeRotation after a Close or a crash):
// records not yet re-sealed stay readable by the new person until then.
// SetCollections changes a person's collections later.
//
// Bad input writes nothing: an invalid user or collection name
// (ErrInvalidName, ErrReservedName), an invalid role or an empty
// credential (ErrInvalidArgument), a malformed
// public key (crypto.ErrBadPublicKey and ErrInvalidArgument), a person who
// already has access (ErrPersonExists, also when another owner granted
// them meanwhile). A revoked person may be granted again. Revoke,
// ChangeSecret and a grant with collections racing another change of the
// same person (for a grant with collections: of anyone, as a rotation)
// fail with an error matching stores.ErrConflict, writing nothing: try
// again.
func (v *Vault) Grant(ctx context.Context, user string, cred Credential, role Role, collections ...string) error {
	if err := v.grant(ctx, user, cred, role, collections); err != nil {
		return fmt.Errorf("grant %q: %w", user, err)
	}
	return nil
}

func (v *Vault) grant(ctx context.Context, user string, cred Credential, role Role, collections []string) error {
	if err := CheckCollectionName(user); err != nil {
		return err
	}
	if !role.Valid() {
		return fmt.Errorf("%w: invalid role %d", ErrInvalidArgument, uint8(role))
	}
	switch {
	case cred.pub == nil && len(cred.secret) == 0:
		return fmt.Errorf("%w: no secret or public key", ErrInvalidArgument)
	case cred.pub != nil:
		if err := crypto.CheckPublicKey(cred.pub); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	cols, err := limitTo(role, collections)
	if err != nil {
		return err
	}
	if cols != nil && !transactional(v.me.store) {
		return fmt.Errorf("limiting a person to some collections rotates the keys, which needs a store with transactions: %w", stores.ErrNotSupported)
	}
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	seed, err := v.ownerSeed()
	if err != nil {
		return err
	}
	if err := v.checkStillHeld(ctx, true); err != nil {
		return err
	}
	key := v.prefix + keyringPrefix + user
	old, err := v.me.store.Get(ctx, key)
	var serial uint64 = 1
	switch {
	case errors.Is(err, stores.ErrNotFound):
		old = stores.Item{}
	case err != nil:
		return err
	case !isKeyringV2(old.Value):
		return ErrPersonExists
	default:
		e, err := v.readEntry(user, old.Value)
		if err != nil {
			return err
		}
		if !e.revoked {
			return ErrPersonExists
		}
		serial = e.serial + 1
	}
	h, err := crypto.ParseHeader(v.me.header)
	if err != nil {
		return fmt.Errorf("vault header: %w", err)
	}
	later, err := v.heldGenerations(ctx)
	if err != nil {
		return err
	}
	spec := entrySpec{
		vault: v.name, user: user, grantedBy: v.user, header: v.me.header, role: role,
		at: time.Now(), serial: serial, pub: cred.pub, dk: v.dk, granterSeed: seed,
		later: later, collections: cols,
	}
	if cred.pub == nil {
		spec.salt, spec.kdf = make([]byte, crypto.SaltSize), h.KDF
		if _, err := rand.Read(spec.salt); err != nil {
			return err
		}
		if spec.kek, err = crypto.DeriveUserKey(cred.secret, spec.salt, h.KDF); err != nil {
			return err
		}
		defer spec.kek.Wipe()
	}
	e, pseed, err := spec.build()
	if err != nil {
		return closedIfWiped(err)
	}
	pseed.Wipe()
	entry := ledger.Entry{Kind: ledger.PersonGranted, ID: user, Reason: role.String(), SigningKey: e.signPub, Partition: cols}
	if cols == nil {
		val := e.encode()
		entry.CipherHash = hashOf(val)
		return v.writePeople(ctx, key, old, val, entry)
	}
	// A limited person holds the first generation's data key, which every
	// record sealed before opens with: the grant makes a new generation,
	// whose collection keys are theirs, and re-seals every record with it
	// before returning.
	gen, skipped, err := v.newGeneration(ctx, "grant "+user, &keyringWrite{user: user, old: old.Value, add: e, entry: entry})
	if errors.Is(err, errPeopleChanged) && old.Value == nil {
		if _, gerr := v.me.store.Get(ctx, key); gerr == nil {
			return ErrPersonExists // granted meanwhile
		}
	}
	if err != nil {
		return err
	}
	r := v.startReseal(gen, nil, skipped)
	if err := r.Wait(ctx); err != nil {
		return fmt.Errorf("granted, but the records are not all re-sealed yet (Vault.Rotation follows it; "+
			"ResumeRotation continues it after a Close): %w", err)
	}
	return nil
}

// limitTo checks the collections a grant limits a person to and returns
// them sorted and unique; nil for none (all collections). An owner is
// never limited: they wrap every generation's data key for the others.
func limitTo(role Role, collections []string) ([]string, error) {
	if len(collections) == 0 {
		return nil, nil
	}
	if role == RoleOwner {
		return nil, fmt.Errorf("%w: an owner cannot be limited to some collections", ErrInvalidArgument)
	}
	if len(collections) > ledger.MaxGrantCollections {
		// The grant's ledger entry names them.
		return nil, fmt.Errorf("%w: %d collections, at most %d", ErrInvalidArgument, len(collections), ledger.MaxGrantCollections)
	}
	for _, c := range collections {
		if err := CheckCollectionName(c); err != nil {
			return nil, err
		}
	}
	cols := slices.Clone(collections)
	slices.Sort(cols)
	return slices.Compact(cols), nil
}

// ownerSeed returns the signing key of the vault's person if they are an
// owner who can sign, else ErrNotPermitted.
func (v *Vault) ownerSeed() (*crypto.Key, error) {
	v.me.mu.Lock()
	defer v.me.mu.Unlock()
	if v.me.role != RoleOwner {
		return nil, fmt.Errorf("%q is a %s, only an owner changes people: %w", v.user, v.me.role, ErrNotPermitted)
	}
	if v.me.seed == nil {
		return nil, fmt.Errorf("%q has a keyring entry of layout version 1 and no signing key (call UpgradeKeyring): %w",
			v.user, ErrNotPermitted)
	}
	return v.me.seed, nil
}

// Revoke removes user's access: their keyring entry is replaced by a
// revoked one holding no key, so their secret or identity no longer opens
// the vault (ErrNoAccess), here and, after Sync, on every device. It is
// written with a ledger.PersonRevoked entry. Only an owner revokes
// (ErrNotPermitted), and not the last owner (ErrNotPermitted); revoking a
// person without access is an error matching ErrNotFound. Nothing is
// written on error. Nobody revokes themselves (ErrNotPermitted: what
// their handle wrote afterwards, the rotation's entries first, would be
// signed by a revoked person, which Verify refuses); another owner does.
//
// Revoke rotates the keys (see RotateKeys) in the same commit: a new data
// key generation is wrapped for everyone but the revoked person, records
// written afterwards are sealed with it, and older records are re-sealed
// in the background (Vault.Rotation follows it). So a revoked person who
// kept their old keys, or the keys themselves, and reads the raw store
// cannot open a record written or re-sealed after the revocation. What it
// cannot do: make them forget what they read before, and the vault's
// internal values (ledger entries, counters) stay sealed by the first
// generation (see RotateKeys). RevokeWithoutRotation skips the rotation;
// a store without transactions, and a keyring holding another person's
// entry of layout version 1, cannot rotate: Revoke then fails with
// stores.ErrNotSupported or ErrNotPermitted, writing nothing, unless
// RevokeWithoutRotation is given. On a device of a hub the rotation is
// made on the hub first, as RotateKeys says: out of reach of the hub,
// Revoke fails with an error wrapping sequence.ErrOffline, writing
// nothing (RevokeWithoutRotation works offline and travels with Sync).
// A device that has not synced since keeps sealing with the generation
// the revoked person held until its next Sync brings the revocation.
//
// A handle the revoked person opened before the revocation writes nothing
// afterwards: every commit that appends to the ledger reads its person's
// keyring entry in the commit's own transaction and fails with ErrNoAccess
// once it is revoked, or revoked and granted again (a new signing key),
// for records, numbers, passes and events alike. On a store without
// transactions there is no such commit: the entry is read just before the
// write (a record, a handoff entry, a keyring entry) and again just before
// its ledger entry. A revocation committed between the two keeps that
// write (the record stays, readable by everyone who holds its key) but
// refuses its ledger entry: the call fails with ErrNoAccess, the write has
// no ledger entry, and Verify, which walks the ledger, does not see it.
// A write whose ledger entry commits before the revocation's is, in the
// ledger's order, one made before it.
func (v *Vault) Revoke(ctx context.Context, user string, opts ...RevokeOption) error {
	var o revokeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := v.revoke(ctx, user, o); err != nil {
		return fmt.Errorf("revoke %q: %w", user, err)
	}
	return nil
}

// RevokeOption configures Revoke.
type RevokeOption func(*revokeOptions)

type revokeOptions struct{ keepKeys bool }

// RevokeWithoutRotation makes Revoke leave the data keys as they are: the
// revoked person's keys keep opening every record (with the raw store).
func RevokeWithoutRotation() RevokeOption { return func(o *revokeOptions) { o.keepKeys = true } }

func (v *Vault) revoke(ctx context.Context, user string, o revokeOptions) error {
	if err := CheckCollectionName(user); err != nil {
		return err
	}
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	if _, err := v.ownerSeed(); err != nil {
		return err
	}
	if err := v.checkStillHeld(ctx, true); err != nil {
		return err
	}
	if user == v.user {
		if owners, err := v.activeOwners(ctx); err != nil {
			return err
		} else if owners <= 1 {
			return fmt.Errorf("the last owner cannot be revoked: %w", ErrNotPermitted)
		}
		// Whatever this handle wrote after its own revocation (the
		// rotation's entries, a record, a number) would be signed by a
		// revoked person, which Verify refuses.
		return fmt.Errorf("%w: an owner cannot revoke themselves (what this handle wrote afterwards would fail Verify): "+
			"ask another owner to revoke you", ErrNotPermitted)
	}
	if !o.keepKeys {
		if err := v.readyToRotate(ctx); err != nil { // rotate_hub.go
			return err
		}
	}
	key := v.prefix + keyringPrefix + user
	old, err := v.me.store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		return fmt.Errorf("no such person: %w", ErrNotFound)
	}
	if err != nil {
		return err
	}
	// An entry that fails the check of authority (one planted, or put
	// back) is revoked too: that is how an owner clears it. Only a valid
	// owner's counts for the last owner.
	a, err := v.authority(ctx)
	if err != nil {
		return err
	}
	_, cerr := a.entry(ctx, user, old.Value)
	if cerr != nil && !refused(cerr) {
		return cerr
	}
	tomb := &keyringEntry{user: user, serial: 1, role: RoleOwner, revoked: true, macGen: 1}
	if e, err := decodeKeyring(old.Value); isKeyringV2(old.Value) && err == nil && e.user == user {
		if cerr == nil && e.revoked {
			return fmt.Errorf("already revoked: %w", ErrNotFound)
		}
		*tomb = keyringEntry{
			user: user, serial: e.serial + 1, role: e.role, revoked: true, grantedBy: e.grantedBy,
			grantedAt: e.grantedAt, collections: e.collections, boxPub: e.grantBoxKey(), signPub: e.signPub,
			grantSig: e.grantSig, macGen: 1, // the grant as signed: a renewal since is dropped with the keys
		}
	}
	if tomb.role == RoleOwner && cerr == nil {
		owners, err := v.activeOwners(ctx)
		if err != nil {
			return err
		}
		if owners <= 1 {
			return fmt.Errorf("the last owner cannot be revoked: %w", ErrNotPermitted)
		}
	}
	if cerr != nil && len(a.sources) > 0 {
		// A refused entry (planted, or put back) is not the grant the
		// ledger records: the revocation ends the ledger's, whose key it
		// names (naming the planted entry's would leave the genuine grant
		// standing, and the genuine entry put back would open).
		if p, named := a.sources[0].st.Person(user); named && !p.Revoked && len(p.Key) > 0 {
			tomb.signPub = p.Key
		}
	}
	tomb.seal(v.dk, v.name, v.me.header)
	val := tomb.encode()
	entry := ledger.Entry{Kind: ledger.PersonRevoked, ID: user, CipherHash: hashOf(val), SigningKey: tomb.signPub}
	if o.keepKeys {
		if err := v.writePeople(ctx, key, old, val, entry); err != nil {
			return err
		}
	} else {
		gen, skipped, err := v.newGeneration(ctx, "revoke "+user, &keyringWrite{user: user, old: old.Value, val: val, entry: entry})
		if err != nil {
			return err
		}
		v.startReseal(gen, nil, skipped)
	}
	return nil
}

// activeOwners counts the owners not revoked whose entries pass the check
// of authority (people_ledger.go).
func (v *Vault) activeOwners(ctx context.Context) (int, error) {
	a, err := v.authority(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	kp := v.prefix + keyringPrefix
	for it, err := range stores.ListUnder(ctx, v.me.store, kp) {
		if err != nil {
			return 0, err
		}
		e, err := v.checkedEntry(ctx, a, it.Key[len(kp):], it.Value)
		switch {
		case refused(err):
		case err != nil:
			return 0, err
		case e == nil || (e.role == RoleOwner && !e.revoked):
			n++
		}
	}
	return n, nil
}

// ChangeSecret changes the secret that opens the vault for its person:
// old must be the current one (ErrWrongSecret otherwise, after the same
// key derivation), new must not be empty (ErrInvalidArgument). Afterwards
// old gets ErrWrongSecret and new opens, here and, after Sync, on every
// device. A keyring entry of layout version 1 is rewritten in the current
// layout (see UpgradeKeyring). It is written with a ledger.SecretChanged
// (or ledger.KeyringUpgraded) entry; every role may change its own secret.
// A person who opens with an identity has no secret to change
// (ErrInvalidArgument).
//
// The change also gives the person a new X25519 key pair and a new
// signing key, re-wraps for it everything their keyring entry holds, and
// their live recovery codes get its private key (see renew.go): the old
// secret, with a copy of the store from before, opens nothing made
// afterwards, and the old signing key signs nothing valid (a
// ledger.KeysRenewed entry, signed by it, ends its commit). On a device
// of a hub the change is made on the hub first: out of its reach nothing
// is written. An identity derived from the old secret (DeriveIdentity)
// stops opening; derive it again. Another handle of the person opened
// before the change writes nothing more (an error matching ErrNoAccess):
// open it again. While the change commits, the handle's other writes wait
// for it, outside their commits (a context ending meanwhile ends the
// wait), and then commit, signed with the new key: none fails because the
// change ran.
func (v *Vault) ChangeSecret(ctx context.Context, old, new []byte) error {
	if err := v.changeSecret(ctx, old, new); err != nil {
		return fmt.Errorf("change secret of %q: %w", v.user, err)
	}
	return nil
}

// UpgradeKeyring rewrites the vault person's keyring entry of layout
// version 1 in the current layout, as an owner granted by themselves with
// a new signing key, so that they can grant and revoke; secret is their
// current secret (ErrWrongSecret otherwise). An entry already in the
// current layout is left alone. Other people's version 1 entries keep
// opening; each holder upgrades their own. Once one entry is upgraded the
// ledger is signed, and a handle without a signing key (opened with a
// version 1 entry, its holder's or one upgraded by another handle since)
// writes nothing more (ErrNotPermitted): an unsigned entry after a signed
// one would fail Verify. Its holder calls UpgradeKeyring, or opens again.
//
// On a device of a hub the upgrade is made on the hub first, so that the
// hub's ledger introduces the new signing key before any entry it signs
// reaches the hub: out of reach of the hub it fails with an error
// wrapping sequence.ErrOffline and writes nothing.
func (v *Vault) UpgradeKeyring(ctx context.Context, secret []byte) error {
	v.me.mu.Lock()
	current := v.me.entry != nil
	v.me.mu.Unlock()
	if current {
		return nil
	}
	return v.ChangeSecret(ctx, secret, secret)
}

func (v *Vault) changeSecret(ctx context.Context, oldSecret, newSecret []byte) error {
	if len(newSecret) == 0 {
		return fmt.Errorf("%w: empty new secret", ErrInvalidArgument)
	}
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	if v.hub != nil && v.Role() != RoleReader {
		// The renewal is made on the hub first (writeRenewal), from the
		// entry the hub holds: bring the two keyrings into agreement, as
		// a rotation does. (A reader's device takes the hub's entries at
		// its Sync; a renewal from another one is refused as changed.)
		if err := (&syncRun{v: v, h: v.hub}).keyrings(ctx); err != nil {
			return fmt.Errorf("keys are renewed on the hub: %w", err)
		}
	}
	key := v.prefix + keyringPrefix + v.user
	cur, err := v.me.store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		return fmt.Errorf("user %q: %w", v.user, ErrNoAccess)
	}
	if err != nil {
		return err
	}
	h, err := crypto.ParseHeader(v.me.header)
	if err != nil {
		return fmt.Errorf("vault header: %w", err)
	}
	if !isKeyringV2(cur.Value) {
		return v.upgrade(ctx, key, cur, h, oldSecret, newSecret)
	}
	e, err := v.readEntry(v.user, cur.Value)
	if err != nil {
		return err
	}
	switch {
	case e.revoked:
		return fmt.Errorf("user %q was revoked: %w", v.user, ErrNoAccess)
	case e.lock != lockSecret:
		return fmt.Errorf("%w: %q opens with an identity, not a secret", ErrInvalidArgument, v.user)
	}
	if m := v.signAs; m != nil && !m.holds(e.signPub) {
		// The renewal is written without the ledger's guard (it signs
		// with the key it replaces): this is the guard's check.
		return fmt.Errorf("user %q renewed their keys elsewhere, or was revoked and granted again, since this handle "+
			"opened: open the vault again: %w", v.user, ErrNoAccess)
	}
	// The entry's cost was checked against this opener's ceiling by Open,
	// and the MAC just checked shows it unchanged since.
	kek, err := crypto.DeriveUserKey(oldSecret, e.salt, e.kdf)
	if err != nil {
		return err
	}
	ad := func(p string) []byte { return wrapAD(v.name, v.user, v.me.header, p) }
	box, err := crypto.UnwrapKey(kek, e.boxPriv, ad("box"))
	kek.Wipe()
	if err != nil {
		return ErrWrongSecret
	}
	old := crypto.IdentityFromKey(box)
	defer old.Wipe()
	seed, err := crypto.UnwrapKeyWith(old, e.signPriv, ad("sign"))
	if err != nil {
		return fmt.Errorf("keyring entry of %q: signing key: %w", v.user, ErrTampered)
	}
	defer seed.Wipe()
	salt := make([]byte, crypto.SaltSize)
	if _, err := rand.Read(salt); err != nil {
		return err
	}
	nkek, err := crypto.DeriveUserKey(newSecret, salt, e.kdf)
	if err != nil {
		return err
	}
	defer nkek.Wipe()
	// A new key pair and signing key, everything the person holds
	// re-wrapped for it, and the person's live recovery codes given its
	// private key (renew.go).
	ren, err := e.renew(v.name, v.me.header, old, seed, nkek, salt)
	if err != nil {
		return closedIfWiped(err)
	}
	ren.entry.seal(v.dk, v.name, v.me.header)
	val := ren.entry.encode()
	ws := []entryWrite{{key: key, old: cur, val: val, hub: hubSame}}
	rit, r, err := v.readRecovery(ctx)
	if err != nil {
		ren.wipe()
		return err
	}
	if r != nil && bytes.Equal(r.boxPub, e.boxPub) {
		nr, err := r.renewed(v.name, v.me.header, ren.entry.boxPub, ren.box.Key())
		if err != nil {
			ren.wipe()
			return closedIfWiped(err)
		}
		nr.seal(v.dk, v.name, v.me.header)
		// On the hub in the same write as the keyring entry: a code
		// recovers there at once (the entry's slots now open the new key
		// pair only).
		ws = append(ws, entryWrite{key: v.recoveryKey(), old: rit, val: nr.encode(), hub: hubSerial})
	}
	err = v.writeRenewal(ctx, ws, []ledger.Entry{
		{Kind: ledger.SecretChanged, ID: v.user, CipherHash: hashOf(val)},
		{Kind: ledger.KeysRenewed, ID: v.user, CipherHash: hashOf(val), SigningKey: ren.entry.signPub},
	}, errPeopleChanged, ren, seed, func() { v.me.renewed(ren) })
	if err != nil {
		ren.wipe()
		return err
	}
	return nil
}

// upgrade rewrites a version 1 entry, unlocked by oldSecret, as a version
// 2 owner entry locked by newSecret.
func (v *Vault) upgrade(ctx context.Context, key string, old stores.Item, h crypto.Header, oldSecret, newSecret []byte) error {
	kek, err := crypto.DeriveUserKey(oldSecret, h.Salt[:], h.KDF)
	if err != nil {
		return err
	}
	dk, err := crypto.UnwrapKey(kek, old.Value, keyringAD(v.name, v.user, v.me.header))
	kek.Wipe()
	if err != nil {
		return ErrWrongSecret
	}
	same := crypto.EqualMAC(dk.MAC([]byte("same")), v.dk.MAC([]byte("same")))
	dk.Wipe()
	if !same {
		return fmt.Errorf("keyring entry of %q holds another data key: %w", v.user, ErrTampered)
	}
	spec := entrySpec{
		vault: v.name, user: v.user, grantedBy: v.user, header: v.me.header, role: RoleOwner,
		at: time.Now(), serial: 1, dk: v.dk, salt: make([]byte, crypto.SaltSize), kdf: h.KDF,
	}
	if _, err := rand.Read(spec.salt); err != nil {
		return err
	}
	if spec.kek, err = crypto.DeriveUserKey(newSecret, spec.salt, h.KDF); err != nil {
		return err
	}
	defer spec.kek.Wipe()
	e, seed, err := spec.build()
	if err != nil {
		return closedIfWiped(err)
	}
	val := e.encode()
	// The entry is signed with the new key it introduces.
	v.me.mu.Lock()
	v.me.entry, v.me.seed = e, seed
	v.me.mu.Unlock()
	holders, err := v.legacyHolders(ctx)
	if err != nil {
		return err
	}
	up := ledger.Entry{Kind: ledger.KeyringUpgraded, ID: v.user, Reason: RoleOwner.String(), CipherHash: hashOf(val),
		SigningKey: e.signPub, Partition: holders}
	err = v.upgradeOnHub(ctx, key, old.Value, val, up)
	if err == nil {
		err = v.writePeople(ctx, key, old, val, up)
	}
	v.me.mu.Lock()
	defer v.me.mu.Unlock()
	if err != nil {
		v.me.entry, v.me.seed = nil, nil
		seed.Wipe()
		return err
	}
	v.me.role = RoleOwner
	return nil
}

// legacyHolders names, sorted, the people whose keyring entries are of
// layout version 1, for an upgrade's ledger entry: the vault's first
// upgrade records who may upgrade after it (ledger.KeyringUpgraded), so
// that an entry of that layout written later (by anyone holding the first
// generation's key) is not taken for a holder's. Nil when they are more
// than a ledger entry names (ledger.MaxGrantCollections): the upgrade
// then records none, as upgrades written before they did.
func (v *Vault) legacyHolders(ctx context.Context) ([]string, error) {
	var out []string
	kp := v.prefix + keyringPrefix
	for it, err := range stores.ListUnder(ctx, v.me.store, kp) {
		if err != nil {
			return nil, err
		}
		if !isKeyringV2(it.Value) {
			out = append(out, it.Key[len(kp):])
		}
	}
	if len(out) > ledger.MaxGrantCollections {
		return nil, nil
	}
	slices.Sort(out)
	return out, nil
}

func hashOf(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// errPeopleChanged: the keyring entry changed between reading and writing
// (another owner, or another device, changed the person meanwhile).
var errPeopleChanged = fmt.Errorf("the keyring entry changed meanwhile (try again): %w", stores.ErrConflict)

// errEntryMoved is errPeopleChanged inside a ledger batch, where an error
// matching stores.ErrConflict would make the batch run again.
var errEntryMoved = errors.New("keyring entry moved")

// writePeople replaces the keyring entry at key, which must still be old
// (a zero Item: absent), with val, and appends e to the ledger: in one
// transaction on a store with transactions; else by compare-and-swap of
// the entry, then the ledger entry (a crash between them leaves the change
// without its entry). A reader's vault, whose ledger writes nothing,
// appends through a ledger of its own for the change of its own secret.
func (v *Vault) writePeople(ctx context.Context, key string, old stores.Item, val []byte, e ledger.Entry) error {
	l := v.ledger
	if v.me.store != v.store {
		l = newLedger()(v.me.store, v.seal, v.macer, v.prefix, v.ledgerOptions())
		defer func() { _ = l.Close() }()
	}
	// A person granted meanwhile is ErrPersonExists for a grant.
	changed := errPeopleChanged
	if old.Value == nil {
		changed = ErrPersonExists
	}
	if _, ok := v.me.store.(stores.Transactor); ok && v.me.store.Capabilities().Transactions {
		// The keyring entry is read first, with the head, as the ledger's
		// guard reads its person's (lock order on PostgreSQL).
		err := l.UpdateKeys(ctx, []string{key}, func(tx stores.Tx) error {
			it, err := tx.Get(key)
			switch {
			case errors.Is(err, stores.ErrNotFound):
				if old.Value != nil {
					return errEntryMoved
				}
			case err != nil:
				return err
			case !bytes.Equal(it.Value, old.Value):
				return errEntryMoved
			}
			if err := tx.Put(key, val); err != nil {
				return err
			}
			_, err = l.AppendTx(ctx, tx, e)
			return err
		})
		if errors.Is(err, errEntryMoved) {
			return changed
		}
		return closedIfWiped(err)
	}
	// The entry is written before its ledger entry, whose commit asks the
	// guard only then: ask it first.
	if err := v.mayChangePeople(ctx); err != nil {
		return err
	}
	if _, err := v.me.store.CompareAndSwap(ctx, key, old.Version, val); err != nil {
		if errors.Is(err, stores.ErrConflict) {
			return changed
		}
		return err
	}
	_, err := l.Append(ctx, e)
	return closedIfWiped(err)
}

// SetCollections changes the collections user may use: collections names
// them (a writer or reader only: ErrInvalidArgument for an owner), none
// gives access to all. Only an owner changes it (ErrNotPermitted); a
// person without access is an error matching ErrNotFound. The person's
// keyring entry is granted again by the caller, with a ledger.PersonGranted
// entry. It takes effect for the handles they open afterwards, and for
// those they hold open: a narrowing at a handle's next key load (its next
// write, or a read of a record of the new generation), a collection given
// at the handle's next call on it outside a Tx (see CollectionOf), which
// loads its keys without a reopen.
//
// Giving more (collections added, or all) wraps for the person the keys
// they lacked: each added collection's key of every generation since
// they were limited, or every generation's data key. Taking any
// collection away rotates the keys and waits for every record to be
// re-sealed, as a Grant with collections does (see Grant, also for ctx
// and a store without transactions): records of a collection taken away
// then open with no key the person holds, although they may have read
// them before. Setting the collections the person already has writes
// nothing.
func (v *Vault) SetCollections(ctx context.Context, user string, collections ...string) error {
	if err := v.setCollections(ctx, user, collections); err != nil {
		return fmt.Errorf("set collections of %q: %w", user, err)
	}
	return nil
}

func (v *Vault) setCollections(ctx context.Context, user string, collections []string) error {
	if err := CheckCollectionName(user); err != nil {
		return err
	}
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	seed, err := v.ownerSeed()
	if err != nil {
		return err
	}
	if err := v.checkStillHeld(ctx, true); err != nil {
		return err
	}
	if v.rotatesOnHub() {
		// A narrowing rotates on the hub, from the hub's entry of the
		// person (which their own renewal reaches first): bring the
		// keyrings into agreement before reading it, as Revoke does.
		if err := v.readyToRotate(ctx); err != nil {
			return err
		}
	}
	key := v.prefix + keyringPrefix + user
	old, err := v.me.store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		return fmt.Errorf("no such person: %w", ErrNotFound)
	}
	if err != nil {
		return err
	}
	if !isKeyringV2(old.Value) {
		return fmt.Errorf("%w: %q is an owner (keyring entry of layout version 1)", ErrInvalidArgument, user)
	}
	e, err := v.readEntry(user, old.Value)
	if err != nil {
		return err
	}
	if e.revoked {
		return fmt.Errorf("revoked: %w", ErrNotFound)
	}
	// The entry's grant must hold (an entry planted, or put back as it was
	// before a revocation, does not): by this device's ledger, so that
	// SetCollections works offline (people_ledger.go).
	a, err := v.authority(ctx)
	if err != nil {
		return err
	}
	if err := a.check(ctx, e, 0); err != nil {
		return err
	}
	cols, err := limitTo(e.role, collections)
	if err != nil {
		return err
	}
	if slices.Equal(cols, e.collections) {
		return nil
	}
	narrows := cols != nil && e.collections == nil
	for _, c := range e.collections {
		if _, ok := slices.BinarySearch(cols, c); cols != nil && !ok {
			narrows = true
		}
	}
	if narrows && !transactional(v.me.store) {
		return fmt.Errorf("taking collections away rotates the keys, which needs a store with transactions: %w", stores.ErrNotSupported)
	}
	held, err := v.heldGenerations(ctx)
	if err != nil {
		return err
	}
	ne := *e
	ne.serial, ne.collections, ne.grantedBy, ne.grantedAt = e.serial+1, cols, v.user, time.Now().UnixNano()
	// The new grant names the person's current box key (a renewal of it
	// since the last grant, checked when the entry was read, is folded
	// in); the earlier key pairs stay (prev, see renew.go).
	ne.grantBox, ne.renewSig = nil, nil
	ne.grantSign, ne.signRenewals = nil, nil // the new grant names the current signing key
	if err := ne.rewrap(v.name, v.me.header, e, held); err != nil {
		return closedIfWiped(err)
	}
	if ne.grantSig, err = crypto.Sign(seed, grantStatement(v.name, v.me.header, &ne)); err != nil {
		return closedIfWiped(err)
	}
	entry := ledger.Entry{Kind: ledger.PersonGranted, ID: user, Reason: e.role.String(), SigningKey: ne.signPub, Partition: cols}
	if !narrows {
		ne.seal(v.dk, v.name, v.me.header)
		val := ne.encode()
		entry.CipherHash = hashOf(val)
		return v.writePeople(ctx, key, old, val, entry)
	}
	gen, skipped, err := v.newGeneration(ctx, "collections of "+user, &keyringWrite{user: user, old: old.Value, add: &ne, entry: entry})
	if err != nil {
		return err
	}
	if err := v.startReseal(gen, nil, skipped).Wait(ctx); err != nil {
		return fmt.Errorf("changed, but the records are not all re-sealed yet (Vault.Rotation follows it; "+
			"ResumeRotation continues it after a Close): %w", err)
	}
	return nil
}

// rewrap sets the wrapped keys of e, whose collections changed from
// those of was, from the data keys held by generation: every generation
// for a person no longer limited; else generation 1, the collection keys
// was held for collections kept, and each added collection's key of every
// generation from the first was held a collection key of (none when was
// was not limited: the caller rotates, and the new generation's keys are
// added then).
func (e *keyringEntry) rewrap(vaultName string, header []byte, was *keyringEntry, held map[uint64]*crypto.Key) error {
	ad := func(p string) []byte { return wrapAD(vaultName, e.user, header, p) }
	e.gens, e.colKeys = nil, nil
	if e.collections == nil {
		for _, g := range slices.Sorted(maps.Keys(held)) {
			w, err := crypto.WrapKeyTo(e.boxPub, held[g], ad(genPurpose(g)))
			if err != nil {
				return err
			}
			e.gens = append(e.gens, wrappedGen{gen: g, key: w})
		}
		return nil
	}
	for _, g := range was.gens {
		if g.gen == 1 {
			e.gens = append(e.gens, g)
		}
	}
	from := uint64(math.MaxUint64)
	for _, c := range was.colKeys {
		from = min(from, c.gen)
		if _, ok := slices.BinarySearch(e.collections, c.name); ok {
			e.colKeys = append(e.colKeys, c)
		}
	}
	for _, c := range e.collections {
		if _, ok := slices.BinarySearch(was.collections, c); ok {
			continue
		}
		for _, g := range slices.Sorted(maps.Keys(held)) {
			if g < from || g < 2 {
				continue
			}
			ck := crypto.CollectionKey(held[g], c)
			w, err := crypto.WrapKeyTo(e.boxPub, ck, ad(colPurpose(g, c)))
			ck.Wipe()
			if err != nil {
				return err
			}
			e.colKeys = append(e.colKeys, wrappedCol{name: c, gen: g, key: w})
		}
	}
	return nil
}

// checkStillHeld reads the keyring entry of the vault's person from the
// store and refuses a handle whose person was revoked since it opened
// (ErrNoAccess) or, with owner, who is no longer an owner
// (ErrNotPermitted): a handle opened before a revocation by another owner
// must not grant, revoke, rotate or issue recovery codes in the name of a
// person the ledger already records as revoked (Verify would refuse it,
// and a grant would let someone in), nor one whose person was revoked and
// granted again (a new signing key: the handle's is no longer theirs). A
// keyring entry of layout version 1
// (an owner from before roles) carries no revocation and passes. It reads
// outside the write's own commit: a revocation racing the call is not
// caught here (Verify still refuses what follows it).
func (v *Vault) checkStillHeld(ctx context.Context, owner bool) error {
	it, err := v.me.store.Get(ctx, v.prefix+keyringPrefix+v.user)
	if errors.Is(err, stores.ErrNotFound) {
		return fmt.Errorf("user %q has no keyring entry any more: %w", v.user, ErrNoAccess)
	}
	if err != nil {
		return err
	}
	if !isKeyringV2(it.Value) {
		return nil
	}
	e, err := v.readEntry(v.user, it.Value)
	if err != nil {
		return err
	}
	if e.revoked {
		return fmt.Errorf("user %q was revoked: %w", v.user, ErrNoAccess)
	}
	if owner && e.role != RoleOwner {
		return fmt.Errorf("%q is now a %s, only an owner changes people: %w", v.user, e.role, ErrNotPermitted)
	}
	if m := v.signAs; m != nil && !m.holds(e.signPub) {
		return fmt.Errorf("user %q was revoked and granted again since this handle opened: %w", v.user, ErrNoAccess)
	}
	return nil
}
