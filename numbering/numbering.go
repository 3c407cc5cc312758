package numbering

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Limits on the arguments of a series.
const (
	// MaxSeriesLen is the longest series name, in bytes.
	MaxSeriesLen = 200
	// MaxFieldLen is the longest Options.Field, in bytes.
	MaxFieldLen = 256
	// MaxIDLen is the longest record id, in bytes (the vault's limit).
	MaxIDLen = 512
)

// DefaultWorkers is how many records a pass reads or stamps at once when
// Options.Workers is 0.
const DefaultWorkers = 8

// Options configures a Series opened with vault.Vault.Numbering, the
// deprecated API that numbers records by the name of a JSON member.
//
// New code does not need Options: vault.NumberingOf takes sequence.Options
// and a typed setter, fills in Collection and Format itself, and ignores
// Field. Use Vault.Numbering, and so Options, only where no setter can be
// written: records without a Go type of their own (raw JSON, or a schema
// chosen at run time) numbered by the name of a member. Collection and
// Field are required there. The zero value of every other field means its
// documented default.
type Options struct {
	// Collection is the collection whose records the series numbers.
	Collection string
	// Field is, for the deprecated vault.Vault.Numbering only, the JSON key
	// of the record that receives the number: a JSON number for a series
	// without a format, else the formatted text. vault.NumberingOf sets the
	// number through a typed setter instead.
	Field string
	// Format renders the number in the sequence package's grammar ({seq},
	// {seq:0N}, literal text; see sequence.ParseFormat). It is stored with
	// the series by its first pass or handoff, so that every process uses
	// the same one: empty means the stored format (plain decimal for a new
	// series), and a format that differs from the stored one is refused
	// with ErrMismatch. A batch keeps the format it was recorded with.
	Format string
	// Workers bounds how many records a pass reads or stamps at once;
	// 0 means DefaultWorkers.
	Workers int
}

// Series is a deferred-numbering series: records are enqueued with a
// provisional id wherever they are written, and a pass on one authority
// gives them dense numbers 1, 2, 3 … . Obtain it from vault.Numbered.Series
// (or the deprecated vault.Vault.Numbering). It is safe for concurrent use; handles on the same
// series share its store data and its lock.
type Series struct {
	b       deferred.Backend
	name    string
	opts    Options
	format  *sequence.Formatter // nil: plain decimal
	dir     string              // Prefix + "_numbering/" + name + "/"
	workers int

	prog progress // the running pass's progress (Progress)

	// Tuning and hooks, changed only by tests (export_test.go).
	stepSize   int
	chunkItems int
	afterLock  func()
	afterClear func()

	closed atomic.Bool // the ledger recorded the period closed (checkedHeads)

	cfgMu     sync.Mutex
	cfg       seriesConfig // the stored config, once cfgLoaded
	cfgLoaded bool
}

func init() {
	wire.NewNumbering = func(b deferred.Backend, name string, opts Options) (*Series, deferred.Hooks, error) {
		s, err := newSeries(b, name, opts)
		if err != nil {
			return nil, deferred.Hooks{}, err
		}
		return s, deferred.Hooks{Handoff: s.handoff, Format: s.formatFor, StoredFormat: s.peekFormat, Indexed: s.indexed,
			Period: s.periodEntry, Periods: s.periods}, nil
	}
}

