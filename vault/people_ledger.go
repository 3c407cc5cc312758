package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// Authority from a chain of signed grants.
//
// A keyring entry's MAC is keyed by the first generation's data key, which
// every person ever granted held: it keeps a store (which holds no key)
// from changing an entry, not a person of the vault. What a person may do
// comes from the ledger instead: its signed people entries, replayed in
// order (ledger.PeopleState), say who was granted which role with which
// signing key by whom, and who was revoked; each counts only when signed
// by an owner who held that role, not revoked, at its position, back to
// the vault's first owner, the one person who granted themselves (see
// ledger/people.go). A keyring entry is valid (authority.check) when the
// ledger's latest grant of its person names its signing key, role and
// collections (or wider ones), and its grant statement is signed by its
// granter's key as the ledger knows it; the genesis owner's entry is the
// only one granted by itself, but for the holders of a vault of layout
// version 1, who granted themselves on their upgrade. Opening, People,
// rotation (which wraps new keys), the copies of a sync and the hub's
// ledger all ask that one check; an entry that fails it is ErrTampered
// and gets nothing.
//
// A person no ledger the check reads names (granted on another device of a
// hub, before this device's ledger or the hub's heard of them) is taken
// from the keyring's chain of grants: granted by an owner whose own entry
// passes the check, not revoked, and so on up to the genesis owner. The
// chain cannot say when a granter was revoked, so a grant by a revoked
// granter that no ledger records is refused.
//
// Cost: the ledger links its people entries (each names the one before,
// and its head the last), so the replay reads the people commits only:
// an open, People and a sync cost in proportion to the changes of people,
// not to the ledger (a ledger written before links were is read whole
// once, up to where they begin). A rotation, which hands out keys, reads
// every entry instead (once per process, then what was appended since):
// a head whose link someone holding the first generation's key turned
// back to an older people entry would hide the later ones from a replay
// by links; a replay of every entry, and Verify, refuse such a head.

// peopleIndex follows the people entries of the vault's ledger.
type peopleIndex struct {
	mu sync.Mutex
	st ledger.PeopleState
}

// replays shares the replays of people of each ledger in the process (by
// store, prefix and chain key): an open of a vault continues from where
// the last replay of its ledger stopped, in any handle, rather than
// reading the ledger from its start. A replay checks that the ledger still
// holds what it replayed, and starts over when not. A store that is a
// pointer is held weakly: the share does not keep a store the program
// dropped (with all its data) in memory, and its replay goes with it.
var replays struct {
	mu sync.Mutex
	m  map[replayKey]*peopleIndex
}

type replayKey struct {
	store  any                // a store that is not a pointer, by value
	ptr    weak.Pointer[byte] // a store that is a pointer, held weakly
	prefix string
	chain  string // a MAC of the chain key: another key is another ledger
}

// maxReplays bounds the replays kept: a process opening many vaults
// drops the oldest one it kept (a later open replays that ledger again).
const maxReplays = 256

// peopleIndexOf returns the replay of v's ledger shared in the process,
// or v's own when its store cannot be told apart from another's.
func (v *Vault) peopleIndexOf() *peopleIndex {
	st := replayStore(v.keyringStore0())
	k := replayKey{prefix: v.prefix, chain: string(v.macer.MAC([]byte("noydb people replay")))}
	if rv := reflect.ValueOf(st); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		k.ptr = weak.Make((*byte)(rv.UnsafePointer()))
	} else if comparableValue(st) {
		k.store = st
	} else {
		return &v.people
	}
	replays.mu.Lock()
	defer replays.mu.Unlock()
	if ix := replays.m[k]; ix != nil {
		return ix
	}
	if len(replays.m) >= maxReplays {
		// The replays of stores the program dropped go first.
		for old := range replays.m {
			if old.store == nil && old.ptr.Value() == nil {
				delete(replays.m, old)
			}
		}
	}
	if replays.m == nil || len(replays.m) >= maxReplays {
		replays.m = map[replayKey]*peopleIndex{}
	}
	ix := &peopleIndex{}
	replays.m[k] = ix
	runtime.KeepAlive(st)
	return ix
}

// replayStore returns the store under the wrappers the vault puts around
// it (checkStore's, and the hub's timeout): they are values holding it,
// each open a new one, and the ledger they reach is the store's.
func replayStore(st stores.Store) stores.Store {
	for {
		switch w := st.(type) {
		case vaultStore:
			st = w.unchecked()
		case interface{ hubInner() stores.Store }:
			st = w.hubInner()
		default:
			return st
		}
	}
}

// comparableValue reports whether x can be a map key (a store that is a
// struct holding a map, say, cannot).
func comparableValue(x any) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = map[any]bool{x: true}
	return true
}

