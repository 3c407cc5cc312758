package sequence

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

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
	wire.SequencePin = pinInTx
	wire.SequenceOwner = func(q *Sequence) any { return q.svc }
	wire.SequenceTarget = targetOf
}

// targetOf returns the handle of the counter q's next call in a
// transaction acts on (see resolve), without reading the store: q itself
// while its series' definition is not loaded yet.
func targetOf(q *Sequence) *Sequence {
	t, _, ok := q.resolveLoaded()
	if !ok {
		return q
	}
	return t
}

// resolveLoaded is resolve when the series' definition is loaded (ok),
// which then reads nothing and takes no lock held across a read: it runs
// inside the caller's store transaction (see specLoaded).
func (q *Sequence) resolveLoaded() (*Sequence, time.Time, bool) {
	if q.target {
		return q, q.date, true
	}
	hs, ok, err := q.specLoaded()
	if !ok || err != nil {
		return nil, time.Time{}, false // checkInTx reads it, or reports err
	}
	t, date, err := q.resolveWith(hs, q.date, q.dated)
	if err != nil {
		return nil, time.Time{}, false
	}
	return t, date, true
}

// txMark marks an error of nextInTx for the vault (see wire.ErrTxWrote and
// wire.ErrTxStale) without changing its message.
type txMark struct {
	err  error
	mark error
}

func (e *txMark) Error() string        { return e.err.Error() }
func (e *txMark) Unwrap() error        { return e.err }
func (e *txMark) Is(target error) bool { return target == e.mark }

// pinInTx returns the rollback pin of q's counter as it is now, for a later
// nextInTx whose transaction begins after this call.
func pinInTx(q *Sequence) uint64 { return q.svc.pinOf(targetOf(q).c.key) }

// txFloor is the floor found by checkInTx, for nextInTx; shared by the
// handles of a counter.
type txFloor struct {
	checked atomic.Bool
	floor   atomic.Uint64
	base    atomic.Uint64 // the passes' head (see counter.base)
	closed  atomic.Bool   // the period was closed (see counter.shut)
	through atomic.Uint64 // the History's position the check held through (see wire.HistoryWatch)
}

