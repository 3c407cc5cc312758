package ledger

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/noydb-go/noydb/internal/batch"
	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/overlay"
	"github.com/noydb-go/noydb/stores"
)

// Batched commits.
//
// Append, AppendFunc and Update calls of one ledger go through one queue
// (internal/batch): a call that finds no commit running commits at once,
// alone; calls that arrive meanwhile commit together in the next one. On a
// store with transactions a batch is one store transaction, so any mix of
// appends and Update closures shares one commit (one fsync on badger, two
// pipelined round trips on PostgreSQL):
//
//   - The batch reads the head once (and prefetches it with the keys the
//     Update calls named, where the store reads in round trips), checks it
//     against the pin taken before the transaction began, then runs the
//     calls in queue order, each after the entries of those before it.
//   - Each Update closure of a batch of several runs against an overlay of
//     its own: its writes reach the transaction only if it returns nil, so
//     a closure that fails (or panics) has only its own writes dropped.
//   - The head a closure's AppendTx produces lives on the transaction value
//     the closure was given (as a token that stands for a head of this
//     batch, never written to the store), so it is dropped with the
//     closure's other writes; the batch seals and writes the head once, at
//     the end.
//   - A batch the store refuses as a whole (too big, or a statement that
//     failed) is run again as two halves, down to single calls, so no call
//     fails because of another; a conflict with another writer retries the
//     whole batch, within the retry budget.
//
// On a store without transactions only appends exist, and a batch is one
// compare-and-swap of the head (see appendCAS).

// Batch limits: what one commit carries.
const (
	// maxBatchUpdates bounds the Update calls of one batch.
	maxBatchUpdates = 256
	// maxBatchEntries bounds the entries the Append calls of one batch
	// bring.
	maxBatchEntries = 4096
	// batchBudget bounds the encoded size of the entries one batch appends
	// (AppendFunc calls count as maxBatchBytes), so that a head carrying
	// them (on a store without transactions) stays well under
	// stores.MaxValueLen.
	batchBudget = 2 * maxBatchBytes
	// lockPatience bounds the wait of a batch for the store's lock (see
	// runBatch).
	lockPatience = time.Second
)

// request is one Append, AppendFunc or Update call in the queue.
type request struct {
	batch.Slot[*request]

	entries []Entry                          // Append: the entries
	derive  func(head Head) ([]Entry, error) // AppendFunc: derives them
	update  func(tx stores.Tx) error         // Update: the closure
	keys    []string                         // Update: keys it reads, prefetched
	cost    int                              // bound of the entries' encoded size

	// Set by the batch, per attempt.
	seen     Head  // the head this request's entries follow (runCAS)
	head     Head  // the result: the head after its entries
	moved    bool  // it appended (its Update moved the head)
	failed   bool  // its own function failed (err) or panicked; final for the attempt
	panicked any   // what its function panicked with
	err      error // the result
}

// requests recycles the requests of Update calls, the commit path's: a
// request is free again once its Do has returned (batch.Slot).
var requests = sync.Pool{New: func() any { return new(request) }}

// recycle returns r, whose Do has returned, to requests, keeping only its
// Slot (whose channel serves its next Do), unless the call panicked (then
// submit panics on and r is left to the collector).
func (r *request) recycle() {
	if r.panicked != nil {
		return
	}
	*r = request{Slot: r.Slot}
	requests.Put(r)
}

// reset clears the outcome of an earlier attempt.
func (r *request) reset() {
	r.seen, r.head, r.moved, r.failed, r.panicked, r.err = Head{}, Head{}, false, false, nil, nil
}

// submit runs req through the queue and returns its head and error. A
// panic in the caller's own function goes on in the caller's goroutine.
func (l *ledger) submit(ctx context.Context, req *request) (Head, error) {
	if err := l.q.Do(ctx, req); err != nil {
		if errors.Is(err, batch.ErrAbandoned) {
			return Head{}, fmt.Errorf("ledger: %w", err)
		}
		return Head{}, err
	}
	if req.panicked != nil {
		panic(req.panicked)
	}
	return req.head, req.err
}