// ledgerBelow returns the ledger l wraps (seriesLedger, which checks
// what entries number), whose optional methods (ledger.PeopleReplayer,
// ledger.VerifiedReader) the wrapper does not carry.
func ledgerBelow(l writableLedger) writableLedger {
	if s, ok := l.(seriesLedger); ok {
		return s.writableLedger
	}
	return l
}

// peopleState returns the replay of the people entries of v's ledger up to
// its head, as a copy the caller may keep: by the links of the people
// entries (the people commits only), or, with all, reading every entry,
// which no head whose link was turned back can shorten (see
// ledger.PeopleReplayer; a rotation asks for it).
func (v *Vault) peopleState(ctx context.Context, all ...bool) (*ledger.PeopleState, error) {
	r, ok := ledgerBelow(v.ledger).(ledger.PeopleReplayer)
	if !ok {
		return &ledger.PeopleState{}, nil
	}
	ix := v.peopleIndexOf()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	a := v.vouchAuthority()
	replay := r.ReplayPeople
	if len(all) > 0 && all[0] {
		replay = r.ReplayAllPeople
	}
	if err := a.failure(replay(ctx, &ix.st, a.vouch(ctx))); err != nil {
		return nil, fmt.Errorf("read the ledger's people entries: %w", closedIfWiped(err))
	}
	return ix.st.Clone(), nil
}

// keyringStore0 is the store v's keyring is read from: the device's own for
// a device's vault (a reader's too), the hub's for a hub-side vault.
func (v *Vault) keyringStore0() stores.Store {
	if v.me != nil {
		return v.me.store
	}
	return v.store
}

// vouchAuthority is the keyring check that vouches for the authors a
// replay of v's ledger has not introduced: v's keyring, and for a
// hub-side vault the device's first (the hub may have replaced an entry);
// for a device of a hub, the hub's for an entry the device lacks.
func (v *Vault) vouchAuthority() *authority {
	a := v.authorityOf(v.keyringStore0())
	if v.me == nil && v.signAs != nil {
		a.first = v.signAs.store
	}
	if v.me != nil && v.hub != nil {
		a.also = v.hub.store
	}
	return a
}

// header is the vault's header as its person opened it.
func (v *Vault) header() []byte {
	if v.me != nil {
		return v.me.header
	}
	return v.signAs.header
}

// peopleSource is one ledger's replay as an authority reads it. A sure
// source is the ledger of every people change of the keyring (a vault's
// own without a hub, the hub's for a device): a grant it records with
// another key, role or collections than the entry's says the entry is not
// the person's latest. A device's own ledger is not sure: it records the
// changes made on the device, and the keyring may hold later ones made
// elsewhere. Either kind vouches for an entry whose grant it records, and
// a revocation either records is final.
type peopleSource struct {
	st   *ledger.PeopleState
	sure bool
}

// authority checks keyring entries read from st against the people of
// sources (the replays of the ledgers that vouch for them).
type authority struct {
	v       *Vault
	st      stores.Store
	sources []peopleSource
	raw     map[string][]byte // keyring entries read so far (nil value: none)
	gen     *string           // the genesis owner, once known ("": none)
	// first, when set, is read before st for a granter or an author (a
	// hub-side vault: the device's keyring, whose entries the device
	// checked, before the hub's, which the hub may have replaced).
	first stores.Store
	// failed is the first failure of the store vouch met (see failure).
	failed error
	// reload, when set, reads sources again (see fresher).
	reload func(ctx context.Context) ([]peopleSource, error)
	// also, when set, is read for an entry st lacks (a device of a hub:
	// the hub's keyring, for a granter no Sync brought to the device yet,
	// as after a first open with a recovery code).
	also stores.Store
}

// fresher reads a's sources again, as of now, and forgets the keyring
// entries read so far; false when a cannot (no reload) or the read fails.
// A decision against a stored entry read after a's sources were (a
// revocation committed on the hub since, with its entry) is made again
// with sources that hold whatever was committed with that entry.
func (a *authority) fresher(ctx context.Context) bool {
	if a.reload == nil {
		return false
	}
	src, err := a.reload(ctx)
	if err != nil {
		return false
	}
	a.sources, a.raw, a.gen = src, map[string][]byte{}, nil
	return true
}

// authorityOf returns the check of the keyring in st by sources.
func (v *Vault) authorityOf(st stores.Store, sources ...peopleSource) *authority {
	return &authority{v: v, st: st, sources: sources, raw: map[string][]byte{}}
}

// isDevice reports whether v is a device of a hub (opened with it or
// without): its own ledger is not the record of every people change.
func (v *Vault) isDevice() bool { return v.hub != nil || v.hubless }