// newSeries returns a handle on the series name of the vault that b
// describes. It does no I/O. It validates the name (non-empty, at most
// MaxSeriesLen bytes of UTF-8, without '/' or control characters) and the
// options, and returns an error matching ErrInvalid (for a bad Format, also
// a *sequence.ValidationError) when they are wrong.
func newSeries(b deferred.Backend, name string, opts Options) (*Series, error) {
	bad := func(what string, err error) (*Series, error) {
		return nil, fmt.Errorf("numbering %q: %w: %w", name, ErrInvalid, fmt.Errorf("%s: %w", what, err))
	}
	if b.Store == nil || b.Sealer == nil || b.Ledger == nil || b.Records == nil {
		return nil, fmt.Errorf("numbering %q: %w: incomplete backend", name, ErrInvalid)
	}
	if err := checkSeries(name); err != nil {
		return bad("series name", err)
	}
	switch {
	case opts.Collection == "":
		return bad("options", errors.New("empty collection"))
	case len(opts.Field) > MaxFieldLen || !utf8.ValidString(opts.Field):
		return bad("options", fmt.Errorf("field %q: want at most %d bytes of UTF-8", opts.Field, MaxFieldLen))
	case opts.Workers < 0:
		return bad("options", fmt.Errorf("negative workers %d", opts.Workers))
	}
	if err := checkPartition(b.Partition); err != nil {
		return bad("period", err)
	}
	s := &Series{
		b: b, name: name, opts: opts, dir: seriesDir(b, name), workers: opts.Workers,
		stepSize: defaultStep, chunkItems: defaultChunkItems,
	}
	if opts.Format != "" {
		f, err := sequence.ParseFormat(opts.Format)
		if err != nil {
			return nil, fmt.Errorf("numbering %q: %w: %w", name, ErrInvalid, err)
		}
		s.format = f
	}
	if s.workers == 0 {
		s.workers = DefaultWorkers
	}
	return s, nil
}

func checkSeries(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > MaxSeriesLen:
		return fmt.Errorf("longer than %d bytes", MaxSeriesLen)
	case !utf8.ValidString(name):
		return errors.New("not valid UTF-8")
	case strings.IndexByte(name, '/') >= 0:
		return errors.New("contains '/'")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return errors.New("contains a control character")
	}
	return nil
}

func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("record id is empty: %w", ErrInvalid)
	case len(id) > MaxIDLen:
		return fmt.Errorf("record id is longer than %d bytes: %w", MaxIDLen, ErrInvalid)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("record id %q holds NUL: %w", id, ErrInvalid)
	}
	return nil
}

// Name returns the series name.
func (s *Series) Name() string { return s.name }

// Options returns the options the series was opened with.
func (s *Series) Options() Options { return s.opts }

// enter admits a call through Backend.Enter; a call admitted must call
// exit when it ends.
func (s *Series) enter(ctx context.Context) (exit func(), err error) {
	if s.b.Enter == nil {
		return func() {}, ctx.Err()
	}
	return s.b.Enter(ctx)
}

func (s *Series) errorf(op string, err error) error {
	return fmt.Errorf("numbering %q: %s: %w", s.name, op, err)
}

// text renders n as a batch with format stamps it.
func (s *Series) text(format string, n uint64) (string, error) {
	if format == "" {
		return strconv.FormatUint(n, 10), nil
	}
	f := s.format
	if f == nil || format != s.opts.Format {
		var err error
		if f, err = sequence.ParseFormat(format); err != nil {
			return "", fmt.Errorf("%w: batch format: %w", ErrCorrupt, err)
		}
	}
	return f.Format(n), nil
}

