package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// markPending is the kind of the mark of a record handed off to a
// deferred-numbering series and not numbered yet. Its single partition part
// is the provisional id; its number is 0. A pass replaces it with the
// series' markNumbering mark.
const markPending byte = 3

// pendingOf returns the provisional id of the pending mark of series, or "".
// A record handed off to a period (NumberingOfDated) has the period's
// label as the mark's second part.
func pendingOf(marks []mark, series string) string {
	for _, m := range marks {
		if m.series == series && isPending(m) {
			return m.partition[0]
		}
	}
	return ""
}

// withoutPending returns marks without the pending mark of series. marks is
// not changed.
func withoutPending(marks []mark, series string) []mark {
	out := make([]mark, 0, len(marks))
	for _, m := range marks {
		if m.kind != markPending || m.series != series {
			out = append(out, m)
		}
	}
	return out
}

// Numbered writes the records of a collection with gap-free numbers of one
// series, the same way on every store. Obtain it with NumberingOf. It is
// safe for concurrent use.
//
// On a store with atomic compare-and-swap and transactions (memory, Badger,
// PostgreSQL) Put numbers the record in the same commit that writes it, as
// Collection.PutNumbered does. On any other store (a file store), and on a
// device of a hub (Config.Hub), Put writes the record marked pending with a
// provisional id and hands it off to the series, and a later pass (Settle,
// or 'noydb number pass') numbers the pending records in provisional order.
// A device's Put works offline; its Settle runs the pass on the hub, over
// the records a sync has pushed there, and the numbered records come back
// with the next sync.
// A series has one head for both paths: a pass numbers after the numbers
// taken at write time and raises the counter past its own, so Put on an
// online store and passes of handed-off records (a device of a hub, a
// record put in line with Enqueue) never give a number twice (see the
// numbering package's One head per series). Either way the number reaches the record through the setter given to
// NumberingOf, in the series' stored format, and the record carries it in
// its sealed metadata too, so a Put of a copy read before the number came
// keeps it (the setter is applied again), and Get always shows it.
type Numbered[T any] struct {
	c      *Collection[T]
	series string
	opts   sequence.Options
	set    func(*T, sequence.Serial)
	date   func(*T) time.Time // the record's document date (NumberingOfDated), or nil
	online bool
	ns     *numbering.Series
	hooks  deferred.Hooks
	onHub  *Numbered[T] // on a device of a hub: the same handle on the hub

	mu     sync.Mutex // guards the fields below, set once by prepare
	ready  bool
	stored bool                // the format is stored with the deferred series too (a write's prepare)
	format *sequence.Formatter // nil: plain decimal
	seq    *sequence.Sequence  // online only

	pmu     sync.Mutex               // guards periods
	periods map[string]*periodSeries // the deferred series of each period used, by label
}

// NumberedRecord is a record as Numbered's Put and Get return it.
type NumberedRecord[T any] struct {
	// ID is the record's id.
	ID string
	// Value is the record, its number set by the setter when it has one.
	Value T
	// Serial is the record's number (N == 0 while it has none).
	Serial sequence.Serial
	// Pending is true when the record waits for a pass to number it.
	Pending bool
	// Provisional is the provisional id the record was handed off with: set
	// while it is pending, and, for a record a pass numbered, the key of
	// Numbered.Lookup. Empty for a record numbered at write time.
	Provisional string
}

// NumberingOf returns the handle that writes the records of c numbered by
// the series named series. set puts a number into a record: it is called
// with the number, formatted with the series' format, on the copy of the
// record that is written (at Put, or by the pass that numbers it) and on
// every record Get returns. It should only assign: it may run more than once.
//
// opts.Format is the series' format (see sequence.Options). The first Put
// or Settle stores it with the series, so every process numbers the same
// way: an empty Format means the stored one, whichever path stored it (a
// Sequence's definition, the first number taken at write time, or a
// pass; plain decimal for a new series), and a Format that differs from
// the stored one makes Put and Settle fail with numbering.ErrMismatch.
// Get and every other read render with the stored format and store
// nothing, so no read changes the text a record was numbered with.
//
// A Period, FiscalStart or Location (other than UTC) numbers and renders
// by the date of the document, which only the record knows: give it with
// NumberingOfDated. The rest of a definition is refused with
// ErrInvalidArgument rather than dropped: Corrects (a credit note names the
// number it corrects: number it with Sequence.Correcting), and, not yet
// supported, a Partition or Meta. A series whose stored definition has any
// of them (stored by a Sequence) makes Put, Get and Settle fail with
// sequence.ErrDefinitionMismatch.
//
// A format with date tokens ({YYYY}, {MM}, {FY}, …) renders the date of
// the document too, so it is NumberingOfDated's: NumberingOf refuses it
// (ErrInvalidArgument), and a series whose stored format has them makes
// Put, Get and Settle fail with sequence.ErrDefinitionMismatch, never
// rendering a number with the date of the read.
//
// NumberingOf does no I/O. A nil c or set, an invalid collection or series
// name, a definition it does not take or a bad format give an error
// wrapping ErrInvalidArgument.
func NumberingOf[T any](c *Collection[T], series string, opts sequence.Options, set func(*T, sequence.Serial)) (*Numbered[T], error) {
	return numberingOf(c, series, opts, set, nil)
}

