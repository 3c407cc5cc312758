package vault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Numbering returns the deferred-numbering series of this vault named
// series, which numbers the records of opts.Collection by setting their JSON
// member opts.Field: to a JSON number for a series without a format, else to
// the formatted text. Records are enqueued with numbering.Series.Enqueue
// after they are written, and a pass on one authority numbers them. The
// error matches numbering.ErrInvalid for an invalid series name or options
// (an invalid or reserved collection name included).
//
// Deprecated: use NumberingOf, which sets the number through a typed
// setter, hands a record off to the series in the same call that writes it,
// and numbers it at once on a store with atomic compare-and-swap. Numbering
// stays for the callers that number raw JSON records by field name.
func (v *Vault) Numbering(series string, opts numbering.Options) (*numbering.Series, error) {
	if v.hubless {
		return nil, fmt.Errorf("numbering %q: %w", series, errHubless)
	}
	if err := CheckCollectionName(opts.Collection); err != nil {
		return nil, fmt.Errorf("numbering %q: %w: %w", series, numbering.ErrInvalid, err)
	}
	if opts.Field == "" {
		return nil, fmt.Errorf("numbering %q: %w: options: empty field", series, numbering.ErrInvalid)
	}
	field := opts.Field
	ns, _, err := v.numberingSeries(series, opts, func(body []byte, s sequence.Serial) ([]byte, error) {
		out, _, err := setField(body, field, jsonNumber(s))
		return out, err
	})
	return ns, err
}

// jsonNumber is the JSON value a record stamped by field name (the
// deprecated Numbering, the command line) gets: the bare number when the
// series has no format (its text is the number in decimal), else the text.
func jsonNumber(s sequence.Serial) []byte {
	if s.Formatted == strconv.FormatUint(s.N, 10) {
		return []byte(s.Formatted)
	}
	b, _ := json.Marshal(s.Formatted)
	return b
}

// numberingSeries opens the deferred-numbering series of the vault whose
// pass stamps a record's body with apply.
func (v *Vault) numberingSeries(series string, opts numbering.Options, apply func(body []byte, s sequence.Serial) ([]byte, error)) (*numbering.Series, deferred.Hooks, error) {
	return v.numberingPeriod(series, opts, stampRecords{v: v, apply: apply})
}

// numberingPeriod opens the deferred-numbering series of the vault that
// stamps records with r: of the period r.partition names (its one label),
// or the series' own when it names none.
func (v *Vault) numberingPeriod(series string, opts numbering.Options, r stampRecords) (*numbering.Series, deferred.Hooks, error) {
	r.v = v
	partition := r.partition
	var records deferred.Records = r
	if tr, ok := v.store.(stores.Transactor); ok {
		records = stampTxRecords{r, tr}
	}
	newSeries := wire.NewNumbering.(func(deferred.Backend, string, numbering.Options) (*numbering.Series, deferred.Hooks, error))
	return newSeries(deferred.Backend{
		Store:     v.store,
		Sealer:    v.seal,
		Prefix:    v.prefix,
		Partition: partition,
		Ledger:    v.ledger,
		Records:   records,
		Enter: func(ctx context.Context) (func(), error) {
			exit, err := v.enterSeries(ctx)
			if err != nil {
				return nil, err
			}
			// A handle that cannot seal with the store's generation is
			// refused before a pass commits a batch (rotate_current.go).
			if err := v.learnCurrentGen(ctx, opts.Collection); err != nil {
				exit()
				return nil, err
			}
			return exit, nil
		},
		Pins: v.pins,
		// A handle whose person was revoked (or revoked and granted
		// again) since it opened runs no pass (people_guard.go).
		Guard: v.guard.check,
		// One head for both paths: a pass numbers above the counter and
		// raises it (onehead.go).
		Counter: func(get func(key string) (stores.Item, error)) (uint64, error) {
			return v.counterHead(series, partition, get)
		},
		Raise: func(ctx context.Context, tx stores.Tx, from, to uint64) error {
			return v.raiseCounter(ctx, tx, series, partition, from, to)
		},
		// One definition per series: a format stored with its counter is
		// its passes' too.
		SeriesFormat: func(ctx context.Context, want string) (string, error) {
			def, err := v.seriesDefinition(ctx, series)
			if err == nil {
				// A period's passes number by the record's date (its
				// period, and the date tokens the vault renders).
				if err = beyondNumberingOf(def, len(partition) > 0 || r.render != nil); err != nil {
					// Passes number by no record's date yet.
					err = fmt.Errorf("the series' stored definition: %w: a pass: %w", sequence.ErrDefinitionMismatch, err)
				}
			}
			switch {
			case err != nil:
				return "", err
			case def.Format == "":
				return want, nil
			case want != "" && want != def.Format:
				return "", &numbering.MismatchError{Stored: def.Format, Asked: want}
			}
			return def.Format, nil
		},
		// Its heads are checked against the ledger's facts (ledger/summary.go).
		Recorded: func(ctx context.Context) (deferred.Recorded, error) {
			return v.passRecorded(ctx, series, partition)
		},
	}, series, opts)
}

