package ledger

import (
	"fmt"
	"maps"
	"slices"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/wire"
)

// NumberFactsKind names the summary's facts about numbers (see FactKind),
// which vault's checks of counters and numbering heads read as a
// *NumberFacts.
const NumberFactsKind = "numbers/1"

// numberFactKind is the FactKind of NumberFacts.
type numberFactKind struct{}

func (numberFactKind) Name() string { return NumberFactsKind }
func (numberFactKind) New() Facts   { return newNumberFacts() }

// NumberFacts are what a ledger records about the numbers of its series:
// per counter (a series and a partition), the highest number it records
// and whether the counter's period was closed; per series, whether its
// definition was stored and the highest number its deferred-numbering
// passes gave. They are the facts of the rollback checks: a counter or a
// pass head below them was rolled back by the store. A *NumberFacts is not
// safe for concurrent use: the ledger's summary hands it to one reader at
// a time.
type NumberFacts struct {
	counters map[string]*CounterFacts // by counterKey
	series   map[string]*SeriesFacts
	key      []byte // scratch for counterKey
}

// CounterFacts are the facts about one counter.
type CounterFacts struct {
	// Highest is the highest number the ledger records for the counter:
	// taken, carried by a record, voided, seeded to, or closed at.
	Highest uint64
	// Closed is true once the counter's period was closed.
	Closed bool
}

// SeriesFacts are the facts about a series as a whole.
type SeriesFacts struct {
	// Defined is true once the series' definition was stored.
	Defined bool
	// Assigned is the highest number deferred-numbering passes of the
	// series gave a record (NumberAssigned) or voided (a NumberVoided
	// naming a record).
	Assigned uint64
}

func newNumberFacts() *NumberFacts {
	return &NumberFacts{counters: map[string]*CounterFacts{}, series: map[string]*SeriesFacts{}}
}

// Counter returns the facts of the counter of series and partition
// (canonical text, nil when unpartitioned).
func (f *NumberFacts) Counter(series string, partition []string) CounterFacts {
	if c := f.counters[string(f.counterKey(series, partition))]; c != nil {
		return *c
	}
	return CounterFacts{}
}

// Series returns the facts of series.
func (f *NumberFacts) Series(series string) SeriesFacts {
	if s := f.series[series]; s != nil {
		return *s
	}
	return SeriesFacts{}
}

// Fold adds what e says about numbers.
func (f *NumberFacts) Fold(e *Entry) {
	switch e.Kind {
	case SeriesDefined:
		f.seriesOf(e.Series).Defined = true
	case NumberAssigned:
		s := f.passesOf(e.Series, e.Partition)
		s.Assigned = max(s.Assigned, e.Number)
	case NumberVoided:
		if e.Collection != "" {
			// A pass's void names the record: a number of the pass.
			s := f.passesOf(e.Series, e.Partition)
			s.Assigned = max(s.Assigned, e.Number)
			return
		}
		f.raise(e)
	case SeriesSeeded:
		if e.Reason == wire.SeedBroughtReason {
			// Numbers a device issued before it joined, brought by the
			// join: not held against the counter, which the join seeds
			// over them (as the sequences' own check counts them).
			return
		}
		f.raise(e)
	case NumberAllocated:
		f.raise(e)
	case RecordPut:
		if e.Series != "" {
			f.raise(e)
		}
	case PeriodClosed:
		f.raise(e).Closed = true
	}
}

// raise raises the highest number of e's counter to e's number.
func (f *NumberFacts) raise(e *Entry) *CounterFacts {
	k := f.counterKey(e.Series, e.Partition)
	c := f.counters[string(k)]
	if c == nil {
		c = &CounterFacts{}
		f.counters[string(k)] = c
	}
	c.Highest = max(c.Highest, e.Number)
	return c
}

// Passes returns the facts of the passes of series that number the
// period (or partition) partition: Series(series) for nil. Only Assigned
// is set for a partition.
func (f *NumberFacts) Passes(series string, partition []string) SeriesFacts {
	if len(partition) == 0 {
		return f.Series(series)
	}
	if s := f.series[string(f.counterKey(series, partition))]; s != nil {
		return *s
	}
	return SeriesFacts{}
}

// passesOf returns the facts of the passes of series numbering partition,
// made when missing: a partition's are kept under its counter's key, which
// no series name is (it holds a NUL).
func (f *NumberFacts) passesOf(series string, partition []string) *SeriesFacts {
	if len(partition) == 0 {
		return f.seriesOf(series)
	}
	return f.seriesOf(string(f.counterKey(series, partition)))
}

// seriesOf returns the facts of series, made when missing.
func (f *NumberFacts) seriesOf(series string) *SeriesFacts {
	s := f.series[series]
	if s == nil {
		s = &SeriesFacts{}
		f.series[series] = s
	}
	return s
}

// counterKey is the map key of a counter: the series alone when it is
// unpartitioned, else the series, a NUL (which no series name holds) and
// each component with its length before it. It reuses f.key.
func (f *NumberFacts) counterKey(series string, partition []string) []byte {
	b := append(f.key[:0], series...)
	if len(partition) > 0 {
		b = append(b, 0)
		for _, p := range partition {
			b = codec.AppendString(b, p)
		}
	}
	f.key = b
	return b
}

// Encoding of NumberFacts (a checkpoint section):
//
//	[1] version (1)
//	uvarint n, n times: bytes counterKey, uvarint highest, flag closed   (sorted by key)
//	uvarint m, m times: string series, flag defined, uvarint assigned     (sorted by series)
const numberFactsVersion = 1

// AppendBinary appends the facts' encoding.
func (f *NumberFacts) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, numberFactsVersion)
	b = codec.AppendUvarint(b, uint64(len(f.counters)))
	for _, k := range slices.Sorted(maps.Keys(f.counters)) {
		c := f.counters[k]
		b = codec.AppendString(b, k)
		b = codec.AppendUvarint(b, c.Highest)
		b = codec.AppendBool(b, c.Closed)
	}
	b = codec.AppendUvarint(b, uint64(len(f.series)))
	for _, name := range slices.Sorted(maps.Keys(f.series)) {
		s := f.series[name]
		b = codec.AppendString(b, name)
		b = codec.AppendBool(b, s.Defined)
		b = codec.AppendUvarint(b, s.Assigned)
	}
	return b, nil
}

// UnmarshalBinary replaces the facts with those b encodes.
func (f *NumberFacts) UnmarshalBinary(b []byte) error {
	out := newNumberFacts()
	r := codec.NewReader(b)
	r.Version(numberFactsVersion)
	n := r.Count(uint64(len(b)), 3)
	for range n {
		k := r.String(maxCheckpointBytes)
		c := &CounterFacts{Highest: r.Uvarint(), Closed: r.Bool()}
		if r.Err() != nil {
			break
		}
		if k == "" {
			r.Fail("empty counter key")
			break
		}
		out.counters[k] = c
	}
	m := r.Count(uint64(len(b)), 3)
	for range m {
		name := r.String(maxCheckpointBytes)
		s := &SeriesFacts{Defined: r.Bool(), Assigned: r.Uvarint()}
		if r.Err() != nil {
			break
		}
		out.series[name] = s
	}
	if err := r.End(); err != nil {
		return err
	}
	if len(out.counters) != n || len(out.series) != m {
		return fmt.Errorf("%w: a key twice", ErrMalformed)
	}
	*f = *out
	return nil
}