// NumberingOfDated is NumberingOf for a series numbered by the date of the
// document each record is (an invoice's or a receipt's date), which date
// returns, like set, from the record itself: with opts.Period the number
// is the next of the period holding that date, read in opts.Location with
// the fiscal year starting on opts.FiscalStart, not of the period of the
// clock; the date tokens of the format ({YYYY}, {MM}, {FY}, …) render it;
// and Serial.Period names the period. A receipt dated 31 December numbered
// on 2 January takes December's next number. The period's counter is the
// one Sequence.At(date) and Collection.PutNumbered take from: one head per
// period for every path. A period closed with Sequence.ClosePeriod takes
// no number: Put fails with an error matching sequence.ErrPeriodClosed
// (a *sequence.PeriodClosedError) and writes nothing.
//
// The date must be set on every record Put writes: a record whose date is
// the zero time.Time is refused with ErrInvalidArgument, nothing written.
// A record keeps the number, and the period, it was given: a Put of it
// whose date falls in another period, or renders its number differently,
// is refused with ErrInvalidArgument. Get renders the number with the
// record's date and the series' stored definition; it stores nothing.
//
// Where passes number (a file store, a device of a hub), Put hands the
// record off to its date's period, and Settle runs a pass of every period
// that has records waiting (its report lists each, PassReport.Periods, and
// counts a closed period's waiting records in Closed): each period's
// numbers follow its head, which
// is the period's counter too, so a receipt handed off on 31 December and
// numbered by a pass in January takes December's next number, after any
// taken at write time. A pass meeting records of a closed period numbers
// none of them and leaves them pending: Settle returns an error matching
// sequence.ErrPeriodClosed (naming the period and how many wait) after
// numbering the other periods. A pending record's Put may not move it to
// another period (ErrInvalidArgument). Lookup looks in every period;
// AuditAt audits one.
//
// NumberingOfDated refuses with ErrInvalidArgument a nil date, and
// everything NumberingOf refuses but the period, fiscal start and zone.
func NumberingOfDated[T any](c *Collection[T], series string, opts sequence.Options, set func(*T, sequence.Serial), date func(*T) time.Time) (*Numbered[T], error) {
	if date == nil {
		return nil, fmt.Errorf("numbering %q: %w: nil date function", series, ErrInvalidArgument)
	}
	return numberingOf(c, series, opts, set, date)
}

// numberingOf is NumberingOf, numbering by the record's date when date is
// set (NumberingOfDated).
func numberingOf[T any](c *Collection[T], series string, opts sequence.Options, set func(*T, sequence.Serial), date func(*T) time.Time) (*Numbered[T], error) {
	bad := func(err error) (*Numbered[T], error) {
		return nil, fmt.Errorf("numbering %q: %w: %w", series, ErrInvalidArgument, err)
	}
	switch {
	case c == nil:
		return bad(errors.New("nil collection"))
	case set == nil:
		return bad(errors.New("nil setter"))
	case c.err != nil && (!c.denied || c.v.keys.permits(c.name) != nil):
		// A collection refused when c was made counts as given once this
		// handle has seen it given (see CollectionOf).
		return bad(c.err)
	}
	if err := beyondNumberingOf(askedOf(opts), date != nil); err != nil {
		return bad(err)
	}
	if len(opts.Partition) != 0 {
		return bad(errors.New("partitions are not supported by NumberingOf yet"))
	}
	if opts.Format != "" {
		f, err := sequence.ParseFormatWith(opts.Format, sequence.FormatOptions{FiscalStart: opts.FiscalStart, Location: opts.Location})
		if err != nil {
			return bad(err)
		}
		if date == nil && f.Dated() {
			return bad(errDatedFormat(opts.Format))
		}
	}
	v := c.v
	n := &Numbered[T]{c: c, series: series, opts: opts, set: set, date: date}
	caps := v.store.Capabilities()
	if _, ok := v.store.(stores.Transactor); ok && caps.CASAtomic && caps.Transactions && v.hub == nil && !v.hubless {
		n.online = true
	}

	if date != nil {
		// Validates the period, fiscal start and zone the sequence way.
		if _, err := v.Sequence(series, sequence.Options{Period: opts.Period, FiscalStart: opts.FiscalStart, Location: opts.Location}); err != nil {
			return bad(err)
		}
	}
	if v.hub != nil {
		// A device numbers in passes on the hub, where the counters are.
		hn, err := numberingOf(&Collection[T]{v: v.hub, name: c.name}, series, opts, set, date)
		if err != nil {
			return nil, err
		}
		n.onHub = hn
		// Syncs keep the numbers the hub stamps (sync_numbers.go), and
		// SyncAndSettle runs this handle's pass.
		v.registerNumbered(series, numberedHook{set: n.setKnown, settle: n.Settle})
	}
	records := stampRecords{apply: n.apply}
	if date != nil {
		records.render = n.render
	}
	ns, hooks, err := v.numberingPeriod(series, numbering.Options{Collection: c.name, Format: opts.Format}, records)
	if err != nil {
		return bad(err)
	}
	if n.online {
		// Validates the name the sequence way too; the format is set once
		// the stored one is known (prepare).
		if _, err := v.Sequence(series, sequence.Options{}); err != nil {
			return bad(err)
		}
	}
	n.ns, n.hooks = ns, hooks
	return n, nil
}

// errDatedFormat is why a handle without the record's date (NumberingOf)
// cannot number with format: its date tokens would render the date of
// the call, and a Get rendering it again later would read otherwise.
func errDatedFormat(format string) error {
	return fmt.Errorf("the date tokens of format %q render the document's date: give it with NumberingOfDated", format)
}

// askedOf is the definition opts asks for, but its format and partition.
func askedOf(opts sequence.Options) sequence.Definition {
	return sequence.Definition{Period: opts.Period, FiscalStart: opts.FiscalStart,
		Meta: opts.Meta, Corrects: opts.Corrects, Zone: zoneName(opts.Location)}
}

// zoneName is the name a definition gives the time zone loc: "" for UTC
// (and nil), else its IANA name.
func zoneName(loc *time.Location) string {
	if loc == nil || loc == time.UTC || loc.String() == "UTC" {
		return ""
	}
	return loc.String()
}