// seriesDefinition reads the definition stored with the counter of series
// on the vault's own store, the zero Definition when it has none. It
// writes nothing.
func (v *Vault) seriesDefinition(ctx context.Context, series string) (sequence.Definition, error) {
	q, err := v.seqs.Sequence(series, sequence.Options{})
	if err != nil {
		return sequence.Definition{}, err
	}
	return q.Definition(ctx)
}

// passRecorded returns what the ledger records of the numbers of series,
// from the ledger's summary: the highest number given or voided by a pass,
// and the highest of its unpartitioned counter.
func (v *Vault) passRecorded(ctx context.Context, series string, partition []string) (deferred.Recorded, error) {
	var r deferred.Recorded
	_, err := v.ledger.Facts(ctx, ledger.NumberFactsKind, func(f any) error {
		nf := f.(*ledger.NumberFacts)
		c := nf.Counter(series, partition)
		r = deferred.Recorded{Passes: nf.Passes(series, partition).Assigned, Counter: c.Highest, Closed: c.Closed}
		return nil
	})
	return r, err
}

// stampRecords lets a numbering series read and stamp this vault's records,
// setting the number into a record's body with apply. Its methods are
// called only from inside a call of the series, which has entered the vault
// (Backend.Enter), so they do not enter it again: a call admitted before
// Close runs to its end.
type stampRecords struct {
	v     *Vault
	apply func(body []byte, s sequence.Serial) ([]byte, error)
	// partition is the period label of a period's series (its marks and
	// ledger entries carry it), nil for a series without periods.
	partition []string
	// render, if set, gives the number the text the record's own date
	// renders (a handle numbering by it), before apply.
	render func(body []byte, s sequence.Serial) (sequence.Serial, error)
}

// Number reports whether the record is stored, which number of the
// deferred-numbering series it carries, and else the provisional id it was
// handed off with, read from its authenticated content.
func (r stampRecords) Number(ctx context.Context, collection, id, series string) (uint64, string, bool, error) {
	n, p, _, ok, err := r.number(ctx, collection, id, series)
	return n, p, ok, err
}

// NumberToPlan implements deferred.PlanChecker: Number that fails, for a
// record waiting for its number, when render refuses it (a format that
// renders the record's date, and a record without one), so that the pass
// refuses before it commits a batch whose stamp would stop there.
func (r stampRecords) NumberToPlan(ctx context.Context, collection, id, series string) (uint64, string, bool, error) {
	n, p, body, ok, err := r.number(ctx, collection, id, series)
	if err == nil && ok && n == 0 && r.render != nil {
		if _, err := r.render(body, sequence.Serial{N: 1}); err != nil {
			return 0, "", false, fmt.Errorf("record %s/%s: %w", collection, id, err)
		}
	}
	return n, p, ok, err
}

// number is Number, with the record's body.
func (r stampRecords) number(ctx context.Context, collection, id, series string) (uint64, string, []byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", nil, false, err
	}
	if err := checkStoredID(id); err != nil {
		return 0, "", nil, false, err
	}
	it, err := r.v.store.Get(ctx, r.v.recordKey(collection, id))
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return 0, "", nil, false, nil
	case err != nil:
		return 0, "", nil, false, err
	}
	rec, err := r.v.openStored(collection, id, it, true)
	if err != nil {
		return 0, "", nil, false, fmt.Errorf("record %s/%s: %w", collection, id, err)
	}
	n, ok := findMark(rec.marks, markNumbering, series, r.partition)
	if !ok {
		// Numbered at write time by the series' sequence (NumberingOf on a
		// store with atomic compare-and-swap): numbered all the same.
		n, _ = findMark(rec.marks, markSequence, series, r.partition)
	}
	return n, pendingOf(rec.marks, series), rec.body, true, nil
}

