package sequence

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// Definition is what a series stores about itself, sealed with its
// counters (see Options): every handle, process, device and the CLI then
// numbers and renders the series the same way.
type Definition struct {
	// Format is the series' format ("" for plain decimal).
	Format string
	// Period says how often the count restarts.
	Period Period
	// FiscalStart is the first day of the fiscal year (zero: 1 January).
	FiscalStart MonthDay
	// Zone is the IANA name of the series' time zone ("" for UTC).
	Zone string
	// Meta is the series' free metadata (nil for none).
	Meta map[string]string
	// Corrects names the series this one corrects ("" for none).
	Corrects string
}

// IsZero reports whether d defines nothing: a series without a definition.
func (d Definition) IsZero() bool {
	return d.Format == "" && d.Period == PeriodNone && d.FiscalStart == (MonthDay{}) &&
		d.Zone == "" && len(d.Meta) == 0 && d.Corrects == ""
}

// String writes d as readable text, the form the ledger records.
func (d Definition) String() string {
	var b strings.Builder
	add := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + v)
	}
	if d.Format != "" {
		add("format", strconv.Quote(d.Format))
	}
	if d.Period != PeriodNone {
		add("period", d.Period.String())
	}
	if d.FiscalStart != (MonthDay{}) {
		add("fiscal-start", d.FiscalStart.String())
	}
	if d.Zone != "" {
		add("tz", d.Zone)
	}
	for _, k := range slices.Sorted(maps.Keys(d.Meta)) {
		add("meta."+k, strconv.Quote(d.Meta[k]))
	}
	if d.Corrects != "" {
		add("corrects", strconv.Quote(d.Corrects))
	}
	return b.String()
}

// equal reports whether a and b define the same series.
func (d Definition) equal(o Definition) bool {
	return d.Format == o.Format && d.Period == o.Period && d.FiscalStart == o.FiscalStart &&
		d.Zone == o.Zone && maps.Equal(d.Meta, o.Meta) && d.Corrects == o.Corrects
}

// mismatch is the *DefinitionError of a handle defined as given on a
// series defined as stored (each with its own copy of the metadata).
func mismatch(series string, stored, given Definition) *DefinitionError {
	stored.Meta, given.Meta = maps.Clone(stored.Meta), maps.Clone(given.Meta)
	return &DefinitionError{Series: series, Stored: stored, Given: given}
}

// Limits on a definition's metadata.
const (
	// MaxMeta is the most metadata entries a series carries.
	MaxMeta = 32
	// MaxMetaKeyLen is the longest metadata key, in bytes: ASCII letters,
	// digits, '_' and '-'.
	MaxMetaKeyLen = 64
	// MaxMetaValueLen is the longest metadata value, in bytes: UTF-8
	// without control characters.
	MaxMetaValueLen = 256
)

// definitionOf validates the definition fields of o and returns them in
// canonical form (1 January as the zero MonthDay, UTC as "").
func definitionOf(o Options) (Definition, *time.Location, error) {
	d := Definition{Format: o.Format, Period: o.Period, Corrects: o.Corrects}
	if !o.Period.valid() {
		return Definition{}, nil, invalid("period", o.Period.String(), "want none, day, month, year or fiscal-year")
	}
	if err := o.FiscalStart.check(); err != nil {
		return Definition{}, nil, err
	}
	if o.FiscalStart.orJan1() != (MonthDay{Month: time.January, Day: 1}) {
		d.FiscalStart = o.FiscalStart
	}
	loc := time.UTC
	if o.Location != nil {
		name := o.Location.String()
		if name != "UTC" {
			l, err := loadZone(name)
			if err != nil {
				return Definition{}, nil, err
			}
			d.Zone, loc = name, l
		}
	}
	if len(o.Meta) > 0 {
		if err := checkMeta(o.Meta); err != nil {
			return Definition{}, nil, err
		}
		d.Meta = maps.Clone(o.Meta)
	}
	if o.Corrects != "" {
		if err := checkSeries(o.Corrects); err != nil {
			return Definition{}, nil, invalid("corrects", o.Corrects, "not a valid series name")
		}
	}
	return d, loc, nil
}

