package sequence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/gate"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// DefaultClaimWindow is how many recent request ids a counter remembers on a
// store without transactions (see Sequence.Claim).
const DefaultClaimWindow = 1024

// config tunes a service; the vault fills it in (see wire.SequenceConfig).
type config = wire.SequenceConfig

// Options selects a partition and a format for a Sequence.
type Options struct {
	// Partition scopes the counter to a tuple of values: each distinct tuple is
	// its own counter, starting at 1. Components are non-empty strings or
	// integers of any int or uint kind; an integer and its decimal string are
	// the same component (2026 == "2026").
	Partition []any
	// Format renders numbers for NextSerial and Bind; see Sequence.Format.
	// Empty means plain decimal.
	Format string

	// Format and the fields below define the series (see Definition): the
	// first call that takes a number with any of them set stores them
	// sealed with the series, if it has no definition yet (in the same
	// commit as that number on a store with transactions, with a
	// series-defined ledger entry), so every process, device and the CLI
	// number it the same way. A handle opened with none of them uses the
	// stored definition; one whose definition differs from the stored one
	// fails at its first call with a *DefinitionError (ErrDefinitionMismatch)
	// and takes nothing. One definition serves every partition of a series.
	// A series without a definition stores nothing and behaves as before.

	// Period restarts the count each day, month, year or fiscal year of the
	// document date (NextAt, At; Next uses the current date). Each period
	// is its own counter, counting from 1, whose partition is Partition
	// followed by the period's label (Serial.Period), and can be closed
	// (ClosePeriod).
	Period Period
	// FiscalStart is the first day of the fiscal year (PeriodFiscalYear and
	// the fiscal tokens of Format); the zero value is 1 January.
	FiscalStart MonthDay
	// Location is the time zone in which a document date is read to choose
	// its period and render its date tokens; nil (or time.UTC) means UTC.
	// It is stored by its IANA name, so it must be a zone that
	// time.LoadLocation finds by its name: time.Local, a time.FixedZone or
	// an unknown name is a *ValidationError. A program that runs where no
	// zoneinfo database is installed (a scratch container, some Windows
	// machines) must import time/tzdata, or every handle of a series with a
	// zone fails.
	Location *time.Location
	// Meta is free text the series carries (a registered series code, for
	// example), rendered by the {meta.<key>} token: at most MaxMeta
	// entries, keys of ASCII letters, digits, '_' and '-'.
	Meta map[string]string
	// Corrects names the series this one corrects (credit notes): the
	// series then takes numbers only through a handle of Correcting, and
	// each number's ledger entry records which number of that series it
	// corrects (Audit shows the pair on both sides). Plain Next on it
	// fails with ErrCorrectionNeeded. Deferred numbering (the vault's
	// NumberingOf) does not take corrections.
	Corrects string

	// MustExist makes the handle refuse a series that does not exist yet
	// (no counter, claim, void or definition stored; see Declare): every
	// call fails with a *NoSuchSeriesError (ErrNoSuchSeries), taking and
	// writing nothing, so a misspelt series name cannot start a new count
	// at 1. Declare on such a handle still creates the series. The check
	// reads the store once per series and vault handle; a series the store
	// lost but the ledger or this process knows is no error here (the
	// allocation reports it as a rollback).
	MustExist bool
}

// Serial is an allocated number with its formatted form.
type Serial struct {
	// N is the number.
	N uint64
	// Formatted is N rendered with the sequence's format (decimal N when it has none).
	Formatted string
	// Period is the label of the period N was taken in (see Options.Period
	// and Sequence.ClosePeriod), "" for a series without periods.
	Period string
}

// service owns the in-process combining state for every series of one vault. Safe for concurrent use.
//
// Use one service per store and prefix in a process: two services over the
// same counters still allocate correctly, but they race each other through
// compare-and-swap retries instead of combining.
type service struct {
	store    stores.Store
	txr      stores.Transactor // nil when the store has no transactions
	sealer   seal.Sealer
	prefix   string
	journal  wire.Journal
	pins     pins.Counter
	history  wire.History
	watch    wire.HistoryWatch                                        // history, when it tells of other writers (nil: it does not)
	passHead func(ctx context.Context, series string) (uint64, error) // nil: none
	claimMAC seal.MACer
	policy   cas.Policy
	window   int
	online   bool

	mu       sync.Mutex
	counters map[string]*counter
	defs     map[string]*seriesDef // by series name
	targets  map[string]*Sequence  // the handles of period counters, by key
	issued   sync.Map              // correction text -> the void key of a number known issued (corrections.go)

	gate gate.Gate // calls in flight; closed by Close
}

