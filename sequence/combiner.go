package sequence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/internal/batch"
	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/overlay"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// The combiner.
//
// Every counter key has one *counter per Service, shared by all handles of
// that key. Operations that write the counter (Next, NextSerial, Claim,
// SeedTo, Bind) are submitted to its queue (internal/batch, the one
// batching primitive of the SDK). If no write is in flight the submitter
// becomes the leader and writes at once, for itself alone. Submitters that
// arrive while a write is in flight queue up; when the write ends, the leader
// hands the queue, as one batch, to the first queued submitter, which
// becomes the next leader and applies the batch in one write (one
// transaction or one compare-and-swap), in arrival order. There is no timer:
// a batch is what queued up during the previous write, cut to what one
// commit can carry (see cutBatch); the rest stays queued for the next
// write. A batch of several ops that the store still refuses as too big is
// written in halves, one after the other, so that no caller ever fails for
// being one of many.
//
// The leader owns the cache of the record it last wrote, so the hot path
// neither decrypts nor re-reads: in a transaction, the stored bytes are
// compared with the bytes last written; otherwise the compare-and-swap is
// made against the version last written, and a record read after a conflict
// is decrypted only if its bytes differ from the cached ones.
//
// A batch is written in a transaction when the store has them and it needs
// one (a Journal, claim records, Bind); otherwise by compare-and-swap. In a
// vault the transaction is the ledger's UpdateKeys, which batches too: the
// batches of different counters (and record writes) that queue meanwhile
// share one store transaction, so many series share one commit.

// keyedTransactor is a Transactor that can be told the keys a transaction
// will read, so that a store that reads in round trips reads them in one
// (the vault's ledger, see wire.Ledger.UpdateKeys).
type keyedTransactor interface {
	UpdateKeys(ctx context.Context, keys []string, fn func(tx stores.Tx) error) error
}

type opKind uint8

const (
	opNext opKind = iota
	opClaim
	opSeed
	opBind
	opClose // ClosePeriod
)

// op is one submitted operation: its request, its outcome, and its place in
// the queue. The context is the caller's, carried for the duration of the
// call.
type op struct {
	kind   opKind
	ctx    context.Context
	seq    *Sequence                          // Bind: formats the Serial handed to fn
	id     string                             // Claim
	ckey   string                             // Claim on a transactional store: its claim record's key
	uid    [16]byte                           // Claim on a store without transactions
	target uint64                             // SeedTo
	count  uint64                             // NextN: how many numbers (0 means 1)
	fn     func(tx stores.Tx, s Serial) error // Bind
	date   time.Time                          // the document's date (zero: now), for rendering
	define *effective                         // a definition to store with this commit (nil: none)
	reason string                             // the Reason of its Allocated event: a correction's text

	keys []string // Bind: the keys fn reads, prefetched

	n        uint64
	err      error
	fresh    bool // n was allocated by this op (an Allocated event)
	panicked bool
	panicVal any

	batch.Slot[*op] // the combining queue's part; kept when the op is recycled
}

// counter is the combining state of one counter key.
type counter struct {
	svc       *service
	key       string
	series    string
	partition []string
	name      string // series and partition, for messages
	defKey    string // the key of the series' definition
	// periodic: the counter is a period's (service.periodTarget).
	periodic  atomic.Bool
	eventBase int // bound of an event's encoded size without its request id (see cutBatch)

	q batch.Queue[*op] // the combining queue

	// Owned by the current leader.
	w            work
	attemptFn    func(attempt int) error
	txFn         func(tx stores.Tx) error
	cache        state  // the counter as last written or read
	cacheSealed  []byte // its sealed bytes (nil: none): equal stored bytes need no decrypt
	cacheVersion uint64 // its version, when cacheValid
	cacheValid   bool   // cacheVersion is known: a compare-and-swap can skip the read
	checked      bool   // the counter was checked against the History (see checkHistory)
	floor        uint64 // the highest number the History recorded at that check
	base         uint64 // the passes' head at that check: the counter is raised to it (see checkHistory)
	through      uint64 // the History's position that check held through (see ledgerMoved)
	versionKnown bool   // cacheVersion is the version of cacheSealed as this Service last wrote or read it
	// shut is true once the History recorded a close of the counter's
	// period, or this Service closed it: an open counter is then one the
	// store replayed or deleted.
	shut bool

	view ledgerView // what the History says, read incrementally; has its own lock
	tx   txFloor    // the floor for numbers taken in a caller's transaction (see intx.go)
}

