package ledger

import (
	"crypto/hmac"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/stores"
)

// MaxFactsAfterTx bounds how many entries FactsAfterTx folds in one
// transaction: a caller whose check is further behind the head asks Facts
// again, outside the transaction, and runs the transaction again.
const MaxFactsAfterTx = 256

// ErrFactsFar: the ledger's head is more than MaxFactsAfterTx entries past
// the position FactsAfterTx was asked from. Nothing is wrong; the caller
// checks against Facts again first.
var ErrFactsFar = errors.New("ledger: too many entries since the position to fold in a transaction")

// FactsAfterTx calls fn with the facts of the kind named kind folded from
// the entries after the position after alone, up to the head as tx (a
// transaction on the ledger's store) reads it, and returns that head.
// Called by a function the ledger's batch runs (Update), it folds up to
// the head the batch began on: what other writers appended. The
// entries are read in tx and checked to chain onto after's MAC and up to
// the head's.
//
// It lets a check made against Facts (which returned after) hold at a
// commit: in the commit's own transaction, whatever entries other writers
// appended since the check are the ones fn sees, so a value the store put
// back meanwhile below what they record is told apart in the same atomic
// step as the write that would trust it. A head behind after, or at after
// with another entry, is a rollback (an error matching ErrRollback of
// internal/pins, vault.ErrRollback); more than MaxFactsAfterTx entries are
// ErrFactsFar. fn must only read the facts, not keep them.
func (l *ledger) FactsAfterTx(tx stores.Tx, after Head, kind string, fn func(facts any) error) (Head, error) {
	if err := l.enter(); err != nil {
		return Head{}, fmt.Errorf("ledger facts: %w", err)
	}
	defer l.gate.Exit()
	i := l.sum.kindIndex(kind)
	if i < 0 {
		return Head{}, fmt.Errorf("ledger facts: unknown kind %q", kind)
	}
	hs, err := l.headBeforeTx(tx)
	if err != nil {
		return Head{}, fmt.Errorf("ledger facts: %w", err)
	}
	switch {
	case hs.Seq < after.Seq:
		return Head{}, rolledBack(after.Seq, fmt.Sprintf("is beyond the head (%d)", hs.Seq))
	case hs.Seq == after.Seq && !hmac.Equal(hs.MAC, after.MAC):
		return Head{}, rolledBack(after.Seq, "holds another entry")
	case hs.Seq-after.Seq > MaxFactsAfterTx:
		return hs.Head, fmt.Errorf("%w: %d entries after %d", ErrFactsFar, hs.Seq-after.Seq, after.Seq)
	}
	facts := l.sum.kinds[i].New()
	prev := after.MAC
	stored := hs.Seq - uint64(len(hs.pending))
	for seq := after.Seq + 1; seq <= hs.Seq; seq++ {
		var r record
		if seq > stored {
			r = hs.pending[seq-stored-1]
		} else {
			key := l.entryKey(seq)
			it, err := tx.Get(key)
			if errors.Is(err, stores.ErrNotFound) {
				return Head{}, &GapError{Want: seq}
			}
			if err != nil {
				return Head{}, fmt.Errorf("ledger facts: %w", err)
			}
			if r, err = l.openEntry(key, seq, it.Value, false); err != nil {
				return Head{}, err
			}
		}
		if !l.chainsOnto(prev, seq, r.enc(), r.mac()) {
			return Head{}, &ChainError{Seq: seq}
		}
		prev = r.mac()
		facts.Fold(&r.entry)
	}
	if !hmac.Equal(prev, hs.MAC) {
		return Head{}, &ChainError{Seq: hs.Seq, Head: true}
	}
	return hs.Head, fn(facts)
}

// headBeforeTx returns the head tx reads, or, in a function this ledger's
// batch runs (Update, UpdateKeys: the head tx reads is a token of the
// batch's own), the head the batch began on: the entries after it are
// this ledger's own, and the ones before are all at their own keys (fill
// wrote out those a head kept pending).
func (l *ledger) headBeforeTx(tx stores.Tx) (headState, error) {
	it, err := tx.Get(l.headKey)
	if err == nil {
		if _, ok := l.fromToken(it.Value); ok {
			return headState{Head: l.run.bt.start}, nil
		}
	}
	return l.readHeadTx(tx)
}
