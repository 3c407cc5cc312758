package numbering

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/stores"
)

// Status is where a series stands, as a pass (or an interrupted one) left
// it: what is numbered, what a pass was numbering when it stopped, and what
// waits for the next pass.
type Status struct {
	// Last is the highest number the series has given (0: none). Numbers of
	// a batch in flight are given: they belong to its records.
	Last uint64
	// Waiting counts the pending entries that no batch holds yet: the next
	// pass numbers them (an id enqueued twice counts twice).
	Waiting int
	// Batch is the batch a pass was numbering when it stopped (or is
	// numbering now), nil when none is in flight.
	Batch *BatchStatus
}

// BatchStatus describes a batch in flight: its numbers are given to its
// records, and the next pass finishes stamping them.
type BatchStatus struct {
	// First and Last are the batch's numbers.
	First, Last uint64
	// Done is the last number whose record was stamped and saved as done
	// (First-1 before any).
	Done uint64
	// Unstamped counts the batch's records that do not carry their number
	// yet (records deleted meanwhile included: the next pass voids their
	// numbers). The next pass finishes them with the numbers already given.
	Unstamped int
}

// Status reads where the series stands. It writes nothing and takes no
// lock, so it may run while a pass runs elsewhere (it then describes a
// moment of that pass). It reads the records of a batch in flight above
// its saved progress, to tell which already carry their numbers.
func (s *Series) Status(ctx context.Context) (Status, error) {
	exit, err := s.enter(ctx)
	if err != nil {
		return Status{}, s.errorf("status", err)
	}
	defer exit()
	// A pass may finish the batch between our reads of the head and of its
	// chunks (and clear them): then the head no longer names that batch,
	// and the next round reads it again. Chunks missing under a head that
	// still names their batch are lost.
	for range 3 {
		st, stale, err := s.status(ctx)
		if errors.Is(err, errStaleBatch) {
			h, _, herr := s.loadHead(ctx)
			if herr != nil {
				return Status{}, s.errorf("status", herr)
			}
			if stale == nil || h.batch != nil && h.batch.id == stale.id && bytes.Equal(h.batch.token, stale.token) {
				return Status{}, s.errorf("status", fmt.Errorf("%w: the chunks of the batch in flight are missing or stale", ErrCorrupt))
			}
			continue
		}
		if err != nil {
			return Status{}, s.errorf("status", err)
		}
		return st, nil
	}
	return Status{}, s.errorf("status", ErrPassRunning)
}

// status is one round of Status: errStaleBatch, with the batch the head
// named, when its chunks did not match it.
func (s *Series) status(ctx context.Context) (Status, *batch, error) {
	h, _, err := s.loadHead(ctx)
	if err != nil {
		return Status{}, nil, err
	}
	prefix := s.dir + pendingDir
	pending := map[string]int{}
	total := 0
	for it, err := range stores.ListUnder(ctx, s.b.Store, prefix) {
		if err != nil {
			return Status{}, nil, err
		}
		pending[it.Key[len(prefix):]]++
		total++
	}
	st := Status{Last: h.last, Waiting: total}
	if b := h.batch; b != nil {
		items, err := s.loadBatch(ctx, b)
		if err != nil {
			return Status{}, b, err
		}
		bs := &BatchStatus{First: b.first, Last: b.last, Done: b.done}
		for i, it := range items {
			k := it.provisional + "/" + it.id
			if pending[k] > 0 { // the batch holds this entry: it does not wait
				pending[k]--
				st.Waiting--
			}
			num := b.first + uint64(i)
			if num <= b.done {
				continue
			}
			n, _, _, err := s.b.Records.Number(ctx, b.collection, it.id, s.name)
			if err != nil {
				return Status{}, nil, err
			}
			if n != num {
				bs.Unstamped++
			}
		}
		st.Batch = bs
	}
	return st, nil, nil
}