// Close makes every Sequence of s, including handles obtained before,
// refuse new calls with stores.ErrClosed, and waits for the calls in
// flight to end: a call already waiting in a combining queue is served (its
// number taken and its pins raised) before Close returns, or fails. So no
// number is taken once Close has returned. Close does not close the store;
// it is idempotent and must not be called from inside a Bind function.
func (s *service) Close() error {
	s.gate.Close()
	return nil
}

func init() {
	wire.NewSequences = func(store stores.Store, sealer seal.Sealer, prefix string, cfg config) wire.Sequences[*Sequence, Options] {
		return newService(store, sealer, prefix, cfg)
	}
}

// newService returns a service that keeps its counters in store under prefix
// (a vault's key prefix; the counters live at prefix+"_sequences/…"),
// sealing every value with sealer. It panics if store or sealer is nil. The
// vault reaches it through wire.NewSequences.
func newService(store stores.Store, sealer seal.Sealer, prefix string, cfg config) *service {
	if store == nil || sealer == nil {
		panic("sequence: newService needs a store and a sealer")
	}
	caps := store.Capabilities()
	s := &service{
		store:    store,
		sealer:   sealer,
		prefix:   prefix,
		journal:  cfg.Journal,
		pins:     cfg.Pins,
		history:  cfg.History,
		passHead: cfg.PassHead,
		claimMAC: cfg.ClaimMAC,
		policy:   cas.Policy{MaxAttempts: cfg.MaxAttempts},
		window:   cfg.ClaimWindow,
		online:   caps.CASAtomic,
		counters: make(map[string]*counter),
		defs:     make(map[string]*seriesDef),
		targets:  make(map[string]*Sequence),
	}
	if txr, ok := store.(stores.Transactor); ok && caps.Transactions {
		s.txr = txr
	}
	s.watch, _ = cfg.History.(wire.HistoryWatch)
	if s.window <= 0 {
		s.window = DefaultClaimWindow
	}
	return s
}

// Sequence returns a handle on series, scoped to o.Partition, with the
// definition fields of o (see Options). It validates everything up front
// and returns a *ValidationError for an invalid series name (empty, longer
// than MaxSeriesLen, not UTF-8, or holding a NUL or other control
// character), partition, format, period, fiscal start, time zone (not an
// IANA name the zoneinfo database knows), metadata or corrected series.
// Handles on the same series and partition share one counter.
func (s *service) Sequence(series string, o Options) (*Sequence, error) {
	if err := checkSeries(series); err != nil {
		return nil, err
	}
	partition, err := normalizePartition(o.Partition)
	if err != nil {
		return nil, err
	}
	key, err := counterKey(s.prefix, series, partition)
	if err != nil {
		return nil, err
	}
	def, loc, err := definitionOf(o)
	if err != nil {
		return nil, err
	}
	q := &Sequence{svc: s, series: series, partition: partition, def: def, defined: !def.IsZero(), loc: loc, mustExist: o.MustExist}
	if o.Format != "" {
		if q.tmpl, err = parseFormat(o.Format, partition, o.Meta); err != nil {
			return nil, err
		}
	}
	q.sd = s.seriesOf(series)
	s.mu.Lock()
	c, ok := s.counters[key]
	if !ok {
		c = newCounter(s, key, series, partition)
		s.counters[key] = c
	}
	s.mu.Unlock()
	q.c = c
	q.partition = c.partition
	return q, nil
}

func displayName(series string, partition []string) string {
	if len(partition) == 0 {
		return strconv.Quote(series)
	}
	quoted := make([]string, len(partition))
	for i, p := range partition {
		quoted[i] = strconv.Quote(p)
	}
	return strconv.Quote(series) + "[" + strings.Join(quoted, ", ") + "]"
}

func (s *service) openState(key string, sealed []byte) (state, error) {
	pt, err := s.sealer.Open(key, sealed)
	if err != nil {
		return state{}, fmt.Errorf("open counter: %w", err)
	}
	st, err := decodeState(pt)
	if err != nil {
		return state{}, fmt.Errorf("decode counter: %w", err)
	}
	return st, nil
}

