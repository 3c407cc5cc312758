package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// The collection definition.
//
// Each collection may have one stored definition: the settings of the
// collection that are kept with the vault rather than with a handle, one
// sealed value per collection at
//
//	prefix + "_collections/" + name
//
// sealed with the first generation's data key (like the vault's other
// internal values), bound to its key, so a store can neither read it, nor
// alter it, nor move it to another collection or vault. A collection
// without one has the zero definition. Today it holds the series an owner
// bound to the collection (what a person limited to the collection may
// number, see people_series.go) and the collection's sync policy; the
// schema, index and policy features extend it with fields of their own
// (a new layout version), never with a second value per collection.
//
// Layout (version 1):
//
//	1 || uvarint n || n × lp(series name) || policy
//
// where the series names are sorted and unique, lp(s) = uvarint len(s) ||
// s, and policy is one byte: 0 for none set (the vault's default), else
// the SyncPolicy plus one. A value that does not decode exactly is a
// *codec.Error (matching ErrCorrupt); the vault reports it as ErrTampered.
const (
	collectionsDir       = "_collections/"
	collectionDefVersion = 1
)

// maxBoundSeries bounds how many series one collection definition binds.
const maxBoundSeries = 1 << 12

// collectionDef is the stored definition of one collection.
type collectionDef struct {
	// series are the series an owner bound to the collection (sorted,
	// unique): a person limited to the collection takes, voids, seeds and
	// closes numbers of these, and of no other series.
	series []string
	// policy is the collection's sync policy; hasPolicy false: none set.
	policy    SyncPolicy
	hasPolicy bool
}

// binds reports whether series is bound to the collection.
func (d *collectionDef) binds(series string) bool {
	_, ok := slices.BinarySearch(d.series, series)
	return ok
}

// bind adds series to the collection's bound series; it reports whether
// the definition changed.
func (d *collectionDef) bind(series string) bool {
	i, ok := slices.BinarySearch(d.series, series)
	if ok {
		return false
	}
	d.series = slices.Insert(d.series, i, series)
	return true
}

// encodeCollectionDef is the plaintext of d (see the layout above).
func encodeCollectionDef(d collectionDef) []byte {
	b := []byte{collectionDefVersion}
	b = codec.AppendUvarint(b, uint64(len(d.series)))
	for _, s := range d.series {
		b = codec.AppendString(b, s)
	}
	var p byte
	if d.hasPolicy {
		p = byte(d.policy) + 1
	}
	return append(b, p)
}

// decodeCollectionDef reads encodeCollectionDef's layout; anything else
// (series out of order or repeated, an unknown policy) is a *codec.Error.
func decodeCollectionDef(b []byte) (collectionDef, error) {
	var d collectionDef
	r := codec.NewReader(b)
	r.Version(collectionDefVersion)
	n := r.Count(maxBoundSeries, 2)
	for range n {
		s := r.String(sequence.MaxSeriesLen)
		if r.Err() != nil {
			break
		}
		if s == "" || (len(d.series) > 0 && s <= d.series[len(d.series)-1]) {
			r.Fail("series names empty, out of order or repeated")
			break
		}
		d.series = append(d.series, s)
	}
	switch p := r.Byte(); {
	case r.Err() != nil:
	case p == 0:
	case SyncPolicy(p-1) <= Merge:
		d.policy, d.hasPolicy = SyncPolicy(p-1), true
	default:
		r.Failf("unknown sync policy %d", p-1)
	}
	if err := r.End(); err != nil {
		return collectionDef{}, err
	}
	return d, nil
}

// collectionDefKey is where the definition of collection is stored.
func (v *Vault) collectionDefKey(collection string) string {
	return v.prefix + collectionsDir + collection
}

// openCollectionDef opens the sealed definition stored at key.
func (v *Vault) openCollectionDef(key string, sealed []byte) (collectionDef, error) {
	plain, err := v.seal.Open(key, sealed)
	if err != nil {
		return collectionDef{}, v.openFailed(err)
	}
	d, err := decodeCollectionDef(plain)
	if err != nil {
		return collectionDef{}, fmt.Errorf("collection definition %q: %w: %w", key[len(v.prefix)+len(collectionsDir):], ErrTampered, err)
	}
	return d, nil
}

// collectionDefFrom reads the definition of collection through get (a
// transaction's Get, or the store's): the zero definition when none is
// stored, and the stored version (0: none).
func (v *Vault) collectionDefFrom(collection string, get func(key string) (stores.Item, error)) (collectionDef, uint64, error) {
	key := v.collectionDefKey(collection)
	it, err := get(key)
	if errors.Is(err, stores.ErrNotFound) {
		return collectionDef{}, 0, nil
	}
	if err != nil {
		return collectionDef{}, 0, err
	}
	d, err := v.openCollectionDef(key, it.Value)
	if err != nil {
		return collectionDef{}, 0, err
	}
	return d, it.Version, nil
}

// collectionDef reads the stored definition of collection (the zero
// definition when none is stored).
func (v *Vault) collectionDef(ctx context.Context, collection string) (collectionDef, error) {
	d, _, err := v.collectionDefFrom(collection, func(key string) (stores.Item, error) { return v.store.Get(ctx, key) })
	return d, err
}

// sealCollectionDef seals d for the definition of collection.
func (v *Vault) sealCollectionDef(collection string, d collectionDef) ([]byte, error) {
	return v.seal.Seal(v.collectionDefKey(collection), encodeCollectionDef(d))
}

// changeCollectionDef changes the stored definition of collection: change
// gets the definition as stored and reports whether it changed it; a
// change is written with entries (its ledger entries, if any) in one
// commit. On a store without transactions the entries are appended first
// and the definition written after, by compare-and-swap: a crash between
// the two leaves the ledger saying more than the definition, which a
// repeated call completes (the definition is what a commit is checked
// against, so it never says more than the ledger). It reports whether it
// wrote anything. The caller checks who may change it.
func (v *Vault) changeCollectionDef(ctx context.Context, collection string, change func(*collectionDef) bool, entries ...ledger.Entry) (bool, error) {
	key := v.collectionDefKey(collection)
	if transactional(v.store) {
		changed := false
		err := v.ledger.UpdateKeys(ctx, []string{key}, func(tx stores.Tx) error {
			changed = false
			d, _, err := v.collectionDefFrom(collection, tx.Get)
			if err != nil || !change(&d) {
				return err
			}
			sealed, err := v.sealCollectionDef(collection, d)
			if err != nil {
				return err
			}
			if err := tx.Put(key, sealed); err != nil {
				return err
			}
			if len(entries) > 0 {
				if _, err := v.ledger.AppendTx(ctx, tx, entries...); err != nil {
					return err
				}
			}
			changed = true
			return nil
		})
		return changed, closedIfWiped(err)
	}
	if err := v.mayWrite(ctx); err != nil {
		return false, err
	}
	appended := false
	changed := false
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		d, ver, err := v.collectionDefFrom(collection, func(key string) (stores.Item, error) { return v.store.Get(ctx, key) })
		if err != nil || !change(&d) {
			return err
		}
		if !appended && len(entries) > 0 {
			if _, err := v.ledger.Append(ctx, entries...); err != nil {
				return err
			}
			appended = true
		}
		sealed, err := v.sealCollectionDef(collection, d)
		if err != nil {
			return err
		}
		if _, err := v.store.CompareAndSwap(ctx, key, ver, sealed); err != nil {
			return err
		}
		changed = true
		return nil
	})
	return changed, closedIfWiped(err)
}