// authority returns the check of v's keyring by v's own ledger (all: read
// whole, see peopleState).
func (v *Vault) authority(ctx context.Context, all ...bool) (*authority, error) {
	st, err := v.peopleState(ctx, all...)
	if err != nil {
		return nil, err
	}
	return v.authorityOf(v.keyringStore0(), peopleSource{st: st, sure: !v.isDevice()}), nil
}

// hubAuthority returns the check of the hub's keyring for a device of a
// hub: by the hub's ledger, which records the people changes of every
// device (Sync records a device's there before it copies its keyring),
// and by the device's own, for those it made and has not synced yet (all:
// both read whole).
func (v *Vault) hubAuthority(ctx context.Context, all ...bool) (*authority, error) {
	sources := func(ctx context.Context) ([]peopleSource, error) {
		hs, err := v.hub.peopleState(ctx, all...)
		if err != nil {
			return nil, err
		}
		own, err := v.peopleState(ctx, all...)
		if err != nil {
			return nil, err
		}
		return []peopleSource{{st: hs, sure: true}, {st: own}}, nil
	}
	src, err := sources(ctx)
	if err != nil {
		return nil, err
	}
	a := v.authorityOf(v.hub.store, src...)
	a.reload = sources
	return a, nil
}

// errEntry is the ErrTampered of the entry of user failing the check.
func errEntry(user, format string, args ...any) error {
	return fmt.Errorf("keyring entry of %q: %s: %w", user, fmt.Sprintf(format, args...), ErrTampered)
}

// errLedgerRevoked: a keyring entry not revoked whose grant (signing key)
// the ledger revoked: the person is revoked, whatever the entry says (an
// entry put back from before the revocation, or one a device has not
// replaced yet). It matches ErrNoAccess: the entry gets nothing.
var errLedgerRevoked = fmt.Errorf("the ledger revoked this grant: %w", ErrNoAccess)

// refused reports whether err says an entry gets nothing: it fails the
// check (ErrTampered), or the ledger revoked it.
func refused(err error) bool {
	return errors.Is(err, ErrTampered) || errors.Is(err, errLedgerRevoked)
}

// read returns the stored keyring entry of name (nil when there is none).
func (a *authority) read(ctx context.Context, name string) ([]byte, error) {
	if b, ok := a.raw[name]; ok {
		return b, nil
	}
	if a.first != nil {
		it, err := a.first.Get(ctx, a.v.prefix+keyringPrefix+name)
		switch {
		case err == nil:
			if _, derr := a.v.readEntryHeader(name, it.Value, a.v.header()); derr == nil {
				a.raw[name] = it.Value
				return it.Value, nil
			}
		case !errors.Is(err, stores.ErrNotFound):
			return nil, err
		}
	}
	it, err := a.st.Get(ctx, a.v.prefix+keyringPrefix+name)
	if errors.Is(err, stores.ErrNotFound) && a.also != nil {
		it, err = a.also.Get(ctx, a.v.prefix+keyringPrefix+name)
	}
	switch {
	case errors.Is(err, stores.ErrNotFound):
		a.raw[name] = nil
		return nil, nil
	case err != nil:
		return nil, err
	}
	a.raw[name] = it.Value
	return it.Value, nil
}

// entry decodes and checks the stored entry raw of name: its layout and
// MAC (a store's change), then its authority. A revoked entry holds
// nothing and is returned as it is. For an entry of layout version 1 it
// returns nil and no error when the vault is of that layout and the
// ledger knows the holder; else ErrTampered.
func (a *authority) entry(ctx context.Context, name string, raw []byte) (*keyringEntry, error) {
	if !isKeyringV2(raw) {
		return nil, a.legacy(ctx, name)
	}
	e, err := a.v.readEntryHeader(name, raw, a.v.header())
	if err != nil {
		return nil, err
	}
	if e.revoked {
		return e, nil
	}
	if err := a.check(ctx, e, 0); err != nil {
		return nil, err
	}
	return e, nil
}

// check checks the authority of e, an entry not revoked whose MAC holds;
// depth bounds a chain of grants through the keyring.
func (a *authority) check(ctx context.Context, e *keyringEntry, depth int) error {
	known, ok := false, false
	for _, src := range a.sources {
		p, named := src.st.Person(e.user)
		if !named {
			continue
		}
		if slices.ContainsFunc(p.RevokedKeys, func(k []byte) bool { return bytes.Equal(k, e.signPub) }) {
			return fmt.Errorf("user %q: %w (entry %d)", e.user, errLedgerRevoked, p.RevokedSeq)
		}
		if p.Seq == 0 && p.GrantedBy == "" {
			continue // vouched for by the keyring, not recorded: as unnamed
		}
		// The ledger's key, or one the entry renewed (each renewal signed
		// by the key it replaced) that this ledger has not heard of: a
		// renewal made on a device opened without its hub, or a device's
		// own ledger, which records its own changes only.
		if !(bytes.Equal(p.Key, e.signPub) || e.renewedFrom(p.Key)) || p.Revoked {
			// On a device of a hub, a key a ledger that revoked the
			// person never named is a grant made after it on another
			// device, not recorded yet: the chain of grants decides.
			known = known || src.sure && !(p.Revoked && a.v.isDevice() && !namesKey(p, e.signPub))
			continue
		}
		switch {
		case p.Role != e.role.String():
			if src.sure {
				return errEntry(e.user, "a %s, the ledger's grant says %s", e.role, p.Role)
			}
		case !within(e.collections, p.Collections):
			if src.sure {
				return errEntry(e.user, "collections %q beyond the ledger's grant %q", e.collections, p.Collections)
			}
		case a.grantHolds(src.st, e, p):
			ok = true
		default:
			known = known || src.sure
		}
	}
	switch {
	case ok:
		return nil
	case known:
		return errEntry(e.user, "not the grant the ledger records")
	}
	return a.chain(ctx, e, depth, true)
}