// Sequence is a handle on one counter: a series, optionally scoped to a
// partition, with an optional format. Safe for concurrent use; handles are
// cheap, and all handles of one counter in a vault share its combining state.
//
// # Allocation
//
// Next, NextSerial, Claim, SeedTo and Bind need a store whose compare-and-swap
// is atomic (Capabilities().CASAtomic) and fail with ErrOffline, writing
// nothing, on any other. Concurrent calls on one counter are combined: the
// calls that arrive while a write is in flight are served together by the
// next write, which advances the counter by the number of calls and hands
// them consecutive numbers in arrival order. A failed write takes no number.
//
// In a vault, the first write of a counter reads the vault's audit ledger
// once (later writes read only what other writers recorded, and only when
// they need to) and every write fails with an error wrapping ErrRollback,
// taking nothing, while the counter is below the highest number the ledger
// records for it: a counter the store deleted or replayed to an older value.
//
// A caller whose context is done while it waits for its turn leaves the queue
// and takes no number. Once its turn has come (its call is part of a write in
// flight) it waits for that write and gets its outcome even if its context is
// done meanwhile: a number taken is always returned. The write runs under a
// context that is done only when the contexts of all the calls it serves are.
type Sequence struct {
	svc       *service
	c         *counter // the handle's counter: a target's is its period's
	sd        *seriesDef
	series    string
	partition []string // without the period's label

	def     Definition     // the definition fields the handle was opened with
	defined bool           // def is not zero
	loc     *time.Location // def's time zone
	tmpl    *template      // def's format, parsed for partition

	mustExist bool // Options.MustExist

	hs   atomic.Pointer[handleSpec]  // the series' definition, once known
	last atomic.Pointer[periodCache] // the period resolved last

	date  time.Time // At's date
	dated bool      // the handle is At's

	corr *correction // the number a handle of Correcting corrects (nil: none)

	target bool      // the handle of one period's counter (see periods.go)
	base   *Sequence // a target's undated handle
	period string    // a target's period label
}

// Key returns the store key of the counter: for a series with periods, the
// key of the counter its partition would have without them (each period's
// counter has its own key).
func (q *Sequence) Key() string { return q.c.key }

// Series returns the series name.
func (q *Sequence) Series() string { return q.series }

// Partition returns the partition tuple in canonical text form (integers in
// decimal), or nil when the series is not partitioned. It never includes
// the period: the counter of a series with periods has the partition
// followed by the period's label (Serial.Period).
func (q *Sequence) Partition() []string {
	if q.partition == nil {
		return nil
	}
	return append([]string(nil), q.partition...)
}

// Format renders n with the sequence's format for a document dated now
// (a handle of At: its date): literal text with the tokens {seq} (n in
// decimal), {seq:0N} (n zero-padded to at least N digits, N from 1 to 20;
// wider numbers are not truncated), {partition.i} (component i of the
// partition), {meta.<key>} (the value of key in Options.Meta) and the date
// tokens {YYYY}, {YY}, {MM}, {DD}, {DOY} (day of the year, 001 to 366),
// {WW} (ISO 8601 week, 01 to 53: around New Year it is the week of the
// ISO year, which can differ from {YYYY}), {FY} (the fiscal year holding
// the date: 2026, or 2026-27 when it spans two calendar years), {FY_START}
// and {FY_END} (the calendar years in which it starts and ends) and {TFY}
// (26, or 26-27), read in Options.Location with the fiscal year starting
// on Options.FiscalStart. See Formatter for the grammar. Without a format
// it returns n in decimal.
//
// A handle opened without a format renders with its series' stored format
// once a call has read the series' definition.
func (q *Sequence) Format(n uint64) string {
	return q.render(n, q.date)
}

// render is the one place a number of q is rendered, for the document
// dated date (zero: now).
func (q *Sequence) render(n uint64, date time.Time) string {
	t, loc, start := q.tmpl, q.loc, q.def.FiscalStart
	if hs := q.hs.Load(); hs != nil {
		t, loc, start = hs.tmpl, hs.eff.loc, hs.eff.def.FiscalStart
	}
	if t == nil {
		return strconv.FormatUint(n, 10)
	}
	if !t.dated() {
		return t.format(n, time.Time{}, start)
	}
	if date.IsZero() {
		date = time.Now()
	}
	if loc == nil {
		loc = time.UTC
	}
	return t.format(n, date.In(loc), start)
}

// serial is n of q with its rendering for date.
func (q *Sequence) serial(n uint64, date time.Time) Serial {
	return Serial{N: n, Formatted: q.render(n, date), Period: q.period}
}

