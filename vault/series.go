package vault

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// SeriesInfo describes one numbered series of a vault, as Series lists it.
type SeriesInfo struct {
	// Name is the series name.
	Name string
	// Partition is the counter's partition, nil for none: a series numbered
	// online has one counter per partition (and per period), each listed on
	// its own. It does not include the period.
	Partition []string
	// Period is the label of the counter's period (2026, 2026-03,
	// FY2025-26…; see sequence.Options.Period), "" for a series without
	// periods.
	Period string
	// Closed is true for a period closed by Sequence.ClosePeriod.
	Closed bool
	// Head is the last number given: the counter's head, or for a series
	// numbered by passes the higher of it and the last number a pass gave
	// (0: none yet).
	Head uint64
	// Passes is true for a series numbered by deferred passes (a handle of
	// NumberingOf on a store without atomic compare-and-swap or on a
	// device, Numbering), and maybe online too (one head for both), false
	// for a counter numbered online only (Sequence, PutNumbered, NumberingOf
	// on a store with it).
	Passes bool
	// Collection and Format are what a series numbered by passes stores with
	// itself: the collection it numbers and its format. For a counter,
	// Collection is "" and Format is its series' stored format.
	Collection, Format string
	// Definition is the definition stored with a counter's series (the
	// zero value when it has none, and for a series numbered by passes).
	Definition sequence.Definition
}

// The helpers Series reaches through internal/wire.
type (
	counterOfFunc    = func(key string) (series string, partition []string, ok bool, err error)
	definitionOfFunc = func(key string) (series string, ok bool)
	counterInfoFunc  = func(ctx context.Context, q *sequence.Sequence) (head uint64, period string, closed bool, def sequence.Definition, err error)
	passInfoFunc     = func(ctx context.Context, b deferred.Backend, series string) (collection, format string, last uint64, err error)
	passPeriodsFunc  = func(ctx context.Context, b deferred.Backend, series string) ([]string, error)
)

// Series lists the numbered series of the vault: every counter (one per
// partition and period) with its head, period and series definition, then, by name, every series numbered by
// passes, with its last number, collection and format. A series whose
// passes gave numbers and that has a counter (one head for both paths, see
// NumberingOf) is one entry, in its counter's place, with Passes set; a
// name may appear as both when its passes have given none yet. A series
// numbered by the record's date (NumberingOfDated) is listed once per
// period, each with the head of its counter and its passes (one head per
// period), Passes set for every period its records were handed off to.
// Heads are read as Peek and a pass series' Last read them, checked against
// the rollback pins. It lists the store's keys under the vault's counters
// and deferred series, so its time grows with the records a deferred series
// holds (its memory with the series only); SeriesNamed reads one series at
// a cost that does not. A key the vault did not write, or a value that does
// not authenticate, is an error.
//
// On a device of a hub (Config.Hub) Series and SeriesNamed list the hub's
// series, where the counters and passes are; an unreachable hub gives an
// error wrapping sequence.ErrOffline.
func (v *Vault) Series(ctx context.Context) ([]SeriesInfo, error) {
	return v.listSeries(ctx, "", false)
}

// SeriesNamed is Series for the one series name: its counters (one per
// partition) and, when it is numbered by passes, that series. It reads
// that series' counters and one key of its deferred series, whatever the
// number of records the series holds. An empty result means the vault has
// no series of that name.
func (v *Vault) SeriesNamed(ctx context.Context, name string) ([]SeriesInfo, error) {
	if _, err := v.seqs.Sequence(name, sequence.Options{}); err != nil {
		return nil, fmt.Errorf("series: %w", err) // an invalid name: no such series can exist
	}
	return v.listSeries(ctx, name, true)
}

// listSeries lists every series, or (one) only the series called name.
func (v *Vault) listSeries(ctx context.Context, name string, one bool) ([]SeriesInfo, error) {
	if err := v.enter(ctx); err != nil {
		return nil, fmt.Errorf("series: %w", err)
	}
	defer v.exit()
	if v.hub != nil {
		out, err := v.hub.listSeries(ctx, name, one)
		if err != nil {
			return nil, err
		}
		return v.deviceCollections(ctx, out)
	}
	out, err := v.listCounters(ctx, name, one)
	if err != nil {
		return nil, err
	}
	return v.listPasses(ctx, name, one, out)
}

