package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
// numbered record there (a Put through NumberingOf or PutNumbered, whose
// ledger entry names the collection and the series). A limited person
// binds nothing, so numbering a new series first captures nothing. The
// bindings are kept in the collections' stored definitions
// (collection_def.go) and recorded in the ledger (ledger.SeriesBound, or
// the owner's numbered record), which Verify replays (ledger's
// UnboundSeries).
//
// The rule holds where every number passes: the vault's ledger, which the
// vault's sequences, numbering passes, numbered records and voids all
// append to, is wrapped by seriesLedger, which checks every append that
// names a series, in the append's own transaction, before anything is
// written; a refused append fails its transaction, so no number is taken.
// An owner's append is not checked (an owner is never limited); before an
// owner's numbered record in a collection whose definition does not bind
// its series yet, bindOwnNumbered binds it.

// seriesLedger is the vault's ledger as the vault's writers append to it
// (see above).
type seriesLedger struct {
	writableLedger
	v *Vault
}

// Append implements the ledger's Append, checking what entries number.
func (l seriesLedger) Append(ctx context.Context, entries ...ledger.Entry) (ledger.Head, error) {
	if err := l.v.numbersPermitted(func(key string) (stores.Item, error) { return l.v.store.Get(ctx, key) }, entries); err != nil {
		return ledger.Head{}, err
	}
	return l.writableLedger.Append(ctx, entries...)
}

// AppendTx implements the ledger's AppendTx, checking what entries number
// in tx.
func (l seriesLedger) AppendTx(ctx context.Context, tx stores.Tx, entries ...ledger.Entry) (ledger.Head, error) {
	if err := l.v.numbersPermitted(tx.Get, entries); err != nil {
		return ledger.Head{}, err
	}
	return l.writableLedger.AppendTx(ctx, tx, entries...)
}

// seriesBinds is what a vault knows of the bindings of its store: the
// pairs of collection and series it found bound (bindings are only ever
// added, so a pair found once stays bound), and the collections of its
// person's keyring entry as last decoded.
type seriesBinds struct {
	mu    sync.Mutex
	bound map[colSeries]bool
	raw   []byte   // the person's keyring entry as last decoded
	cols  []string // its collections (nil: all)
	bad   error    // why raw does not decode
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
// or the store), that the vault's person may write the entries that name
// a series: an owner may, and so may a person given every collection; a limited person only of series
// bound to one of the collections their keyring entry gives them now.
// Anything else is ErrNotPermitted.
func (v *Vault) numbersPermitted(get func(key string) (stores.Item, error), entries []ledger.Entry) error {
	m := v.signAs
	if m == nil {
		return nil // a vault without people (tests, internal stores)
	}
	named := false
	for i := range entries {
		if entries[i].Series != "" {
			named = true
			break
		}
	}
	if !named {
		return nil
	}
	m.mu.Lock()
	role := m.role
	m.mu.Unlock()
	if role == RoleOwner {
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
	if err != nil || cols == nil {
		return err
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

// bindOwnNumbered binds series to collection before a numbered record
// of the vault's person there, when the person is an owner and no stored
// definition binds it yet: an owner's own first numbered record in a
// collection binds its series (see above). The binding is a commit of its
// own, before the record's (a commit that wrote the definition with the
// record would lock it after the record), made where the numbers are
// taken (the hub, for Collection.PutNumbered on a device of one; a
// NumberingOf handle binds only when it numbers at write time, so that an
// offline device's Put never waits for its hub). It is best effort: a binding that
// fails (a hub out of reach) leaves the series unbound, which refuses
// limited persons only, until the owner's next numbered record there or
// BindSeries.
func (v *Vault) bindOwnNumbered(ctx context.Context, collection, series string) {
	if v.me == nil || v.Role() != RoleOwner {
		return
	}
	at := v
	if v.hub != nil {
		at = v.hub
	}
	if at.binds.isBound(collection, series) {
		return
	}
	d, err := at.collectionDef(ctx, collection)
	if err != nil {
		return
	}
	if !d.binds(series) {
		if _, err := at.changeCollectionDef(ctx, collection, func(d *collectionDef) bool { return d.bind(series) },
			ledger.Entry{Kind: ledger.SeriesBound, Series: series, Collection: collection}); err != nil {
			return
		}
	}
	at.binds.found(collection, series)
}

// BindSeries binds series to collection: a person limited to collection
// (Grant, SetCollections) may then take, void, seed and close its numbers,
// and number records with it; without a binding to one of their
// collections they may not (ErrNotPermitted, nothing taken). An owner's
// own first numbered record in a collection binds its series there too; a
// series may be bound to several collections. Only an owner binds
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