// beyondNumberingOf says which part of the definition d NumberingOf cannot
// honour on both of its paths (nil: none): a correcting series (credit
// notes number through Sequence.Correcting, naming the number corrected),
// metadata (not yet), and, for a handle without the record's date
// (dated false), periods, fiscal years and time zones, which number and
// render by the document's date.
func beyondNumberingOf(d sequence.Definition, dated bool) error {
	switch {
	case d.Corrects != "":
		return fmt.Errorf("a correcting series (Corrects %q) takes numbers through Sequence.Correcting only", d.Corrects)
	case len(d.Meta) != 0:
		return errors.New("metadata (Meta) is not supported by NumberingOf yet")
	case dated:
		return nil
	case d.Period != sequence.PeriodNone:
		return fmt.Errorf("a period (%s) numbers by the record's date: give it with NumberingOfDated", d.Period)
	case d.FiscalStart != (sequence.MonthDay{}) && d.FiscalStart != (sequence.MonthDay{Month: time.January, Day: 1}):
		return errors.New("a fiscal start numbers by the record's date: give it with NumberingOfDated")
	case d.Zone != "" && d.Zone != "UTC":
		return errors.New("a time zone (Location) reads the record's date: give it with NumberingOfDated")
	}
	return nil
}

// checkStored checks the series' stored definition def against the
// handle's: what NumberingOf cannot honour, and, for a handle numbering by
// the record's date, a period, fiscal start or zone other than its own. A
// series with none stored takes the handle's (its first number stores it).
func (n *Numbered[T]) checkStored(def sequence.Definition) error {
	if err := beyondNumberingOf(def, n.date != nil); err != nil {
		return err
	}
	if n.date == nil || def.IsZero() {
		return nil
	}
	fs := n.opts.FiscalStart
	if fs == (sequence.MonthDay{Month: time.January, Day: 1}) {
		fs = sequence.MonthDay{}
	}
	if def.Period != n.opts.Period || def.FiscalStart != fs || def.Zone != zoneName(n.opts.Location) {
		return fmt.Errorf("stored with period %s, fiscal start %s, zone %q; the handle asks for period %s, fiscal start %s, zone %q",
			def.Period, def.FiscalStart, def.Zone, n.opts.Period, fs, zoneName(n.opts.Location))
	}
	return nil
}

// apply decodes a record's JSON body, sets s with the setter and encodes it.
func (n *Numbered[T]) apply(body []byte, s sequence.Serial) ([]byte, error) {
	var val T
	if err := json.Unmarshal(body, &val); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	n.set(&val, s)
	out, err := json.Marshal(val)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return out, nil
}

// setKnown puts number num into body with the setter, in the series'
// format once this handle knows it (ok false before: body unchanged).
func (n *Numbered[T]) setKnown(body []byte, num uint64) ([]byte, bool, error) {
	n.mu.Lock()
	ready := n.ready
	var s sequence.Serial
	if ready {
		s = n.serial(num)
	}
	n.mu.Unlock()
	if !ready {
		return body, false, nil
	}
	if n.date != nil {
		// Rendered by the record's date, in the period of it.
		label, err := n.periodOfBody(body)
		if err != nil {
			return body, false, err
		}
		s.Period = label
		if s, err = n.render(body, s); err != nil {
			return body, false, err
		}
	}
	out, err := n.apply(body, s)
	return out, err == nil, err
}

// Series returns the deferred-numbering series behind the handle: its
// passes, Lookup by record id, Last, Pending, Assignments. A handle with
// periods (NumberingOfDated) has one per period besides, which its
// Settle, Lookup and AuditAt use; this one numbers none of its records.
func (n *Numbered[T]) Series() *numbering.Series { return n.ns }

// Online reports whether Put numbers records at write time (the store has
// atomic compare-and-swap and transactions), else it hands them off to a
// pass.
func (n *Numbered[T]) Online() bool { return n.online }

// prepare learns the series' format once: its one definition, stored with
// its counter (by a Sequence, or the first number taken at write time)
// and, for its passes, with the deferred series. A format the handle asks
// for must be that one (else numbering.ErrMismatch); a handle asking for
// none uses it, whichever path stored it. With store (a write) the
// deferred series' config is stored when it has none; a read stores
// nothing, and renders with the stored definition all the same.
func (n *Numbered[T]) prepare(ctx context.Context, store bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ready && (n.stored || !store) {
		return nil
	}
	want := n.opts.Format
	def, err := n.definition(ctx)
	if err != nil {
		return err
	}
	if err := n.checkStored(def); err != nil {
		// Stored by a Sequence: numbering it here would not follow it.
		return fmt.Errorf("numbering %q: the series' stored definition: %w: %w", n.series, sequence.ErrDefinitionMismatch, err)
	}
	if def.Format != "" {
		if want != "" && want != def.Format {
			return fmt.Errorf("numbering %q: %w", n.series, &numbering.MismatchError{Stored: def.Format, Asked: want})
		}
		want = def.Format
	}
	var format string
	if store {
		format, err = n.hooks.Format(ctx, want)
	} else {
		format, _, err = n.hooks.StoredFormat(ctx, want)
	}
	if err != nil {
		return err
	}
	n.stored = n.stored || store
	if n.ready {
		return nil
	}
	if format != "" {
		fo := sequence.FormatOptions{FiscalStart: n.opts.FiscalStart, Location: n.opts.Location}
		f, err := sequence.ParseFormatWith(format, fo)
		if err != nil {
			return fmt.Errorf("numbering %q: stored format: %w: %w", n.series, numbering.ErrCorrupt, err)
		}
		if n.date == nil && f.Dated() {
			// Stored by a Sequence or a dated handle: rendered here, its
			// date tokens would read today's date on every Get.
			return fmt.Errorf("numbering %q: the series' stored definition: %w: %w", n.series, sequence.ErrDefinitionMismatch, errDatedFormat(format))
		}
		n.format = f
	}
	o := sequence.Options{Format: format}
	if n.date != nil {
		o.Period, o.FiscalStart, o.Location = n.opts.Period, n.opts.FiscalStart, n.opts.Location
	}
	if n.online {
		if n.seq, err = n.c.v.Sequence(n.series, o); err != nil {
			return err
		}
	} else if n.date != nil && store && def.IsZero() {
		// Passes store no definition with the counter: it is declared,
		// so every handle and Sequence of the series numbers by the same
		// period, on a file store too (by its compare-and-swap, see
		// wire.SequenceDeclareForPasses). A device declares it where it
		// can (its handle on the hub does there).
		declare := func(ctx context.Context, q *sequence.Sequence) error { return q.Declare(ctx) }
		if n.onHub == nil {
			declare = wire.Hook[func(context.Context, *sequence.Sequence) error]("SequenceDeclareForPasses", wire.SequenceDeclareForPasses)
		}
		q, err := n.c.v.Sequence(n.series, o)
		if err == nil {
			err = declare(ctx, q)
		}
		// A device's declare is its best: offline, or refused to a limited
		// person (who defines no series), the handoff takes no number all
		// the same, and the hub's pass declares it there.
		if err != nil && !(n.onHub != nil && (errors.Is(err, sequence.ErrOffline) || errors.Is(err, ErrNotPermitted))) {
			return fmt.Errorf("numbering %q: declare its definition: %w", n.series, err)
		}
	}
	n.ready = true
	return nil
}

