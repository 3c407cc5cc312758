package ledger

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"iter"

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
func (l *Ledger) Read(ctx context.Context, from uint64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		stopped := false
		_, err := l.walk(ctx, from, func(e Entry) bool {
			stopped = !yield(e, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(Entry{}, err)
		}
	}
}

// Report is the outcome of Verify.
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
func (l *Ledger) Verify(ctx context.Context) (Report, error) {
	var rep Report
	head, err := l.walk(ctx, 1, func(Entry) bool {
		rep.Entries++
		return true
	})
	rep.Head = head
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
	)
	switch {
	case errors.As(err, &g):
		rep.FirstBad = g.Want
	case errors.As(err, &c):
		rep.FirstBad = c.Seq
	case errors.As(err, &t):
		rep.FirstBad = t.Seq
	}
	return rep, err
}

// walk checks and passes to fn the entries from position from up to the
// head, stopping early when fn returns false, and returns the head it read.
func (l *Ledger) walk(ctx context.Context, from uint64, fn func(Entry) bool) (Head, error) {
	hs, _, err := l.loadHead(ctx)
	if err != nil {
		return Head{}, err
	}
	head := Head{Seq: hs.Seq, MAC: hs.MAC}
	if from == 0 {
		from = 1
	}
	if from > hs.Seq {
		return head, nil
	}
	// Positions up to stored are at their own keys; the rest are pending in the head.
	stored := hs.Seq - uint64(len(hs.pending))
	var prev []byte
	if from > 1 {
		r, err := l.entryAt(ctx, hs, from-1)
		if err != nil {
			return head, err
		}
		prev = r.mac()
	}
	next := from
	check := func(r record) error {
		if !hmac.Equal(l.chainMAC(prev, r.entry.Seq, r.enc()), r.mac()) {
			return &ChainError{Seq: r.entry.Seq}
		}
		prev = r.mac()
		next++
		return nil
	}
	if next <= stored {
		lo, hi := appendSeq(nil, next), appendSeq(nil, stored)
		n := 0
		for n < len(lo) && lo[n] == hi[n] {
			n++
		}
		for it, err := range l.store.List(ctx, l.dir+string(lo[:n])) {
			if err != nil {
				return head, err
			}
			seq, ok := parseSeq(it.Key[len(l.dir):])
			if !ok || seq < next {
				continue
			}
			if seq > stored {
				break
			}
			if seq != next {
				return head, &GapError{Want: next, Got: seq}
			}
			r, err := l.openEntry(seq, it.Value)
			if err != nil {
				return head, err
			}
			if err := check(r); err != nil {
				return head, err
			}
			if !fn(r.entry) {
				return head, nil
			}
		}
		if next <= stored {
			return head, &GapError{Want: next}
		}
	}
	for _, r := range hs.pending {
		if r.entry.Seq < next {
			continue
		}
		if err := check(r); err != nil {
			return head, err
		}
		if !fn(r.entry) {
			return head, nil
		}
	}
	if !hmac.Equal(prev, hs.MAC) {
		return head, &ChainError{Seq: hs.Seq, Head: true}
	}
	return head, nil
}

// entryAt reads the record at position seq (which must be at most the head's).
func (l *Ledger) entryAt(ctx context.Context, hs headState, seq uint64) (record, error) {
	if stored := hs.Seq - uint64(len(hs.pending)); seq > stored {
		return hs.pending[seq-stored-1], nil
	}
	it, err := l.store.Get(ctx, l.entryKey(seq))
	if err != nil {
		if errors.Is(err, stores.ErrNotFound) {
			return record{}, &GapError{Want: seq}
		}
		return record{}, err
	}
	return l.openEntry(seq, it.Value)
}
