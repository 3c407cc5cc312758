package numbering

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Tuning of a pass. Tests lower them to exercise chunking and progress.
const (
	// defaultStep is how many numbers a pass finishes between two saves of
	// its progress in the head.
	defaultStep = 1000
	// defaultChunkItems bounds the record ids of one batch chunk.
	defaultChunkItems = 10000
	// chunkBytes bounds the encoded size of one batch chunk, well under
	// stores.MaxValueLen whatever the length of the ids.
	chunkBytes = 1 << 20
	// entryBudget bounds the estimated size of one ledger append, half the
	// ledger's limit.
	entryBudget = wire.LedgerMaxBatchBytes / 2
)

// voidReason is the reason of the NumberVoided entry of a record deleted
// after its batch was recorded.
const voidReason = "record deleted before its number was stamped"

// carriesReason starts the reason of the NumberVoided entry of a record
// that already carried a number of the series (its index was lost), followed
// by that number.
const carriesReason = "record already carries number"

// errStaleBatch: the chunks found are not those of the batch in the head
// (the batch finished meanwhile, or they were lost).
var errStaleBatch = errors.New("batch chunks do not match the head")

// PassReport says what a pass did.
type PassReport struct {
	// Batch is the id of the batch this pass recorded, 0 when it recorded none.
	Batch uint64
	// First and Last are the numbers of that batch (0 when none).
	First, Last uint64
	// Assigned is how many records got their number stamped, Resumed ones included.
	Assigned int
	// Voided is how many numbers were voided because their record was
	// deleted after its batch was recorded.
	Voided int
	// Resumed is how many numbers of an interrupted earlier batch this pass finished.
	Resumed int
	// Skipped is how many pending entries were dropped without a number: the
	// record was deleted, already numbered, enqueued twice, or handed off
	// again under another provisional id.
	Skipped int
	// Waiting is how many handoff entries (vault.Numbered.Put) were left in
	// line because their record is not in the store: a writer between its
	// two writes, one killed between them, or a record still on its way
	// through a synced folder. They take no number until the record is there.
	Waiting int
	// Closed is how many records wait in line in a period closed since
	// they were handed off (the pass returned an error matching
	// sequence.ErrPeriodClosed): they take no number there.
	Closed int
	// Periods is, for the pass of a series numbered by the record's date
	// (vault.NumberingOfDated), the report of each period's pass, in
	// label order; the fields above sum them. Nil for other series.
	Periods []PeriodPass
}

// PeriodPass is the pass of one period of a series numbered by the
// record's date (PassReport.Periods).
type PeriodPass struct {
	// Period is the period's label (2026-12, FY2026-27…).
	Period string
	// Report is the period's pass (its Periods is nil).
	Report PassReport
	// Err is the error of the period's pass: one matching
	// sequence.ErrPeriodClosed for a closed period with records waiting
	// (Report.Closed says how many), nil when it numbered them all.
	Err error
}

// RunPass numbers every pending record of the series. Run it on one
// authority: it try-locks the series with the store's stores.Locker (see
// the package's Concurrency) and fails at once with ErrPassRunning when
// another pass holds the lock.
//
// A pass first finishes a batch an interrupted pass left in the head, from
// what that batch recorded. It then lists the pending entries once, in key
// order (provisional id, then record id), drops those whose record is gone
// or already numbered, and commits the rest as one batch: the record ids,
// in chunks, then the head, advanced past the batch's numbers, which is the
// commit point. Only then does it stamp each record's field (idempotently),
// append a NumberAssigned entry per number to the ledger (NumberVoided for a
// record deleted since), index the assignment for Lookup and remove the
// pending entries, saving its progress in the head every so many numbers.
//
// A pass that stops anywhere (an error, a cancelled ctx, a killed process)
// leaves either no batch, or a batch that the next pass finishes exactly as
// recorded: a record never gets two numbers, a number never goes to two
// records, and the ledger gets one entry per number. A pass with nothing to
// do writes nothing.
func (s *Series) RunPass(ctx context.Context) (PassReport, error) {
	var rep PassReport
	exit, err := s.enter(ctx)
	if err != nil {
		return rep, s.errorf("pass", err)
	}
	defer exit()
	release, err := s.lock(ctx)
	if err != nil {
		return rep, s.errorf("pass", err)
	}
	defer release()
	if s.afterLock != nil {
		s.afterLock()
	}
	defer s.prog.start(PassIdle, 0)
	if err := s.pass(ctx, &rep); err != nil {
		return rep, s.errorf("pass", err)
	}
	return rep, nil
}