// definition reads the definition stored with the series' counter on the
// vault's own store (a device's too: reads work offline), the zero
// Definition when it has none. It writes nothing.
func (n *Numbered[T]) definition(ctx context.Context) (sequence.Definition, error) {
	return n.c.v.seriesDefinition(ctx, n.series)
}

// serial is n with its text in the series' stored format.
func (n *Numbered[T]) serial(num uint64) sequence.Serial {
	if n.format == nil {
		return sequence.Serial{N: num, Formatted: strconv.FormatUint(num, 10)}
	}
	return sequence.Serial{N: num, Formatted: n.format.Format(num)}
}

// serialAt is number num of period (a series with periods; else "") with
// its text in the series' stored format, for a document dated date: the
// record's date, for a handle numbering by it (NumberingOfDated).
func (n *Numbered[T]) serialAt(num uint64, period string, date time.Time) sequence.Serial {
	if n.date == nil || n.format == nil {
		s := n.serial(num)
		s.Period = period
		return s
	}
	return sequence.Serial{N: num, Formatted: n.format.FormatAt(num, date), Period: period}
}

// dateOf returns the document date of value (NumberingOfDated), the zero
// time for a handle without one. A handle with a date refuses a zero one:
// the period and the date tokens are chosen by it.
func (n *Numbered[T]) dateOf(value *T) (time.Time, error) {
	if n.date == nil {
		return time.Time{}, nil
	}
	d := n.date(value)
	if d.IsZero() {
		return d, fmt.Errorf("%w: the record's date is the zero time.Time: its period and the date of its number are chosen by it", ErrInvalidArgument)
	}
	return d, nil
}

// periodOf is the label of the period holding date in the handle's zone
// ("" for a series without periods).
func (n *Numbered[T]) periodOf(date time.Time) string {
	if n.date == nil || n.opts.Period == sequence.PeriodNone {
		return ""
	}
	loc := n.opts.Location
	if loc == nil {
		loc = time.UTC
	}
	return n.opts.Period.Label(date.In(loc), n.opts.FiscalStart)
}

// errRestart: the record changed under a Put in a way that changes what it
// writes (it got its number, or was handed off by another writer); the Put
// reads it again.
var errRestart = errors.New("record changed: read it again")

// putRounds bounds the rounds of a Put whose record keeps changing under it.
const putRounds = 8

// Put writes value under id with the series' next number (PutDeferred).
//
// On a store with atomic compare-and-swap and transactions the number is
// taken in the same commit that writes the record and its ledger entry: a
// failed Put takes no number. On any other store the record is written
// without a number, marked pending with a provisional id (a UUIDv7), and
// handed off to the series; the result has Pending set, and its error is
// nil. The handoff entry is written first and the record second (in one
// transaction where the store has them): a Put killed in between leaves an
// entry whose record is not in the store, which no pass numbers (it waits,
// numbering.PassReport.Waiting) and which the next Put of the id replaces.
//
// A record that already carries its number (an earlier Put or a pass gave
// it) keeps it: value is written with the number set again, and no number
// is taken. A pending record keeps its provisional id and place in line.
// So Put is idempotent per id: retrying a Put whose outcome is unknown
// never takes a second number. To give an id a new number, Delete it first.
//
// A record the store serves pending under a provisional id that the series'
// index says a pass numbered (a revision replayed from before its stamp)
// makes Put fail with an error wrapping ErrRollback, writing nothing.
func (n *Numbered[T]) Put(ctx context.Context, id string, value T) (NumberedRecord[T], error) {
	c := n.c
	if err := c.begin(ctx, "put numbered", id); err != nil {
		return NumberedRecord[T]{}, err
	}
	defer c.v.exit()
	fail := func(err error) (NumberedRecord[T], error) {
		return NumberedRecord[T]{}, fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
	}
	// The record's date (NumberingOfDated) is checked before anything is
	// written.
	date, err := n.dateOf(&value)
	if err != nil {
		return fail(err)
	}
	if err := n.prepare(ctx, true); err != nil {
		return fail(err)
	}
	for range putRounds {
		prev, err := n.read(ctx, id)
		if err != nil {
			return fail(err)
		}
		var out NumberedRecord[T]
		num, period, numbered := n.markOf(prev.marks)
		if !numbered {
			err := n.checkPending(ctx, id, prev)
			if errors.Is(err, errRestart) {
				continue
			}
			if err != nil {
				return fail(err)
			}
		}
		switch {
		case numbered:
			out, err = n.rewrite(ctx, id, value, num, period, date)
		case n.online:
			out, err = n.putOnline(ctx, id, value, date)
		default:
			out, err = n.handoff(ctx, id, value, pendingOf(prev.marks, n.series), date)
		}
		if errors.Is(err, errRestart) {
			continue
		}
		if err != nil && !(errors.Is(err, ledger.ErrUnpinned) && out.ID != "") {
			return fail(err)
		}
		if err != nil {
			// Written, but the rollback pin covering it was not saved: the
			// record comes back with the error.
			return out, fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
		}
		return out, nil
	}
	return fail(fmt.Errorf("%w: the record kept changing", stores.ErrConflict))
}