// grantHolds reports whether the ledger replay s, whose latest grant of
// e's person is p (with e's signing key), vouches for e's grant statement.
func (a *authority) grantHolds(s *ledger.PeopleState, e *keyringEntry, p ledger.PersonState) bool {
	stmt := grantStatement(a.v.name, a.v.header(), e)
	if e.grantedBy == e.user {
		// The genesis owner, or a holder of layout version 1 upgraded.
		if p.GrantedBy != e.user || (!p.Legacy && s.Genesis() != e.user) {
			return false
		}
		return crypto.VerifySignature(e.grantSignKey(), stmt, e.grantSig)
	}
	if e.grantedBy == p.GrantedBy && crypto.VerifySignature(p.GranterKey, stmt, e.grantSig) {
		return true
	}
	// An owner recorded the grant another made (a hub's ledger records
	// those of its devices): the entry's granter signed it with a key the
	// replay gives them as an owner.
	g, named := s.Person(e.grantedBy)
	if !named {
		return false
	}
	for _, h := range g.Held {
		if h.Role == RoleOwner.String() && crypto.VerifySignature(h.Key, stmt, e.grantSig) {
			return true
		}
	}
	return false
}

// within reports whether the collections cols are among limit's (nil:
// all of them).
func within(cols, limit []string) bool {
	if limit == nil {
		return true
	}
	if cols == nil {
		return false
	}
	for _, c := range cols {
		if _, ok := slices.BinarySearch(limit, c); !ok {
			return false
		}
	}
	return true
}

// maxGrantDepth bounds a chain of grants the keyring vouches for.
const maxGrantDepth = 64

// chain checks e, whom no ledger names, by the keyring's chain of grants:
// the genesis owner, or granted by an owner whose entry passes the check
// (with the ledgers when withStates) and who is not revoked.
func (a *authority) chain(ctx context.Context, e *keyringEntry, depth int, withStates bool) error {
	stmt := grantStatement(a.v.name, a.v.header(), e)
	if e.grantedBy == e.user {
		g, err := a.genesis(ctx)
		if err != nil {
			return err
		}
		if g == e.user && crypto.VerifySignature(e.grantSignKey(), stmt, e.grantSig) {
			return nil
		}
		return errEntry(e.user, "granted by themselves, and not the vault's first owner")
	}
	if depth >= maxGrantDepth {
		return errEntry(e.user, "a chain of grants longer than %d", maxGrantDepth)
	}
	raw, err := a.read(ctx, e.grantedBy)
	if err != nil {
		return err
	}
	if raw == nil || !isKeyringV2(raw) {
		return errEntry(e.user, "granter %q has no signing key", e.grantedBy)
	}
	g, err := a.v.readEntryHeader(e.grantedBy, raw, a.v.header())
	if err != nil {
		return errEntry(e.user, "granter %q: %v", e.grantedBy, err)
	}
	switch {
	case g.revoked && withStates:
		// (Vouching for a ledger's author, withStates false, a grant
		// made before the granter's revocation stands: the ledger
		// orders them.)
		return errEntry(e.user, "granter %q is revoked, and no ledger says the grant came before", e.grantedBy)
	case g.role != RoleOwner:
		return errEntry(e.user, "granter %q is a %s", e.grantedBy, g.role)
	case !crypto.VerifySignature(g.signPub, stmt, e.grantSig):
		return errEntry(e.user, "grant signature")
	}
	if withStates {
		err = a.check(ctx, g, depth+1)
	} else {
		err = a.chain(ctx, g, depth+1, false)
	}
	if err != nil {
		return errEntry(e.user, "granter: %v", err)
	}
	return nil
}