// submit runs o through the combining queue and returns once o has its
// outcome. An op whose context ends while it waits leaves the queue and
// takes nothing; one already in a batch sees it through, so a number it
// took reaches the caller.
func (c *counter) submit(o *op) {
	if err := c.q.Do(o.ctx, o); err != nil && !errors.Is(err, batch.ErrAbandoned) {
		o.err = err
	}
}

// runBatch is the queue's Run: it writes batch, and if the write panics it
// leaves errLeaderPanicked in the ops without a final outcome (what the
// halves written before the panic took stays taken) before the panic goes
// on in the leader.
func (c *counter) runBatch(ctx context.Context, batch []*op) {
	completed := false
	done := 0 // batch[:done] have their final outcome
	defer func() {
		if !completed {
			c.cacheValid, c.cacheSealed = false, nil
			for _, o := range batch[done:] {
				o.n, o.fresh = 0, false
				if o.err == nil {
					o.err = errLeaderPanicked
				}
			}
		}
	}()
	c.runSplit(ctx, batch, &done)
	completed = true
}

// runSplit writes batch and, if the store refused it as too big while it
// holds several ops, writes its halves one after the other instead. It
// advances *done past the ops whose outcome is final.
func (c *counter) runSplit(ctx context.Context, batch []*op, done *int) {
	c.run(ctx, batch)
	if len(batch) > 1 && refusedAsTooBig(batch) {
		half := len(batch) / 2
		c.runSplit(ctx, batch[:half], done)
		c.runSplit(ctx, batch[half:], done)
		return
	}
	*done += len(batch)
}

// refusedAsTooBig reports whether the write of batch failed as a whole
// because the store found it too big (stores.ErrTooLarge, as badger's
// transaction size limit is reported): nothing was taken, and an op failed
// with that error.
func refusedAsTooBig(batch []*op) bool {
	tooBig := false
	for _, o := range batch {
		if o.fresh || o.n != 0 {
			return false // the write committed
		}
		tooBig = tooBig || errors.Is(o.err, stores.ErrTooLarge)
	}
	return tooBig
}

var errLeaderPanicked = errors.New("write abandoned: a panic in the goroutine writing it")

// Batch limits: what one commit carries. Each op of a batch may make one
// Journal event, and the Journal records a batch's events in one append,
// which the vault's ledger bounds (wire.LedgerMaxBatchBytes, 1 MiB, by the
// entries' encoded size); a Bind op also writes the caller's records, of up
// to stores.MaxValueLen each, in the batch's transaction.
const (
	// maxBatchOps bounds the ops of one batch.
	maxBatchOps = 4096
	// maxBatchBinds bounds the Bind ops of one batch.
	maxBatchBinds = 256
	// maxBatchEventBytes bounds the estimated encoded size of a batch's
	// events: half of what one ledger append accepts.
	maxBatchEventBytes = 512 << 10
	// eventFixedBytes bounds the encoded size of an event's fixed fields
	// (kind, position, time, numbers, and the lengths of its strings).
	eventFixedBytes = 128
)

// cutBatch takes the ops at the front of queue that make the next batch:
// at least one, and no more than the batch limits allow. An op's event is
// estimated by the longest encoding of its fields: the series and
// partition (the same for every op of c), the request id of a Claim.
func (c *counter) cutBatch(queue []*op) (next, rest []*op) {
	n := c.batchLen(queue)
	return queue[:n:n], queue[n:]
}

// batchLen is how many ops at the front of queue cutBatch takes.
func (c *counter) batchLen(queue []*op) int {
	if len(queue) <= 1 {
		return len(queue)
	}
	size, binds := 0, 0
	for i, o := range queue {
		cost := (c.eventBase + len(o.id)) * int(max(o.count, 1)) // one event per number
		if o.kind == opBind {
			binds++
		}
		if i > 0 && (i == maxBatchOps || binds > maxBatchBinds || size+cost > maxBatchEventBytes) {
			return i
		}
		size += cost
	}
	return len(queue)
}