// checkPending fails with an error wrapping ErrRollback when the record
// id, whose marks say it is pending under a provisional id, was numbered
// under that same provisional id by a pass (the series' index, written only
// after the record was stamped, says so): the store served a revision of
// the record from before its stamp. A record deleted and handed off again
// since is pending under another provisional id, and passes.
func (n *Numbered[T]) checkPending(ctx context.Context, id string, rec stored) error {
	p := pendingOf(rec.marks, n.series)
	if p == "" {
		return nil
	}
	label, err := n.periodOfBody(rec.body)
	if err != nil {
		return err
	}
	ps, err := n.period(label)
	if err != nil {
		return err
	}
	ip, num, text, ok, err := ps.hooks.Indexed(ctx, id)
	if err != nil || !ok || ip != p {
		return err
	}
	// A pass may have stamped and indexed the record since it was read:
	// then it carries its number now.
	now, err := n.read(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := n.numberOf(now.marks); ok || pendingOf(now.marks, n.series) != p {
		return errRestart
	}
	return fmt.Errorf("%w: the store serves the record as it was before a pass gave it number %d (%s)", ErrRollback, num, text)
}

// numberOf returns the number of the series that marks carry, from either path.
func (n *Numbered[T]) numberOf(marks []mark) (uint64, bool) {
	num, _, ok := n.markOf(marks)
	return num, ok
}

// markOf returns the number of the series that marks carry, from either
// path, and for a handle numbering by period the label of its period (the
// partition of its mark, as Collection.PutNumbered writes it).
func (n *Numbered[T]) markOf(marks []mark) (uint64, string, bool) {
	if num, ok := findMark(marks, markSequence, n.series, nil); ok {
		return num, "", true
	}
	if num, ok := findMark(marks, markNumbering, n.series, nil); ok {
		return num, "", true
	}
	if n.date != nil && n.opts.Period != sequence.PeriodNone {
		for _, m := range marks {
			if (m.kind == markSequence || m.kind == markNumbering) && m.series == n.series && len(m.partition) == 1 {
				return m.n, m.partition[0], true
			}
		}
	}
	return 0, "", false
}

// partitioned reports whether marks carry a number of series taken in a
// partition or period of it.
func partitioned(marks []mark, series string) bool {
	for _, m := range marks {
		if m.kind == markSequence && m.series == series && len(m.partition) > 0 {
			return true
		}
	}
	return false
}

// read reads and opens the stored record id (the zero stored when there is none).
func (n *Numbered[T]) read(ctx context.Context, id string) (stored, error) {
	it, err := n.c.v.store.Get(ctx, n.c.v.recordKey(n.c.name, id))
	if errors.Is(err, stores.ErrNotFound) {
		return stored{}, nil
	}
	if err != nil {
		return stored{}, err
	}
	return n.c.v.openStored(n.c.name, id, it, true)
}

// putOnline takes the next number of the series in the commit that writes
// the record (Collection.PutNumbered), or fails with errRestart when the
// record got a number meanwhile. A handle numbering by the record's date
// takes it from the period of date (Sequence.At).
func (n *Numbered[T]) putOnline(ctx context.Context, id string, value T, date time.Time) (NumberedRecord[T], error) {
	c, v := n.c, n.c.v
	out := NumberedRecord[T]{ID: id}
	q := n.seq
	if n.date != nil {
		q = q.At(date)
	}
	// The record's keys include currentGenKey, which applyTx reads: named
	// here, it is locked with the others in key order (see recordKeys).
	// So is the collection's definition when the record may bind the
	// series (an owner's first numbered record here, withBindKey).
	_, err := q.BindKeys(ctx, v.withBindKey(v.recordKeys(c.name, id), c.name, n.series), func(tx stores.Tx, s sequence.Serial) error {
		prev, err := v.readTx(tx, c.name, id, true)
		if err != nil {
			return err
		}
		if _, ok := n.numberOf(prev.marks); ok {
			return errRestart // takes no number
		}
		val := value
		n.set(&val, s)
		plain, err := json.Marshal(val)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		// A series with periods counts each under its label (as
		// Collection.PutNumbered marks and records it).
		var partition []string
		if s.Period != "" {
			partition = []string{s.Period}
		}
		marks := withMark(withoutPending(prev.marks, n.series), mark{kind: markSequence, series: n.series, partition: partition, n: s.N})
		e := ledger.Entry{Kind: ledger.RecordPut, Series: n.series, Partition: partition, Number: s.N}
		if err := v.applyTx(ctx, tx, c.name, id, prev, joinRecord(marks, plain), e); err != nil {
			return err
		}
		out.Value, out.Serial = val, s
		return nil
	})
	if err != nil && !errors.Is(err, ledger.ErrUnpinned) {
		return NumberedRecord[T]{}, err
	}
	return out, err
}

// rewrite writes value over the record id, which carries number num of the
// series (of period, for a series with periods), with num set again, or
// fails with errRestart when the record no longer carries it (deleted
// meanwhile). For a handle numbering by the record's date, value's date
// must keep the number in its period and its text as the stored record
// renders it (else ErrInvalidArgument, nothing written).
func (n *Numbered[T]) rewrite(ctx context.Context, id string, value T, num uint64, period string, date time.Time) (NumberedRecord[T], error) {
	if got := n.periodOf(date); got != period {
		return NumberedRecord[T]{}, fmt.Errorf("%w: the record carries number %d of period %s; its date %s is in period %s",
			ErrInvalidArgument, num, period, date.Format(time.RFC3339), got)
	}
	s := n.serialAt(num, period, date)
	val := value
	n.set(&val, s)
	plain, err := json.Marshal(val)
	if err != nil {
		return NumberedRecord[T]{}, fmt.Errorf("encode: %w", err)
	}
	err = n.write(ctx, id, nil, func(prev stored) ([]mark, []byte, error) {
		if got, p, ok := n.markOf(prev.marks); !ok || got != num || p != period {
			return nil, nil, errRestart
		}
		if err := n.keepsText(prev.body, s); err != nil {
			return nil, nil, err
		}
		return prev.marks, plain, nil
	})
	out := NumberedRecord[T]{ID: id, Value: val, Serial: s}
	if err != nil && !errors.Is(err, ledger.ErrUnpinned) {
		return NumberedRecord[T]{}, err
	}
	return out, err
}

// keepsText refuses, with ErrInvalidArgument, a new revision whose date
// would render its number s otherwise than the stored record's date body
// does (a handle numbering by the record's date, with a format of date
// tokens): the issued text is kept. A stored record without a date (written
// around the handle) is not held against.
func (n *Numbered[T]) keepsText(body []byte, s sequence.Serial) error {
	if n.date == nil || n.format == nil || !n.format.Dated() {
		return nil
	}
	var old T
	if err := json.Unmarshal(body, &old); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	d := n.date(&old)
	if d.IsZero() {
		return nil
	}
	if was := n.format.FormatAt(s.N, d); was != s.Formatted {
		return fmt.Errorf("%w: the record's number reads %q; its new date would make it %q", ErrInvalidArgument, was, s.Formatted)
	}
	return nil
}

// handoff writes the record id marked pending under provisional (a new one
// when empty) after its handoff entry, or fails with errRestart when the
// record got a number, or another provisional id, meanwhile.
func (n *Numbered[T]) handoff(ctx context.Context, id string, value T, provisional string, date time.Time) (NumberedRecord[T], error) {
	// A handle numbering by period hands the record off to the period of
	// its date, listed first so Settle finds it.
	label := n.periodOf(date)
	ps, err := n.period(label)
	if err != nil {
		return NumberedRecord[T]{}, err
	}
	if err := n.keepsPeriod(ctx, ps, provisional, id, label); err != nil {
		return NumberedRecord[T]{}, err
	}
	if err := n.list(ctx, ps); err != nil {
		return NumberedRecord[T]{}, err
	}
	if provisional == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return NumberedRecord[T]{}, err
		}
		provisional = u.String()
	}
	plain, err := json.Marshal(value)
	if err != nil {
		return NumberedRecord[T]{}, fmt.Errorf("encode: %w", err)
	}
	entryKey, entry, err := ps.hooks.Handoff(provisional, id)
	if err != nil {
		return NumberedRecord[T]{}, err
	}
	err = n.write(ctx, id, &sealedEntry{key: entryKey, value: entry}, func(prev stored) ([]mark, []byte, error) {
		if _, ok := n.numberOf(prev.marks); ok {
			return nil, nil, errRestart
		}
		if p := pendingOf(prev.marks, n.series); p != "" && p != provisional {
			return nil, nil, errRestart
		}
		part := []string{provisional}
		if label != "" {
			part = append(part, label) // where its handoff entry is (handoffKeyOf)
		}
		marks := withMark(withoutPending(prev.marks, n.series), mark{kind: markPending, series: n.series, partition: part})
		return marks, plain, nil
	})
	out := NumberedRecord[T]{ID: id, Value: value, Pending: true, Provisional: provisional}
	if err != nil && !errors.Is(err, ledger.ErrUnpinned) {
		return NumberedRecord[T]{}, err
	}
	return out, err
}