func checkMeta(meta map[string]string) error {
	if len(meta) > MaxMeta {
		return invalid("meta", strconv.Itoa(len(meta)), fmt.Sprintf("more than %d entries", MaxMeta))
	}
	for k, v := range meta {
		if k == "" || len(k) > MaxMetaKeyLen || strings.IndexFunc(k, func(r rune) bool {
			return !(r < utf8.RuneSelf && (r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)))
		}) >= 0 {
			return invalid("meta", k, fmt.Sprintf("key: want 1 to %d ASCII letters, digits, '_' or '-'", MaxMetaKeyLen))
		}
		if len(v) > MaxMetaValueLen || !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
			return invalid("meta", k, fmt.Sprintf("value: want UTF-8 without control characters, at most %d bytes", MaxMetaValueLen))
		}
	}
	return nil
}

// zones caches time zones by IANA name: loading one reads the zoneinfo
// database.
var zones sync.Map // string -> *time.Location

// loadZone returns the time zone called name, or a *ValidationError.
func loadZone(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	if name == "" || name == "Local" {
		return nil, invalid("time zone", name, "not an IANA zone name (use time.LoadLocation, or nil for UTC)")
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalid("time zone", name, "unknown IANA zone (a program on a machine without a zoneinfo database must import time/tzdata)")
	}
	zones.Store(name, l)
	return l, nil
}

// defVersion is the first byte of a stored definition.
const defVersion = 1

// maxDefField bounds a stored definition's strings when decoding.
const maxDefField = 1024

// appendDefinition appends the stored encoding of d:
//
//	byte     defVersion (1)
//	str      Format
//	byte     Period
//	byte     FiscalStart month, byte FiscalStart day (0, 0: 1 January)
//	str      Zone
//	uvarint  count of Meta entries
//	count ×  (str key, str value), keys strictly ascending
//	str      Corrects
//
// where str is a uvarint length and the bytes (internal/codec).
func appendDefinition(b []byte, d Definition) []byte {
	b = append(b, defVersion)
	b = codec.AppendString(b, d.Format)
	b = append(b, byte(d.Period), byte(d.FiscalStart.Month), byte(d.FiscalStart.Day))
	b = codec.AppendString(b, d.Zone)
	b = codec.AppendUvarint(b, uint64(len(d.Meta)))
	for _, k := range slices.Sorted(maps.Keys(d.Meta)) {
		b = codec.AppendString(b, k)
		b = codec.AppendString(b, d.Meta[k])
	}
	return codec.AppendString(b, d.Corrects)
}

// decodeDefinition decodes what appendDefinition writes, and only that:
// a definition that Options could not give (an unknown period, 29
// February, a 1 January written out, unsorted metadata) is refused as
// corrupt. The zone's name is not looked up here.
func decodeDefinition(b []byte) (Definition, error) {
	var d Definition
	r := codec.NewReader(b)
	r.Version(defVersion)
	d.Format = r.String(maxDefField)
	d.Period = Period(r.Byte())
	d.FiscalStart = MonthDay{Month: time.Month(r.Byte()), Day: int(r.Byte())}
	d.Zone = r.String(maxDefField)
	n := r.Count(MaxMeta, 2)
	if n > 0 {
		d.Meta = make(map[string]string, n)
	}
	prev := ""
	for i := 0; i < n && r.Err() == nil; i++ {
		k, v := r.String(maxDefField), r.String(maxDefField)
		if r.Err() == nil && i > 0 && k <= prev {
			r.Fail("metadata keys out of order")
		}
		d.Meta[k], prev = v, k
	}
	d.Corrects = r.String(maxDefField)
	if r.Err() == nil {
		switch {
		case !d.Period.valid():
			r.Fail("unknown period")
		case d.FiscalStart.check() != nil || d.FiscalStart == (MonthDay{Month: time.January, Day: 1}):
			r.Fail("bad fiscal start")
		case d.Zone == "UTC":
			r.Fail("UTC written out")
		case len(d.Meta) > 0 && checkMeta(d.Meta) != nil:
			r.Fail("bad metadata")
		}
	}
	if err := r.End(); err != nil {
		return Definition{}, corrupt(err)
	}
	return d, nil
}