// work is the batch being written and the scratch space of its attempts.
// Only the leader touches it; it lives in the counter, with the attempt
// functions bound once, so the hot path allocates no closures. The context is
// the batch's, held for the duration of one run.
type work struct {
	ctx       context.Context
	batch     []*op
	indexed   bool        // the History's claims were read for this batch: a missing claim record is looked up there
	start     uint64      // the counter before the attempt
	seeds     []seedRange // the numbers the attempt's seeds skipped
	events    []event
	eventBuf  []event  // the room events are planned in, kept from batch to batch
	next      state    // the state the attempt wrote
	sealed    []byte   // the bytes the attempt wrote (or read, if it wrote nothing)
	buf       []byte   // plaintext scratch
	keys      []string // the keys the transaction reads (scratch)
	pin       uint64   // the counter's pin, taken before the transaction began
	rechecked bool     // the History was asked again for this batch (errRecheck)
	// unpinned is the error of a transaction that committed although a
	// pin covering it (the ledger's) was not saved (see pins.ErrUnpinned).
	unpinned error
	// defined is the definition the attempt found or stored (nil: none).
	defined *effective
}

func newCounter(svc *service, key, series string, partition []string) *counter {
	c := &counter{svc: svc, key: key, series: series, partition: partition, name: displayName(series, partition), defKey: svc.defKey(series)}
	c.eventBase = eventFixedBytes + len(series)
	for _, p := range partition {
		c.eventBase += binary.MaxVarintLen32 + len(p)
	}
	c.attemptFn = c.attempt
	c.txFn = c.txBody
	c.q.Run, c.q.Cut = c.runBatch, c.cutBatch
	return c
}

// run applies batch to the store, retrying lost races, and leaves each op's outcome in it.
func (c *counter) run(ctx context.Context, batch []*op) {
	c.w.ctx, c.w.batch = ctx, batch
	defer func() {
		c.w.ctx, c.w.batch, c.w.events, c.w.indexed, c.w.rechecked, c.w.unpinned, c.w.defined = nil, nil, nil, false, false, nil, nil
	}()

	var attempts int
	err := c.checkHistory(ctx)
	if err == nil {
		attempts, err = cas.Do(ctx, c.svc.policy, c.attemptFn)
	}
	for err != nil {
		switch {
		case errors.Is(err, errRecheck) && !c.w.rechecked:
			// Another writer moved the counter: the floor of the first
			// check may be stale (see errRecheck).
			c.w.rechecked, c.checked = true, false
			err = c.checkHistory(ctx)
		case errors.Is(err, errLookUpClaims) && !c.w.indexed:
			// A claim record is missing: the ledger may know the request id
			// (a record the store lost). Read it, then write again.
			if err = c.catchUp(ctx, true); err == nil {
				c.w.indexed = true
			}
		default:
			goto written
		}
		if err == nil {
			// One budget for every loop: the next gets what is left.
			var more int
			more, err = cas.Do(ctx, c.svc.policy.Remaining(attempts), c.attemptFn)
			attempts += more
		}
	}
written:
	if err != nil {
		if cas.Exhausted(err) {
			err = &ContentionError{Series: c.name, Attempts: attempts}
		}
		for _, o := range batch {
			o.n, o.fresh = 0, false
			if o.err == nil {
				o.err = err
			}
		}
		return
	}
	if c.w.defined != nil {
		c.w.defined.stored.Store(true)
	}
	if c.cache.closed {
		c.shut = true
		c.tx.closed.Store(true)
	}
	pinErr := c.w.unpinned
	if c.svc.pins != nil {
		if err := c.svc.pins.RaiseCounter(c.key, c.cache.value); err != nil && pinErr == nil {
			pinErr = err
		}
	}
	if pinErr != nil && !errors.Is(pinErr, pins.ErrUnpinned) {
		pinErr = fmt.Errorf("%w: %w", pins.ErrUnpinned, pinErr)
	}
	if pinErr != nil {
		// The batch is committed but a pin covering it is not durable: no
		// caller may believe its number protected. Each gets its number
		// (if it took one) with the error.
		for _, o := range batch {
			switch {
			case o.err != nil:
			case o.n != 0:
				o.err = fmt.Errorf("number %d was taken but its rollback pin was not saved: %w", o.n, pinErr)
			default:
				o.err = fmt.Errorf("written, but its rollback pin was not saved: %w", pinErr)
			}
		}
	}
	if c.svc.history != nil {
		c.noteCommit(c.w.start, c.cache.value, batch, c.w.seeds)
	}
	if c.svc.txr == nil && c.svc.journal != nil && len(c.w.events) > 0 {
		if err := c.svc.journal.Record(ctx, nil, c.w.events); err != nil {
			for _, o := range batch {
				if !o.fresh {
					continue
				}
				jerr := fmt.Errorf("number %d was taken but the journal failed: %w", o.n, err)
				if o.err != nil {
					jerr = errors.Join(o.err, jerr)
				}
				o.err = jerr
			}
		}
	}
}