// Enqueue puts the record id of the series' collection in line for a number
// and returns its provisional id: a UUIDv7, ordered by the time it was taken
// (within one process strictly increasing). It writes one sealed pending
// entry under a key of its own, so it works on every store, offline and
// from any number of devices at once; it takes no lock and no number.
//
// The record must exist (else an error wrapping ErrNotFound) and must not
// have its number yet (else ErrAlreadyNumbered), which Enqueue reads from
// the series' index and from the record itself. Enqueuing a record twice
// is harmless: it gets one number, in the place of its first provisional id.
//
// Records written through vault.NumberingOf's handle need no Enqueue: its
// Put hands the record off in the same call. Enqueue is for records written
// otherwise (an import, a plain collection Put).
func (s *Series) Enqueue(ctx context.Context, id string) (string, error) {
	exit, err := s.enter(ctx)
	if err != nil {
		return "", s.errorf("enqueue", err)
	}
	defer exit()
	if err := checkID(id); err != nil {
		return "", s.errorf("enqueue", err)
	}
	if err := s.b.Check(ctx); err != nil {
		return "", s.errorf("enqueue "+id, err)
	}
	if _, err := s.b.Store.Get(ctx, s.assignedKey(id)); err == nil {
		return "", s.errorf("enqueue "+id, ErrAlreadyNumbered)
	} else if !errors.Is(err, stores.ErrNotFound) {
		return "", s.errorf("enqueue "+id, err)
	}
	// The index can be lost (a store deleting keys); the record itself says
	// whether it has its number.
	n, _, ok, err := s.b.Records.Number(ctx, s.opts.Collection, id, s.name)
	if err != nil {
		return "", s.errorf("enqueue "+id, err)
	}
	if !ok {
		return "", s.errorf("enqueue "+id, fmt.Errorf("record %s/%s: %w", s.opts.Collection, id, ErrNotFound))
	}
	if n != 0 {
		return "", s.errorf("enqueue "+id, fmt.Errorf("%w: it carries number %d", ErrAlreadyNumbered, n))
	}
	u, err := uuid.NewV7()
	if err != nil {
		return "", s.errorf("enqueue "+id, err)
	}
	p := u.String()
	key := s.pendingKey(p, id)
	sealed, err := s.b.Sealer.Seal(key, encodePending(id))
	if err != nil {
		return "", s.errorf("enqueue "+id, err)
	}
	if _, err := s.b.Store.Put(ctx, key, sealed); err != nil {
		return "", s.errorf("enqueue "+id, err)
	}
	return p, nil
}

// Assignment is a record's number, as Lookup and Assignments report it.
type Assignment struct {
	// RecordID is the numbered record.
	RecordID string
	// Number is the record's number.
	Number uint64
	// Formatted is the value stamped on the record, as text: the formatted
	// number, or the number in decimal for a series without a format.
	Formatted string
	// Voided is true when the record was deleted after its batch was
	// recorded: the number is spent, and void in the ledger.
	Voided bool
	// Provisional is the provisional id the record was numbered by.
	Provisional string
	// Batch is the pass's batch that gave the number (1 for the first).
	Batch uint64
}

// Lookup tells whether the record id has its number yet, and which. A
// record in a batch that is recorded but not yet fully stamped already has
// its number (the batch is finished by the next pass, never recomputed), and
// Lookup reports it. A record that is pending, or unknown, gives ok false.
func (s *Series) Lookup(ctx context.Context, id string) (Assignment, bool, error) {
	exit, err := s.enter(ctx)
	if err != nil {
		return Assignment{}, false, s.errorf("lookup", err)
	}
	defer exit()
	if err := checkID(id); err != nil {
		return Assignment{}, false, s.errorf("lookup", err)
	}
	// A pass may finish its batch between our reads of the index and of the
	// batch; then the index has the record on the next round.
	for range 3 {
		a, ok, err := s.readAssigned(ctx, id)
		if err != nil {
			return Assignment{}, false, s.errorf("lookup "+id, err)
		}
		if ok {
			// The index entry may be that of a record deleted since, whose
			// id was handed off again (the record says): then the new
			// record waits, or is in the batch in flight.
			_, p, found, err := s.b.Records.Number(ctx, s.opts.Collection, id, s.name)
			if err != nil {
				return Assignment{}, false, s.errorf("lookup "+id, err)
			}
			if !found || p == "" || p == a.Provisional {
				return a, true, nil
			}
		}
		a, ok, err = s.inFlight(ctx, func(it item) bool { return it.id == id })
		if errors.Is(err, errStaleBatch) {
			continue
		}
		if err != nil {
			return Assignment{}, false, s.errorf("lookup "+id, err)
		}
		return a, ok, nil
	}
	return Assignment{}, false, s.errorf("lookup "+id, ErrPassRunning)
}

// inFlight looks in the batch in flight for the first record match
// accepts, and returns its number; ok is false when there is no batch or
// no such record in it. errStaleBatch says a pass replaced the batch
// meanwhile: the caller reads the index again.
func (s *Series) inFlight(ctx context.Context, match func(item) bool) (Assignment, bool, error) {
	h, _, err := s.loadHead(ctx)
	if err != nil || h.batch == nil {
		return Assignment{}, false, err
	}
	items, err := s.loadBatch(ctx, h.batch)
	if err != nil {
		return Assignment{}, false, err
	}
	for i, it := range items {
		if match(it) {
			n := h.batch.first + uint64(i)
			text, err := s.text(h.batch.format, n)
			if err != nil {
				return Assignment{}, false, err
			}
			return Assignment{RecordID: it.id, Number: n, Formatted: text, Provisional: it.provisional, Batch: h.batch.id}, true, nil
		}
	}
	return Assignment{}, false, nil
}