// begin starts an allocating call: it checks what every allocating method
// needs, resolves q to its target (the counter the call acts on) and, on a
// store without transactions, stores a pending definition first. It returns
// the target, the document's date (zero: now) and the definition the call
// must store in its commit (nil: none).
func (q *Sequence) begin(ctx context.Context, op string) (*Sequence, time.Time, *effective, error) {
	return q.beginAt(ctx, op, q.date, q.dated)
}

// beginAt is begin for a document dated date (when dated; else now).
func (q *Sequence) beginAt(ctx context.Context, op string, date time.Time, dated bool) (*Sequence, time.Time, *effective, error) {
	if err := q.allocating(ctx, op); err != nil {
		return nil, time.Time{}, nil, err
	}
	t, date, err := q.resolveAt(ctx, date, dated)
	if err != nil {
		return nil, time.Time{}, nil, q.errorf(op, err)
	}
	hs := t.hs.Load()
	if op != "seed" {
		if err := q.checkCorrection(ctx, hs.eff); err != nil {
			return nil, time.Time{}, nil, q.errorf(op, err)
		}
	}
	if err := t.definePending(ctx, hs); err != nil {
		return nil, time.Time{}, nil, t.errorf(op, err)
	}
	return t, date, hs.pending(), nil
}

// definePending stores hs's pending definition, on a store without
// transactions (with them, it is stored in the first allocation's commit).
func (q *Sequence) definePending(ctx context.Context, hs *handleSpec) error {
	eff := hs.pending()
	if eff == nil || q.svc.txr != nil {
		return nil
	}
	if !q.svc.gate.Enter() {
		return stores.ErrClosed
	}
	defer q.svc.gate.Exit()
	if err := q.svc.defineCAS(ctx, q.series, q.sd.key, eff); err != nil {
		return err
	}
	if eff.def.Period == PeriodNone || len(q.c.partition) == 0 {
		return nil
	}
	// Stored with a period: the counter of no period is touched (touchTx).
	base, err := q.svc.baseOf(q.series, q.c.partition)
	if err != nil {
		return err
	}
	return q.svc.touchCAS(ctx, base)
}

func (q *Sequence) errorf(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *ContentionError
	var ve *ValidationError
	var de *DefinitionError
	var re *CorrectionError
	var ne *NoSuchSeriesError
	if errors.As(err, &ce) || errors.As(err, &ve) || errors.As(err, &de) || errors.As(err, &re) || errors.As(err, &ne) {
		return err
	}
	return fmt.Errorf("sequence %s: %s: %w", q.c.name, op, err)
}

// allocating checks what every allocating method needs before it queues.
func (q *Sequence) allocating(ctx context.Context, op string) error {
	if q.svc.gate.Closed() {
		return q.errorf(op, stores.ErrClosed)
	}
	if !q.svc.online {
		return q.errorf(op, ErrOffline)
	}
	return q.errorf(op, ctx.Err())
}

// ops are recycled: an op belongs to its caller again once submit returns.
var opPool = sync.Pool{New: func() any { return new(op) }}

// do runs req through the counter's combiner and returns its outcome,
// re-raising a panic of a Bind fn in the caller's goroutine.
func (q *Sequence) do(req op) (uint64, error) {
	if !q.svc.gate.Enter() {
		return 0, stores.ErrClosed
	}
	defer q.svc.gate.Exit()
	o := opPool.Get().(*op)
	slot := o.Slot // keeps its channel
	*o = req
	o.Slot = slot
	q.c.submit(o)
	n, err, panicked, panicVal := o.n, o.err, o.panicked, o.panicVal
	*o = op{Slot: o.Slot} // as submit left it: with the channel a wait made
	opPool.Put(o)
	if panicked {
		panic(panicVal)
	}
	return n, err
}

// Next allocates the next number of the series: 1 for a new series. See
// Sequence for the concurrency and cancellation rules. It fails with
// ErrOffline on a store without atomic compare-and-swap and with an error
// matching ErrContention when other processes kept winning the race for the
// counter. On a store without transactions, if recording the number in the
// ledger fails after the counter was written, Next returns the taken number
// together with the error.
//
// On a series with periods, Next takes a number of the period holding the
// current date in the series' time zone (of the handle's date for a handle
// of At), and fails with an error matching ErrPeriodClosed when that period
// is closed.
func (q *Sequence) Next(ctx context.Context) (uint64, error) {
	t, date, def, err := q.begin(ctx, "next")
	if err != nil {
		return 0, err
	}
	n, err := t.do(op{kind: opNext, ctx: ctx, date: date, define: def, reason: q.reason()})
	return n, t.errorf("next", err)
}