// definitionTag marks a series' definition record, after the series' own
// (unpartitioned) counter key: see keys.go.
const definitionTag = "\x01d\x00"

// defKey is the store key of the definition of series.
func (s *service) defKey(series string) string {
	return s.prefix + sequencesDir + series + definitionTag
}

// seriesDef is what a service knows of one series' definition: loaded
// from the store once, then shared by every handle of the series.
type seriesDef struct {
	key string
	mu  sync.Mutex // held while loading
	// cur is the series' definition as this service knows it: nil until
	// loaded. It changes when a handle defines a series that had none.
	cur atomic.Pointer[effective]
	// exists: the series was found to exist (declare.go).
	exists atomic.Bool
}

// effective is a definition with what rendering and period selection need.
type effective struct {
	def     Definition
	defined bool // def was given or stored (else the series has none)
	loc     *time.Location
	// stored is false while the definition must still be written with the
	// next number taken (create-if-absent, in the same commit).
	stored atomic.Bool
}

// handleSpec is a handle's view of its series' definition: the effective
// definition it was built from and the template parsed for the handle's
// partition.
type handleSpec struct {
	eff  *effective
	tmpl *template
}

// seriesOf returns the service's state of series' definition.
func (s *service) seriesOf(series string) *seriesDef {
	s.mu.Lock()
	defer s.mu.Unlock()
	sd := s.defs[series]
	if sd == nil {
		sd = &seriesDef{key: s.defKey(series)}
		s.defs[series] = sd
	}
	return sd
}

// spec returns q's view of its series' definition, loading the definition
// from the store on the series' first call in this service (one read).
// A handle opened with a definition other than the series' fails with a
// *DefinitionError.
func (q *Sequence) spec(ctx context.Context) (*handleSpec, error) {
	hs := q.hs.Load()
	if hs != nil && hs.eff == q.sd.cur.Load() {
		return hs, nil
	}
	return q.prepare(ctx)
}

// prepare is spec when q's view is not built yet or is stale: it loads the
// series' definition (reading the store once) and publishes q's view. It
// holds sd.mu across those reads, so nothing that runs inside a store
// transaction may call it (on a store whose transaction holds a store-wide
// lock, a read waits for the transaction): that code uses specLoaded.
func (q *Sequence) prepare(ctx context.Context) (*handleSpec, error) {
	sd := q.sd
	sd.mu.Lock()
	defer sd.mu.Unlock()
	for {
		eff, err := q.loadSeries(ctx)
		if err != nil {
			return nil, err
		}
		if err := q.mustExistCheck(ctx); err != nil {
			return nil, err
		}
		if q.defined && !eff.defined && eff.stored.Load() {
			// None is stored: the ledger must not record one (deleted by
			// the store), else this handle would define the series anew.
			if eff, err = q.svc.storedOrRecorded(ctx, q.series, sd, eff); err != nil {
				return nil, q.errorf("definition", err)
			}
		}
		if q.defined && !eff.defined {
			// This handle defines the series: stored with its first
			// number. sd.cur changes without sd.mu too (a definition
			// another process stored, adopted): then look again.
			def := q.defining()
			if !sd.cur.CompareAndSwap(eff, def) {
				continue
			}
			eff = def
		}
		hs, err := q.specFor(eff)
		if err != nil {
			return nil, err
		}
		q.hs.Store(hs)
		return hs, nil
	}
}