// listCounters is the first half of listSeries on the vault's own store:
// its counters (every one, or only those of the series name), in the
// order of their keys.
func (v *Vault) listCounters(ctx context.Context, name string, one bool) ([]SeriesInfo, error) {
	counterOf := wire.Hook[counterOfFunc]("SequenceCounterOf", wire.SequenceCounterOf)
	counterInfo := wire.Hook[counterInfoFunc]("SequenceCounterInfo", wire.SequenceCounterInfo)
	definitionOf := wire.Hook[definitionOfFunc]("SequenceDefinitionOf", wire.SequenceDefinitionOf)
	var out []SeriesInfo
	prev := ""
	// The counters of name are under this prefix, among those of longer
	// names that start with it; counterOf tells them apart.
	for it, err := range v.store.List(ctx, v.prefix+"_sequences/"+name) {
		if err != nil {
			return nil, fmt.Errorf("series: %w", err)
		}
		// List yields each key once, in ascending order: a key again (or
		// out of order) would list a counter twice.
		if prev != "" && it.Key <= prev {
			return nil, fmt.Errorf("series: key %q after %q: %w: keys out of order", it.Key, prev, stores.ErrMisbehaving)
		}
		prev = it.Key
		series, part, ok, err := counterOf(it.Key[len(v.prefix):])
		if err != nil {
			return nil, fmt.Errorf("series: key %q: %w: %w", it.Key, stores.ErrMisbehaving, err)
		}
		if !ok {
			// A series declared before its first number has its
			// definition's key, after its counters' keys, and no counter.
			if series, ok := definitionOf(it.Key[len(v.prefix):]); ok && (!one || series == name) &&
				(len(out) == 0 || out[len(out)-1].Name != series) {
				info, err := v.declaredSeries(ctx, series)
				if err != nil {
					return nil, err
				}
				out = append(out, info)
			}
			continue // a claim or void record of a counter, or another series
		}
		if one && series != name {
			continue
		}
		opts := sequence.Options{}
		for _, p := range part {
			opts.Partition = append(opts.Partition, p)
		}
		s, err := v.seqs.Sequence(series, opts)
		if err != nil {
			return nil, fmt.Errorf("series: key %q: %w: %w", it.Key, stores.ErrMisbehaving, err)
		}
		head, period, closed, def, err := counterInfo(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("series: %w", err)
		}
		if period != "" {
			part = part[:len(part)-1]
			if len(part) == 0 {
				part = nil
			}
		}
		out = append(out, SeriesInfo{Name: series, Partition: part, Period: period, Closed: closed, Head: head, Format: def.Format, Definition: def})
	}
	return out, nil
}

// deviceCollections fills in, for the series numbered by passes that the
// hub knows without a collection, the collection this device stored with
// the series: a handoff made offline stores the series' collection and
// format on the device, and sync brings the hub its entries but not that.
func (v *Vault) deviceCollections(ctx context.Context, infos []SeriesInfo) ([]SeriesInfo, error) {
	passInfo := wire.Hook[passInfoFunc]("NumberingInfo", wire.NumberingInfo)
	b := deferred.Backend{Store: v.store, Sealer: v.seal, Prefix: v.prefix, Ledger: v.ledger, Pins: v.pins}
	for i := range infos {
		s := &infos[i]
		if !s.Passes || s.Collection != "" {
			continue
		}
		coll, format, _, err := passInfo(ctx, b, s.Name)
		if err != nil {
			return nil, fmt.Errorf("series: %w", err)
		}
		s.Collection = coll
		if s.Format == "" {
			s.Format = format
		}
	}
	return infos, nil
}

// declaredSeries is the listing of a series declared (sequence.Declare)
// that has no counter yet: head 0 and its definition.
func (v *Vault) declaredSeries(ctx context.Context, series string) (SeriesInfo, error) {
	s, err := v.seqs.Sequence(series, sequence.Options{})
	if err != nil {
		return SeriesInfo{}, fmt.Errorf("series %q: %w: %w", series, stores.ErrMisbehaving, err)
	}
	// The definition as stored, as for a counter (counterInfo): s has no
	// partition, which a format naming a partition component does not
	// fit, so s.Definition would refuse it. Its head is that of the
	// series' counter without a partition, which is none (else the
	// listing found it): 0, or a pin's ErrRollback when the store
	// dropped it.
	counterInfo := wire.Hook[counterInfoFunc]("SequenceCounterInfo", wire.SequenceCounterInfo)
	_, _, _, def, err := counterInfo(ctx, s)
	if err != nil {
		return SeriesInfo{}, fmt.Errorf("series: %w", err)
	}
	return SeriesInfo{Name: series, Format: def.Format, Definition: def}, nil
}