// NextSerial is Next returning the number with its formatted form and period.
func (q *Sequence) NextSerial(ctx context.Context) (Serial, error) {
	t, date, def, err := q.begin(ctx, "next")
	if err != nil {
		return Serial{}, err
	}
	n, err := t.do(op{kind: opNext, ctx: ctx, date: date, define: def, reason: q.reason()})
	if n == 0 {
		return Serial{}, t.errorf("next", err)
	}
	return t.serial(n, date), t.errorf("next", err)
}

// MaxNextN is the most numbers one NextN call takes: each number is an entry
// of the vault's ledger, and one commit's entries are bounded.
const MaxNextN = 500

// NextN allocates k consecutive numbers of the series in one commit, all or
// none, and returns the first: the numbers are first … first+k-1, and no
// other caller's number falls between them. k must be 1 to MaxNextN (else
// an error matching ErrInvalid, and nothing is taken). It fails as Next does
// otherwise; ErrOverflow when the counter cannot advance by k.
func (q *Sequence) NextN(ctx context.Context, k int) (first uint64, err error) {
	if k < 1 || k > MaxNextN {
		return 0, q.errorf("next", invalid("count", strconv.Itoa(k), fmt.Sprintf("want 1 to %d", MaxNextN)))
	}
	if k > 1 && q.corr != nil {
		return 0, q.errorf("next", invalid("count", strconv.Itoa(k), "a handle of Correcting takes one number at a time"))
	}
	t, date, def, err := q.begin(ctx, "next")
	if err != nil {
		return 0, err
	}
	last, err := t.do(op{kind: opNext, ctx: ctx, count: uint64(k), date: date, define: def, reason: q.reason()})
	if last == 0 {
		return 0, t.errorf("next", err)
	}
	return last - uint64(k) + 1, t.errorf("next", err)
}

// Peek returns the last number handed out, 0 for a series never used. It
// never writes and works on every store. On a series with periods it is
// the last number of the current period (of the handle's date for a
// handle of At).
func (q *Sequence) Peek(ctx context.Context) (uint64, error) {
	if q.svc.gate.Closed() {
		return 0, q.errorf("peek", stores.ErrClosed)
	}
	t, _, err := q.resolve(ctx)
	if err != nil {
		return 0, q.errorf("peek", err)
	}
	return t.peek(ctx)
}

// peek is Peek of q's own counter.
func (q *Sequence) peek(ctx context.Context) (uint64, error) {
	st, err := q.peekState(ctx)
	return st.value, err
}