// defining is the effective of a handle that defines its series.
func (q *Sequence) defining() *effective {
	return &effective{def: q.def, defined: true, loc: q.loc}
}

// specFor builds q's view of eff, its series' definition as loaded: a
// handle opened with another definition gets a *DefinitionError. It reads
// nothing.
func (q *Sequence) specFor(eff *effective) (*handleSpec, error) {
	if q.defined && !eff.def.equal(q.def) {
		return nil, mismatch(q.series, eff.def, q.def)
	}
	hs := &handleSpec{eff: eff, tmpl: q.tmpl}
	if !q.defined && eff.def.Format != "" {
		t, err := parseFormat(eff.def.Format, q.partition, eff.def.Meta)
		if err != nil {
			return nil, q.errorf("definition", err)
		}
		hs.tmpl = t
	}
	return hs, nil
}

// specLoaded is spec for code running inside a store transaction, which
// must neither read the store nor wait for sd.mu (held by prepare across
// its reads, which may wait for that very transaction). It builds q's view
// from the series' definition as already loaded, taking no lock; ok is
// false when that needs a read first (prepare, outside the transaction):
// the definition not loaded yet, or q defining a series loaded without one
// while the history must be asked whether it records one.
func (q *Sequence) specLoaded() (hs *handleSpec, ok bool, err error) {
	sd := q.sd
	old := q.hs.Load()
	eff := sd.cur.Load()
	if old != nil && old.eff == eff {
		return old, true, nil
	}
	switch {
	case eff == nil:
		return nil, false, nil
	case q.defined && !eff.defined:
		if q.svc.history != nil {
			return nil, false, nil // storedOrRecorded reads it
		}
		def := q.defining()
		if !sd.cur.CompareAndSwap(eff, def) {
			return nil, false, nil
		}
		eff = def
	}
	if hs, err = q.specFor(eff); err != nil {
		return nil, true, err
	}
	// A view published meanwhile (from a newer definition, maybe) wins:
	// a stale one is rebuilt by the next call.
	q.hs.CompareAndSwap(old, hs)
	return hs, true, nil
}

// loadSeries returns the series' definition as the service knows it,
// reading it from the store the first time. sd.mu must be held.
func (q *Sequence) loadSeries(ctx context.Context) (*effective, error) {
	eff := q.sd.cur.Load()
	if eff == nil {
		var err error
		if eff, err = q.svc.loadDefinition(ctx, q.sd.key); err != nil {
			return nil, q.errorf("definition", err)
		}
		q.sd.cur.Store(eff)
	}
	return eff, nil
}

// errDefinitionGone: the ledger records a definition of the series but the
// store holds none.
var errDefinitionGone = fmt.Errorf("the ledger records the series' definition but the store holds none: %w", ErrRollback)

// storedOrRecorded is called when none, the series' effective as loaded
// from the store, has no definition, before a handle defines the series:
// if the history records a definition, it is read again from the store
// (stored meanwhile by another process: returned and kept), and a store
// that still holds none deleted it (errDefinitionGone). It reads the
// history once, when a series is first defined. sd.mu must be held.
func (s *service) storedOrRecorded(ctx context.Context, series string, sd *seriesDef, none *effective) (*effective, error) {
	if s.history == nil {
		return none, nil
	}
	recorded, err := s.recordsDefinition(ctx, series)
	if err != nil || !recorded {
		return none, err
	}
	eff, err := s.loadDefinition(ctx, sd.key)
	if err != nil {
		return nil, err
	}
	if !eff.defined {
		return nil, errDefinitionGone
	}
	sd.cur.CompareAndSwap(none, eff)
	return eff, nil
}