func (s *Series) pass(ctx context.Context, rep *PassReport) error {
	// A handle whose person was revoked runs no pass, not even the end of
	// a batch another committed: its stamps and entries would be theirs.
	if err := s.b.Check(ctx); err != nil {
		return err
	}
	h, ver, counter, err := s.checkedHeads(ctx)
	if err != nil {
		return err
	}
	if h.batch != nil {
		if ver, err = s.finish(ctx, &h, ver, true, rep); err != nil {
			return err
		}
	}
	if h.collection != "" && h.collection != s.opts.Collection {
		return &MismatchError{Collection: true, Stored: h.collection, Asked: s.opts.Collection}
	}
	if s.closed.Load() {
		// The period was closed (the ledger says so): its records waiting
		// are left in line, for someone to decide what becomes of them.
		n, err := s.closedPeriod(ctx)
		rep.Closed = n
		return err
	}
	// The series' one definition: a handle asking for no format numbers
	// with the one stored with the series' counter, if any.
	want := s.opts.Format
	if s.b.SeriesFormat != nil {
		if want, err = s.b.SeriesFormat(ctx, want); err != nil {
			return err
		}
	}
	// A handle of another format or collection than the stored ones is
	// refused before anything is written.
	if err := s.checkConfig(ctx, want); err != nil {
		return err
	}
	// One head for both paths: the batch is numbered above the series'
	// counter (numbers taken at write time) and its own last number.
	taken, err := s.plan(ctx, max(h.last, counter), rep)
	if err != nil || len(taken) == 0 {
		return err
	}
	// Store the format, for the series' first batch, only now: a pass with
	// nothing to number does not fix it for the first writer.
	format, err := s.configFormat(ctx, want)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		top := max(h.last, counter)
		if top > math.MaxUint64-uint64(len(taken)) {
			return fmt.Errorf("%d numbers after %d: %w", len(taken), top, sequence.ErrOverflow)
		}
		b := &batch{
			token:      make([]byte, 16),
			id:         h.batches + 1,
			first:      top + 1,
			last:       top + uint64(len(taken)),
			collection: s.opts.Collection,
			field:      s.opts.Field,
			format:     format,
		}
		_, _ = rand.Read(b.token)
		b.done = b.first - 1
		lh, err := s.b.Ledger.Head(ctx)
		if err != nil {
			return err
		}
		b.mark = lh.Seq
		next, err := s.commit(ctx, &h, ver, b, taken, counter)
		if errors.Is(err, deferred.ErrCounterMoved) && attempt < maxCounterMoves {
			// A number was taken at write time since the counter was
			// read: the batch is numbered after it.
			if counter, err = s.b.CounterHead(ctx); err != nil {
				return fmt.Errorf("read the counter %q: %w", s.name, err)
			}
			continue
		}
		if errors.Is(err, deferred.ErrCounterMoved) {
			err = fmt.Errorf("%w: %w", sequence.ErrContention, err)
		}
		if err != nil {
			return fmt.Errorf("commit batch %d: %w", b.id, err)
		}
		rep.Batch, rep.First, rep.Last = b.id, b.first, b.last
		_, err = s.finish(ctx, &h, next, false, rep)
		return err
	}
}

// maxCounterMoves bounds how many times a pass plans its batch's numbers
// again because numbers were taken at write time meanwhile; then it fails
// with an error wrapping sequence.ErrContention, numbering nothing.
const maxCounterMoves = 16

// commit records the batch b of the items taken: its chunks, then the head
// at version ver advanced past its numbers, which is the commit point. It
// returns the head's new version.
//
// Where the store has transactions, the chunks left by an earlier batch are
// deleted, the new ones written and the head replaced in one transaction
// that holds the head at ver: a pass that lost its lock (a pgstore session
// that broke) while another took the series can then neither delete nor
// overwrite the chunks of the batch the other committed, since the head it
// planned from is gone. Elsewhere (and for a batch too large for one
// transaction) it sweeps, writes the chunks and then the head by
// compare-and-swap: there the lock is one a living pass cannot lose.
func (s *Series) commit(ctx context.Context, h *head, ver uint64, b *batch, taken []item, counter uint64) (uint64, error) {
	chunks, err := s.sealChunks(b, taken)
	if err != nil {
		return 0, err
	}
	b.chunks = uint64(len(chunks))
	next := *h
	next.last, next.batches, next.batch, next.collection = b.last, b.id, b, s.opts.Collection
	tr, ok := s.b.Store.(stores.Transactor)
	if ok && s.b.Store.Capabilities().Transactions {
		stale, err := s.listChunks(ctx)
		if err != nil {
			return 0, err
		}
		v, err := s.headTx(ctx, tr, &next, ver, stale, chunks, &raise{from: counter, to: b.last})
		if err == nil {
			*h = next
			return v, nil
		}
		if !errors.Is(err, stores.ErrTooLarge) {
			return 0, err
		}
	}
	// Without a transaction to ask it in, the guard is asked again just
	// before the batch's first write.
	if err := s.b.Check(ctx); err != nil {
		return 0, err
	}
	if err := s.sweepChunks(ctx); err != nil {
		return 0, err
	}
	for _, c := range chunks {
		if _, err := s.b.Store.Put(ctx, c.key, c.value); err != nil {
			return 0, fmt.Errorf("write batch chunk %s: %w", c.key[len(s.dir):], err)
		}
	}
	if ok && s.b.Store.Capabilities().Transactions {
		// The chunks were too many for one transaction with the head:
		// the head and the counter still commit together.
		v, err := s.headTx(ctx, tr, &next, ver, nil, nil, &raise{from: counter, to: b.last})
		if err != nil {
			return 0, err
		}
		*h = next
		return v, nil
	}
	// Without transactions the head is the commit point, and the counter
	// is raised past the batch after it (finish): a number taken at write
	// time in between, on a store with atomic compare-and-swap but no
	// transactions (none of the SDK's: the file store takes none), could
	// be one of the batch's.
	v, err := s.writeHead(ctx, &next, ver)
	if err != nil {
		return 0, err
	}
	*h = next
	return v, nil
}