// cut takes the next batch from the front of queue: within batchBudget,
// maxBatchEntries and maxBatchUpdates, and always at least one request.
// The entries as built add the actor and the MAC to what checkBatch
// counted.
func (l *ledger) cut(queue []*request) (next, rest []*request) {
	perEntry := len(l.actor) + maxMAC
	n, cost, count, updates := 0, 0, 0, 0
	for n < len(queue) {
		r := queue[n]
		rc := r.cost + len(r.entries)*perEntry
		u := 0
		if r.update != nil {
			u = 1
		}
		if n > 0 && (cost+rc > batchBudget || count+len(r.entries) > maxBatchEntries || updates+u > maxBatchUpdates) {
			break
		}
		cost += rc
		count += len(r.entries)
		updates += u
		n++
	}
	return queue[:n:n], queue[n:]
}

// runBatch is the queue's Run: it commits batch and leaves each request's
// outcome in it. Requests held back by the guard (a cas.Hold: the vault's
// person's signing key is being renewed) wait for the hold to pass here,
// outside any transaction and with the store's lock released, while the
// calls behind them wait in the queue; then they are committed again,
// with the whole retry budget.
func (l *ledger) runBatch(ctx context.Context, b []*request) {
	for {
		l.runLocked(ctx, b)
		var h cas.Hold
		held := b[:0:0]
		for _, r := range b {
			if r.err != nil && r.panicked == nil {
				if rh := cas.HoldOf(r.err); rh != nil {
					h, held = rh, append(held, r)
				}
			}
		}
		if h == nil {
			return
		}
		if err := h.Await(ctx); err != nil {
			for _, r := range held {
				r.reset()
				r.err = fmt.Errorf("ledger: %w", err)
			}
			return
		}
		b = held
	}
}

// runLocked commits b once, holding the store's lock where it has one.
func (l *ledger) runLocked(ctx context.Context, b []*request) {
	// Writers that would race by the store's optimistic transactions or
	// compare-and-swap (other processes on a file store, other ledgers of
	// this process on one badger store) take turns where the store can
	// lock for all of them, instead of spending their retry budgets.
	// The lock only spares retries, so a batch that waited lockPatience
	// for it goes on without: its holder may be waiting for this batch (a
	// closure of another ledger's batch that writes through this one).
	// A shared store with transactions (PostgreSQL) arbitrates them on its
	// server, where they queue on row locks instead of failing: there the
	// lock would spare no retry, only add round trips and a connection.
	if lk, ok := l.store.(stores.Locker); ok && !(l.tr != nil && l.store.Capabilities().Shared) {
		lctx, cancel := context.WithTimeout(ctx, lockPatience)
		unlock, err := lk.Lock(lctx, l.headKey)
		cancel()
		switch {
		case err == nil:
			defer unlock()
		case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
			// Waited long enough: race on the head, within the retry budget.
		default:
			for _, r := range b {
				r.reset()
				r.err = fmt.Errorf("ledger: %w", err)
			}
			return
		}
	}
	if l.tr != nil {
		l.runTx(ctx, b)
		return
	}
	l.runCAS(ctx, b)
}