// genesis returns the vault's first owner: the genesis of a ledger
// replay, else the one person of the keyring who granted themselves
// (whose MAC holds); "" when there is none or more than one.
func (a *authority) genesis(ctx context.Context) (string, error) {
	if a.gen != nil {
		return *a.gen, nil
	}
	for _, src := range a.sources {
		if g := src.st.Genesis(); g != "" {
			a.gen = &g
			return g, nil
		}
	}
	var roots []string
	kp := a.v.prefix + keyringPrefix
	for _, st := range []stores.Store{a.st, a.also} {
		if st == nil || len(roots) > 0 {
			break
		}
		for it, err := range stores.ListUnder(ctx, st, kp) {
			if err != nil {
				return "", err
			}
			name := it.Key[len(kp):]
			if !isKeyringV2(it.Value) {
				continue
			}
			e, err := a.v.readEntryHeader(name, it.Value, a.v.header())
			if errors.Is(err, ErrClosed) {
				return "", err
			}
			if err == nil && e.grantedBy == e.user {
				roots = append(roots, name)
			}
		}
	}
	g := ""
	if len(roots) == 1 {
		g = roots[0]
	}
	a.gen = &g
	return g, nil
}

// legacy checks a keyring entry of layout version 1 of name: accepted in a
// vault of that layout (its ledger began unsigned or with an upgrade, or
// is empty and its keyring holds no entry of the current layout), for a
// holder the first upgrade named (when it named them) and whose own
// upgrade the ledger does not hold.
func (a *authority) legacy(ctx context.Context, name string) error {
	legacy := false
	for _, src := range a.sources {
		s := src.st
		if s.Legacy() {
			legacy = true
		}
		if h := s.Holders(); h != nil {
			if _, ok := slices.BinarySearch(h, name); !ok {
				return errEntry(name, "layout version 1, not a holder the vault's upgrade named")
			}
		}
		if p, named := s.Person(name); named && p.Legacy {
			return errEntry(name, "layout version 1, upgraded by the ledger's entry %d", p.Seq)
		}
	}
	if !legacy {
		empty := true
		for _, src := range a.sources {
			if src.st.Next() > 1 {
				empty = false
			}
		}
		if empty {
			kp := a.v.prefix + keyringPrefix
			for it, err := range stores.ListUnder(ctx, a.st, kp) {
				if err != nil {
					return err
				}
				if isKeyringV2(it.Value) {
					empty = false
					break
				}
			}
		}
		legacy = empty
	}
	if !legacy {
		return errEntry(name, "layout version 1 in a vault of the current layout")
	}
	return nil
}

// vouch is what the keyring says of the author of a people commit a
// replay has not introduced (ledger.PeopleVouch): the person who granted
// themselves, as a candidate genesis, or an owner whose chain of grants
// through the keyring leads to them.
//
// A failure to read the keyring (the store's, not a check's) is kept in
// a.failed: the caller reports it rather than the unknown signer the
// replay sees (see failure).
//
// A hub-side vault reads the device's entry first (a.first); when the
// hub's is newer (the person was revoked and granted again on another
// device, whose handles brought the new entry to the hub before this
// device's Sync brings it here), the hub's vouches, with the device's key
// as the one they held before: the ledger tells them apart by position.
func (a *authority) vouch(ctx context.Context) ledger.PeopleVouch {
	return func(name string) (ledger.Vouched, bool) {
		raw, err := a.read(ctx, name)
		if err != nil {
			if a.failed == nil {
				a.failed = err
			}
			return ledger.Vouched{}, false
		}
		if raw == nil || !isKeyringV2(raw) {
			return ledger.Vouched{}, false
		}
		v, ok := a.vouchFor(ctx, name, raw)
		if a.first != nil {
			it, err := a.st.Get(ctx, a.v.prefix+keyringPrefix+name)
			if err == nil && keyringNewer(it.Value, raw) {
				if h, hok := a.vouchFor(ctx, name, it.Value); hok {
					if ok && !bytes.Equal(v.Key, h.Key) {
						h.Earlier = v.Key
					}
					return h, true
				}
			}
		}
		return v, ok
	}
}

// vouchFor is vouch for the stored entry raw of name.
func (a *authority) vouchFor(ctx context.Context, name string, raw []byte) (ledger.Vouched, bool) {
	e, err := a.v.readEntryHeader(name, raw, a.v.header())
	if errors.Is(err, ErrClosed) && a.failed == nil {
		a.failed = err
	}
	if err != nil {
		return ledger.Vouched{}, false
	}
	// A revoked entry keeps the key its person's past commits were
	// signed with: the ledger's PersonRevoked entry ends it at its
	// position (the keyring's revocation has none in this ledger,
	// as for Verify).
	stmt := grantStatement(a.v.name, a.v.header(), e)
	if e.grantedBy == e.user {
		if e.role != RoleOwner || !crypto.VerifySignature(e.grantSignKey(), stmt, e.grantSig) {
			return ledger.Vouched{}, false
		}
		return ledger.Vouched{Key: e.signPub, Renewed: e.renewedSignKeys(), Role: RoleOwner.String(), Root: true}, true
	}
	if err := a.chain(ctx, e, 0, false); err != nil {
		// The grant chain of an author (revoked or not) whose
		// granters may be revoked since: their grants before stand.
		if !errors.Is(err, ErrTampered) && a.failed == nil {
			a.failed = err
		}
		return ledger.Vouched{}, false
	}
	return ledger.Vouched{Key: e.signPub, Renewed: e.renewedSignKeys(), Role: e.role.String()}, true
}