// sealedEntry is a sealed value written with a record: before it, or in its
// transaction.
type sealedEntry struct {
	key   string
	value []byte
}

// write writes the next revision of record id, whose marks and JSON body
// next computes from the stored revision, and its RecordPut ledger entry:
// in one transaction (with before) where the store has them, else before
// first, then the record by compare-and-swap on its version (retried when
// another writer changed it), then the ledger entry. An error of next ends
// the write, writing nothing more.
func (n *Numbered[T]) write(ctx context.Context, id string, before *sealedEntry, next func(prev stored) ([]mark, []byte, error)) error {
	c, v := n.c, n.c.v
	key := v.recordKey(c.name, id)
	if _, ok := v.store.(stores.Transactor); ok && v.store.Capabilities().Transactions {
		keys := v.recordKeys(c.name, id)
		if before != nil {
			keys = append(keys, before.key) // locked with the others, in key order (lockKeys)
		}
		return v.ledger.UpdateKeys(ctx, keys, func(tx stores.Tx) error {
			prev, err := v.readTx(tx, c.name, id, true)
			if err != nil {
				return err
			}
			marks, body, err := next(prev)
			if err != nil {
				return err
			}
			if before != nil {
				if err := tx.Put(before.key, before.value); err != nil {
					return err
				}
			}
			return v.applyTx(ctx, tx, c.name, id, prev, joinRecord(marks, body), ledger.Entry{Kind: ledger.RecordPut})
		})
	}
	if err := v.mayWrite(ctx); err != nil {
		return err
	}
	if before != nil {
		if _, err := v.store.Put(ctx, before.key, before.value); err != nil {
			return err
		}
	}
	defer v.syncs.writing.begin(recKey{c.name, id})() // sync_inflight.go
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		it, err := v.store.Get(ctx, key)
		found := err == nil
		if err != nil && !errors.Is(err, stores.ErrNotFound) {
			return err
		}
		prev, err := v.openStored(c.name, id, it, found)
		if err != nil {
			return err
		}
		marks, body, err := next(prev)
		if err != nil {
			return err
		}
		sealed, rev, err := v.sealNext(c.name, id, joinRecord(marks, body), prev.rev)
		if err != nil {
			return err
		}
		if _, err := v.store.CompareAndSwap(ctx, key, it.Version, sealed); err != nil {
			return err
		}
		_, err = v.ledger.Append(ctx, ledger.Entry{Kind: ledger.RecordPut, Collection: c.name, ID: id, Revision: rev, CipherHash: cipherHash(sealed)})
		return err
	})
	return err
}