// runTx commits b in one store transaction; if the store refuses the batch
// as a whole, it commits the halves apart.
func (l *ledger) runTx(ctx context.Context, b []*request) {
	head, whole, err := l.commitTx(ctx, b)
	if err != nil && !whole && len(b) > 1 {
		half := len(b) / 2
		l.runTx(ctx, b[:half])
		l.runTx(ctx, b[half:])
		return
	}
	if err != nil {
		for _, r := range b {
			if !r.failed {
				r.err, r.head, r.moved = err, Head{}, false
			}
		}
		return
	}
	// Committed. The pin error, if any, goes to every call that appended:
	// its writes are in the store, but a rollback of them would go unseen.
	pinErr := l.raisePin(head)
	l.foldCollected(head)
	for _, r := range b {
		if pinErr != nil && r.moved && !r.failed {
			r.err = pinErr
		}
	}
	// A closure of a batch of several that reported a conflict is run
	// again alone, where its conflicts are retried, as they are for a
	// closure that had no company.
	if len(b) > 1 {
		for _, r := range b {
			if r.update != nil && r.failed && r.panicked == nil && errors.Is(r.err, stores.ErrConflict) {
				l.runTx(ctx, []*request{r})
			}
		}
	}
}

// commitRun is the state of a batch's store transaction. The ledger keeps
// one and commitTx reuses it, with its functions bound once, so that a
// commit builds no closure: batches of one ledger commit one at a time
// (the queue's leader runs them; runTx's halves run one after the other).
type commitRun struct {
	l   *ledger
	ctx context.Context
	b   []*request
	tx  stores.Tx // the store's transaction of the attempt
	pin Head      // the pin taken before the attempt's transaction began
	bt  batchTx   // tx as the batch's Update closures see it
	// The attempt's outcome: the head it left and the bytes sealed for
	// it, whether its error is the batch's as a whole, and whether its
	// body succeeded.
	head   Head
	sealed []byte
	whole  bool
	filled bool

	attemptFn func(attempt int) error               // attempt
	bodyFn    func(tx stores.Tx) error              // body
	getFn     func(key string) (stores.Item, error) // get
}

func (run *commitRun) bind(l *ledger) {
	run.l = l
	run.attemptFn, run.bodyFn, run.getFn = run.attempt, run.body, run.get
}

// attempt is one try of the batch's transaction.
func (run *commitRun) attempt(int) error {
	for _, r := range run.b {
		r.reset()
	}
	run.whole, run.filled = false, false
	run.pin = run.l.pinned() // before the transaction's snapshot: see pinned
	return run.l.tr.Update(run.ctx, run.bodyFn)
}

// body is the transaction's function.
func (run *commitRun) body(tx stores.Tx) error {
	run.tx = tx
	var err error
	run.head, run.sealed, run.whole, err = run.l.fill(run, tx)
	run.filled = err == nil
	return err
}

// get reads through the attempt's transaction (for the guard, which
// modifies nothing it reads: see wire.LedgerOptions.Guard).
func (run *commitRun) get(key string) (stores.Item, error) { return stores.GetShared(run.tx, key) }

// start readies the run for batch b.
func (run *commitRun) start(ctx context.Context, b []*request) {
	run.ctx, run.b = ctx, b
	run.head, run.sealed, run.whole, run.filled = Head{}, nil, false, false
}

// end drops what the run refers to, once its batch is done.
func (run *commitRun) end() {
	run.l.dropUnwritten() // of an attempt that failed
	run.ctx, run.b, run.tx, run.bt, run.sealed, run.head = nil, nil, nil, batchTx{}, nil, Head{}
}

// commitTx runs b in one store transaction, retrying conflicts, and
// returns the head it left. whole reports an error that concerns the batch
// as a whole (the head, a rollback, contention, the context), which running
// its parts apart would not cure.
func (l *ledger) commitTx(ctx context.Context, b []*request) (head Head, whole bool, err error) {
	run := &l.run
	run.start(ctx, b)
	defer run.end()
	attempts, err := cas.Do(ctx, l.policy, run.attemptFn)
	head, whole = run.head, run.whole
	sealed, filled := run.sealed, run.filled // filled: the last attempt's body succeeded, an error is the commit's
	if err != nil && filled && !errors.Is(err, stores.ErrTooLarge) {
		// The commit failed after the body ran: the store may have applied
		// it (a connection lost at COMMIT). Running the batch again, in
		// halves, could append its entries twice.
		whole = true
	}
	switch {
	case err == nil:
		if sealed != nil {
			l.mu.Lock()
			l.lastSealed, l.lastHead = sealed, headState{Head: head}
			l.mu.Unlock()
		}
		return head, false, nil
	case cas.Exhausted(err):
		return Head{}, true, fmt.Errorf("ledger: %w after %d attempts", ErrContention, attempts)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return Head{}, true, err
	case cas.HoldOf(err) != nil:
		return Head{}, true, err // runBatch waits for it
	case len(b) == 1 && b[0].update != nil:
		return Head{}, whole, err // an Update alone: its error, unchanged
	default:
		return Head{}, whole, fmt.Errorf("ledger: %w", err)
	}
}