// listPasses is the second half of listSeries: the series numbered by
// passes, appended to out.
func (v *Vault) listPasses(ctx context.Context, name string, one bool, out []SeriesInfo) ([]SeriesInfo, error) {
	passInfo := wire.Hook[passInfoFunc]("NumberingInfo", wire.NumberingInfo)
	dir := v.prefix + "_numbering/"
	var names []string
	if one && !strings.Contains(name, "/") { // deferred series have no '/' in their names
		// One key under the series' folder says it exists.
		for _, err := range v.store.List(ctx, dir+name+"/") {
			if err != nil {
				return nil, fmt.Errorf("series: %w", err)
			}
			names = append(names, name)
			break
		}
	} else if !one {
		for it, err := range v.store.List(ctx, dir) {
			if err != nil {
				return nil, fmt.Errorf("series: %w", err)
			}
			name, _, _ := strings.Cut(it.Key[len(dir):], "/")
			if len(names) == 0 || names[len(names)-1] != name {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		names = slices.Compact(names)
	}
	passPeriods := wire.Hook[passPeriodsFunc]("NumberingPeriods", wire.NumberingPeriods)
	b := deferred.Backend{Store: v.store, Sealer: v.seal, Prefix: v.prefix, Ledger: v.ledger, Pins: v.pins}
	for _, name := range names {
		coll, format, last, err := passInfo(ctx, b, name)
		if err != nil {
			return nil, fmt.Errorf("series: %w", err)
		}
		labels, err := passPeriods(ctx, b, name)
		if err != nil {
			return nil, fmt.Errorf("series: %w", err)
		}
		if len(labels) > 0 {
			// A series numbered by the record's date: one head per
			// period, its counter's and its passes' (its own series
			// numbers nothing).
			if out, err = v.listPeriodPasses(ctx, b, name, coll, format, labels, out); err != nil {
				return nil, err
			}
			if last == 0 {
				continue
			}
		}
		// One head per series: the series' unpartitioned counter, which
		// its passes raise, and passes that gave numbers are one entry.
		i := slices.IndexFunc(out, func(si SeriesInfo) bool {
			return si.Name == name && len(si.Partition) == 0 && si.Period == ""
		})
		if i < 0 || last == 0 {
			out = append(out, SeriesInfo{Name: name, Head: last, Passes: true, Collection: coll, Format: format})
			continue
		}
		si := &out[i]
		si.Head, si.Passes, si.Collection = max(si.Head, last), true, coll
		if format != "" {
			si.Format = format
		}
	}
	return out, nil
}

// listPeriodPasses merges into out the pass heads of the periods labels
// of the series name numbered by passes: each into its period's counter,
// as one entry with Passes set and the higher head, or as an entry of its
// own when the period has no counter. A period whose passes stored neither yet
// shows the series' collection and format (coll, format).
func (v *Vault) listPeriodPasses(ctx context.Context, b deferred.Backend, name, coll, format string, labels []string, out []SeriesInfo) ([]SeriesInfo, error) {
	passInfo := wire.Hook[passInfoFunc]("NumberingInfo", wire.NumberingInfo)
	for _, label := range labels {
		pb := b
		pb.Partition = []string{label}
		pc, pf, last, err := passInfo(ctx, pb, name)
		if err != nil {
			return nil, fmt.Errorf("series: period %s: %w", label, err)
		}
		if pc == "" {
			pc = coll
		}
		if pf == "" {
			pf = format
		}
		i := slices.IndexFunc(out, func(si SeriesInfo) bool {
			return si.Name == name && len(si.Partition) == 0 && si.Period == label
		})
		if i < 0 {
			out = append(out, SeriesInfo{Name: name, Period: label, Head: last, Passes: true, Collection: pc, Format: pf})
			continue
		}
		si := &out[i]
		si.Head, si.Passes = max(si.Head, last), true
		if pc != "" {
			si.Collection = pc
		}
		if si.Format == "" {
			si.Format = pf
		}
	}
	return out, nil
}
