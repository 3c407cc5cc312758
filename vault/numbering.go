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
		Enter:   v.enterSeries,
		Pins:    v.pins,
	}, series, opts)
}

// numberingRecords lets a numbering series read and stamp this vault's
// records. Its methods are called only from inside a call of the series,
// which has entered the vault (Backend.Enter), so they do not enter it
// again: a call admitted before Close runs to its end.
type numberingRecords struct{ v *Vault }

// Number reports whether the record is stored and which number of the
// deferred-numbering series it carries, read from its authenticated content.
func (r numberingRecords) Number(ctx context.Context, collection, id, series string) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := CheckID(id); err != nil {
		return 0, false, err
	}
	it, err := r.v.store.Get(ctx, r.v.recordKey(collection, id))
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	rec, err := r.v.openStored(collection, id, it, true)
	if err != nil {
		return 0, false, fmt.Errorf("record %s/%s: %w", collection, id, err)
	}
	n, _ := findMark(rec.marks, markNumbering, series, nil)
	return n, true, nil
}

// Stamp sets m.Field of the record to m.Value and marks it as carrying
// m.N, as its next revision, unless it already does: in a transaction where
// the store has them, else by compare-and-swap on the record's version,
// retried when a writer changed the record in between, so a concurrent
// change is kept, not overwritten.
func (r numberingRecords) Stamp(ctx context.Context, collection, id string, m numbering.Mark) (numbering.Stamp, error) {
	v := r.v
	if err := ctx.Err(); err != nil {
		return numbering.Stamp{}, err
	}
	want, err := json.Marshal(m.Value)
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
				if sealed, out, err = v.stampItem(collection, id, m, want, it); err != nil || sealed == nil {
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
			if sealed, out, err = v.stampItem(collection, id, m, want, it); err != nil || sealed == nil {
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

// StampBatch stamps every ids[i] with marks[i] in one transaction.
func (r numberingTxRecords) StampBatch(ctx context.Context, collection string, ids []string, marks []numbering.Mark) ([]numbering.Stamp, []bool, error) {
	v := r.v
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(ids) != len(marks) {
		return nil, nil, fmt.Errorf("stamp batch: %d ids, %d marks", len(ids), len(marks))
	}
	wants := make([][]byte, len(marks))
	for i, m := range marks {
		var err error
		if wants[i], err = json.Marshal(m.Value); err != nil {
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
				sealed, st, err := v.stampItem(collection, id, marks[i], wants[i], it)
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
// Stamp when the record already carries m.N with its field holding want,
// or carries another number of m.Series (Stamp.Carries).
func (v *Vault) stampItem(collection, id string, m numbering.Mark, want []byte, it stores.Item) ([]byte, numbering.Stamp, error) {
	rec, err := v.openStored(collection, id, it, true)
	if err != nil {
		return nil, numbering.Stamp{}, err
	}
	current := numbering.Stamp{Revision: rec.rev, CipherHash: cipherHash(it.Value)}
	n, marked := findMark(rec.marks, markNumbering, m.Series, nil)
	if marked && n != m.N {
		current.Carries = n
		return nil, current, nil
	}
	next, changed, err := setField(rec.body, m.Field, want)
	if err != nil {
		return nil, numbering.Stamp{}, err
	}
	if !changed && marked {
		return nil, current, nil
	}
	marks := withMark(rec.marks, mark{kind: markNumbering, series: m.Series, n: m.N})
	sealed, rev, err := v.sealNext(collection, id, joinRecord(marks, next), rec.rev)
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
