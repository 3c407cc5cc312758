package vault

import (
	"encoding/json"
	"fmt"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
)

// PutNumbered is Collection.PutNumbered in the transaction: it takes the
// next number of seq (as Tx.Next) and writes under id the value build
// makes of it, the record bound to the number (it carries the number's
// mark and its ledger entry names it, so an audit counts it bound, not
// taken and unused). Both commit with the transaction, or neither.
//
// A record that already carries a number of seq's series is returned as
// stored, and no number is taken: a transaction run again after a crash
// finds it so. A build error, or a write that fails after the number was
// taken, spoils the transaction: nothing commits, whatever fn returns.
// seq must come from the transaction's vault handle, as for Tx.Next.
func (b *TxCollection[T]) PutNumbered(id string, seq *sequence.Sequence, build func(sequence.Serial) (T, error)) (T, error) {
	var out T
	if collect, err := b.begin("put numbered", id); err != nil || collect {
		return out, err // a run that only collects keys writes nothing (see txOrder)
	}
	c := b.c
	switch {
	case seq == nil:
		return out, fmt.Errorf("put numbered %s/%s: nil sequence: %w", c.name, id, ErrInvalidArgument)
	case build == nil:
		return out, fmt.Errorf("put numbered %s/%s: nil build function: %w", c.name, id, ErrInvalidArgument)
	}
	if c.v.needsBind(c.name, seq.Series()) && b.tx.order.touch(c.v.collectionDefKey(c.name)) {
		// The record may bind the series to the collection (an owner's
		// first numbered record there), writing its definition, a key
		// below those locked: the next run names it (see txOrder).
		return out, nil
	}
	prev, err := c.v.readTx(b.tx.tx, c.name, id, true)
	if err != nil {
		return out, fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
	}
	for _, m := range prev.marks {
		if m.kind == markSequence && m.series == seq.Series() {
			if err := json.Unmarshal(prev.body, &out); err != nil {
				return out, fmt.Errorf("put numbered %s/%s: decode: %w", c.name, id, err)
			}
			return out, nil
		}
	}
	s, err := b.tx.Next(seq)
	if err != nil {
		return out, fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
	}
	fail := func(err error) (T, error) {
		err = fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
		b.tx.spoil(err) // the number is taken in the transaction: it must not commit unbound
		var zero T
		return zero, err
	}
	val, err := build(s)
	if err != nil {
		return fail(err)
	}
	plain, err := json.Marshal(val)
	if err != nil {
		return fail(fmt.Errorf("encode: %w", err))
	}
	// The counter's partition: a series with periods counts each period
	// under the partition followed by its label.
	partition := seq.Partition()
	if s.Period != "" {
		partition = append(partition, s.Period)
	}
	marks := withMark(prev.marks, mark{kind: markSequence, series: seq.Series(), partition: partition, n: s.N})
	e := ledger.Entry{Kind: ledger.RecordPut, Series: seq.Series(), Partition: partition, Number: s.N}
	if err := c.v.applyTx(b.tx.ctx, b.tx.tx, c.name, id, prev, joinRecord(marks, plain), e); err != nil {
		return fail(err)
	}
	return val, nil
}