// failure is err, or, when vouch met a failure of the store meanwhile,
// that failure: an unknown signer the replay reports because the keyring
// could not be read is that read's error, not tampering.
func (a *authority) failure(err error) error {
	if err != nil && a.failed != nil {
		return a.failed
	}
	return err
}

// readEntryHeader decodes the stored entry of user and checks its MAC
// under header (a store's change is ErrTampered).
func (v *Vault) readEntryHeader(user string, raw, header []byte) (*keyringEntry, error) {
	e, err := decodeKeyring(raw)
	if err != nil {
		return nil, fmt.Errorf("keyring entry of %q: %w: %w", user, ErrTampered, err)
	}
	if err := e.verify(v.dk, v.name, user, header); err != nil {
		return nil, closedIfWiped(err)
	}
	return e, nil
}

// agrees reports whether the stored entry raw of name is in the state the
// ledgers of a say: an entry not revoked that passes the check, or a
// revoked one whose key a ledger records as revoked (a revocation either
// records is final, and a key is never granted again), or whose person no
// ledger names as granted with its key and not revoked since. A device's
// own ledger names as granted a grant made there; revoked on another
// device, its revoked entry must still reach the device, or the device
// holds the person as granted for good.
func (a *authority) agrees(ctx context.Context, name string, raw []byte) bool {
	if !isKeyringV2(raw) {
		return a.legacy(ctx, name) == nil
	}
	e, err := a.v.readEntryHeader(name, raw, a.v.header())
	if err != nil {
		return false
	}
	if !e.revoked {
		return a.check(ctx, e, 0) == nil
	}
	for _, src := range a.sources {
		if p, named := src.st.Person(name); named && len(e.signPub) > 0 &&
			slices.ContainsFunc(p.RevokedKeys, func(k []byte) bool { return bytes.Equal(k, e.signPub) }) {
			return true
		}
	}
	for _, src := range a.sources {
		if p, named := src.st.Person(name); named && p.Seq > 0 && !p.Revoked && bytes.Equal(p.Key, e.signPub) {
			return false
		}
	}
	return true
}

// preferLedger wraps a keyring merge (see copyKeyringWith) for the copy
// between a device and its hub: of two entries of a person, one agreeing
// with the ledgers (authority.agrees) and the other not, the agreeing one
// is kept, whatever their serials (dst itself is returned to keep it). A
// serial alone would let secret changes made on the person's device while
// an owner narrowed their collections undo the narrowing: they raise the
// entry of the wider grant past the narrowing's. Otherwise merge decides.
//
// Two grants of one person made on two devices before either heard of the
// other (each with a key of its own, neither entry newer) both agree with
// the ledgers, each device's own vouching for its grant: the one a sure
// source (the hub's ledger) records wins over one whose key it never
// named; when it names neither, the one the hub holds (the first to reach
// it: the person may have written through the hub with it). So every
// device ends with the same grant (devicePeople records on the other
// device's ledger its own as revoked).
//
// The ledgers were read before dst: when they would have src replace dst,
// they are read again first (authority.fresher), so that a change of
// people committed meanwhile with dst (a revocation on the hub) counts:
// else the copy would put back the entry it revoked.
func preferLedger(ctx context.Context, a *authority, merge func(src, dst []byte) []byte) func(src, dst []byte) []byte {
	return func(src, dst []byte) []byte {
		if isKeyringV2(src) && isKeyringV2(dst) {
			es, serr := decodeKeyring(src)
			ed, derr := decodeKeyring(dst)
			if serr == nil && derr == nil && es.user == ed.user {
				pick := a.prefer(ctx, es, ed, src, dst)
				if pick != nil && bytes.Equal(pick, src) {
					if !a.fresher(ctx) {
						return dst
					}
					pick = a.prefer(ctx, es, ed, src, dst)
				}
				if pick != nil {
					return pick
				}
			}
		}
		return mergeOrNil(merge, src, dst)
	}
}