// fill is the body of a batch's transaction: it reads the head, runs the
// requests of run in order and writes the new head once. It returns the
// head and the sealed bytes written for it (nil when the head did not
// move).
func (l *ledger) fill(run *commitRun, tx stores.Tx) (head Head, sealed []byte, whole bool, err error) {
	b, pin := run.b, run.pin
	if _, ok := tx.(stores.Prefetcher); ok {
		keys := l.pinKeys(pin)
		for _, r := range b {
			keys = append(keys, r.keys...)
		}
		if err := l.prefetch(tx, keys); err != nil {
			// A key a caller named may be invalid: its batch runs apart,
			// down to that caller. Any other failure (the server) is the
			// whole batch's.
			return Head{}, nil, !errors.Is(err, stores.ErrInvalidKey), err
		}
	}
	hs, err := l.readHeadTx(tx)
	if err != nil {
		return Head{}, nil, true, err
	}
	if err := l.checkPin(hs.Head, pin); err != nil {
		return Head{}, nil, true, err
	}
	if err := l.checkPinEntry(tx.Get, hs, pin); err != nil {
		return Head{}, nil, true, err
	}
	l.dropUnwritten()       // of an attempt that failed
	l.collectStart(hs.Head) // for the summary of facts (summary.go)
	// A head left with pending entries by a compare-and-swap writer has
	// them written out too.
	for _, r := range hs.pending {
		if err := l.putEntry(tx, r); err != nil {
			return Head{}, nil, false, err
		}
	}
	bt := &run.bt
	*bt = batchTx{l: l, tx: tx, head: hs.Head}
	alone := len(b) == 1
	for _, r := range b {
		if r.update != nil {
			if err := l.runUpdate(bt, r, alone); err != nil {
				return Head{}, nil, false, err
			}
			continue
		}
		entries := r.entries
		if r.derive != nil {
			if entries, err = r.derived(bt.head); err != nil {
				r.failed, r.err = true, err
				continue
			}
		}
		if bt.head, err = l.putEntries(tx, bt.head, entries, true); err != nil {
			return Head{}, nil, false, err
		}
		r.head, r.moved = bt.head, len(entries) > 0
	}
	if !alone && slices.ContainsFunc(b, func(r *request) bool { return r.failed }) {
		// A closure failed: perhaps because another one spoiled the
		// transaction (a statement that failed on PostgreSQL fails every
		// later call). Ask the transaction, so that a spoiled one fails
		// here, before its commit, and the batch is run again in halves.
		if _, err := tx.Get(l.headKey); err != nil && !errors.Is(err, stores.ErrNotFound) {
			return Head{}, nil, false, err
		}
	}
	if bt.head.Equal(hs.Head) {
		return bt.head, nil, false, nil
	}
	// The commit appends: the guard reads what the transaction sees,
	// writes of this batch included. Its refusal is the whole batch's.
	if err := l.check(run.getFn); err != nil {
		return Head{}, nil, true, err
	}
	if l.signer == nil || bt.head.cover == 0 {
		if err := l.writeUnwritten(); err != nil {
			return Head{}, nil, false, err
		}
	} else {
		// One signature for the commit, on its last entry (none when
		// every entry is Chained).
		unsigned := bt.head
		if bt.head, err = l.signCommit(tx, hs.Head, bt.head); err != nil {
			return Head{}, nil, false, err
		}
		for _, r := range b {
			if r.head.Equal(unsigned) {
				r.head = bt.head
			}
		}
	}
	bt.head = bt.head.committed()
	if sealed, err = l.sealHead(bt.head, nil); err != nil {
		return Head{}, nil, false, err
	}
	// sealed is kept (lastSealed) and never modified: the store may keep it.
	if err := stores.PutShared(tx, l.headKey, sealed); err != nil {
		return Head{}, nil, false, err
	}
	return bt.head, sealed, false, nil
}