// Stamp gives the record number m.N of m.Series as its next revision,
// unless it carries a number of the series already: in a transaction where
// the store has them, else by compare-and-swap on the record's version,
// retried when a writer changed the record in between, so a concurrent
// change is kept, not overwritten. In a transaction the new revision is
// sealed with the generation the store holds, as a record commit's is
// (freshSealAt); a store without transactions keeps none.
func (r stampRecords) Stamp(ctx context.Context, collection, id string, m deferred.Mark) (deferred.Stamp, error) {
	v := r.v
	if err := ctx.Err(); err != nil {
		return deferred.Stamp{}, err
	}
	key := v.recordKey(collection, id)
	var out deferred.Stamp
	var err error
	if tr, ok := v.store.(stores.Transactor); ok {
		_, err = cas.Do(ctx, cas.Policy{}, func(int) error {
			return tr.Update(ctx, func(tx stores.Tx) error {
				if err := lockKeys(tx, key, v.prefix+currentGenKey); err != nil {
					return err
				}
				it, err := tx.Get(key)
				if err != nil {
					return err
				}
				cur, err := v.currentGenTx(tx)
				if err != nil {
					return err
				}
				var sealed []byte
				if sealed, out, err = r.stampItem(tx, cur, collection, id, m, it); err != nil || sealed == nil {
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
			if sealed, out, err = r.stampItem(nil, 0, collection, id, m, it); err != nil || sealed == nil {
				return err
			}
			_, err = v.store.CompareAndSwap(ctx, key, it.Version, sealed)
			return err
		})
	}
	if err != nil {
		return deferred.Stamp{}, err
	}
	return out, nil
}

var _ deferred.PlanChecker = stampRecords{}

// stampTxRecords also stamps many records in one transaction.
type stampTxRecords struct {
	stampRecords
	tr stores.Transactor
}

// StampBatch stamps every ids[i] with marks[i] in one transaction.
func (r stampTxRecords) StampBatch(ctx context.Context, collection string, ids []string, marks []deferred.Mark) ([]deferred.Stamp, []bool, error) {
	v := r.v
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if len(ids) != len(marks) {
		return nil, nil, fmt.Errorf("stamp batch: %d ids, %d marks", len(ids), len(marks))
	}
	stamps := make([]deferred.Stamp, len(ids))
	found := make([]bool, len(ids))
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		return r.tr.Update(ctx, func(tx stores.Tx) error {
			// The pass names the ids in its own order, not the keys'.
			keys := make([]string, 0, len(ids)+1)
			for _, id := range ids {
				keys = append(keys, v.recordKey(collection, id))
			}
			if err := lockKeys(tx, append(keys, v.prefix+currentGenKey)...); err != nil {
				return err
			}
			cur, err := v.currentGenTx(tx) // once for the batch
			if err != nil {
				return err
			}
			for i, id := range ids {
				key := v.recordKey(collection, id)
				it, err := tx.Get(key)
				if errors.Is(err, stores.ErrNotFound) {
					stamps[i], found[i] = deferred.Stamp{}, false
					continue
				}
				if err != nil {
					return err
				}
				found[i] = true
				sealed, st, err := r.stampItem(tx, cur, collection, id, marks[i], it)
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
// Stamp when the record already carries a number of m.Series (m.N, or
// another: Stamp.Carries). The new revision has its body passed through
// apply, the series' pending mark replaced by its number mark. tx is the
// transaction on v's store it was read in, or nil; cur is the generation
// the store holds in tx (0: none, or no tx), which the new revision is
// sealed with at least.
func (r stampRecords) stampItem(tx stores.Tx, cur uint64, collection, id string, m deferred.Mark, it stores.Item) ([]byte, deferred.Stamp, error) {
	v := r.v
	rec, err := v.openStoredTx(v.keyTx(tx), collection, id, it, true)
	if err != nil {
		return nil, deferred.Stamp{}, err
	}
	current := deferred.Stamp{Revision: rec.rev, CipherHash: cipherHash(it.Value)}
	s := sequence.Serial{N: m.N, Formatted: m.Formatted}
	if len(r.partition) == 1 {
		s.Period = r.partition[0]
	}
	var rendered string // the text the record's date renders (Stamp.Formatted)
	if r.render != nil {
		if s, err = r.render(rec.body, s); err != nil {
			return nil, deferred.Stamp{}, err
		}
		rendered = s.Formatted
	}
	if n, marked := findMark(rec.marks, markNumbering, m.Series, r.partition); marked {
		if n != m.N {
			current.Carries = n
		} else {
			current.Formatted = rendered
		}
		return nil, current, nil
	}
	if n, marked := findMark(rec.marks, markSequence, m.Series, r.partition); marked {
		// Numbered at write time by the series' sequence: m.N is not its.
		current.Carries = n
		return nil, current, nil
	}
	next, err := r.apply(rec.body, s)
	if err != nil {
		return nil, deferred.Stamp{}, err
	}
	marks := withMark(withoutPending(rec.marks, m.Series), mark{kind: markNumbering, series: m.Series, partition: r.partition, n: m.N})
	sealed, rev, err := v.sealNextTx(tx, collection, id, joinRecord(marks, next), rec.rev)
	if err != nil {
		return nil, deferred.Stamp{}, err
	}
	sealed, hash, err := v.freshSealAt(tx, cur, collection, id, sealed, rev, cipherHash(sealed)) // rotate_current.go
	if err != nil {
		return nil, deferred.Stamp{}, err
	}
	return sealed, deferred.Stamp{Stamped: true, Revision: rev, CipherHash: hash, Formatted: rendered}, nil
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
