package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Limits cover numbers.
//
// A person limited to some collections (Grant, SetCollections) takes,
// voids, seeds and closes numbers only of series an owner bound to one of
// those collections: explicitly (BindSeries), or by the owner's own first
// numbered record there (a record numbered at write time through
// NumberingOf, PutNumbered or TxCollection.PutNumbered, or by a pass the
// owner runs over a NumberingOf series of the collection: its ledger
// entry, RecordPut or NumberAssigned, names the collection and the
// series). A limited person binds nothing, so numbering a new series first
// captures nothing. The bindings are kept in the collections' stored
// definitions (collection_def.go) and recorded in the ledger (a
// ledger.SeriesBound entry, or the owner's numbered record's own entry),
// which Verify replays (ledger's UnboundSeries).
//
// The rule holds where every number passes: the vault's ledger, which the
// vault's sequences, numbering passes, numbered records and voids all
// append to, is wrapped by seriesLedger, which checks every append that
// names a series, in the append's own transaction, before anything is
// written; a refused append fails its transaction, so no number is taken.
// An owner's append is not checked (an owner is never limited); an owner's
// append of a numbered record's entry whose collection's definition does
// not bind its series yet writes the binding into the definition in the
// same transaction, so the binding exists exactly when the entry does
// (bindNumberedTx). Its commit names the definition's key with its other
// keys (withBindKey), so that it locks them in key order (see lockKeys).
// On a store without transactions nothing binds by itself: the numbers of
// a pass are appended alone, and the series stays unbound for limited
// persons until BindSeries (Verify, which replays the entry, is then the
// more permissive of the two, never the less).

// seriesLedger is the vault's ledger as the vault's writers append to it
// (see above).
type seriesLedger struct {
	writableLedger
	v *Vault
}

// Append implements the ledger's Append, checking what entries number.
// An owner's entries of numbered records (a pass's) that bind their series
// commit with the bindings, in one transaction where the store has them.
func (l seriesLedger) Append(ctx context.Context, entries ...ledger.Entry) (ledger.Head, error) {
	if err := l.v.numbersHere(entries); err != nil {
		return ledger.Head{}, err
	}
	if err := l.v.numbersPermitted(ctx, func(key string) (stores.Item, error) { return l.v.store.Get(ctx, key) }, false, entries); err != nil {
		return ledger.Head{}, err
	}
	if keys := l.v.bindKeysOf(entries); len(keys) > 0 && transactional(l.v.store) {
		var h ledger.Head
		err := l.writableLedger.UpdateKeys(ctx, keys, func(tx stores.Tx) error {
			if err := l.v.bindNumberedTx(tx, entries); err != nil {
				return err
			}
			var err error
			h, err = l.writableLedger.AppendTx(ctx, tx, entries...)
			return err
		})
		return h, err
	}
	return l.writableLedger.Append(ctx, entries...)
}

// AppendTx implements the ledger's AppendTx, checking what entries number
// in tx, and binding in tx the series of an owner's numbered records.
func (l seriesLedger) AppendTx(ctx context.Context, tx stores.Tx, entries ...ledger.Entry) (ledger.Head, error) {
	if err := l.v.numbersHere(entries); err != nil {
		return ledger.Head{}, err
	}
	// An owner's appends are not checked: no reader is made for them (a
	// method value that escapes costs an allocation per commit).
	if people, owner := l.v.signsAsOwner(); people && !owner {
		if err := l.v.numbersPermitted(ctx, tx.Get, true, entries); err != nil {
			return ledger.Head{}, err
		}
	} else if owner {
		if err := l.v.bindNumberedTx(tx, entries); err != nil {
			return ledger.Head{}, err
		}
	}
	return l.writableLedger.AppendTx(ctx, tx, entries...)
}

// bindsByNumbering reports whether e, an owner's, binds its series to its
// collection: the entry of a numbered record (see above).
func bindsByNumbering(e *ledger.Entry) bool {
	return (e.Kind == ledger.RecordPut || e.Kind == ledger.NumberAssigned) && e.Series != "" && e.Collection != ""
}

// needsBind reports whether a numbered record of series in collection,
// written by the vault's person, may have to bind series there: the
// person is an owner and the vault has not found series bound there yet.
func (v *Vault) needsBind(collection, series string) bool {
	if series == "" || collection == "" {
		return false
	}
	people, owner := v.signsAsOwner()
	return people && owner && !v.binds.isBound(collection, series)
}