// prefer is preferLedger's choice between src and dst, the stored entries
// es and ed of one person: the one agreeing with a's ledgers, nil for
// neither.
func (a *authority) prefer(ctx context.Context, es, ed *keyringEntry, src, dst []byte) []byte {
	as, ad := a.agrees(ctx, es.user, src), a.agrees(ctx, ed.user, dst)
	switch {
	case as && ad && !es.revoked && !ed.revoked && !keyringNewer(src, dst) && !keyringNewer(dst, src) &&
		!bytes.Equal(es.signPub, ed.signPub):
		// Two grants made apart.
		ns, nd := a.names(es.user, es.signPub), a.names(ed.user, ed.signPub)
		switch {
		case a.recorded(es) && !nd:
			return src
		case a.recorded(ed) && !ns:
			return dst
		case !ns && !nd:
			it, err := a.st.Get(ctx, a.v.prefix+keyringPrefix+es.user)
			switch {
			case err != nil:
			case bytes.Equal(it.Value, src):
				return src
			case bytes.Equal(it.Value, dst):
				return dst
			}
		}
	case as && !ad && !(keyringNewer(dst, src) && a.unrecorded(ctx, ed)):
		return src
	case ad && !as && !(keyringNewer(src, dst) && a.unrecorded(ctx, es)):
		return dst
	}
	return nil
}

// recorded reports whether a sure source of a records e's key as its
// person's current grant, not revoked.
func (a *authority) recorded(e *keyringEntry) bool {
	for _, src := range a.sources {
		if p, named := src.st.Person(e.user); src.sure && named && p.Seq > 0 && !p.Revoked && bytes.Equal(p.Key, e.signPub) {
			return true
		}
	}
	return false
}

// names reports whether a sure source of a names key as person's, in a
// grant or a revocation, current or past.
func (a *authority) names(person string, key []byte) bool {
	for _, src := range a.sources {
		if p, named := src.st.Person(person); src.sure && named && namesKey(p, key) {
			return true
		}
	}
	return false
}

// namesKey reports whether the ledger's state p of a person names key:
// their current key, one they held, or one a revocation ended.
func namesKey(p ledger.PersonState, key []byte) bool {
	eq := func(k []byte) bool { return bytes.Equal(k, key) }
	return eq(p.Key) || slices.ContainsFunc(p.RevokedKeys, eq) ||
		slices.ContainsFunc(p.Held, func(h ledger.HeldKey) bool { return eq(h.Key) })
}

// unrecorded reports whether e, an entry not revoked, holds a grant no
// ledger of a has heard of (its key is neither granted nor revoked there)
// and its chain of grants holds: the person was revoked and granted again
// on a device that has not synced since, and the new entry reached the hub
// before that device's Sync recorded it on the hub's ledger (a handle
// opened there brought it). preferLedger lets it win as the newer entry
// rather than put back the older one the ledgers agree with, which would
// take the person's new key away from the hub while their entries
// signed with it are in its ledger.
func (a *authority) unrecorded(ctx context.Context, e *keyringEntry) bool {
	if e.revoked {
		return false
	}
	held := func(k []byte) bool { return bytes.Equal(k, e.signPub) }
	for _, src := range a.sources {
		if p, named := src.st.Person(e.user); named &&
			(slices.ContainsFunc(p.RevokedKeys, held) || slices.ContainsFunc(p.Held, func(h ledger.HeldKey) bool { return held(h.Key) })) {
			return false
		}
	}
	return a.chain(ctx, e, 0, true) == nil
}

// checkOpener checks the authority of the keyring entry the vault was
// opened with, by its ledger (an entry that fails is ErrTampered). On a
// device of a hub whose own ledger does not vouch for the entry (the
// person was granted, or their granter revoked, on another device), the
// hub's ledger is asked too, when the hub can be reached.
func (v *Vault) checkOpener(ctx context.Context) error {
	a, err := v.authority(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return err
		}
		// A ledger that does not read (rolled back, tampered) is reported
		// by the calls that use it, each with its own error; the open
		// checks the entry by the keyring's chain of grants alone.
		a = v.authorityOf(v.keyringStore0())
	}
	if len(a.sources) > 0 {
		cur, _ := v.keys.current()
		v.raiseFloor(a.sources[0].st.FloorAtMost(cur))
	}
	v.me.mu.Lock()
	e := v.me.entry
	v.me.mu.Unlock()
	if e == nil {
		return a.legacy(ctx, v.user)
	}
	err = a.check(ctx, e, 0)
	if err == nil || !errors.Is(err, ErrTampered) || v.hub == nil {
		return err // a revocation the ledger holds is final
	}
	h, herr := v.hubAuthority(ctx)
	if herr != nil {
		return err
	}
	// The device's own entry is the one checked, by the hub's ledger (and
	// the hub's keyring for a chain of grants).
	if h.check(ctx, e, 0) == nil {
		return nil
	}
	return err
}