// runUpdate runs the closure of r in the batch. Alone in its batch, the
// closure writes into the batch's transaction and its error fails the
// transaction (so a conflict it met is retried). Among others, it writes
// into an overlay that reaches the transaction only if it succeeds; its
// error is its own outcome.
func (l *ledger) runUpdate(bt *batchTx, r *request, alone bool) error {
	start := bt.head
	if alone {
		if err := r.call(bt); err != nil {
			return err
		}
		r.moved = !bt.head.Equal(start)
		return nil
	}
	ov := overlay.New(bt, nil)
	err := r.call(ov)
	ov.Close()
	if err == nil {
		err = ov.Apply()
		if err != nil {
			// The transaction refused a write: the batch is spoiled.
			return err
		}
		r.moved = !bt.head.Equal(start)
		return nil
	}
	r.failed, r.err = true, err
	bt.head = start
	return nil
}

// call runs the request's Update closure on tx, turning a panic into its
// outcome (re-raised in the caller's goroutine by submit).
func (r *request) call(tx stores.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.failed, r.panicked = true, p
			err = fmt.Errorf("ledger update: function panicked: %v", p)
		}
	}()
	return r.update(tx)
}

// derived runs derive on head, turning a panic into failure.
func (r *request) derived(head Head) (entries []Entry, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.panicked = p
			entries, err = nil, fmt.Errorf("ledger append: derive panicked: %v", p)
		}
	}()
	entries, err = r.derive(head)
	if err != nil {
		return nil, err
	}
	if _, err := checkBatch(entries); err != nil {
		return nil, fmt.Errorf("ledger append: %w", err)
	}
	return entries, nil
}

// readHeadTx reads the head in tx, without decrypting it when its bytes are
// the ones this ledger wrote last (they carry a random nonce, so equal bytes
// are that head).
func (l *ledger) readHeadTx(tx stores.Tx) (headState, error) {
	it, err := stores.GetShared(tx, l.headKey) // compared and opened, never modified
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return headState{}, nil
	case err != nil:
		return headState{}, err
	}
	l.mu.Lock()
	cached := l.lastSealed != nil && bytes.Equal(it.Value, l.lastSealed)
	hs := l.lastHead
	l.mu.Unlock()
	if cached {
		return hs, nil
	}
	hs, err = l.openHead(it.Value)
	if err == nil {
		l.sawForeign(hs.Seq)
	}
	return hs, err
}

// sawForeign notes that a commit began on a head at position seq that this
// ledger had not written last.
func (l *ledger) sawForeign(seq uint64) {
	for {
		old := l.foreign.Load()
		if seq <= old || l.foreign.CompareAndSwap(old, seq) {
			return
		}
	}
}

// ForeignThrough returns the highest position of a head that a commit of
// this ledger began on and that this ledger had not written last: another
// writer (or the store) moved the ledger since this ledger's commit before
// it. 0 when every commit so far began on the head the one before left.
//
// A cache of anything the ledger records (a sequence's counter) that was
// checked against the ledger through some position is stale when
// ForeignThrough passes that position: the check is due again. Reading it
// costs one atomic load, so a writer alone pays nothing for the question.
func (l *ledger) ForeignThrough() uint64 { return l.foreign.Load() }

