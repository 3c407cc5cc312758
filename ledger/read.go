package ledger

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/stores"
)

// Read yields the entries from position from (0 means 1) up to the head as
// it was when reading started, in order. It checks as it goes that positions
// are dense (*GapError), that each entry opens and sits at its own position
// (*TamperError, matching ErrTampered), that each entry's MAC follows from
// its predecessor's (*ChainError; for from > 1 the chain is anchored on entry
// from-1), and at the end that the head's MAC is the last entry's. The first
// problem, or a store error, is yielded once with a zero Entry and ends the
// sequence. Entries written above the head (an append still in flight) are
// not yielded. The store is listed once, not read entry by entry.
func (l *ledger) Read(ctx context.Context, from uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		stopped := false
		_, err := l.walk(ctx, from, false, func(r record, _ []byte) bool {
			stopped = !yield(r.entry, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(Entry{}, err)
		}
	}
}

// Report is the outcome of a verification of the whole ledger (vault.Audit.Verify).
type Report struct {
	// Entries is how many entries, from 1, were found intact before the
	// first problem (all of them when there is none).
	Entries uint64
	// Head is the head record as read.
	Head Head
	// FirstBad is the position of the first problem: the missing, tampered or
	// unchained entry, or the head's position when the head does not match
	// its last entry. It is 0 when the ledger is intact, and when the problem
	// is that the head record itself does not open.
	FirstBad uint64
	// Problem is the first integrity problem (a *GapError, *ChainError or
	// *TamperError), nil when the ledger is intact.
	Problem error
}

// OK reports whether Verify found the ledger intact.
func (r Report) OK() bool { return r.Problem == nil }

// Verify walks the whole ledger from position 1, as Read does, and reports
// what it found. The error is non-nil whenever the ledger could not be shown
// intact: then either Report.Problem is set (and is the error), or the store
// failed or ctx ended (Report.Problem is nil, and the report covers what was
// read before).
func (l *ledger) Verify(ctx context.Context) (Report, error) {
	return l.verifySigned(ctx, nil)
}

// VerifyProgress is Verify, calling progress, when it is not nil, with
// the number of entries walked so far as the walk goes: on the calling
// goroutine, in increasing order, after each entry. It checks exactly
// what Verify checks, signatures included (some of which are checked in
// batches, so a count passed to progress is no promise that those
// entries are intact: the report says that).
func (l *ledger) VerifyProgress(ctx context.Context, progress func(entries uint64)) (Report, error) {
	return l.verifySigned(ctx, progress)
}

// finish completes a report with err, the walk's outcome.
func (rep Report) finish(err error) (Report, error) {
	if err == nil {
		return rep, nil
	}
	if !integrity(err) {
		return rep, fmt.Errorf("verify ledger: %w", err)
	}
	rep.Problem = err
	var (
		g *GapError
		c *ChainError
		t *TamperError
		s *SignatureError
	)
	switch {
	case errors.As(err, &g):
		rep.FirstBad = g.Want
	case errors.As(err, &c):
		rep.FirstBad = c.Seq
	case errors.As(err, &t):
		rep.FirstBad = t.Seq
	case errors.As(err, &s):
		rep.FirstBad = s.Seq
		rep.Entries = s.Seq - 1
	}
	return rep, err
}

// walk checks and passes to fn the entries from position from up to the
// head, stopping early when fn returns false, and returns the head it read.
// fn gets each entry's record and the MAC of the entry before it. With
// skim, the records' entries come without their strings (see decodeEntry).
func (l *ledger) walk(ctx context.Context, from uint64, skim bool, fn func(r record, prev []byte) bool) (Head, error) {
	if err := l.enter(); err != nil {
		return Head{}, err
	}
	defer l.gate.Exit()
	// The pin as it was before the head was read is what the whole walk is
	// checked against: appends of this process (or reads of other writers'
	// appends) may raise the pin while the walk runs, past the head it read,
	// and that is no rollback.
	pin := l.pinned()
	hs, _, err := l.loadHeadAfter(ctx, pin)
	if err != nil {
		return Head{}, err
	}
	head := hs.Head
	if from == 0 {
		from = 1
	}
	if from > hs.Seq {
		return head, nil
	}
	c := &chain{l: l, next: from, pin: pin}
	if from > 1 {
		r, err := l.entryAt(ctx, hs, from-1)
		if err != nil {
			return head, err
		}
		c.prev = r.mac()
	}
	// Positions up to stored are at their own keys; the rest are pending in the head.
	stored := hs.Seq - uint64(len(hs.pending))
	if c.next <= stored {
		walkStored := l.walkStored
		if stored-c.next >= 4*chunkSize && runtime.GOMAXPROCS(0) > 1 {
			walkStored = l.walkStoredParallel
		}
		if more, err := walkStored(ctx, c, stored, skim, fn); err != nil || !more {
			return head, err
		}
	}
	for _, r := range hs.pending {
		if r.entry.Seq < c.next {
			continue
		}
		prev := c.prev
		if err := c.link(r); err != nil {
			return head, err
		}
		if !fn(r, prev) {
			return head, nil
		}
	}
	if !hmac.Equal(c.prev, hs.MAC) {
		return head, &ChainError{Seq: hs.Seq, Head: true}
	}
	return head, l.raisePin(head)
}

// chain is the state of a walk: the next position expected and the MAC of
// the one before.
type chain struct {
	l    *ledger
	prev []byte
	next uint64
	pin  Head // the device's pin when the walk began: the entry there must carry its MAC
}

// link checks that r is the next entry and chains onto prev, and advances.
func (c *chain) link(r record) error {
	if !c.l.chainsOnto(c.prev, r.entry.Seq, r.enc(), r.mac()) {
		return &ChainError{Seq: r.entry.Seq}
	}
	c.prev = r.mac()
	c.next++
	return c.atPin(r)
}

// atPin checks r against the pin taken when the walk began, when r is at
// the pinned position: another MAC there is another history than the one
// this device saw. The pin may have moved on since; that is not held
// against r. The error is the Pins' own (a rollback).
func (c *chain) atPin(r record) error {
	if c.pin.Seq == 0 || r.entry.Seq != c.pin.Seq || hmac.Equal(r.mac(), c.pin.MAC) {
		return nil
	}
	return c.l.pins.CheckLedger(c.l.dir, r.entry.Seq, r.mac())
}

// listStored lists the stored entries from c.next to last (and perhaps a
// few keys after them): the narrowest prefix covering the range, listed
// from position from (stores.ListAfter), so that on a store that can start
// a listing there (a stores.RangeLister) the entries before from cost
// nothing, however many they are. It yields each item with its position
// (ok false: not a position key). A key outside the listed range, or out of
// order, ends the listing with an error wrapping stores.ErrMisbehaving:
// nothing more is trusted from that answer.
func (l *ledger) listStored(ctx context.Context, from, last uint64) iter.Seq2[listed, error] {
	lo, hi := appendSeq(nil, from), appendSeq(nil, last)
	n := 0
	for n < len(lo) && lo[n] == hi[n] {
		n++
	}
	prefix := l.dir + string(lo[:n])
	after := "" // the whole prefix
	if from > 0 {
		after = l.entryKey(from - 1)
	}
	return func(yield func(listed, error) bool) {
		for it, err := range stores.ListAfter(ctx, l.store, prefix, after) {
			if err != nil {
				yield(listed{}, fmt.Errorf("ledger: %w", err))
				return
			}
			seq, ok := parseSeq(it.Key[len(l.dir):])
			if !yield(listed{Item: it, seq: seq, ok: ok}, nil) {
				return
			}
		}
	}
}

// listed is a stored item with the position its key names.
type listed struct {
	stores.Item
	seq uint64
	ok  bool // the key names a position
}

// walkStored checks and passes to fn the entries at their own keys from
// c.next to last. more is false when fn stopped the walk.
func (l *ledger) walkStored(ctx context.Context, c *chain, last uint64, skim bool, fn func(record, []byte) bool) (more bool, err error) {
	for it, err := range l.listStored(ctx, c.next, last) {
		if err != nil {
			return false, err
		}
		seq, ok := it.seq, it.ok
		if !ok || seq < c.next {
			continue
		}
		if seq > last {
			break
		}
		if seq != c.next {
			return false, &GapError{Want: c.next, Got: seq}
		}
		r, err := l.openEntry(it.Key, seq, it.Value, skim)
		if err != nil {
			return false, err
		}
		prev := c.prev
		if err := c.link(r); err != nil {
			return false, err
		}
		if !fn(r, prev) {
			return false, nil
		}
	}
	if c.next <= last {
		return false, &GapError{Want: c.next}
	}
	return true, nil
}

// chunkSize is how many entries one worker of a parallel walk checks at a time.
const chunkSize = 256

// chunk is a run of consecutive stored entries checked by one worker.
type chunk struct {
	items []stores.Item
	first uint64        // the position of items[0]
	recs  []record      // the entries that opened and chain onto each other, from the first
	err   error         // the problem after recs, if any
	ready chan struct{} // closed when recs and err are set
}

// walkStoredParallel is walkStored with the authentication, decoding and
// chaining of entries spread over GOMAXPROCS workers. One goroutine lists
// and checks density, workers check chunks (each entry against the one
// before it in the chunk), and the calling goroutine takes the chunks in
// order, links each chunk's first entry to the previous chunk, and calls fn.
func (l *ledger) walkStoredParallel(ctx context.Context, c *chain, last uint64, skim bool, fn func(record, []byte) bool) (more bool, err error) {
	workers := runtime.GOMAXPROCS(0)
	out := make(chan *chunk, 2*workers)
	sem := make(chan struct{}, workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)

	// send starts a worker on ch and queues ch for the consumer.
	send := func(ch *chunk) bool {
		if ch.items == nil {
			close(ch.ready)
		} else {
			select {
			case sem <- struct{}{}:
			case <-stop:
				return false
			}
			wg.Go(func() {
				defer func() { <-sem }()
				l.checkChunk(ch, skim)
				close(ch.ready)
			})
		}
		select {
		case out <- ch:
			return true
		case <-stop:
			return false
		}
	}
	wg.Go(func() {
		defer close(out)
		next := c.next
		cur := &chunk{ready: make(chan struct{})}
		fail := func(err error) {
			if send(cur) {
				send(&chunk{err: err, ready: make(chan struct{})})
			}
		}
		for it, err := range l.listStored(ctx, next, last) {
			if err != nil {
				fail(err)
				return
			}
			seq, ok := it.seq, it.ok
			if !ok || seq < next {
				continue
			}
			if seq > last {
				break
			}
			if seq != next {
				fail(&GapError{Want: next, Got: seq})
				return
			}
			next++
			cur.items = append(cur.items, it.Item)
			if len(cur.items) == 1 {
				cur.first = seq
			}
			if len(cur.items) == chunkSize {
				if !send(cur) {
					return
				}
				cur = &chunk{ready: make(chan struct{})}
			}
		}
		if next <= last {
			fail(&GapError{Want: next})
			return
		}
		send(cur)
	})

	for ch := range out {
		<-ch.ready
		for i, r := range ch.recs {
			prev := c.prev
			if i == 0 {
				if err := c.link(r); err != nil {
					return false, err
				}
			} else {
				c.prev = r.mac()
				c.next++
				if err := c.atPin(r); err != nil {
					return false, err
				}
			}
			if !fn(r, prev) {
				return false, nil
			}
		}
		if ch.err != nil {
			return false, ch.err
		}
	}
	return true, nil
}

// checkChunk opens the chunk's entries and checks each chains onto the one
// before it, stopping at the first problem.
func (l *ledger) checkChunk(ch *chunk, skim bool) {
	ch.recs = make([]record, 0, len(ch.items))
	for i, it := range ch.items {
		seq := ch.first + uint64(i)
		r, err := l.openEntry(it.Key, seq, it.Value, skim)
		if err != nil {
			ch.err = err
			return
		}
		if i > 0 && !l.chainsOnto(ch.recs[i-1].mac(), seq, r.enc(), r.mac()) {
			ch.err = &ChainError{Seq: seq}
			return
		}
		ch.recs = append(ch.recs, r)
	}
	ch.items = nil
}

// entryAt reads the record at position seq (which must be at most the
// head's), skimmed (see decodeRecord).
func (l *ledger) entryAt(ctx context.Context, hs headState, seq uint64) (record, error) {
	return l.readAt(ctx, hs, seq, true)
}

// readAt reads the record at position seq (at most the head's): from the
// head's pending entries, or the store; skim as for openEntry.
func (l *ledger) readAt(ctx context.Context, hs headState, seq uint64, skim bool) (record, error) {
	if stored := hs.Seq - uint64(len(hs.pending)); seq > stored {
		return hs.pending[seq-stored-1], nil
	}
	key := l.entryKey(seq)
	it, err := l.store.Get(ctx, key)
	if err != nil {
		if errors.Is(err, stores.ErrNotFound) {
			return record{}, &GapError{Want: seq}
		}
		return record{}, err
	}
	return l.openEntry(key, seq, it.Value, skim)
}

// MACAt returns the chain MAC of the entry at position seq, which names
// the whole ledger up to seq: two copies of one vault hold the same MAC at
// seq exactly when their ledgers agree up to seq. It returns nil when the
// ledger has no entry at seq (0, or above the head). The entry is read and
// opened at its own key (its seal binds it to the position), not walked
// from the start.
func (l *ledger) MACAt(ctx context.Context, seq uint64) ([]byte, error) {
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.gate.Exit()
	hs, _, err := l.loadHeadAfter(ctx, l.pinned())
	if err != nil {
		return nil, err
	}
	if seq == 0 || seq > hs.Seq {
		return nil, nil
	}
	r, err := l.entryAt(ctx, hs, seq)
	if err != nil {
		return nil, err
	}
	return slices.Clone(r.mac()), nil
}