// errFenced: the head is not at the version the pass read.
var errFenced = errors.New("the head changed since it was read")

// listChunks lists the keys under the series' batch chunks (never a key
// the store lists outside them).
func (s *Series) listChunks(ctx context.Context) ([]string, error) {
	var keys []string
	for it, err := range stores.ListUnder(ctx, s.b.Store, s.dir+batchDir) {
		if err != nil {
			return nil, err
		}
		keys = append(keys, it.Key)
	}
	return keys, nil
}

// raise is a raise of the series' counter in a batch's commit.
type raise struct{ from, to uint64 }

// headTx replaces the head at version ver with h, deletes the keys del and
// writes puts, in one transaction of tr, and returns the head's new
// version. A head no longer at ver is ErrPassRunning. With r set (a
// batch's commit) the series' counter is raised from r.from to r.to in the
// transaction too, read after the head (in key order, as a write-time
// number locks them): one that moved since (a concurrent write-time
// number) is deferred.ErrCounterMoved, and the batch is not committed.
//
// A transaction that conflicts is run again: the conflict may come from a
// key other than the head (the guard's keyring entry, which a rotation or
// a change of the person rewrites; a chunk), which says nothing of another
// pass, and the next attempt reads the head again, so a head another pass
// moved is then told apart (ErrPassRunning). Conflicts that outlast the
// retry budget give an error matching stores.ErrConflict and
// sequence.ErrContention, not ErrPassRunning.
func (s *Series) headTx(ctx context.Context, tr stores.Transactor, h *head, ver uint64, del []string, puts []sealedKV, r *raise) (uint64, error) {
	key := s.headKey()
	sealed, err := s.b.Sealer.Seal(key, h.encode())
	if err != nil {
		return 0, err
	}
	_, err = cas.Do(ctx, cas.Policy{}, func(int) error { return s.headTxOnce(ctx, tr, key, sealed, ver, del, puts, r) })
	if errors.Is(err, errFenced) {
		return 0, fmt.Errorf("write head: %w: %w", ErrPassRunning, err)
	}
	if cas.Exhausted(err) {
		return 0, fmt.Errorf("write head: %w", err)
	}
	if err != nil {
		return 0, err
	}
	// The head's new version, for the compare-and-swaps that save progress:
	// the head must be the one just written (sealing is randomized).
	it, err := s.b.Store.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(it.Value, sealed) {
		return 0, fmt.Errorf("write head: %w: %w", ErrPassRunning, errFenced)
	}
	if s.b.Pins != nil {
		if err := s.b.Pins.RaiseCounter(key, h.last); err != nil {
			return it.Version, fmt.Errorf("head written at %d, but its rollback pin was not saved: %w", h.last, err)
		}
	}
	return it.Version, nil
}