// recordsDefinition reports whether the history records a definition of
// series.
func (s *service) recordsDefinition(ctx context.Context, series string) (bool, error) {
	if !s.gate.Enter() {
		return false, stores.ErrClosed
	}
	defer s.gate.Exit()
	if hs, ok := s.history.(wire.HistorySummary); ok {
		f, err := hs.CounterFacts(ctx, series, nil)
		return f.Defined, err
	}
	found := false
	_, err := s.history.Facts(ctx, series, nil, 0, func(f fact) error {
		found = found || f.Kind == wire.FactDefined
		return nil
	})
	return found, err
}

// checkDefinition is called when the history records a definition of
// series: a service that knows the series without one reads it again from
// the store, adopting it if another process stored it meanwhile, and fails
// with errDefinitionGone if the store holds none.
func (s *service) checkDefinition(ctx context.Context, series string) error {
	sd := s.seriesOf(series)
	cur := sd.cur.Load()
	if cur == nil || cur.defined {
		return nil
	}
	eff, err := s.loadDefinition(ctx, sd.key)
	if err != nil {
		return err
	}
	if !eff.defined {
		return errDefinitionGone
	}
	sd.cur.CompareAndSwap(cur, eff)
	return nil
}

// loadDefinition reads the definition stored at key (none: an effective
// without definition, marked stored).
func (s *service) loadDefinition(ctx context.Context, key string) (*effective, error) {
	if !s.gate.Enter() {
		return nil, stores.ErrClosed
	}
	defer s.gate.Exit()
	item, err := s.store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		eff := &effective{loc: time.UTC}
		eff.stored.Store(true)
		return eff, nil
	}
	if err != nil {
		return nil, err
	}
	d, err := s.openDefinition(key, item.Value)
	if err != nil {
		return nil, err
	}
	return s.storedEffective(d)
}

func (s *service) openDefinition(key string, sealed []byte) (Definition, error) {
	pt, err := s.sealer.Open(key, sealed)
	if err != nil {
		return Definition{}, fmt.Errorf("open series definition: %w", err)
	}
	d, err := decodeDefinition(pt)
	if err != nil {
		return Definition{}, fmt.Errorf("decode series definition: %w", err)
	}
	return d, nil
}

// storedEffective is the effective of d, read from the store.
func (s *service) storedEffective(d Definition) (*effective, error) {
	eff := &effective{def: d, defined: true, loc: time.UTC}
	if d.Zone != "" {
		l, err := loadZone(d.Zone)
		if err != nil {
			return nil, fmt.Errorf("the series' stored definition: %w", err)
		}
		eff.loc = l
	}
	eff.stored.Store(true)
	return eff, nil
}

// adopt replaces lost, a definition this service meant to store, with d,
// the one another process stored first: the handles opened without a
// definition then number as d says, and those opened with lost's fail
// with a *DefinitionError. d was read in a transaction that may not
// commit, so it is checked again (as if pending) by the next allocation.
func (s *service) adopt(series string, lost *effective, d Definition) {
	eff := &effective{def: d, defined: true, loc: time.UTC}
	if d.Zone != "" {
		l, err := loadZone(d.Zone)
		if err != nil {
			return // the next load reports it
		}
		eff.loc = l
	}
	s.seriesOf(series).cur.CompareAndSwap(lost, eff)
}

// pending returns the definition an allocation must store with its
// number, or nil when there is none to store.
func (hs *handleSpec) pending() *effective {
	if hs.eff.stored.Load() {
		return nil
	}
	return hs.eff
}

// defineTx stores eff's definition in tx unless the series has one:
// equal, it is a no-op; different, the handle is refused. It returns the
// event to record when it stored the definition.
func (s *service) defineTx(tx stores.Tx, series, key string, eff *effective) (*event, error) {
	item, err := tx.Get(key)
	switch {
	case err == nil:
		d, err := s.openDefinition(key, item.Value)
		if err != nil {
			return nil, err
		}
		if !d.equal(eff.def) {
			s.adopt(series, eff, d)
			return nil, mismatch(series, d, eff.def)
		}
		return nil, nil
	case !errors.Is(err, stores.ErrNotFound):
		return nil, err
	}
	sealed, err := s.sealer.Seal(key, appendDefinition(nil, eff.def))
	if err != nil {
		return nil, err
	}
	if err := tx.Put(key, sealed); err != nil {
		return nil, err
	}
	return &event{Kind: wire.EventDefined, Series: series, Reason: eff.def.String()}, nil
}