// putEntries builds entries to follow head and writes them in tx, and
// returns the head after them (head itself when entries is empty). With a
// signer, the entries are Covered: fill signs the commit's last entry.
//
// top says that tx is the batch's own transaction (or its batchTx), where
// nothing written is dropped before the commit: there the last Covered
// entry is kept unwritten (see ledger.unwritten), since it is likely the
// commit's last, which signCommit signs and writes once, instead of
// sealing and writing it twice. Any later putEntries, and signCommit for
// another entry, write it first. In a closure's overlay (an Update among
// others, whose writes may be dropped) every entry is written at once.
func (l *ledger) putEntries(tx stores.Tx, head Head, entries []Entry, top bool) (Head, error) {
	if len(entries) == 0 {
		return head, nil
	}
	if err := l.writeUnwritten(); err != nil {
		return Head{}, err
	}
	c := l.chainAfter(head)
	c.chunk = chunkFor(len(entries))
	if len(entries) >= parallelSeal && runtime.GOMAXPROCS(0) > 1 {
		return l.putRun(tx, &c, entries, top)
	}
	// One entry at a time: none is kept but the last.
	var last record
	for i, e := range entries {
		var err error
		if last, err = c.next(e); err != nil {
			return Head{}, err
		}
		keep := top && l.signer != nil && i == len(entries)-1 && last.entry.Covered
		if !keep {
			if err := l.putEntry(tx, last); err != nil {
				return Head{}, err
			}
		}
		l.mu.Lock()
		l.collectEntry(&last.entry)
		if keep {
			l.unwritten, l.hasUnwritten = last, true
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	if l.signer != nil {
		l.built = last
	}
	l.mu.Unlock()
	return c.head(), nil
}

// parallelSeal is the least number of entries putEntries seals on two
// goroutines: below, the hand-over costs more than half the sealing.
const parallelSeal = 32

// putRun is putEntries for a run of entries (a batch of numbers): the
// chain is built first, one entry after the other (each MAC covers the
// one before); the entries are then sealed on two goroutines, each at its
// own key, which shares a batch's largest cost with a second core, and
// written in order.
func (l *ledger) putRun(tx stores.Tx, c *chainer, entries []Entry, top bool) (Head, error) {
	recs := make([]record, len(entries))
	for i, e := range entries {
		var err error
		if recs[i], err = c.next(e); err != nil {
			return Head{}, err
		}
	}
	last := recs[len(recs)-1]
	keep := top && l.signer != nil && last.entry.Covered
	toSeal := recs
	if keep {
		toSeal = recs[:len(recs)-1]
	}
	keys, sealed := make([]string, len(toSeal)), make([][]byte, len(toSeal))
	half := len(toSeal) / 2
	var (
		wg       sync.WaitGroup
		other    error
		panicked any
	)
	wg.Go(func() {
		// A panic of the sealer goes on in the caller's goroutine, as it
		// does for an entry sealed there: here it would end the process.
		defer func() { panicked = recover() }()
		other = l.sealRun(toSeal[half:], keys[half:], sealed[half:])
	})
	err := l.sealRun(toSeal[:half], keys[:half], sealed[:half])
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
	if err = cmp.Or(err, other); err != nil {
		return Head{}, err
	}
	for i := range toSeal {
		if err := stores.PutShared(tx, keys[i], sealed[i]); err != nil { // fresh bytes, not kept here
			return Head{}, err
		}
	}
	l.mu.Lock()
	for i := range recs {
		l.collectEntry(&recs[i].entry)
	}
	if keep {
		l.unwritten, l.hasUnwritten = last, true
	}
	if l.signer != nil {
		l.built = last
	}
	l.mu.Unlock()
	return c.head(), nil
}

// sealRun seals recs, each at its key, into keys and sealed.
func (l *ledger) sealRun(recs []record, keys []string, sealed [][]byte) error {
	for i, rec := range recs {
		keys[i] = l.entryKey(rec.entry.Seq)
		var err error
		if sealed[i], err = l.sealer.Seal(keys[i], rec.plain); err != nil {
			return fmt.Errorf("seal entry: %w", err)
		}
	}
	return nil
}

// writeUnwritten writes the entry putEntries kept unwritten, if any, Covered,
// in the batch's transaction.
func (l *ledger) writeUnwritten() error {
	l.mu.Lock()
	if !l.hasUnwritten {
		l.mu.Unlock()
		return nil // a commit without signer, or none kept: copies nothing
	}
	rec := l.unwritten
	l.unwritten, l.hasUnwritten = record{}, false
	l.mu.Unlock()
	return l.putEntry(l.run.tx, rec)
}

// takeUnwritten returns and forgets the entry putEntries kept unwritten.
func (l *ledger) takeUnwritten() (record, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, ok := l.unwritten, l.hasUnwritten
	if ok {
		l.unwritten, l.hasUnwritten = record{}, false
	}
	return rec, ok
}

// dropUnwritten forgets the entry putEntries kept unwritten, if any.
func (l *ledger) dropUnwritten() {
	l.mu.Lock()
	if l.hasUnwritten {
		l.unwritten, l.hasUnwritten = record{}, false
	}
	l.mu.Unlock()
}

// topTx reports whether tx, given to AppendTx, is the batch's batchTx
// itself (an Update alone in its batch), not an overlay of it.
func (l *ledger) topTx(tx stores.Tx) bool {
	bt, ok := tx.(*batchTx)
	return ok && bt == &l.run.bt
}

// putEntry seals rec and writes it at its position in tx.
func (l *ledger) putEntry(tx stores.Tx, rec record) error {
	key := l.entryKey(rec.entry.Seq)
	sealed, err := l.sealer.Seal(key, rec.plain)
	if err != nil {
		return fmt.Errorf("seal entry: %w", err)
	}
	return stores.PutShared(tx, key, sealed) // fresh bytes, not kept here
}

// batchTx is a batch's transaction as its Update closures see it: the
// store's transaction, except at the head's key, where it holds the head as
// the batch's writes so far leave it, as a token (see token). A closure's
// AppendTx reads the token, appends after it and writes the next token, so
// an overlay that is dropped takes its head with it.
type batchTx struct {
	l    *ledger
	tx   stores.Tx
	head Head
}

func (b *batchTx) Get(key string) (stores.Item, error) {
	if key == b.l.headKey {
		return stores.Item{Key: key, Value: b.l.token(b.head)}, nil
	}
	return b.tx.Get(key)
}

func (b *batchTx) Put(key string, value []byte) error {
	if key == b.l.headKey {
		h, ok := b.l.fromToken(value)
		if !ok {
			return errHeadWrite
		}
		b.head = h
		return nil
	}
	return b.tx.Put(key, value)
}

// GetShared implements stores.TxSharer for the keys other than the head's.
func (b *batchTx) GetShared(key string) (stores.Item, error) {
	if key == b.l.headKey {
		return b.Get(key)
	}
	return stores.GetShared(b.tx, key)
}

// PutShared implements stores.TxSharer for the keys other than the head's.
func (b *batchTx) PutShared(key string, value []byte) error {
	if key == b.l.headKey {
		return b.Put(key, value)
	}
	return stores.PutShared(b.tx, key, value)
}

func (b *batchTx) Delete(key string) error {
	if key == b.l.headKey {
		return errHeadWrite
	}
	return b.tx.Delete(key)
}

var errHeadWrite = fmt.Errorf("ledger: the head is written by AppendTx only: %w", stores.ErrInvalidKey)

// tokenMagicLen is the length of a ledger's random token prefix.
const tokenMagicLen = 16

// token encodes h as the value a batch's transaction shows at the head's
// key: this ledger's random prefix, the position, the people link fields,
// the commit's state (see Head), the window's owner and the MAC. Tokens
// never reach the store, and no sealed value starts with the prefix but by
// a 2^-128 chance.
func (l *ledger) token(h Head) []byte {
	b := make([]byte, 0, tokenMagicLen+tokenFixed+len(h.alone)+len(h.MAC))
	b = append(b, l.magic[:]...)
	b = binary.BigEndian.AppendUint64(b, h.Seq)
	b = binary.BigEndian.AppendUint64(b, h.people)
	b = binary.BigEndian.AppendUint64(b, h.linkFrom)
	b = binary.BigEndian.AppendUint64(b, h.cover)
	var flag byte
	if h.coverPeople {
		flag = 1
	}
	b = append(b, flag)
	b = binary.BigEndian.AppendUint32(b, uint32(len(h.alone)))
	b = append(b, h.alone...)
	return append(b, h.MAC...)
}

// tokenFixed is the length of a token's fixed fields after the prefix.
const tokenFixed = 4*8 + 1 + 4

// fromToken decodes a token made by token.
func (l *ledger) fromToken(b []byte) (Head, bool) {
	if len(b) < tokenMagicLen+tokenFixed || !bytes.Equal(b[:tokenMagicLen], l.magic[:]) {
		return Head{}, false
	}
	b = b[tokenMagicLen:]
	h := Head{Seq: binary.BigEndian.Uint64(b), people: binary.BigEndian.Uint64(b[8:]),
		linkFrom: binary.BigEndian.Uint64(b[16:]), cover: binary.BigEndian.Uint64(b[24:]), coverPeople: b[32] == 1}
	n := int(binary.BigEndian.Uint32(b[33:]))
	b = b[tokenFixed:]
	if n > len(b) {
		return Head{}, false
	}
	h.alone = string(b[:n])
	if mac := b[n:]; len(mac) > 0 {
		// The MAC stays in the token: token made it for this read
		// (batchTx.Get) or write (AppendTx), and nothing writes to it.
		h.MAC = mac[:len(mac):len(mac)]
	}
	return h, true
}

// runCAS commits b, appends only, with one compare-and-swap of the head on
// a store without transactions.
func (l *ledger) runCAS(ctx context.Context, b []*request) {
	// plan places the requests one after the other, deriving each fenced
	// request's entries from the head as it stands after those before it.
	// It runs again, from the fresh head, for every attempt.
	type span struct{ off, n int }
	spans := make([]span, len(b))
	plan := func(h Head) ([]record, error) {
		var all []record
		for i, r := range b {
			r.reset()
			r.seen, spans[i] = h, span{off: len(all)}
			entries := r.entries
			if r.derive != nil {
				var err error
				if entries, err = r.derived(h); err != nil {
					r.failed, r.err = true, err
					continue
				}
			}
			recs, next, err := l.build(h, entries)
			if err != nil {
				return nil, err
			}
			spans[i].n = len(recs)
			all = append(all, recs...)
			h = next
		}
		// One signature for the commit, on its last entry.
		return all, l.signLast(all, h.cover)
	}
	recs, start, err := l.commitCAS(ctx, plan)
	var pinErr error // the batch committed but its pin is not durable
	if err == nil && len(recs) > 0 {
		pinErr = l.raisePin(headOf(recs, Head{}))
		l.collectStart(start)
		l.mu.Lock()
		l.collect(recs)
		l.mu.Unlock()
		l.foldCollected(headOf(recs, start))
	}
	for i, r := range b {
		switch {
		case r.failed:
		case err != nil:
			r.err = err
		default:
			r.head = headOf(recs[spans[i].off:spans[i].off+spans[i].n], r.seen)
			if pinErr != nil && spans[i].n > 0 {
				r.err = pinErr
			}
		}
	}
}