// headTxOnce is one attempt of headTx's transaction, writing sealed as the
// head key when the head is at version ver (else errFenced).
func (s *Series) headTxOnce(ctx context.Context, tr stores.Transactor, key string, sealed []byte, ver uint64, del []string, puts []sealedKV, r *raise) error {
	return tr.Update(ctx, func(tx stores.Tx) error {
		// The guard reads first (the vault's person's keyring entry, which
		// a revocation writes first too: one lock order on PostgreSQL),
		// so a revocation commits before the batch or refuses it.
		if s.b.Guard != nil {
			if err := s.b.Guard(tx.Get); err != nil {
				return err
			}
		}
		it, err := tx.Get(key)
		switch {
		case errors.Is(err, stores.ErrNotFound):
			it.Version = 0
		case err != nil:
			return err
		}
		if it.Version != ver {
			return errFenced
		}
		if r != nil && s.b.Raise != nil {
			if err := s.b.Raise(ctx, tx, r.from, r.to); err != nil {
				return err
			}
		}
		for _, k := range del {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		for _, c := range puts {
			if err := tx.Put(c.key, c.value); err != nil {
				return err
			}
		}
		return tx.Put(key, sealed)
	})
}

// sealedKV is a sealed value and its key.
type sealedKV struct {
	key   string
	value []byte
}

// formatFor is storedFormat (deferred.Hooks.Format) guarded by checkConfig.
func (s *Series) formatFor(ctx context.Context, want string) (string, error) {
	if err := s.checkConfig(ctx, want); err != nil {
		return "", s.errorf("config", err)
	}
	return s.storedFormat(ctx, want)
}

// checkConfig checks a handle's format want against the series' stored
// config, and stores nothing. A config that does not match is ErrMismatch.
// So is a missing config of a series whose passes have given numbers (its
// first batch stored it, or the series predates configs) when want does not
// format those numbers as their index entries say: the store lost the
// config, and a handle without the series' format must not replace it with
// its own. (An online-only series, or one whose index entries the store
// lost too, cannot be checked so.)
func (s *Series) checkConfig(ctx context.Context, want string) error {
	s.cfgMu.Lock()
	loaded := s.cfgLoaded
	s.cfgMu.Unlock()
	_, err := s.b.Store.Get(ctx, s.configKey())
	switch {
	case loaded || err == nil:
		_, err := s.configFormat(ctx, want)
		return err
	case !errors.Is(err, stores.ErrNotFound):
		return err
	}
	h, _, err := s.loadHead(ctx)
	if err != nil || h.batches == 0 {
		return err
	}
	prefix := s.dir + assignedDir
	for it, err := range stores.ListUnder(ctx, s.b.Store, prefix) {
		if err != nil {
			return err
		}
		a, err := s.openAssigned(it.Key, it.Key[len(prefix):], it.Value)
		if err != nil {
			return fmt.Errorf("index %s: %w", it.Key[len(prefix):], err)
		}
		text, err := s.text(want, a.Number)
		if err != nil {
			return err
		}
		if text != a.Formatted {
			return fmt.Errorf("%w: its config is missing, and its number %d reads %q, not %q: give the series' format",
				ErrMismatch, a.Number, a.Formatted, text)
		}
		return nil
	}
	return nil
}

// sweepChunks deletes chunks left by a batch that was never committed (the
// pass stopped between writing them and writing the head), or by a finished
// batch whose chunks were not all deleted. Called only when no batch is in
// flight, before a new batch writes its chunks.
func (s *Series) sweepChunks(ctx context.Context) error {
	stale, err := s.listChunks(ctx)
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := s.b.Store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// plan lists the pending entries once and returns those to number, in
// order; it deletes the entries it drops.
func (s *Series) plan(ctx context.Context, last uint64, rep *PassReport) ([]item, error) {
	prefix := s.dir + pendingDir
	var all []item
	var handoffs []bool
	s.prog.start(PassReading, 0)
	for it, err := range stores.ListUnder(ctx, s.b.Store, prefix) {
		if err != nil {
			return nil, fmt.Errorf("list pending: %w", err)
		}
		s.prog.add(1)
		rest := it.Key[len(prefix):]
		if len(rest) < provisionalLen+2 || rest[provisionalLen] != '/' {
			return nil, fmt.Errorf("pending key %q: %w", it.Key, ErrTampered)
		}
		p, id := rest[:provisionalLen], rest[provisionalLen+1:]
		plain, err := s.b.Sealer.Open(it.Key, it.Value)
		if err != nil {
			return nil, fmt.Errorf("pending %s: %w", id, ErrTampered)
		}
		got, handoff, err := decodeEntry(plain)
		if err != nil || got != id {
			return nil, fmt.Errorf("pending %s: %w", id, ErrTampered)
		}
		all = append(all, item{provisional: p, id: id})
		handoffs = append(handoffs, handoff)
	}
	const (
		take uint8 = iota
		drop
		wait
	)
	status := make([]uint8, len(all))
	var above atomic.Uint64 // the highest number a record carries above last
	s.prog.start(PassChecking, len(all))
	err := parallel(ctx, len(all), s.workers, func(ctx context.Context, i int) error {
		defer s.prog.add(1)
		id := all[i].id
		a, indexed, err := s.readAssigned(ctx, id)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if indexed && !handoffs[i] && !a.Voided {
			status[i] = drop // already numbered by an earlier batch
			return nil
		}
		number := s.b.Records.Number
		if pc, can := s.b.Records.(deferred.PlanChecker); can {
			number = pc.NumberToPlan // a record it could not stamp fails the plan
		}
		n, p, ok, err := number(ctx, s.opts.Collection, id, s.name)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		switch {
		case ok && n > last:
			// The record carries a number the heads read had not given:
			// another pass (or a write-time number) gave it since they
			// were read, or the store put back older heads (and the
			// entries the pass had removed). Checked below.
			status[i] = drop
			for {
				old := above.Load()
				if n <= old || above.CompareAndSwap(old, n) {
					break
				}
			}
		case indexed && ok && n == 0 && p == all[i].provisional && a.Provisional != p:
			// The id was numbered, deleted and handed off again: the
			// record in the store is a new one, in line under this
			// entry, and the index entry is its predecessor's.
		case indexed && ok && n == 0 && p == all[i].provisional && a.Voided:
			// Its number was voided (the record was gone when its batch
			// was stamped) and the record came back pending under this
			// entry (a device's edit won over the deletion in a sync): it
			// never carried that number, and gets a new one.
		case indexed && ok:
			// Numbered by an earlier batch (the index says so, whatever
			// the record shows: a record the store served from before
			// its stamp does not get a second number).
			status[i] = drop
		case !ok && handoffs[i]:
			// A handoff entry is written before its record: the record
			// may still come (see PassReport.Waiting).
			status[i] = wait
		case !ok || n != 0:
			// Deleted before its batch was recorded: no number. Or it
			// carries its number, and only the index of it was lost.
			status[i] = drop
		case p != "" && p != all[i].provisional:
			// Handed off again under another provisional id (its first
			// handoff never wrote the record): that entry is its place.
			status[i] = drop
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if n := above.Load(); n > last {
		if err := s.checkAbove(ctx, n); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
	}
	seen := make(map[string]struct{}, len(all))
	for i, it := range all {
		if status[i] != take {
			continue
		}
		if _, dup := seen[it.id]; dup {
			status[i] = drop // enqueued twice: it keeps its first place
			continue
		}
		seen[it.id] = struct{}{}
	}
	var taken, dropped []item
	for i, it := range all {
		switch status[i] {
		case take:
			taken = append(taken, it)
		case wait:
			rep.Waiting++
		default:
			dropped = append(dropped, it)
		}
	}
	err = parallel(ctx, len(dropped), s.workers, func(ctx context.Context, i int) error {
		return s.b.Store.Delete(ctx, s.pendingKey(dropped[i].provisional, dropped[i].id))
	})
	if err != nil {
		return nil, fmt.Errorf("drop pending: %w", err)
	}
	rep.Skipped += len(dropped)
	return taken, nil
}

// checkAbove reads the series' heads again after the plan found a record
// carrying number n, above the heads it planned from: heads that have
// moved past n since (a pass elsewhere, which makes this one's commit
// fail with ErrPassRunning, or a number taken at write time) are no
// rollback; heads still below it were put back by the store, and a pass
// from them would give n again (ErrRollback).
func (s *Series) checkAbove(ctx context.Context, n uint64) error {
	h, _, err := s.loadHead(ctx)
	if err != nil {
		return err
	}
	counter, err := s.b.CounterHead(ctx)
	if err != nil {
		return fmt.Errorf("read the counter %q: %w", s.name, err)
	}
	if top := max(h.last, counter); top < n {
		return fmt.Errorf("%w: a record carries number %d, above the head (%d)", ErrRollback, n, top)
	}
	return nil
}

// sealChunks seals the record ids of b in chunks of at most chunkItems
// ids and chunkBytes bytes.
func (s *Series) sealChunks(b *batch, items []item) ([]sealedKV, error) {
	var out []sealedKV
	var start, size int
	flush := func(end int) error {
		index := len(out)
		key := s.chunkKey(index)
		sealed, err := s.b.Sealer.Seal(key, encodeChunk(b.token, b.id, index, b.first+uint64(start), items[start:end]))
		if err != nil {
			return err
		}
		out = append(out, sealedKV{key, sealed})
		start, size = end, 0
		return nil
	}
	for i, it := range items {
		n := 2*binary.MaxVarintLen32 + len(it.provisional) + len(it.id)
		if i > start && (i-start >= s.chunkItems || size+n > chunkBytes) {
			if err := flush(i); err != nil {
				return nil, err
			}
		}
		size += n
	}
	if err := flush(len(items)); err != nil {
		return nil, err
	}
	return out, nil
}

// loadBatch reads the record ids of b, in number order.
func (s *Series) loadBatch(ctx context.Context, b *batch) ([]item, error) {
	items := make([]item, 0, b.last-b.first+1)
	for i := range int(b.chunks) {
		key := s.chunkKey(i)
		it, err := s.b.Store.Get(ctx, key)
		if errors.Is(err, stores.ErrNotFound) {
			return nil, errStaleBatch
		}
		if err != nil {
			return nil, err
		}
		p, err := s.b.Sealer.Open(key, it.Value)
		if err != nil {
			return nil, fmt.Errorf("batch chunk %d: %w", i, ErrTampered)
		}
		c, err := decodeChunk(p)
		if err != nil {
			return nil, fmt.Errorf("batch chunk %d: %w", i, err)
		}
		if !bytes.Equal(c.token, b.token) || c.batch != b.id || c.index != uint64(i) {
			return nil, errStaleBatch
		}
		if c.first != b.first+uint64(len(items)) {
			return nil, fmt.Errorf("batch chunk %d: %w: starts at %d", i, ErrCorrupt, c.first)
		}
		items = append(items, c.items...)
	}
	if uint64(len(items)) != b.last-b.first+1 {
		return nil, fmt.Errorf("batch %d: %w: %d ids for numbers %d to %d", b.id, ErrCorrupt, len(items), b.first, b.last)
	}
	return items, nil
}

// staleBatch says why the chunks of batch b, which the head at version ver
// named, did not match it. Where the series' lock is one of this process
// (a store without a stores.Locker), a pass elsewhere may have finished the
// batch and cleared its chunks meanwhile: the head has then moved on, and
// this pass lost the race (ErrPassRunning), as at its next write of the
// head. Chunks missing under the very head that names them are lost
// (ErrCorrupt).
func (s *Series) staleBatch(ctx context.Context, b *batch, ver uint64) error {
	if err := s.stillAt(ctx, b, ver); err != nil {
		return err
	}
	return fmt.Errorf("%w: the chunks of batch %d are missing or stale", ErrCorrupt, b.id)
}

// stillAt returns ErrPassRunning when the head is no longer at version ver
// (another pass has written it since this one did).
func (s *Series) stillAt(ctx context.Context, b *batch, ver uint64) error {
	it, err := s.b.Store.Get(ctx, s.headKey())
	if err != nil && !errors.Is(err, stores.ErrNotFound) {
		return err
	}
	if it.Version != ver {
		return fmt.Errorf("batch %d: %w: %w", b.id, ErrPassRunning, errFenced)
	}
	return nil
}

// finish completes the batch in the head, from its progress on, and clears
// it from the head. With resumed set, the batch was left by an earlier pass,
// which may have recorded some numbers after its last saved progress: the
// ledger after the batch's mark says which.
func (s *Series) finish(ctx context.Context, h *head, ver uint64, resumed bool, rep *PassReport) (uint64, error) {
	b := h.batch
	// The series' counter past the batch's numbers (one head): raised in
	// the batch's commit on a store with transactions, here elsewhere (or
	// again, for a batch whose pass stopped before it did).
	if s.b.Raise != nil {
		if err := s.b.Raise(ctx, nil, 0, b.last); err != nil {
			return 0, fmt.Errorf("raise the counter %q past batch %d: %w", s.name, b.id, err)
		}
	}
	items, err := s.loadBatch(ctx, b)
	if errors.Is(err, errStaleBatch) {
		err = s.staleBatch(ctx, b, ver)
	}
	if err != nil {
		return 0, err
	}
	var f *sequence.Formatter
	if b.format != "" {
		if f, err = sequence.ParseFormat(b.format); err != nil {
			return 0, fmt.Errorf("%w: batch %d format: %w", ErrCorrupt, b.id, err)
		}
	}
	s.prog.start(PassNumbering, int(b.last-b.first+1))
	s.prog.add(int(b.done - (b.first - 1)))
	var recorded map[uint64]bool
	if resumed {
		if recorded, err = s.recorded(ctx, b); err != nil {
			return 0, err
		}
		rep.Resumed += int(b.last - b.done)
	}
	for b.done < b.last {
		lo, hi := b.done+1, min(b.last, b.done+uint64(s.stepSize))
		if err := s.step(ctx, b, ver, f, lo, items[lo-b.first:hi-b.first+1], recorded, rep); err != nil {
			return 0, err
		}
		if hi == b.last {
			break
		}
		lh, err := s.b.Ledger.Head(ctx)
		if err != nil {
			return 0, err
		}
		b.done, b.mark = hi, lh.Seq
		if ver, err = s.writeHead(ctx, h, ver); err != nil {
			return 0, fmt.Errorf("save progress of batch %d: %w", b.id, err)
		}
	}
	if ver, err = s.clear(ctx, h, ver); err != nil {
		return 0, fmt.Errorf("clear batch %d: %w", b.id, err)
	}
	return ver, nil
}

// clear clears the finished batch from the head at version ver and deletes
// its chunks, which are no longer needed, and returns the head's new
// version. Where the store has transactions both happen in one that holds
// the head at ver, so a pass that lost its lock cannot delete the chunks of
// a batch another pass committed since (they have the same keys). Elsewhere
// chunks left by a crash between the two are swept by the next pass.
func (s *Series) clear(ctx context.Context, h *head, ver uint64) (uint64, error) {
	b := h.batch
	h.batch = nil
	keys := make([]string, b.chunks)
	for i := range keys {
		keys[i] = s.chunkKey(i)
	}
	if tr, ok := s.b.Store.(stores.Transactor); ok && s.b.Store.Capabilities().Transactions {
		v, err := s.headTx(ctx, tr, h, ver, keys, nil, nil)
		if err == nil || !errors.Is(err, stores.ErrTooLarge) {
			if err == nil && s.afterClear != nil {
				s.afterClear()
			}
			return v, err
		}
	}
	v, err := s.writeHead(ctx, h, ver)
	if err != nil {
		return 0, err
	}
	if s.afterClear != nil {
		s.afterClear()
	}
	for _, k := range keys {
		if err := s.b.Store.Delete(ctx, k); err != nil {
			return 0, err
		}
	}
	return v, nil
}

// recorded returns the numbers of b above its progress that already have
// their ledger entry (only the holder of the series lock appends them).
func (s *Series) recorded(ctx context.Context, b *batch) (map[uint64]bool, error) {
	m := make(map[uint64]bool)
	for e, err := range s.b.Ledger.Read(ctx, b.mark+1) {
		if err != nil {
			return nil, fmt.Errorf("read ledger after %d: %w", b.mark, err)
		}
		if (e.Kind == ledger.NumberAssigned || e.Kind == ledger.NumberVoided) && e.Series == s.name &&
			slices.Equal(e.Partition, s.b.Partition) && e.Collection == b.collection && e.Number > b.done && e.Number <= b.last {
			m[e.Number] = true
		}
	}
	return m, nil
}

// step finishes numbers first … first+len(seg)-1 of b: stamps the records,
// records the numbers in the ledger (those not already recorded), indexes
// them and removes their pending entries. Every part is idempotent but the
// ledger entries: before appending them it checks that the head is still at
// ver, the version this pass last wrote, so a pass overtaken while it
// stamped (see staleBatch) stops with ErrPassRunning instead of recording
// the other pass's numbers a second time. (Between that check and the
// append, a window remains: see the package's Concurrency.)
func (s *Series) step(ctx context.Context, b *batch, ver uint64, f *sequence.Formatter, first uint64, seg []item, recorded map[uint64]bool, rep *PassReport) error {
	texts := make([]string, len(seg))
	marks := make([]deferred.Mark, len(seg))
	for i := range seg {
		n := first + uint64(i)
		if f != nil {
			texts[i] = f.Format(n)
		} else {
			texts[i] = strconv.FormatUint(n, 10)
		}
		marks[i] = deferred.Mark{Series: s.name, N: n, Formatted: texts[i]}
	}
	stamps, gone, err := s.stamp(ctx, b, seg, marks, texts)
	if err != nil {
		return err
	}
	for i := range stamps {
		if stamps[i].Formatted != "" {
			texts[i] = stamps[i].Formatted // rendered by the record's date
		}
	}
	entries := make([]ledger.Entry, 0, len(seg))
	for i, it := range seg {
		n := first + uint64(i)
		if gone[i] || stamps[i].Carries != 0 {
			rep.Voided++
		} else {
			rep.Assigned++
		}
		if recorded[n] {
			continue
		}
		e := ledger.Entry{Kind: ledger.NumberAssigned, Collection: b.collection, ID: it.id, Series: s.name, Partition: s.b.Partition, Number: n}
		switch {
		case gone[i]:
			e.Kind, e.Reason = ledger.NumberVoided, voidReason
		case stamps[i].Carries != 0:
			// The record got its number from an earlier batch, whose index
			// the store lost: it keeps that number, and this one is void.
			e.Kind, e.Reason = ledger.NumberVoided, fmt.Sprintf("%s %d", carriesReason, stamps[i].Carries)
		default:
			e.Revision, e.CipherHash = stamps[i].Revision, stamps[i].CipherHash
		}
		entries = append(entries, e)
	}
	if err := s.stillAt(ctx, b, ver); err != nil {
		return err
	}
	if err := s.appendEntries(ctx, entries); err != nil {
		return err
	}
	return s.index(ctx, b, first, seg, gone, stamps, texts)
}

// index writes the assignments of numbers first … first+len(seg)-1 of b
// and removes their pending entries: in one transaction where the store has
// them, else key by key. A record that carries another number keeps its
// index entry (or its lack of one): the number voided here is not its own.
func (s *Series) index(ctx context.Context, b *batch, first uint64, seg []item, gone []bool, stamps []deferred.Stamp, texts []string) error {
	sealed := make([][]byte, len(seg))
	byProv := make([][]byte, len(seg))
	for i, it := range seg {
		if stamps[i].Carries != 0 {
			continue
		}
		a := assignment{number: first + uint64(i), voided: gone[i], batch: b.id, provisional: it.provisional, formatted: texts[i]}
		var err error
		if sealed[i], err = s.b.Sealer.Seal(s.assignedKey(it.id), a.encode()); err != nil {
			return err
		}
		if byProv[i], err = s.b.Sealer.Seal(s.provisionalKey(it.provisional), encodeProvisional(it.id)); err != nil {
			return err
		}
	}
	if tr, ok := s.b.Store.(stores.Transactor); ok && s.b.Store.Capabilities().Transactions {
		_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
			return tr.Update(ctx, func(tx stores.Tx) error {
				for i, it := range seg {
					if sealed[i] != nil {
						if err := tx.Put(s.assignedKey(it.id), sealed[i]); err != nil {
							return err
						}
						if err := tx.Put(s.provisionalKey(it.provisional), byProv[i]); err != nil {
							return err
						}
					}
					if err := tx.Delete(s.pendingKey(it.provisional, it.id)); err != nil {
						return err
					}
				}
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("index numbers %d to %d: %w", first, first+uint64(len(seg))-1, err)
		}
		return nil
	}
	return parallel(ctx, len(seg), s.workers, func(ctx context.Context, i int) error {
		it := seg[i]
		if sealed[i] != nil {
			if _, err := s.b.Store.Put(ctx, s.assignedKey(it.id), sealed[i]); err != nil {
				return fmt.Errorf("index %s: %w", it.id, err)
			}
			if _, err := s.b.Store.Put(ctx, s.provisionalKey(it.provisional), byProv[i]); err != nil {
				return fmt.Errorf("index %s: %w", it.id, err)
			}
		}
		if err := s.b.Store.Delete(ctx, s.pendingKey(it.provisional, it.id)); err != nil {
			return fmt.Errorf("remove pending %s: %w", it.id, err)
		}
		return nil
	})
}

// stamp stamps the records of seg with marks: all in one transaction when
// the Records can (BatchStamper), else one by one on up to s.workers
// goroutines. It reports which records are gone.
func (s *Series) stamp(ctx context.Context, b *batch, seg []item, marks []deferred.Mark, texts []string) ([]deferred.Stamp, []bool, error) {
	if bs, ok := s.b.Records.(deferred.BatchStamper); ok && len(seg) > 1 {
		ids := make([]string, len(seg))
		for i, it := range seg {
			ids[i] = it.id
		}
		stamps, found, err := bs.StampBatch(ctx, b.collection, ids, marks)
		if err == nil {
			s.prog.add(len(seg))
			gone := make([]bool, len(seg))
			for i, ok := range found {
				gone[i] = !ok
			}
			return stamps, gone, nil
		}
		// A batch that keeps losing to writers of single records, or that
		// the store cannot take at once, is stamped record by record.
		if !errors.Is(err, stores.ErrConflict) && !errors.Is(err, stores.ErrTooLarge) {
			return nil, nil, fmt.Errorf("stamp %s/%s to %s: %w", b.collection, seg[0].id, seg[len(seg)-1].id, err)
		}
	}
	stamps := make([]deferred.Stamp, len(seg))
	gone := make([]bool, len(seg))
	err := parallel(ctx, len(seg), s.workers, func(ctx context.Context, i int) error {
		st, err := s.b.Records.Stamp(ctx, b.collection, seg[i].id, marks[i])
		if errors.Is(err, stores.ErrNotFound) {
			gone[i] = true
			s.prog.add(1)
			return nil
		}
		if err != nil {
			return fmt.Errorf("stamp %s/%s with %s: %w", b.collection, seg[i].id, texts[i], err)
		}
		stamps[i] = st
		s.prog.add(1)
		return nil
	})
	return stamps, gone, err
}

// appendEntries appends entries in order, in as few appends as the
// ledger's batch limit allows.
func (s *Series) appendEntries(ctx context.Context, entries []ledger.Entry) error {
	start, size := 0, 0
	for i, e := range entries {
		n := 512 + len(e.Collection) + len(e.ID) + len(e.Series) + len(e.Reason) + len(e.CipherHash)
		if i > start && size+n > entryBudget {
			if err := s.append(ctx, entries[start:i]); err != nil {
				return err
			}
			start, size = i, 0
		}
		size += n
	}
	if start < len(entries) {
		return s.append(ctx, entries[start:])
	}
	return nil
}

// append appends entries. The ledger retries lost races within its own
// retry budget; the pass does not run it again on top (budgets that
// multiply would turn contention into a queue): ErrContention means nothing
// was written, and the next pass resumes from the head.
func (s *Series) append(ctx context.Context, entries []ledger.Entry) error {
	_, err := s.b.Ledger.Append(ctx, entries...)
	return err
}

// parallel runs fn for 0 … n-1 on up to workers goroutines and returns the
// first error (no further fn starts), or ctx's error if it ended before
// every fn started.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(workers, 1))
	started := 0
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, i) })
		started++
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if started < n || n == 0 {
		return ctx.Err()
	}
	return nil
}