// touchTx re-seals in tx the counter at key, its state unchanged, when the
// store holds one: after a definition with a period is stored, a process
// that took numbers there without knowing one (a handle opened without a
// definition) finds its counter written elsewhere at its next number,
// checks it against the ledger again, adopts the definition and takes no
// number outside the periods (counter.outsidePeriods).
func (s *service) touchTx(tx stores.Tx, key string) error {
	item, err := tx.Get(key)
	if errors.Is(err, stores.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	sealed, err := s.resealed(key, item.Value)
	if err != nil {
		return err
	}
	return tx.Put(key, sealed)
}

// resealed is the counter at key whose stored value is sealed, sealed
// again with its state unchanged (touchTx).
func (s *service) resealed(key string, sealed []byte) ([]byte, error) {
	st, err := s.openState(key, sealed)
	if err != nil {
		return nil, err
	}
	return s.sealer.Seal(key, st.appendTo(nil))
}

// touchCAS is touchTx on a store without transactions, by
// compare-and-swap (retried while another writer moves the counter: its
// write is enough, but is not known to be).
func (s *service) touchCAS(ctx context.Context, key string) error {
	_, err := cas.Do(ctx, s.policy, func(int) error {
		item, err := s.store.Get(ctx, key)
		if errors.Is(err, stores.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		sealed, err := s.resealed(key, item.Value)
		if err != nil {
			return err
		}
		_, err = s.store.CompareAndSwap(ctx, key, item.Version, sealed)
		return err
	})
	return err
}

// baseOf is the key of the counter of no period of the period counter
// whose partition (its label last) is partition.
func (s *service) baseOf(series string, partition []string) (string, error) {
	return counterKey(s.prefix, series, partition[:len(partition)-1])
}

// defineCAS stores eff's definition on a store without transactions,
// before the first number is taken: created only if absent, then recorded
// in the journal.
func (s *service) defineCAS(ctx context.Context, series, key string, eff *effective) error {
	sealed, err := s.sealer.Seal(key, appendDefinition(nil, eff.def))
	if err != nil {
		return err
	}
	_, err = s.store.CompareAndSwap(ctx, key, 0, sealed)
	if errors.Is(err, stores.ErrConflict) {
		item, err := s.store.Get(ctx, key)
		if err != nil {
			return err
		}
		d, err := s.openDefinition(key, item.Value)
		if err != nil {
			return err
		}
		if !d.equal(eff.def) {
			s.adopt(series, eff, d)
			return mismatch(series, d, eff.def)
		}
		eff.stored.Store(true)
		return nil
	}
	if err != nil {
		return err
	}
	eff.stored.Store(true)
	if s.journal != nil {
		ev := []event{{Kind: wire.EventDefined, Series: series, Reason: eff.def.String()}}
		if err := s.journal.Record(ctx, nil, ev); err != nil {
			return fmt.Errorf("the definition was stored but the journal failed: %w", err)
		}
	}
	return nil
}

// Definition returns the definition of q's series: the stored one, or the
// one q was opened with when the series has none stored yet (it is stored
// with the first number taken). The zero Definition means the series has
// none. It reads the store once per series and vault handle, and fails
// with a *DefinitionError when q's own definition differs from the stored
// one.
func (q *Sequence) Definition(ctx context.Context) (Definition, error) {
	hs, err := q.spec(ctx)
	if err != nil {
		return Definition{}, err
	}
	d := hs.eff.def
	d.Meta = maps.Clone(d.Meta)
	return d, nil
}