// errLookUpClaims fails an attempt that found a claim record missing before
// the History's claims were read for the batch.
var errLookUpClaims = errors.New("claim record missing: look the request id up in the history")

// checkHistory, on the first write of the counter in this Service, reads the
// highest number the History records for it; every attempt then refuses a
// counter below it (deleted, or replayed to an older value by the store).
// The History is read before the counter, which only grows, so an honest
// counter is never below it. Later writes need no read: the floor stays.
func (c *counter) checkHistory(ctx context.Context) error {
	if c.checked || c.svc.history == nil {
		return nil
	}
	// A History without a summary is read: a first batch with a claim
	// reads the claims in the same walk.
	claims := false
	for _, o := range c.w.batch {
		claims = claims || (o.kind == opClaim && c.svc.txr != nil)
	}
	highest, closed, defined, through, err := c.recorded(ctx, claims)
	if err != nil {
		return fmt.Errorf("check the counter against the ledger: %w", err)
	}
	// The passes' head after the History (its numbers reach the History
	// after the head), before the counter.
	base, err := c.passHead(ctx)
	if err != nil {
		return fmt.Errorf("check the counter against the passes' head: %w", err)
	}
	c.floor, c.shut, c.base = max(c.floor, highest), c.shut || closed, max(c.base, base)
	c.through = max(c.through, through)
	if defined {
		if err := c.svc.checkDefinition(ctx, c.series); err != nil {
			return err
		}
		if err := c.outsidePeriods(); err != nil {
			return err
		}
	}
	c.checked = true
	return nil
}

// outsidePeriods refuses the batch of a counter that is not a period's
// when the series' definition, as just read, counts per period: its ops
// were resolved by handles that did not know it yet (opened without a
// definition, before another process stored one), and a number here would
// be outside every period. Their next call resolves to the period.
func (c *counter) outsidePeriods() error {
	eff := c.svc.seriesOf(c.series).cur.Load()
	if eff == nil || !eff.defined || eff.def.Period == PeriodNone || c.periodic.Load() {
		return nil
	}
	return fmt.Errorf("%w: the series counts per %s (a definition stored elsewhere since this handle first read it): nothing taken; "+
		"a call again numbers in its period", ErrDefinitionMismatch, eff.def.Period)
}

// recorded returns what the History records of the counter: the highest
// number (its passes' numbers included, for the unpartitioned counter of
// a series: one head for both paths), whether its period was closed,
// whether its series' definition was stored. A History with a summary
// (wire.HistorySummary) answers from it; another is read since the view's
// last read (from the start, the first time), with claims indexing the
// request ids of claims too (see catchUp).
func (c *counter) recorded(ctx context.Context, claims bool) (highest uint64, closed, defined bool, through uint64, err error) {
	if hs, ok := c.svc.history.(wire.HistorySummary); ok {
		f, err := hs.CounterFacts(ctx, c.series, c.partition)
		return max(f.Highest, f.Passes), f.Closed, f.Defined, f.Through, err
	}
	if err := c.catchUp(ctx, claims); err != nil {
		return 0, false, false, 0, err
	}
	c.view.mu.Lock()
	defer c.view.mu.Unlock()
	return c.view.highest, c.view.closed, c.view.defined, c.view.through, nil
}

// passHead returns the head of the deferred-numbering passes of the
// counter's series (0 for a partitioned counter: passes number the
// unpartitioned one).
func (c *counter) passHead(ctx context.Context) (uint64, error) {
	if c.svc.passHead == nil || len(c.partition) != 0 {
		return 0, nil
	}
	return c.svc.passHead(ctx, c.series)
}

// errRecheck fails an attempt that found the counter written by another
// writer since this Service last wrote or read it: the History is asked
// again (see checkHistory) before the batch is written, so a counter the
// store rolled back after the first check is not trusted on the floor of
// that check.
var errRecheck = errors.New("counter written elsewhere: check it against the ledger again")

// movedElsewhere reports whether the counter's stored bytes, read by an
// attempt, are not the ones this Service last wrote or read, and the
// batch has not asked the History again yet.
func (c *counter) movedElsewhere(stored []byte) bool {
	return c.checked && !c.w.rechecked && c.cacheSealed != nil && !bytes.Equal(stored, c.cacheSealed)
}

