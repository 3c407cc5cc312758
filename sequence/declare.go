package sequence

import (
	"context"
	"strings"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// A series exists once anything of it is stored: a counter (of any
// partition or period), a claim or void record of one, or its definition.
// Declare stores a definition without taking a number, so a series can be
// made to exist before its first number; a handle opened with
// Options.MustExist refuses a series that does not exist, so that a
// misspelt name fails instead of starting a new count at 1.

func init() {
	wire.SequenceDefinitionOf = definitionSeriesOf
	wire.SequenceDeclareForPasses = declareForPasses
}

// definitionSeriesOf tells whether key (relative to a prefix) is the key
// of a series' definition, and of which series.
func definitionSeriesOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, sequencesDir)
	if !ok {
		return "", false
	}
	series, ok := strings.CutSuffix(rest, definitionTag)
	if !ok || checkSeries(series) != nil || strings.ContainsAny(series, "\x00\x01") {
		return "", false
	}
	return series, true
}

// Declare makes q's series exist without taking a number: it stores the
// definition q was opened with (the empty one for a handle opened without
// any), with a series-defined ledger entry, when the series has none
// stored. A series that has a definition equal to q's is left as it is; one
// whose definition differs fails with a *DefinitionError, writing nothing.
// A series declared with the empty definition keeps it: a later handle
// opened with a format or a period is refused as for any other stored
// definition.
//
// Declare needs a store with atomic compare-and-swap (else ErrOffline), as
// an allocation does. It takes no number and no partition: every partition
// and period of a declared series counts from 1 when first used.
func (q *Sequence) Declare(ctx context.Context) error {
	if err := q.allocating(ctx, "declare"); err != nil {
		return err
	}
	return q.declare(ctx)
}

// declareForPasses is Declare on any store (see
// wire.SequenceDeclareForPasses): on one without atomic compare-and-swap
// the definition is created if absent by the store's compare-and-swap,
// which holds among the processes of one machine.
func declareForPasses(ctx context.Context, q *Sequence) error {
	if q.svc.gate.Closed() {
		return q.errorf("declare", stores.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return q.errorf("declare", err)
	}
	return q.declare(ctx)
}

// declare is Declare once the store was found fit.
func (q *Sequence) declare(ctx context.Context) error {
	if q.target {
		q = q.base
	}
	if !q.svc.gate.Enter() {
		return q.errorf("declare", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	s, sd := q.svc, q.sd
	sd.mu.Lock()
	defer sd.mu.Unlock()
	eff := &effective{def: q.def, defined: true, loc: q.loc}
	var err error
	periods := q.def.Period != PeriodNone // the counter of no period is touched (touchTx)
	if s.txr != nil {
		keys := []string{sd.key}
		if periods {
			keys = append(keys, q.c.key)
		}
		err = s.update(ctx, keys, func(tx stores.Tx) error {
			ev, err := s.defineTx(tx, q.series, sd.key, eff)
			if err != nil || ev == nil {
				return err
			}
			if periods {
				if err := s.touchTx(tx, q.c.key); err != nil {
					return err
				}
			}
			if s.journal == nil {
				return nil
			}
			return s.journal.Record(ctx, tx, []event{*ev})
		})
	} else {
		err = s.defineCAS(ctx, q.series, sd.key, eff)
		if err == nil && periods {
			err = s.touchCAS(ctx, q.c.key)
		}
	}
	if err != nil {
		return q.errorf("declare", err)
	}
	// What the store holds now: q's definition, or an equal one stored
	// before. Handles already open see it at their next call.
	stored, err := s.loadDefinition(ctx, sd.key)
	if err != nil {
		return q.errorf("declare", err)
	}
	sd.cur.Store(stored)
	sd.exists.Store(true)
	return nil
}

// Exists reports whether q's series exists (see Declare): whether the
// store holds a counter, a claim or void record, or the definition of the
// series. It reads at most one key of the store, and also asks this
// process's rollback pins and the ledger before it answers false, so that a
// series the store lost is not taken for one that never existed.
func (q *Sequence) Exists(ctx context.Context) (bool, error) {
	if q.sd.exists.Load() {
		return true, nil
	}
	if !q.svc.gate.Enter() {
		return false, q.errorf("exists", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	ok, err := q.svc.exists(ctx, q)
	if err != nil {
		return false, q.errorf("exists", err)
	}
	if ok {
		q.sd.exists.Store(true)
	}
	return ok, nil
}

// exists is Exists without the cache.
func (s *service) exists(ctx context.Context, q *Sequence) (bool, error) {
	if eff := q.sd.cur.Load(); eff != nil && eff.defined && eff.stored.Load() {
		return true, nil // a definition read from the store (or stored here)
	}
	base := s.prefix + sequencesDir + q.series
	// The keys of the series sort before those of every longer name that
	// starts with it ("\x00" and "\x01" come first): the first key under
	// base decides.
	for it, err := range stores.ListUnder(ctx, s.store, base) {
		if err != nil {
			return false, err
		}
		rest := it.Key[len(base):]
		if rest == "" || strings.HasPrefix(rest, "\x00") || strings.HasPrefix(rest, "\x01") {
			return true, nil
		}
		break
	}
	// Nothing stored. A counter this process saw, or a fact the ledger
	// records, means the store lost the series: the allocation path reports
	// that (ErrRollback), not this one.
	if s.pinOf(q.c.key) > 0 {
		return true, nil
	}
	if s.history == nil {
		return false, nil
	}
	found := false
	_, err := s.history.Facts(ctx, q.series, nil, 0, func(f fact) error {
		if f.Kind != wire.FactRecordDeleted && f.Kind != wire.FactCorrected {
			found = true
		}
		return nil
	})
	return found, err
}

// mustExistCheck fails with ErrNoSuchSeries when q was opened with
// Options.MustExist and its series does not exist. sd.mu may be held.
func (q *Sequence) mustExistCheck(ctx context.Context) error {
	if !q.mustExist || q.sd.exists.Load() {
		return nil
	}
	ok, err := q.svc.exists(ctx, q)
	switch {
	case err != nil:
		return q.errorf("exists", err)
	case !ok:
		return &NoSuchSeriesError{Series: q.series}
	}
	q.sd.exists.Store(true)
	return nil
}