// checkInTx loads the definition of q's series and reads the highest
// number the history records for the counter q resolves to.
func checkInTx(ctx context.Context, q *Sequence) error {
	if q.svc.gate.Closed() {
		return q.errorf("next", stores.ErrClosed)
	}
	orig := q
	q, _, err := q.resolve(ctx)
	if err != nil {
		return err
	}
	if err := orig.checkCorrection(ctx, q.hs.Load().eff); err != nil {
		return orig.errorf("next", err)
	}
	c := q.c
	if c.svc.history == nil {
		c.tx.checked.Store(true)
		return nil
	}
	if !q.svc.gate.Enter() {
		return q.errorf("next", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	highest, closed, defined, through, err := c.recorded(ctx, false)
	if err != nil {
		return q.errorf("next", err)
	}
	base, err := c.passHead(ctx)
	if err != nil {
		return q.errorf("next", err)
	}
	for {
		old := c.tx.base.Load()
		if base <= old || c.tx.base.CompareAndSwap(old, base) {
			break
		}
	}
	if closed {
		c.tx.closed.Store(true)
	}
	if defined {
		if err := c.svc.checkDefinition(ctx, c.series); err != nil {
			return q.errorf("next", err)
		}
		if err := c.outsidePeriods(); err != nil {
			return q.errorf("next", err)
		}
	}
	for {
		old := c.tx.floor.Load()
		if highest <= old || c.tx.floor.CompareAndSwap(old, highest) {
			break
		}
	}
	for {
		old := c.tx.through.Load()
		if through <= old || c.tx.through.CompareAndSwap(old, through) {
			break
		}
	}
	c.tx.checked.Store(true)
	return nil
}

// nextInTx takes the next number of q in tx (see wire.SequenceNextTx).
// pinned, when set, is the counter's pin taken before tx began (pinInTx);
// otherwise the pin is read here, inside tx, and a counter below it is not
// held for a rollback yet (wire.ErrTxStale): the transaction may read a
// snapshot older than a number another handle sharing the pins (a second
// DB on the state folder) committed meanwhile. The caller runs it again
// with the pin taken before.
func nextInTx(ctx context.Context, q *Sequence, tx stores.Tx, pinned *uint64, checked bool) (Serial, bool, error) {
	if err := q.allocating(ctx, "next"); err != nil {
		return Serial{}, false, err
	}
	if q.svc.txr == nil || tx == nil {
		return Serial{}, false, q.errorf("next", stores.ErrNotSupported)
	}
	orig := q
	q, date, ok := q.resolveLoaded()
	if !ok {
		return Serial{}, true, nil // the definition is read by checkInTx
	}
	reason := ""
	if orig.corr != nil {
		// Whether the number corrected was issued is checked by
		// checkInTx, outside tx, once per service; whether it is void is
		// read in tx.
		text, ok := orig.correctionText(q.hs.Load().eff.def.Corrects)
		vk, known := q.svc.issued.Load(text)
		if !ok || !known {
			return Serial{}, true, nil
		}
		switch _, err := tx.Get(vk.(string)); {
		case err == nil:
			return Serial{}, false, orig.errorf("next", &CorrectionError{Series: orig.series, Of: orig.corr.of,
				Err: fmt.Errorf("number %d was voided: %w", orig.corr.of.N, ErrAlreadyVoided)})
		case !errors.Is(err, stores.ErrNotFound):
			return Serial{}, false, orig.errorf("next", err)
		}
		reason = text
	} else if err := orig.checkCorrection(ctx, q.hs.Load().eff); err != nil {
		return Serial{}, false, orig.errorf("next", err) // reads nothing
	}
	c := q.c
	if !c.tx.checked.Load() {
		return Serial{}, true, nil
	}
	if w := q.svc.watch; w != nil && !checked && w.ForeignThrough() > c.tx.through.Load() {
		// Another writer moved the ledger since the check: the counter,
		// whatever its bytes, may have been put back behind numbers it
		// gave meanwhile. Checked again before it is trusted.
		return Serial{}, true, nil
	}
	if !q.svc.gate.Enter() {
		return Serial{}, false, q.errorf("next", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	// Without a pin taken before the transaction, it is taken here: in a
	// vault every transaction of this Service runs through the ledger's
	// batches, one at a time, so no commit of this Service raises the pin
	// while this one reads. A pin raised meanwhile by another DB sharing
	// the state folder may be above the snapshot this transaction reads
	// (badger): such a refusal is stale, not yet a rollback.
	var pin uint64
	if pinned != nil {
		pin = *pinned
	} else {
		pin = q.svc.pinOf(c.key)
	}
	stale := func(err error) error {
		if pinned == nil && errors.Is(err, ErrRollback) {
			return &txMark{err: err, mark: wire.ErrTxStale}
		}
		return err
	}
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
		return Serial{}, false, q.errorf("next", stale(err))
	}
	if st.closed {
		return Serial{}, false, q.errorf("next", c.closedError())
	}
	if c.tx.closed.Load() {
		// The ledger or this Service saw the period closed after this
		// transaction's snapshot, or the store reopened it: stale too,
		// until run again.
		return Serial{}, false, q.errorf("next", stale(reopened(st.value)))
	}
	var defined *event
	if eff := q.hs.Load().pending(); eff != nil {
		// Stored with this number, unless the series has one (equal: a
		// no-op; different: refused before anything is written).
		if defined, err = q.svc.defineTx(tx, q.series, q.sd.key, eff); err != nil {
			return Serial{}, false, q.errorf("next", err)
		}
	}
	if base := c.tx.base.Load(); st.value < base && !st.closed {
		st.value = base // numbers the passes gave (see counter.base)
	}
	if floor := c.tx.floor.Load(); st.value < floor {
		// The floor may have been raised by a check that read the ledger
		// after this transaction's snapshot: stale too, until run again.
		return Serial{}, false, q.errorf("next", stale(behind(st.value, floor)))
	}
	if st.value == math.MaxUint64 {
		return Serial{}, false, q.errorf("next", ErrOverflow)
	}
	st.value++
	sealed, err := q.svc.sealer.Seal(c.key, st.appendTo(nil))
	if err != nil {
		return Serial{}, false, q.errorf("next", err)
	}
	// From here a failure may leave the counter moved in tx without its
	// journal event: the transaction must not commit (wire.ErrTxWrote).
	if err := tx.Put(c.key, sealed); err != nil {
		return Serial{}, false, q.errorf("next", &txMark{err: err, mark: wire.ErrTxWrote})
	}
	if defined != nil {
		// A definition written without its event must not commit either.
		if q.svc.journal != nil {
			if err := q.svc.journal.Record(ctx, tx, []event{*defined}); err != nil {
				return Serial{}, false, q.errorf("next", &txMark{err: err, mark: wire.ErrTxWrote})
			}
		}
	}
	if q.svc.journal != nil {
		ev := []event{{Kind: wire.EventAllocated, Series: c.series, Partition: c.partition, Number: st.value, Reason: reason}}
		if err := q.svc.journal.Record(ctx, tx, ev); err != nil {
			return Serial{}, false, q.errorf("next", &txMark{err: err, mark: wire.ErrTxWrote})
		}
	}
	return q.serial(st.value, date), false, nil
}