// Delete removes the record id (recording it in the ledger) and, when it
// was pending, its handoff entry, so no pass keeps waiting for it. A record
// a pass already numbered keeps its number in the ledger: the pass or
// Audit shows it voided or orphaned, as for Collection.Delete. A missing
// record is an error wrapping ErrNotFound.
func (n *Numbered[T]) Delete(ctx context.Context, id string) error {
	c := n.c
	if err := c.begin(ctx, "delete numbered", id); err != nil {
		return err
	}
	defer c.v.exit()
	prev, err := n.read(ctx, id)
	if err != nil {
		return fmt.Errorf("delete numbered %s/%s: %w", c.name, id, err)
	}
	if err := c.v.write(ctx, c.name, id, nil, ledger.Entry{Kind: ledger.RecordDelete}); err != nil {
		return fmt.Errorf("delete numbered %s/%s: %w", c.name, id, err)
	}
	if p := pendingOf(prev.marks, n.series); p != "" {
		// In the period of its date, for a handle numbering by period.
		label, err := n.periodOfBody(prev.body)
		var ps *periodSeries
		if err == nil {
			ps, err = n.period(label)
		}
		var key string
		if err == nil {
			key, _, err = ps.hooks.Handoff(p, id)
		}
		if err == nil {
			err = c.v.store.Delete(ctx, key)
		}
		if err != nil && !errors.Is(err, stores.ErrNotFound) {
			return fmt.Errorf("delete numbered %s/%s: remove its handoff entry: %w", c.name, id, err)
		}
	}
	return nil
}

// Get returns the record id with its number set by the setter (from the
// number it carries in its sealed metadata, so a number is shown even if a
// write through the plain collection dropped it from the content), or
// marked Pending with its provisional id. A record written without the
// handle and never numbered has neither. A missing record is an error
// wrapping ErrNotFound; one the store serves as it was before a pass
// stamped it, an error wrapping ErrRollback (see Put).
//
// On a device of a hub Get reads the device only, and works offline: a
// record numbered on the hub (pulled by a sync) shows its number, but not
// its Provisional id, which only the hub's index of the series holds (a
// read of the hub on every Get would make Get wait for an unreachable hub
// up to Config.HubTimeout). Lookup asks the hub for it.
func (n *Numbered[T]) Get(ctx context.Context, id string) (NumberedRecord[T], error) {
	c := n.c
	if err := c.begin(ctx, "get numbered", id); err != nil {
		return NumberedRecord[T]{}, err
	}
	defer c.v.exit()
	fail := func(err error) (NumberedRecord[T], error) {
		return NumberedRecord[T]{}, fmt.Errorf("get numbered %s/%s: %w", c.name, id, err)
	}
	for range putRounds {
		out, err := n.get(ctx, id)
		if errors.Is(err, errRestart) {
			continue // a pass numbered it while it was read
		}
		if err != nil {
			return fail(err)
		}
		return out, nil
	}
	return fail(fmt.Errorf("%w: the record kept changing", stores.ErrConflict))
}

// get is one round of Get, or errRestart.
func (n *Numbered[T]) get(ctx context.Context, id string) (NumberedRecord[T], error) {
	c := n.c
	fail := func(err error) (NumberedRecord[T], error) { return NumberedRecord[T]{}, err }
	it, err := c.v.store.Get(ctx, c.v.recordKey(c.name, id))
	if err != nil {
		return fail(err)
	}
	rec, err := c.v.openStored(c.name, id, it, true)
	if err != nil {
		return fail(err)
	}
	out := NumberedRecord[T]{ID: id}
	if err := json.Unmarshal(rec.body, &out.Value); err != nil {
		return fail(fmt.Errorf("decode: %w", err))
	}
	if num, period, ok := n.markOf(rec.marks); ok {
		// Numbered: rendered with the series' stored definition (and the
		// record's date, for a handle numbering by it). A read stores
		// nothing.
		if err := n.prepare(ctx, false); err != nil {
			return fail(err)
		}
		var date time.Time
		if n.date != nil {
			date = n.date(&out.Value)
		}
		out.Serial = n.serialAt(num, period, date)
		n.set(&out.Value, out.Serial)
		var part []string
		if period != "" {
			part = []string{period}
		}
		if num, ok := findMark(rec.marks, markNumbering, n.series, part); ok {
			// Numbered by a pass: its provisional id is in the index of
			// the series (of its period).
			if ps, err := n.period(period); err == nil {
				if a, ok, err := ps.ns.Lookup(ctx, id); err == nil && ok && a.Number == num {
					out.Provisional = a.Provisional
				}
			}
		}
		return out, nil
	}
	if partitioned(rec.marks, n.series) {
		// Numbered in a partition or period of the series (a Sequence's,
		// or a dated handle's): a handle that cannot render it says why
		// rather than show it unnumbered.
		if err := n.prepare(ctx, false); err != nil {
			return fail(err)
		}
	}
	if err := n.checkPending(ctx, id, rec); err != nil {
		return fail(err)
	}
	if p := pendingOf(rec.marks, n.series); p != "" {
		out.Pending, out.Provisional = true, p
	}
	return out, nil
}