// ledgerMoved reports, for a counter whose stored bytes this Service
// cannot tell from its own (the ones it last wrote or read, none, or bytes
// it never held), whether the History was moved by another
// writer since the counter's check held (wire.HistoryWatch), and the batch
// has not asked the History again yet. Equal bytes do not prove the
// counter unmoved: a store can put back the bytes this Service last saw
// after another writer moved the counter on, and then only the History
// knows the numbers given meanwhile. A writer alone pays one atomic load.
func (c *counter) ledgerMoved() bool {
	return c.svc.watch != nil && c.checked && !c.w.rechecked && c.svc.watch.ForeignThrough() > c.through
}

// absentMoved reports, on a store without transactions, whether a counter
// this Service last read as absent was written since (its version moved,
// or a write of this Service's had an unknown outcome), and the batch has
// not asked the History again yet: a counter read again after that, present
// or absent, is checked against the History first. (With transactions,
// ledgerMoved tells.)
func (c *counter) absentMoved() bool {
	return c.versionKnown && c.cacheSealed == nil && c.checked && !c.w.rechecked && c.svc.history != nil
}

// attempt is one try at writing c.w.batch.
func (c *counter) attempt(int) error {
	for _, o := range c.w.batch {
		o.n, o.err, o.fresh, o.panicked, o.panicVal = 0, nil, false, false, nil
	}
	c.w.events, c.w.unpinned, c.w.defined = nil, nil, nil
	if c.needsTx() {
		// Taken before the transaction's snapshot, which may be older than a
		// value pinned while it runs (see ledger's pinned).
		c.w.pin = c.svc.pinOf(c.key)
		if err := c.update(); err != nil {
			if !errors.Is(err, pins.ErrUnpinned) {
				return err
			}
			c.w.unpinned = err // committed: see run
		}
		// The new version is not reported by a transaction.
		c.cache, c.cacheSealed, c.cacheValid, c.versionKnown = c.w.next, c.w.sealed, false, false
		return nil
	}
	return c.casAttempt()
}