// indexed is deferred.Hooks.Indexed. A voided number is not the record's:
// its record was gone when its batch was stamped, so a revision pending
// under the same provisional id (the record brought back, by a device
// whose edit won over the deletion) is no replay of one from before a
// stamp; the next pass numbers it anew.
func (s *Series) indexed(ctx context.Context, id string) (string, uint64, string, bool, error) {
	a, ok, err := s.readAssigned(ctx, id)
	if err != nil || !ok || a.Voided {
		return "", 0, "", false, wrapIf(s, "index "+id, err)
	}
	return a.Provisional, a.Number, a.Formatted, true, nil
}

func wrapIf(s *Series, op string, err error) error {
	if err == nil {
		return nil
	}
	return s.errorf(op, err)
}

func (s *Series) readAssigned(ctx context.Context, id string) (Assignment, bool, error) {
	key := s.assignedKey(id)
	it, err := s.b.Store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		return Assignment{}, false, nil
	}
	if err != nil {
		return Assignment{}, false, err
	}
	a, err := s.openAssigned(key, id, it.Value)
	return a, err == nil, err
}

func (s *Series) openAssigned(key, id string, sealed []byte) (Assignment, error) {
	p, err := s.b.Sealer.Open(key, sealed)
	if err != nil {
		return Assignment{}, ErrTampered
	}
	a, err := decodeAssignment(p)
	if err != nil {
		return Assignment{}, err
	}
	return Assignment{RecordID: id, Number: a.number, Formatted: a.formatted, Voided: a.voided,
		Provisional: a.provisional, Batch: a.batch}, nil
}

// Assignments yields the number of every record the series has stamped
// (voided numbers included), in record id order. Records of a batch still
// in flight are not yielded until a pass finishes it. An error is yielded
// once and ends the sequence.
func (s *Series) Assignments(ctx context.Context) iter.Seq2[Assignment, error] {
	return func(yield func(Assignment, error) bool) {
		exit, err := s.enter(ctx)
		if err != nil {
			yield(Assignment{}, s.errorf("assignments", err))
			return
		}
		defer exit()
		prefix := s.dir + assignedDir
		for it, err := range stores.ListUnder(ctx, s.b.Store, prefix) {
			if err != nil {
				yield(Assignment{}, s.errorf("assignments", err))
				return
			}
			id := it.Key[len(prefix):]
			a, err := s.openAssigned(it.Key, id, it.Value)
			if err != nil {
				yield(Assignment{}, s.errorf("assignments: "+id, err))
				return
			}
			if !yield(a, nil) {
				return
			}
		}
	}
}

// Last returns the highest number the series has given (committed by a
// pass's batch), 0 before the first pass.
func (s *Series) Last(ctx context.Context) (uint64, error) {
	exit, err := s.enter(ctx)
	if err != nil {
		return 0, s.errorf("last", err)
	}
	defer exit()
	h, _, _, err := s.checkedHeads(ctx)
	if err != nil {
		return 0, s.errorf("last", err)
	}
	return h.last, nil
}