// checkedEntry is a.entry, asking the hub's ledger too on a device of a
// hub whose own ledger does not vouch for the entry (see checkOpener).
func (v *Vault) checkedEntry(ctx context.Context, a *authority, name string, raw []byte) (*keyringEntry, error) {
	e, err := a.entry(ctx, name, raw)
	if err == nil || !errors.Is(err, ErrTampered) || v.hub == nil || !isKeyringV2(raw) {
		return e, err
	}
	h, herr := v.hubAuthority(ctx)
	if herr != nil {
		return nil, err
	}
	if he, herr := h.entry(ctx, name, raw); herr == nil {
		return he, nil
	}
	return nil, err
}

// readFeed reads the hub's feed (h is a hub-side vault) from position from
// as a pull applies it: each change only once its commit is shown signed
// by an author who could make it there, by the hub's people
// (ledger.VerifiedReader): a change that someone holding the first
// generation's key appended in another's name, beyond their role, or
// after their revocation is never applied (ErrTampered, which a pull
// reports as ErrHubTampered).
func (h *Vault) readFeed(ctx context.Context, from uint64) iter.Seq2[ledger.Entry, error] {
	vr, ok := ledgerBelow(h.ledger).(ledger.VerifiedReader)
	if !ok {
		return h.ledger.Read(ctx, from)
	}
	return func(yield func(ledger.Entry, error) bool) {
		st, err := h.peopleState(ctx)
		if err != nil {
			yield(ledger.Entry{}, err)
			return
		}
		a := h.vouchAuthority()
		for e, err := range vr.ReadVerified(ctx, from, st, a.vouch(ctx)) {
			if !yield(e, a.failure(err)) || err != nil {
				return
			}
		}
	}
}

// The generation floor.
//
// When a rotation's re-sealing finishes, every record of the store is
// sealed with its generation g or a later one, and its clearing of the
// rotation mark appends a signed ledger.KeysResealed entry for g. From
// then on no record the vault writes on that store is sealed below g (a
// commit re-seals a record sealed with a generation older than the one
// the store holds: rotate_current.go), so one that is was written by
// someone else: a person who kept an older generation's key (every person
// ever granted kept the first's), revoked since, writing with the raw
// store. Reading it is ErrTampered. A handle learns the floor when it
// opens (from the ledger's people entries, to which the KeysResealed
// entries are linked) and when its own re-sealing finishes.
//
// A device of a hub keeps no floor: records pulled from the hub, or
// written on another device that had not heard of the rotation, reach it
// sealed with older generations and are re-sealed by its next rotation
// resumed; the floor holds on the store where the rotation's re-sealing
// ran.

// raiseFloor raises the handle's floor to gen (not on a device of a hub).
// The floors the ledger records count up to the newest generation the
// handle holds (ledger.PeopleState.FloorAtMost): a KeysResealed entry
// naming a later one is not one a rotation of this vault finished (only
// an owner's counts, and an owner finishes a re-seal only with keys the
// keyring holds).
func (v *Vault) raiseFloor(gen uint64) {
	if v.isDevice() {
		return
	}
	for {
		cur := v.floor.Load()
		if gen <= cur || v.floor.CompareAndSwap(cur, gen) {
			return
		}
	}
}

// errBelowFloor is the reason of the ErrTampered of a record sealed below
// the generation floor (see aboveFloor and openPrevious).
var errBelowFloor = errors.New("sealed below the generation floor")

// aboveFloor refuses (ErrTampered, wrapping errBelowFloor) a record of
// collection/id sealed below the handle's floor.
func (v *Vault) aboveFloor(collection, id string, sealed []byte) error {
	f := v.floor.Load()
	if f <= 1 {
		return nil
	}
	gen, err := recordGeneration(sealed)
	if err != nil || gen >= f {
		return nil // the envelope's own check reports a bad one
	}
	return fmt.Errorf("%s/%s is sealed by key generation %d, below %d, which every record was re-sealed with (%w): %w",
		collection, id, gen, f, errBelowFloor, ErrTampered)
}

// openPrevious is openStoredTx for the record a Put or a Delete replaces.
// A record below the generation floor (written by someone who kept an old
// key, never by the vault) does not stop an owner's write: the owner
// replaces or deletes it, which is how it is cleared. Its revision is
// taken from its envelope, authenticated under the old key (so the new
// write's revision still rises, for sync), and nothing else of it: its
// marks (numbers it claims) are dropped. Anyone else gets the
// ErrTampered.
func (v *Vault) openPrevious(tx stores.Tx, collection, id string, it stores.Item, found bool) (stored, error) {
	prev, err := v.openStoredTx(tx, collection, id, it, found)
	if err == nil || !errors.Is(err, errBelowFloor) || v.Role() != RoleOwner {
		return prev, err
	}
	if _, rev, oerr := v.openSealedTx(tx, collection, id, it.Value); oerr == nil {
		return stored{rev: rev}, nil
	}
	return stored{}, err
}