// update runs fn in a store transaction that reads keys first in one step:
// through the transactor when it takes them (the vault's ledger, which
// reads the keys of its whole batch at once), else through the store's
// transaction when it is a stores.Prefetcher (pgstore).
func (s *service) update(ctx context.Context, keys []string, fn func(tx stores.Tx) error) error {
	if kt, ok := s.txr.(keyedTransactor); ok {
		return kt.UpdateKeys(ctx, keys, fn)
	}
	if len(keys) < 2 {
		return s.txr.Update(ctx, fn) // one key: its Get costs the same
	}
	return s.txr.Update(ctx, func(tx stores.Tx) error {
		if p, ok := tx.(stores.Prefetcher); ok {
			if err := p.Prefetch(keys); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

// update runs txBody in a store transaction, naming the keys it reads.
func (c *counter) update() error {
	keys := append(c.w.keys[:0], c.key)
	defining := false
	for _, o := range c.w.batch {
		if o.ckey != "" {
			keys = append(keys, o.ckey)
		}
		keys = append(keys, o.keys...)
		defining = defining || o.define != nil
	}
	if defining {
		keys = append(keys, c.definitionKey())
		if len(c.partition) > 0 {
			if base, err := c.svc.baseOf(c.series, c.partition); err == nil {
				keys = append(keys, base) // touched with a definition of periods
			}
		}
	}
	c.w.keys = keys
	return c.svc.update(c.w.ctx, keys, c.txFn)
}

// needsTx reports whether the batch must be written in a transaction: on a
// transactional store, when the Journal must record in the same commit or an
// op writes more keys than the counter (claim records, Bind). Otherwise a
// compare-and-swap of the counter alone is enough, and cheaper on most stores.
func (c *counter) needsTx() bool {
	if c.svc.txr == nil {
		return false
	}
	if c.svc.journal != nil {
		return true
	}
	for _, o := range c.w.batch {
		if o.kind == opClaim || o.kind == opBind || o.define != nil {
			return true
		}
	}
	return false
}

// definitionKey is the key of the definition of c's series.
func (c *counter) definitionKey() string { return c.defKey }

// defineTx stores, in tx, the definition the batch's ops carry, unless the
// series has one: an op whose definition differs from the stored one (or
// from the one an earlier op of the batch stores) fails, taking nothing.
// It returns the event to record first, when it stored the definition.
func (c *counter) defineTx(tx stores.Tx) (*event, error) {
	c.w.defined = nil
	var ev *event
	for _, o := range c.w.batch {
		if o.define == nil {
			continue
		}
		if c.w.defined != nil {
			if !c.w.defined.def.equal(o.define.def) {
				o.err = mismatch(c.series, c.w.defined.def, o.define.def)
			}
			continue
		}
		e, err := c.svc.defineTx(tx, c.series, c.definitionKey(), o.define)
		var de *DefinitionError
		if errors.As(err, &de) {
			o.err = err
			continue
		}
		if err == nil && e != nil && o.define.def.Period != PeriodNone && len(c.partition) > 0 {
			// Stored with a period: the counter of no period is touched.
			var base string
			if base, err = c.svc.baseOf(c.series, c.partition); err == nil {
				err = c.svc.touchTx(tx, base)
			}
		}
		if err != nil {
			return nil, err
		}
		c.w.defined, ev = o.define, e
	}
	return ev, nil
}

// txBody applies c.w.batch inside a store transaction. Its outcome reaches
// the cache only if the transaction commits.
func (c *counter) txBody(tx stores.Tx) error {
	// The ledger runs this again when its batch's transaction conflicts:
	// start from a clean outcome each time.
	for _, o := range c.w.batch {
		o.n, o.err, o.fresh, o.panicked, o.panicVal = 0, nil, false, false, nil
	}
	c.w.events = nil
	pin := c.w.pin
	item, err := stores.GetShared(tx, c.key) // compared, opened or copied: never modified
	var st state
	switch {
	case err == nil && c.cacheSealed != nil && bytes.Equal(item.Value, c.cacheSealed):
		if c.ledgerMoved() {
			return errRecheck
		}
		st = c.cache
		c.w.sealed = c.cacheSealed
	case err == nil:
		if st, err = c.svc.openState(c.key, item.Value); err != nil {
			return err
		}
		if c.movedElsewhere(item.Value) || c.ledgerMoved() {
			return errRecheck
		}
		c.w.sealed = slices.Clone(item.Value)
	case errors.Is(err, stores.ErrNotFound):
		if c.ledgerMoved() {
			// Absent as this Service last saw it, or deleted: either way
			// the numbers another writer gave meanwhile are in the History.
			return errRecheck
		}
		c.w.sealed = nil
	default:
		return err
	}
	if err := c.svc.checkPin(c.key, st.value, pin); err != nil {
		return err
	}
	defined, err := c.defineTx(tx)
	if err != nil {
		return err
	}
	changed, events, err := c.plan(tx, &st, c.w.batch)
	if err != nil {
		return err
	}
	if defined != nil && c.svc.journal != nil {
		events = append([]event{*defined}, events...)
	}
	if changed {
		c.w.buf = st.appendTo(c.w.buf[:0])
		if c.w.sealed, err = c.svc.sealer.Seal(c.key, c.w.buf); err != nil {
			return err
		}
		// Fresh bytes, kept as the cache and never modified: the store may keep them.
		if err := stores.PutShared(tx, c.key, c.w.sealed); err != nil {
			return err
		}
	}
	if c.svc.journal != nil && len(events) > 0 {
		if err := c.svc.journal.Record(c.w.ctx, tx, events); err != nil {
			return err
		}
	}
	c.w.next, c.w.events = st, events
	return nil
}

// casAttempt applies c.w.batch with one compare-and-swap against the cached
// version, reading the record first only when the cache is not known good.
func (c *counter) casAttempt() error {
	ctx := c.w.ctx
	pin := c.svc.pinOf(c.key)
	if c.cacheValid && c.cache.value < pin {
		// The pin is above the value cached before it was taken: another
		// writer sharing these pins (a second DB on the same state folder)
		// moved the counter. Only a value read after the pin may be held
		// against it, so read the counter again.
		c.cacheValid = false
	}
	if !c.cacheValid {
		item, err := c.svc.store.Get(ctx, c.key)
		switch {
		case err == nil && c.cacheSealed != nil && bytes.Equal(item.Value, c.cacheSealed):
			if c.versionKnown && item.Version != c.cacheVersion && c.checked && !c.w.rechecked && c.svc.history != nil {
				// Written since this Service last wrote or read it, and
				// put back to the same bytes (sealed with a random nonce,
				// they are not another honest writer's): the numbers
				// given meanwhile are known to the History only.
				c.cacheVersion = item.Version
				return errRecheck
			}
			c.cacheVersion = item.Version
		case err == nil:
			st, err := c.svc.openState(c.key, item.Value)
			if err != nil {
				return err
			}
			if c.movedElsewhere(item.Value) || c.absentMoved() {
				return errRecheck
			}
			c.cache, c.cacheSealed, c.cacheVersion = st, item.Value, item.Version
		case errors.Is(err, stores.ErrNotFound):
			if c.absentMoved() {
				return errRecheck
			}
			c.cache, c.cacheSealed, c.cacheVersion = state{}, nil, 0
		default:
			return err
		}
		c.cacheValid, c.versionKnown = true, true
	}
	if err := c.svc.checkPin(c.key, c.cache.value, pin); err != nil {
		c.cacheValid = false
		return err
	}
	st := c.cache
	changed, events, err := c.plan(nil, &st, c.w.batch)
	if err != nil || !changed {
		c.w.events = events
		return err
	}
	c.w.buf = st.appendTo(c.w.buf[:0])
	sealed, err := c.svc.sealer.Seal(c.key, c.w.buf)
	if err != nil {
		return err
	}
	v, err := c.svc.store.CompareAndSwap(ctx, c.key, c.cacheVersion, sealed)
	if err != nil {
		// A conflict means another writer moved on; any other error may hide
		// a write that happened. Either way, read again next time.
		c.cacheValid = false
		return err
	}
	c.cache, c.cacheSealed, c.cacheVersion = st, sealed, v
	c.w.events = events
	return nil
}

// plan applies the ops of batch, in order, to st. tx is the transaction on a
// transactional store and nil otherwise. Failures of one op (a Bind fn, an
// expired request id, overflow) are left in the op; the error returned fails
// the whole attempt.
func (c *counter) plan(tx stores.Tx, st *state, batch []*op) (changed bool, events []event, err error) {
	if st.value < c.base && !st.closed {
		// Numbers the passes gave and did not raise the counter past
		// (see wire.SequenceConfig.PassHead): taken already.
		st.value, changed = c.base, true
	}
	if st.value < c.floor {
		return false, nil, behind(st.value, c.floor)
	}
	if c.shut && !st.closed {
		return false, nil, reopened(st.value)
	}
	start := st.value
	c.w.start, c.w.seeds = start, c.w.seeds[:0]
	var served map[string]uint64 // request ids answered in this batch
	if c.svc.journal != nil {
		// The leader's buffer: the events live until the batch's run ends.
		events = c.w.eventBuf[:0]
		defer func() { c.w.eventBuf = events[:0] }()
	}
	for _, o := range batch {
		if o.err != nil {
			continue // refused before the plan (a definition mismatch)
		}
		if st.closed {
			switch o.kind {
			case opClose: // closing again is a no-op
			case opClaim:
				// A retry of a claim served before the close gets its
				// number (taken while the period was open); a new one
				// is refused.
				if n, ok := served[o.id]; ok {
					o.n = n
					continue
				}
				n, found, err := c.findClaim(tx, st, o)
				if err != nil {
					return false, nil, err
				}
				switch {
				case o.err != nil:
				case found:
					o.n = n
					if served == nil {
						served = make(map[string]uint64)
					}
					served[o.id] = n
				default:
					o.err = c.closedError()
				}
			default:
				o.err = c.closedError()
			}
			continue
		}
		switch o.kind {
		case opClose:
			st.closed, changed = true, true
			if c.svc.journal != nil {
				events = append(events, event{Kind: wire.EventClosed, Series: c.series, Partition: c.partition, Number: st.value})
			}
			continue
		case opSeed:
			if o.target > st.value {
				if c.svc.journal != nil {
					events = append(events, event{Kind: wire.EventSeeded, Series: c.series, Partition: c.partition, Number: o.target, From: st.value})
				}
				c.w.seeds = append(c.w.seeds, seedRange{from: st.value + 1, to: o.target})
				st.value = o.target
			}
			continue
		case opClaim:
			if n, ok := served[o.id]; ok {
				o.n = n
				continue
			}
			n, found, err := c.findClaim(tx, st, o)
			if err != nil {
				return false, nil, err
			}
			if o.err != nil {
				continue
			}
			if found {
				o.n = n
				if served == nil {
					served = make(map[string]uint64)
				}
				served[o.id] = n
				continue
			}
		}
		if st.value == math.MaxUint64 {
			o.err = ErrOverflow
			continue
		}
		if o.count > 1 { // NextN: all its numbers in this commit, or none
			if st.value > math.MaxUint64-o.count {
				o.err = ErrOverflow
				continue
			}
			for i := uint64(1); c.svc.journal != nil && i <= o.count; i++ {
				events = append(events, event{Kind: wire.EventAllocated, Series: c.series, Partition: c.partition, Number: st.value + i, Reason: o.reason})
			}
			st.value += o.count
			o.n, o.fresh = st.value, true
			continue
		}
		n := st.value + 1
		switch o.kind {
		case opClaim:
			if tx != nil {
				if err := c.putClaim(tx, o.ckey, n); err != nil {
					return false, nil, err
				}
			} else {
				st.remember(o.uid, n, c.svc.window)
				changed = true
			}
			if served == nil {
				served = make(map[string]uint64)
			}
			served[o.id] = n
		case opBind:
			sub := overlay.New(tx, c.guard)
			if !c.callBind(o, sub, o.seq.serial(n, o.date)) {
				continue
			}
			if err := sub.Apply(); err != nil {
				return false, nil, err
			}
		}
		st.value = n
		o.n, o.fresh = n, true
		if c.svc.journal != nil {
			events = append(events, event{Kind: wire.EventAllocated, Series: c.series, Partition: c.partition, Number: n, RequestID: o.id, Reason: o.reason})
		}
	}
	return changed || st.value != start, events, nil
}

// findClaim looks a Claim's request id up: in its claim record on a
// transactional store, in the window of st otherwise. An unreadable claim
// record or an expired id is the op's error (found is false, o.err set).
//
// A claim record that is missing is looked up in the History, when there is
// one: the ledger entry of the allocation carries the request id. If the
// ledger knows the id, the claim gets the number it got then, and its record
// is written again; so a store that deletes claim records cannot make a
// request be answered with two numbers. The History's claims are read once
// per Service and then caught up incrementally (see ledgerView).
func (c *counter) findClaim(tx stores.Tx, st *state, o *op) (n uint64, found bool, err error) {
	if tx == nil {
		n, found, expired := st.lookup(o.uid)
		if expired {
			o.err = ErrRequestExpired
		}
		return n, found, nil
	}
	key := o.ckey
	item, err := tx.Get(key)
	if errors.Is(err, stores.ErrNotFound) {
		if c.svc.history == nil {
			return 0, false, nil
		}
		n, ok, complete := c.claimed(o.id, c.w.start)
		if !ok && !complete && !c.w.indexed {
			return 0, false, errLookUpClaims
		}
		if !ok {
			return 0, false, nil
		}
		if n > c.w.start {
			return 0, false, behind(c.w.start, n)
		}
		if err := c.putClaim(tx, key, n); err != nil {
			return 0, false, err
		}
		return n, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	pt, err := c.svc.sealer.Open(key, item.Value)
	if err == nil {
		n, err = decodeNumber(pt)
	}
	if err != nil {
		o.err = fmt.Errorf("read claim record: %w", err)
		return 0, false, nil
	}
	if n > c.w.start {
		// A claim record is written in the transaction that moves the
		// counter to its number: one above the counter means the store
		// rolled the counter back and kept the record.
		return 0, false, fmt.Errorf("counter is at %d but a claim record holds number %d: %w", c.w.start, n, ErrRollback)
	}
	return n, true, nil
}

// putClaim writes, at key, the claim record of a request: the number n it got.
func (c *counter) putClaim(tx stores.Tx, key string, n uint64) error {
	sealed, err := c.svc.sealer.Seal(key, encodeNumber(n))
	if err != nil {
		return err
	}
	return tx.Put(key, sealed)
}

// callBind runs a Bind fn, turning a panic into the op's outcome (re-raised in
// the caller's goroutine). It reports whether fn succeeded.
func (c *counter) callBind(o *op, sub *overlay.Tx, s Serial) (ok bool) {
	defer func() {
		sub.Close()
		if r := recover(); r != nil {
			o.panicked, o.panicVal = true, r
			o.err = fmt.Errorf("bind fn panicked: %v", r)
			ok = false
		}
	}()
	if err := o.fn(sub, s); err != nil {
		o.err = err
		return false
	}
	return true
}

// guard refuses a Bind fn's writes to the sequence's own keys: the counter,
// its claim records and its series' definition.
func (c *counter) guard(key string) error {
	if key == c.key || key == c.defKey || (len(key) > len(c.key) && key[:len(c.key)] == c.key && key[len(c.key)] == '\x01') {
		return fmt.Errorf("bind: fn may not write the sequence's own keys: %w", stores.ErrInvalidKey)
	}
	return nil
}

// closedError is the error of an allocation into c, a closed period.
func (c *counter) closedError() error {
	e := &PeriodClosedError{Series: c.series}
	if n := len(c.partition) - 1; n >= 0 { // else a store's forgery: no period to name
		e.Period = c.partition[n]
		if n > 0 {
			e.Partition = c.partition[:n:n]
		}
	}
	return e
}