// checkedHeads reads the series' head and its counter (one head for both
// paths: a batch is numbered above both), checked against the ledger
// (Backend.Recorded, read first: heads are written before the entries of
// their numbers, and only grow, so honest heads are never below it). The
// head below the highest number the ledger records as given by the
// series' passes, or the higher of the two below the highest it records
// of the counter, is ErrRollback.
func (s *Series) checkedHeads(ctx context.Context) (h head, ver, counter uint64, err error) {
	var rec deferred.Recorded
	if s.b.Recorded != nil {
		if rec, err = s.b.Recorded(ctx); err != nil {
			return head{}, 0, 0, fmt.Errorf("check the head against the ledger: %w", err)
		}
	}
	if h, ver, err = s.loadHead(ctx); err != nil {
		return head{}, 0, 0, err
	}
	if h.last < rec.Passes {
		return head{}, 0, 0, headBehind(h.last, rec.Passes)
	}
	s.closed.Store(rec.Closed)
	if counter, err = s.b.CounterHead(ctx); err != nil {
		return head{}, 0, 0, fmt.Errorf("read the counter %q: %w", s.name, err)
	}
	if top := max(h.last, counter); top < rec.Counter {
		return head{}, 0, 0, fmt.Errorf("counter %q is at %d but the ledger records number %d: %w", s.name, top, rec.Counter, ErrRollback)
	}
	return h, ver, counter, nil
}

// headBehind is the error of a head at last below a number the ledger
// records as given by a pass.
func headBehind(last, recorded uint64) error {
	return fmt.Errorf("head is at %d but the ledger records number %d: %w", last, recorded, ErrRollback)
}

// Pending returns how many pending entries wait for a pass (a record
// enqueued twice counts twice). A store that lists a key outside the
// series' pending entries gives an error wrapping stores.ErrMisbehaving.
func (s *Series) Pending(ctx context.Context) (int, error) {
	exit, err := s.enter(ctx)
	if err != nil {
		return 0, s.errorf("pending", err)
	}
	defer exit()
	n := 0
	prefix := s.dir + pendingDir
	for _, err := range stores.ListUnder(ctx, s.b.Store, prefix) {
		if err != nil {
			return 0, s.errorf("pending", err)
		}
		n++
	}
	return n, nil
}

// loadHead reads the series head and its version (0 and the zero head when
// the series has never been numbered).
func (s *Series) loadHead(ctx context.Context) (head, uint64, error) {
	key := s.headKey()
	var pin uint64
	if s.b.Pins != nil {
		pin = s.b.Pins.CounterPin(key)
	}
	it, err := s.b.Store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		if pin > 0 {
			if err := s.b.Pins.CheckCounter(key, 0); err != nil {
				return head{}, 0, fmt.Errorf("head: %w", err)
			}
		}
		return head{}, 0, nil
	}
	if err != nil {
		return head{}, 0, err
	}
	p, err := s.b.Sealer.Open(key, it.Value)
	if err != nil {
		return head{}, 0, fmt.Errorf("head: %w", ErrTampered)
	}
	h, err := decodeHead(p)
	if err != nil {
		return head{}, 0, fmt.Errorf("head: %w", err)
	}
	if s.b.Pins != nil {
		// Held against the pin as it was before the read, so that a pass of
		// this process finishing meanwhile is not taken for a rollback.
		if h.last < pin {
			if err := s.b.Pins.CheckCounter(key, h.last); err != nil {
				return head{}, 0, fmt.Errorf("head: %w", err)
			}
		}
		if err := s.b.Pins.RaiseCounter(key, h.last); err != nil {
			return head{}, 0, fmt.Errorf("head: %w", err)
		}
	}
	return h, it.Version, nil
}

// writeHead replaces the head at version ver (fenced: a head changed by
// someone else fails with ErrPassRunning) and returns the new version.
func (s *Series) writeHead(ctx context.Context, h *head, ver uint64) (uint64, error) {
	key := s.headKey()
	sealed, err := s.b.Sealer.Seal(key, h.encode())
	if err != nil {
		return 0, err
	}
	v, err := s.b.Store.CompareAndSwap(ctx, key, ver, sealed)
	if errors.Is(err, stores.ErrConflict) {
		return 0, fmt.Errorf("write head: %w: %w", ErrPassRunning, err)
	}
	if err == nil && s.b.Pins != nil {
		if err := s.b.Pins.RaiseCounter(key, h.last); err != nil {
			// Written: the numbers up to h.last are committed, but their
			// pin is not durable, so the pass must not report success.
			return v, fmt.Errorf("head written at %d, but its rollback pin was not saved: %w", h.last, err)
		}
	}
	return v, err
}
