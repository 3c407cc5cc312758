package sequence

import (
	"context"
	"errors"
	"math"
	"sync/atomic"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// Numbers taken inside a caller's transaction (a vault's multi-record
// transaction): the counter is read, moved and written in the caller's
// transaction, with its Allocated event, so the number is taken exactly
// when the transaction commits. It bypasses the combining queue: in a vault
// both write through the ledger's batches, which serialise them in this
// process, and the combiner reads the counter back from the transaction
// (its cached bytes no longer match). The floor of the counter (the highest
// number its history records) is read once per Service, outside any
// transaction, by checkInTx.

func init() {
	wire.SequenceNextTx = nextInTx
	wire.SequenceCheck = checkInTx
}

// txFloor is the floor found by checkInTx, for nextInTx; shared by the
// handles of a counter.
type txFloor struct {
	checked atomic.Bool
	floor   atomic.Uint64
}

// checkInTx reads the highest number the history records for q's counter.
func checkInTx(ctx context.Context, q *Sequence) error {
	c := q.c
	if c.svc.history == nil {
		c.tx.checked.Store(true)
		return nil
	}
	if !q.svc.gate.Enter() {
		return q.errorf("next", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	if err := c.catchUp(ctx, false); err != nil {
		return q.errorf("next", err)
	}
	c.view.mu.Lock()
	highest := c.view.highest
	c.view.mu.Unlock()
	for {
		old := c.tx.floor.Load()
		if highest <= old || c.tx.floor.CompareAndSwap(old, highest) {
			break
		}
	}
	c.tx.checked.Store(true)
	return nil
}

// nextInTx takes the next number of q in tx (see wire.SequenceNextTx).
func nextInTx(ctx context.Context, q *Sequence, tx stores.Tx) (Serial, bool, error) {
	if err := q.allocating(ctx, "next"); err != nil {
		return Serial{}, false, err
	}
	if q.svc.txr == nil || tx == nil {
		return Serial{}, false, q.errorf("next", stores.ErrNotSupported)
	}
	c := q.c
	if !c.tx.checked.Load() {
		return Serial{}, true, nil
	}
	if !q.svc.gate.Enter() {
		return Serial{}, false, q.errorf("next", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	// The pin is taken inside the transaction, not before it as the
	// combiner takes it: in a vault every transaction of this Service runs
	// through the ledger's batches, one at a time, so no commit of this
	// process raises the pin while this one reads. A pin raised meanwhile
	// by another DB sharing the state folder could be held against a
	// snapshot older than it (badger), failing this number as a rollback.
	pin := q.svc.pinOf(c.key)
	var st state
	item, err := tx.Get(c.key)
	switch {
	case err == nil:
		if st, err = q.svc.openState(c.key, item.Value); err != nil {
			return Serial{}, false, q.errorf("next", err)
		}
	case errors.Is(err, stores.ErrNotFound):
	default:
		return Serial{}, false, q.errorf("next", err)
	}
	if err := q.svc.checkPin(c.key, st.value, pin); err != nil {
		return Serial{}, false, q.errorf("next", err)
	}
	if floor := c.tx.floor.Load(); st.value < floor {
		return Serial{}, false, q.errorf("next", behind(st.value, floor))
	}
	if st.value == math.MaxUint64 {
		return Serial{}, false, q.errorf("next", ErrOverflow)
	}
	st.value++
	sealed, err := q.svc.sealer.Seal(c.key, st.appendTo(nil))
	if err != nil {
		return Serial{}, false, q.errorf("next", err)
	}
	if err := tx.Put(c.key, sealed); err != nil {
		return Serial{}, false, q.errorf("next", err)
	}
	if q.svc.journal != nil {
		ev := []event{{Kind: wire.EventAllocated, Series: c.series, Partition: c.partition, Number: st.value}}
		if err := q.svc.journal.Record(ctx, tx, ev); err != nil {
			return Serial{}, false, q.errorf("next", err)
		}
	}
	return Serial{N: st.value, Formatted: q.Format(st.value)}, false, nil
}
