package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
)

// Numbering returns the deferred-numbering series of this vault named
// series, which numbers the records of opts.Collection by setting their
// opts.Field: records are enqueued wherever they are written (any store,
// offline, many devices), and a pass on one authority numbers them. See
// package numbering. The error matches numbering.ErrInvalid for an invalid
// series name or options (an invalid or reserved collection name included).
func (v *Vault) Numbering(series string, opts numbering.Options) (*numbering.Series, error) {
	if err := CheckCollectionName(opts.Collection); err != nil {
		return nil, fmt.Errorf("numbering %q: %w: %w", series, numbering.ErrInvalid, err)
	}
	var records numbering.Records = numberingRecords{v}
	if tr, ok := v.store.(stores.Transactor); ok {
		records = numberingTxRecords{numberingRecords{v}, tr}
	}
	return numbering.New(numbering.Backend{
		Store:   v.store,
		Sealer:  v.seal,
		Prefix:  v.prefix,
		Ledger:  v.ledger,
		Records: records,
		Check:   v.check,
		Pins:    v.pins,
	}, series, opts)
}

// numberingRecords lets a numbering series read and stamp this vault's records.
type numberingRecords struct{ v *Vault }

// Exists reports whether the record is stored (without opening it).
func (r numberingRecords) Exists(ctx context.Context, collection, id string) (bool, error) {
	if err := r.v.check(ctx); err != nil {
		return false, err
	}
	if err := CheckID(id); err != nil {
		return false, err
	}
	_, err := r.v.store.Get(ctx, r.v.recordKey(collection, id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, stores.ErrNotFound):
		return false, nil
	}
	return false, err
}

// Stamp sets field of the record to value as its next revision, unless it
// already holds value: in a transaction where the store has them, else by
// compare-and-swap on the record's version, retried when a writer changed
// the record in between, so a concurrent change is kept, not overwritten.
func (r numberingRecords) Stamp(ctx context.Context, collection, id, field string, value any) (numbering.Stamp, error) {
	v := r.v
	if err := v.check(ctx); err != nil {
		return numbering.Stamp{}, err
	}
	want, err := json.Marshal(value)
	if err != nil {
		return numbering.Stamp{}, fmt.Errorf("stamp: encode: %w", err)
	}
	key := v.recordKey(collection, id)
	var out numbering.Stamp
	if tr, ok := v.store.(stores.Transactor); ok {
		_, err = cas.Do(ctx, cas.Policy{}, func(int) error {
			return tr.Update(ctx, func(tx stores.Tx) error {
				it, err := tx.Get(key)
				if err != nil {
					return err
				}
				var sealed []byte
				if sealed, out, err = v.stampItem(collection, id, field, want, it); err != nil || sealed == nil {
					return err
				}
				return tx.Put(key, sealed)
			})
		})
	} else {
		_, err = cas.Do(ctx, cas.Policy{}, func(int) error {
			it, err := v.store.Get(ctx, key)
			if err != nil {
				return err
			}
			var sealed []byte
			if sealed, out, err = v.stampItem(collection, id, field, want, it); err != nil || sealed == nil {
				return err
			}
			_, err = v.store.CompareAndSwap(ctx, key, it.Version, sealed)
			return err
		})
	}
	if err != nil {
		return numbering.Stamp{}, err
	}
	return out, nil
}

// numberingTxRecords also stamps many records in one transaction.
type numberingTxRecords struct {
	numberingRecords
	tr stores.Transactor
}

// StampBatch stamps every ids[i] with values[i] in one transaction.
func (r numberingTxRecords) StampBatch(ctx context.Context, collection, field string, ids []string, values []any) ([]numbering.Stamp, []bool, error) {
	v := r.v
	if err := v.check(ctx); err != nil {
		return nil, nil, err
	}
	if len(ids) != len(values) {
		return nil, nil, fmt.Errorf("stamp batch: %d ids, %d values", len(ids), len(values))
	}
	wants := make([][]byte, len(values))
	for i, val := range values {
		var err error
		if wants[i], err = json.Marshal(val); err != nil {
			return nil, nil, fmt.Errorf("stamp %s/%s: encode: %w", collection, ids[i], err)
		}
	}
	stamps := make([]numbering.Stamp, len(ids))
	found := make([]bool, len(ids))
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		return r.tr.Update(ctx, func(tx stores.Tx) error {
			for i, id := range ids {
				key := v.recordKey(collection, id)
				it, err := tx.Get(key)
				if errors.Is(err, stores.ErrNotFound) {
					stamps[i], found[i] = numbering.Stamp{}, false
					continue
				}
				if err != nil {
					return err
				}
				found[i] = true
				sealed, st, err := v.stampItem(collection, id, field, wants[i], it)
				if err != nil {
					return fmt.Errorf("stamp %s/%s: %w", collection, id, err)
				}
				stamps[i] = st
				if sealed != nil {
					if err := tx.Put(key, sealed); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return stamps, found, nil
}

// stampItem computes the stamped revision of the stored record it: the
// sealed new revision and its Stamp, or nil and the current revision's
// Stamp when field already holds want.
func (v *Vault) stampItem(collection, id, field string, want []byte, it stores.Item) ([]byte, numbering.Stamp, error) {
	plain, rev, err := crypto.OpenRecord(v.dk, it.Value, crypto.RecordRef{Vault: v.name, Collection: collection, ID: id})
	if err != nil {
		return nil, numbering.Stamp{}, v.openFailed(err)
	}
	next, changed, err := setField(plain, field, want)
	if err != nil {
		return nil, numbering.Stamp{}, err
	}
	if !changed {
		return nil, numbering.Stamp{Revision: rev, CipherHash: cipherHash(it.Value)}, nil
	}
	sealed, rev, err := v.sealRecord(collection, id, next, it)
	if err != nil {
		return nil, numbering.Stamp{}, err
	}
	return sealed, numbering.Stamp{Stamped: true, Revision: rev, CipherHash: cipherHash(sealed)}, nil
}

// setField sets the JSON object member field of plain to want (a JSON
// value), matching an existing member exactly or else case-insensitively,
// as encoding/json does when decoding. It reports whether plain changed.
func setField(plain []byte, field string, want []byte) ([]byte, bool, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(plain, &obj); err != nil || obj == nil {
		return nil, false, numbering.ErrNotObject
	}
	name := field
	if _, ok := obj[field]; !ok {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if strings.EqualFold(k, field) {
				name = k
				break
			}
		}
	}
	if cur, ok := obj[name]; ok {
		var compact bytes.Buffer
		if json.Compact(&compact, cur) == nil && bytes.Equal(compact.Bytes(), want) {
			return plain, false, nil
		}
	}
	obj[name] = want
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, false, fmt.Errorf("stamp: encode: %w", err)
	}
	return out, true, nil
}