// Settle runs a pass of the series: it numbers every pending record, in
// provisional order, through the setter, in the series' stored format (see
// numbering.Series.RunPass for how, and its locking). On a store where Put
// numbers at write time there is normally nothing to do; records enqueued
// there get the numbers after those taken at write time.
//
// On a device of a hub the pass runs on the hub, exclusive across every
// machine its lock covers (PostgreSQL: all): Settle first hands the hub
// the device's pending records that are there already, pending under the
// same provisional id (a sync pushed them); the others wait on the device
// for a later Settle. It then runs the pass over the hub's copy of the
// collection, which numbers the records of every device, and drops the
// device's handoff entries of the records the hub numbered. The stamped
// records reach the device with its next sync. An unreachable hub gives an
// error wrapping sequence.ErrOffline.
func (n *Numbered[T]) Settle(ctx context.Context) (numbering.PassReport, error) {
	if err := n.c.v.enter(ctx); err != nil {
		return numbering.PassReport{}, fmt.Errorf("numbering %q: pass: %w", n.series, err)
	}
	defer n.c.v.exit()
	// The pass asks the guard itself (deferred.Backend.Guard); on a device,
	// the hub's is asked first, before handoff entries are copied there.
	check := n.c.v.mayWrite
	if n.onHub != nil {
		check = n.onHub.c.v.mayWriteNow
	}
	if err := check(ctx); err != nil {
		return numbering.PassReport{}, fmt.Errorf("numbering %q: pass: %w", n.series, err)
	}
	if n.onHub != nil {
		return n.settleOnHub(ctx)
	}
	if n.date != nil {
		// A pass of each period (numbered_periods.go).
		return n.settlePeriods(ctx)
	}
	if n.c.v.hubless {
		return numbering.PassReport{}, fmt.Errorf("numbering %q: pass: %w", n.series, errHubless)
	}
	// The pass checks the handle's format against the stored one itself
	// (the one stored with the series' counter, deferred.Backend.SeriesFormat),
	// and stores it only when it has something to number. A stored
	// definition this handle cannot render (date tokens) refuses first.
	if err := n.prepare(ctx, false); err != nil {
		return numbering.PassReport{}, fmt.Errorf("numbering %q: pass: %w", n.series, err)
	}
	return n.ns.RunPass(ctx)
}

// Lookup tells which record the provisional id (from Put) went to and which
// number a pass gave it; ok is false while the record is pending. On a
// device of a hub it asks the hub.
//
// A provisional id whose record was deleted after its pass, and whose id
// was numbered again since, gives ok false: the series' index keeps the
// number of the id's latest record only.
func (n *Numbered[T]) Lookup(ctx context.Context, provisional string) (numbering.Assignment, bool, error) {
	if n.onHub != nil {
		return n.onHub.Lookup(ctx, provisional)
	}
	if n.date != nil && n.opts.Period != sequence.PeriodNone {
		return n.lookupPeriods(ctx, provisional)
	}
	a, ok, err := n.ns.LookupProvisional(ctx, provisional)
	if err != nil || !ok {
		return numbering.Assignment{}, false, err
	}
	if a.Provisional != provisional {
		return numbering.Assignment{}, false, nil
	}
	return a, true, nil
}

// NumberedAudit accounts for the numbers of a series, which both paths
// take from one head: every number 1..head, whichever path gave it, in
// Online (the series' sequence audit: bound to a record, orphaned by its
// deletion, voided, unbound, seeded or missing, a number given by a pass
// as one taken at write time), and what only the passes' own records tell
// in Deferred (the numbers of a batch not finished yet, and any record or
// number given twice).
type NumberedAudit struct {
	// Series is the series name.
	Series string
	// Online is the audit of every number of the series, on both paths.
	Online sequence.AuditReport
	// Deferred is the audit of the numbers given by passes.
	Deferred numbering.AuditReport
}

// Numbered is how many numbers of the series a record carries (or carried,
// before its deletion), on either path.
func (a NumberedAudit) Numbered() int { return a.Online.Bound }

// Clean reports whether every number of both paths is accounted for:
// carried by a record or voided, none missing, none given twice.
func (a NumberedAudit) Clean() bool {
	o, d := a.Online, a.Deferred
	return o.Unbound == 0 && o.Missing == 0 && o.Orphaned == 0 &&
		d.Missing == 0 && len(d.Renumbered) == 0 && len(d.Reused) == 0
}

// Audit reads the vault's ledger once per path and accounts for every
// number of the series in one report (on a device of a hub, the hub's
// ledger, where the numbers are). An error wrapping
// numbering.ErrDuplicate comes with the full report. A handle with periods
// (NumberingOfDated) audits one period at a time: AuditAt.
func (n *Numbered[T]) Audit(ctx context.Context) (NumberedAudit, error) {
	if n.onHub != nil {
		return n.onHub.Audit(ctx)
	}
	rep := NumberedAudit{Series: n.series}
	if err := n.c.v.enter(ctx); err != nil {
		return rep, fmt.Errorf("numbering %q: audit: %w", n.series, err)
	}
	defer n.c.v.exit()
	n.mu.Lock()
	seq := n.seq // set by a Put's prepare, maybe running now
	n.mu.Unlock()
	if seq == nil {
		var err error
		if seq, err = n.c.v.Sequence(n.series, sequence.Options{}); err != nil {
			return rep, err
		}
	}
	var err error
	if rep.Online, err = seq.Audit(ctx); err != nil {
		return rep, err
	}
	rep.Deferred, err = n.ns.Audit(ctx)
	return rep, err
}