// signsAsOwner reports whether the vault writes as a person (a vault
// without people, of tests and internal stores, does not), and whether
// that person is an owner, whom no limit holds.
func (v *Vault) signsAsOwner() (people, owner bool) {
	m := v.signAs
	if m == nil {
		return false, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return true, m.role == RoleOwner
}

// withBindKey returns keys, the keys a commit of a numbered record of
// series in collection names, with the collection's definition key when
// the record may bind series there (needsBind): the commit then locks it
// with the others, in key order, not after them (see lockKeys).
func (v *Vault) withBindKey(keys []string, collection, series string) []string {
	if !v.needsBind(collection, series) {
		return keys
	}
	return append(keys, v.collectionDefKey(collection))
}

// bindKeysOf returns the definition keys that a commit appending entries
// may write (see bindNumberedTx), sorted and unique; nil when none.
func (v *Vault) bindKeysOf(entries []ledger.Entry) []string {
	var keys []string
	for i := range entries {
		e := &entries[i]
		if bindsByNumbering(e) && v.needsBind(e.Collection, e.Series) {
			keys = append(keys, v.collectionDefKey(e.Collection))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// bindNumberedTx binds, in tx, the series of each numbered record entries
// name to its collection, when the vault's person is an owner and the
// collection's stored definition does not bind it yet: the binding then
// commits with the entry, or neither does. A definition found binding
// the series is remembered, so later commits read it no more.
func (v *Vault) bindNumberedTx(tx stores.Tx, entries []ledger.Entry) error {
	for i := range entries {
		e := &entries[i]
		if !bindsByNumbering(e) || !v.needsBind(e.Collection, e.Series) {
			continue
		}
		d, _, err := v.collectionDefFrom(e.Collection, tx.Get)
		if err != nil {
			return err
		}
		if !d.bind(e.Series) {
			v.binds.found(e.Collection, e.Series)
			continue
		}
		sealed, err := v.sealCollectionDef(e.Collection, d)
		if err != nil {
			return err
		}
		if err := tx.Put(v.collectionDefKey(e.Collection), sealed); err != nil {
			return err
		}
	}
	return nil
}

// seriesBinds is what a vault knows of the bindings of its store: the
// pairs of collection and series it found bound (bindings are only ever
// added, so a pair found once stays bound), the collections of its
// person's keyring entry as last decoded, and their collections by the
// ledger's latest grant as last replayed.
type seriesBinds struct {
	mu    sync.Mutex
	bound map[colSeries]bool
	raw   []byte   // the person's keyring entry as last decoded
	cols  []string // its collections (nil: all)
	bad   error    // why raw does not decode

	grant     []string // the collections of the ledger's latest grant (nil: all, or none recorded)
	grantNext uint64   // the position after the replay they come from (0: never replayed)
}

type colSeries struct{ collection, series string }

// isBound reports whether the vault found series bound to collection.
func (b *seriesBinds) isBound(collection, series string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bound[colSeries{collection, series}]
}

// found records that series is bound to collection.
func (b *seriesBinds) found(collection, series string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bound == nil {
		b.bound = map[colSeries]bool{}
	}
	b.bound[colSeries{collection, series}] = true
}

// limits returns the collections the person's keyring entry raw gives
// them (nil: all), decoding it only when it differs from the last one.
func (b *seriesBinds) limits(user string, raw []byte) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.raw == nil || !bytes.Equal(b.raw, raw) {
		e, err := decodeKeyring(raw)
		b.raw, b.cols, b.bad = bytes.Clone(raw), nil, nil
		switch {
		case err != nil:
			b.bad = fmt.Errorf("keyring entry of %q: %w: %w", user, ErrTampered, err)
		case e.user != user:
			b.bad = fmt.Errorf("keyring entry of %q names %q: %w", user, e.user, ErrTampered)
		default:
			b.cols = e.collections
		}
	}
	return b.cols, b.bad
}

// numbersPermitted checks, reading through get (the append's transaction,
// inTx, or the store), that the vault's person may write the entries that
// name a series: an owner may, and so may a person given every
// collection; a limited person only of series bound to one of the
// collections both their keyring entry and the ledger's latest grant of
// them give them now. The entry alone would not do: a store that puts
// back an entry from before a narrowing (its MAC holds) would widen an
// open handle's limits, as the authority check (people_ledger.go) says
// of any entry the ledger's grant does not name. Anything else is
// ErrNotPermitted.
func (v *Vault) numbersPermitted(ctx context.Context, get func(key string) (stores.Item, error), inTx bool, entries []ledger.Entry) error {
	if people, owner := v.signsAsOwner(); !people || owner {
		return nil // a vault without people (tests, internal stores), or an owner's
	}
	if !slices.ContainsFunc(entries, func(e ledger.Entry) bool { return e.Series != "" }) {
		return nil
	}
	// The person's collections as the append sees them: a handle opened
	// before an owner narrowed them is held to the narrower ones.
	it, err := get(v.prefix + keyringPrefix + v.user)
	if errors.Is(err, stores.ErrNotFound) {
		return fmt.Errorf("user %q has no keyring entry any more: %w", v.user, ErrNoAccess)
	}
	if err != nil || !isKeyringV2(it.Value) {
		return err // layout version 1: no limits
	}
	cols, err := v.binds.limits(v.user, it.Value)
	if err != nil {
		return err
	}
	grant, err := v.ledgerGrant(ctx, get, inTx)
	if err != nil {
		return err
	}
	if cols = narrower(cols, grant); cols == nil {
		return nil
	}
	for i := range entries {
		series := entries[i].Series
		if series == "" {
			continue
		}
		ok, err := v.boundToAny(series, cols, get)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("series %q is not bound to any collection of %q (an owner binds it: BindSeries): %w",
				series, v.user, ErrNotPermitted)
		}
	}
	return nil
}

// ledgerGrant returns the collections the ledger's latest grant gives the
// vault's person (nil: every one, or no grant of theirs recorded), from
// the replay of its people entries, brought up to every people entry of
// the head read through get first. Inside a transaction (inTx) the ledger
// cannot be read (a store such as memstore holds its lock for the
// transaction): the grant is then the one the replay brought before the
// commit began (freshenGrant, called before every commit that may
// number). A people change committed between that replay and the commit
// is not seen by it (the next commit's replay sees it): a store that puts
// back a wider entry in that window gets one commit's numbers past the
// vault, which Verify refuses (UnboundSeries).
func (v *Vault) ledgerGrant(ctx context.Context, get func(key string) (stores.Item, error), inTx bool) ([]string, error) {
	through, err := v.ledger.HeadPeople(get)
	if err != nil {
		return nil, err
	}
	b := &v.binds
	b.mu.Lock()
	fresh, grant := b.grantNext > through, b.grant
	b.mu.Unlock()
	if fresh || inTx {
		return grant, nil
	}
	if err := v.refreshGrant(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.grant, nil
}

// freshenGrant brings the ledger's grant of the vault's person up to the
// ledger's people before a commit that may number, when the person is not
// an owner (an owner's numbers are not checked) and the replay is behind
// the head as the store holds it now: one read of the head, outside any
// transaction.
func (v *Vault) freshenGrant(ctx context.Context) error {
	if people, owner := v.signsAsOwner(); !people || owner {
		return nil
	}
	_, err := v.ledgerGrant(ctx, func(key string) (stores.Item, error) { return v.store.Get(ctx, key) }, false)
	return err
}

// refreshGrant replays the people entries of the vault's ledger up to its
// head and keeps the collections of its person's latest grant.
func (v *Vault) refreshGrant(ctx context.Context) error {
	st, err := v.peopleState(ctx)
	if err != nil {
		return err
	}
	var grant []string
	if p, ok := st.Person(v.user); ok && p.Collections != nil {
		grant = slices.Clone(p.Collections)
	}
	b := &v.binds
	b.mu.Lock()
	defer b.mu.Unlock()
	if next := st.Next(); next >= b.grantNext {
		b.grant, b.grantNext = grant, next
	}
	return nil
}

// narrower returns the collections both a and b give (nil: every one).
func narrower(a, b []string) []string {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	out := []string{}
	for _, c := range a {
		if slices.Contains(b, c) {
			out = append(out, c)
		}
	}
	return out
}

// boundToAny reports whether series is bound to one of cols, reading the
// definitions it has not found binding it through get.
func (v *Vault) boundToAny(series string, cols []string, get func(key string) (stores.Item, error)) (bool, error) {
	for _, c := range cols {
		if v.binds.isBound(c, series) {
			return true, nil
		}
	}
	for _, c := range cols {
		d, _, err := v.collectionDefFrom(c, get)
		if err != nil {
			return false, err
		}
		for _, s := range d.series {
			v.binds.found(c, s)
		}
		if d.binds(series) {
			return true, nil
		}
	}
	return false, nil
}

// BindSeries binds series to collection: a person limited to collection
// (Grant, SetCollections) may then take, void, seed and close its numbers,
// and number records with it; without a binding to one of their
// collections they may not (ErrNotPermitted, nothing taken). An owner's
// own first numbered record in a collection binds its series there too
// (see Limits cover numbers); a series may be bound to several
// collections. Only an owner binds
// (ErrNotPermitted); a binding is recorded in the ledger
// (ledger.SeriesBound), which Verify replays, and binding a series bound
// already writes nothing.
//
// On a device of a hub the binding is made on the hub, where the numbers
// are taken (an error wrapping sequence.ErrOffline when the hub cannot be
// reached). On a store without transactions the ledger entry is written
// before the definition; a crash between the two leaves the series
// unbound for limited persons until BindSeries is called again.
func (v *Vault) BindSeries(ctx context.Context, collection, series string) error {
	if err := v.bindSeries(ctx, collection, series); err != nil {
		return fmt.Errorf("bind series %q to %q: %w", series, collection, err)
	}
	return nil
}

func (v *Vault) bindSeries(ctx context.Context, collection, series string) error {
	if err := CheckCollectionName(collection); err != nil {
		return err
	}
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	if v.hubless {
		return errHubless
	}
	if role := v.Role(); role != RoleOwner {
		return fmt.Errorf("%q is a %s, only an owner binds series: %w", v.user, role, ErrNotPermitted)
	}
	at := v
	if v.hub != nil {
		at = v.hub
	}
	if _, err := at.seqs.Sequence(series, sequence.Options{}); err != nil {
		return err // an invalid name
	}
	_, err := at.changeCollectionDef(ctx, collection, func(d *collectionDef) bool { return d.bind(series) },
		ledger.Entry{Kind: ledger.SeriesBound, Series: series, Collection: collection})
	return err
}