// peekState reads q's own counter.
func (q *Sequence) peekState(ctx context.Context) (state, error) {
	if !q.svc.gate.Enter() {
		return state{}, q.errorf("peek", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	pin := q.svc.pinOf(q.c.key) // before the read: see checkPin
	item, err := q.svc.store.Get(ctx, q.c.key)
	if errors.Is(err, stores.ErrNotFound) {
		if err := q.svc.checkPin(q.c.key, 0, pin); err != nil {
			return state{}, q.errorf("peek", err)
		}
		return state{}, nil
	}
	if err != nil {
		return state{}, q.errorf("peek", err)
	}
	st, err := q.svc.openState(q.c.key, item.Value)
	if err != nil {
		return state{}, q.errorf("peek", err)
	}
	if err := q.svc.checkPin(q.c.key, st.value, pin); err != nil {
		return state{}, q.errorf("peek", err)
	}
	return st, nil
}

// pinOf returns the device's pin of the counter at key, taken before a read.
func (s *service) pinOf(key string) uint64 {
	if s.pins == nil {
		return 0
	}
	return s.pins.CounterPin(key)
}

// checkPin fails when value, read after the pin was taken, is below it. A
// pin raised after the read (by this process's own allocations) is not held
// against it.
func (s *service) checkPin(key string, value, pin uint64) error {
	if s.pins == nil || value >= pin {
		return nil
	}
	if err := s.pins.CheckCounter(key, value); err != nil {
		return err
	}
	return nil
}

// SeedTo advances the counter to n if it is below n, so the next number is
// n+1; it never rewinds a series and is a no-op when the counter is already
// at n or beyond. Use it after importing records that carry numbers.
func (q *Sequence) SeedTo(ctx context.Context, n uint64) error {
	t, _, def, err := q.begin(ctx, "seed")
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	_, err = t.do(op{kind: opSeed, ctx: ctx, target: n, define: def})
	return t.errorf("seed", err)
}

// Claim allocates a number for requestID, or returns the number an earlier
// Claim with the same requestID got: a caller that does not know whether its
// call succeeded (a timeout, a lost connection) calls Claim again with the
// same id and gets the same number, never a second one.
//
// On a transactional store each claim is recorded under its own key, written
// in the same transaction as the counter, and remembered for good; any
// non-empty id without NUL of at most MaxRequestIDLen bytes is accepted.
// In a vault the key holds a keyed MAC of the id, not the id, and a claim
// record the store lost is not taken for a new request:
// the allocation's history entry carries the id, so the claim gets the
// number it got then and its record is written again. On a
// store without transactions the counter remembers the last
// DefaultClaimWindow ids; ids must then be UUIDv7 (see NewRequestID), and a
// Claim whose id is older than every id the window still holds fails with
// ErrRequestExpired rather than risk a second number.
func (q *Sequence) Claim(ctx context.Context, requestID string) (uint64, error) {
	if err := checkRequestID(requestID); err != nil {
		return 0, err
	}
	t, date, def, err := q.begin(ctx, "claim")
	if err != nil {
		return 0, err
	}
	req := op{kind: opClaim, ctx: ctx, id: requestID, date: date, define: def, reason: q.reason()}
	q = t
	if q.svc.txr != nil {
		if req.ckey, err = q.svc.claimKey(q.c.key, requestID); err != nil {
			return 0, q.errorf("claim", err)
		}
	}
	if q.svc.txr == nil {
		uid, err := parseRequestID(requestID)
		if err != nil {
			return 0, err
		}
		req.uid = uid
	}
	n, err := q.do(req)
	return n, q.errorf("claim", err)
}

// Bind takes the next number in the same store transaction as the writes fn
// makes through tx: fn is called with the number it will get, and if fn
// returns an error (or panics) nothing it wrote is kept and no number is
// taken. The vault uses it to write a record carrying its number, so a
// number is never taken without the record that uses it. Applications get
// that through vault.Collection.PutNumbered, vault.NumberingOf or a
// vault.Vault.Update calling vault.Tx.Next, which seal the record: tx here
// writes raw store values, unsealed.
//
// Concurrent Bind calls on one counter share one transaction; each fn sees
// its own buffered view of it, so a failing fn is dropped without affecting
// the others. fn may run more than once when the transaction is retried
// after a conflict, with a different number each time: it must derive what
// it writes from its arguments, and only the last run counts. fn must not use
// tx after returning nor call methods of this Sequence (it would deadlock),
// and may not write the sequence's own keys.
//
// Bind fails with ErrOffline on a store without atomic compare-and-swap and
// with stores.ErrNotSupported on a store without transactions. A panic in fn
// is re-raised in the caller's goroutine.
func (q *Sequence) Bind(ctx context.Context, fn func(tx stores.Tx, s Serial) error) (Serial, error) {
	return q.BindKeys(ctx, nil, fn)
}

// BindKeys is Bind for a function that reads keys (a record it replaces):
// on a store whose reads are round trips (PostgreSQL), the keys are read in
// one step before the function runs, and in a vault the keys of every call
// sharing the transaction are, so a batch of Bind calls costs one round
// trip for its reads instead of one per key. Elsewhere BindKeys is Bind.
func (q *Sequence) BindKeys(ctx context.Context, keys []string, fn func(tx stores.Tx, s Serial) error) (Serial, error) {
	if err := q.allocating(ctx, "bind"); err != nil {
		return Serial{}, err
	}
	if q.svc.txr == nil {
		return Serial{}, q.errorf("bind", stores.ErrNotSupported)
	}
	if fn == nil {
		return Serial{}, invalid("bind function", "nil", "must not be nil")
	}
	reason := q.reason
	q, date, def, err := q.begin(ctx, "bind")
	if err != nil {
		return Serial{}, err
	}
	n, err := q.do(op{kind: opBind, ctx: ctx, seq: q, fn: fn, keys: keys, date: date, define: def, reason: reason()})
	if err != nil {
		if n != 0 {
			// Committed with fn's writes, but its pin or journal failed.
			return q.serial(n, date), q.errorf("bind", err)
		}
		return Serial{}, q.errorf("bind", err)
	}
	return q.serial(n, date), nil
}
