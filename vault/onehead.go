package vault

import (
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// One head per series. A series is numbered at write time, by the sequence
// counter of its name (Sequence, Collection.PutNumbered, Numbered.Put on a
// store with transactions), and by the passes of the deferred-numbering
// series of its name (Numbered.Settle, numbering.Series), from one head:
// the unpartitioned counter. A pass numbers its batch above the counter
// (and above its own last number) and raises the counter past the batch in
// the transaction that commits the batch (on a store without transactions,
// by compare-and-swap right after its head, the commit point), so a
// write-time number comes after the pass's numbers without reading
// anything of the passes. A counter below the passes' head (passes of a
// version before one head, or a pass cut between its head and the counter
// on a store without transactions) is raised to it at its first use in a
// process (wire.SequenceConfig.PassHead), and by the next pass.

// The hooks of packages sequence and numbering the vault reads through.
type (
	sequenceHeadFunc   = func(plain []byte) (uint64, error)
	sequenceRaiseFunc  = func(plain []byte, to uint64) ([]byte, error)
	numberingGivenFunc = func(b deferred.Backend, series string, get func(key string) (stores.Item, error)) (uint64, error)
	sequenceKeyFunc    = func(prefix, series string, partition []string) (string, error)
)

// counterKey is the key of the unpartitioned counter of series.
func (v *Vault) counterKey(series string) string { return v.prefix + "_sequences/" + series }

// counterKeyOf is the key of the counter of series and partition (a
// period's label, for the passes of a period).
func (v *Vault) counterKeyOf(series string, partition []string) (string, error) {
	if len(partition) == 0 {
		return v.counterKey(series), nil
	}
	return wire.Hook[sequenceKeyFunc]("SequenceCounterKey", wire.SequenceCounterKey)(v.prefix, series, partition)
}

// counterHead returns the head of the counter of series and partition (0
// when it has none), read with get.
func (v *Vault) counterHead(series string, partition []string, get func(key string) (stores.Item, error)) (uint64, error) {
	key, err := v.counterKeyOf(series, partition)
	if err != nil {
		return 0, err
	}
	it, err := get(key)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return v.openCounterHead(key, it.Value)
}

// openCounterHead opens and decodes the counter value sealed at key.
func (v *Vault) openCounterHead(key string, sealed []byte) (uint64, error) {
	p, err := v.seal.Open(key, sealed)
	if err != nil {
		return 0, fmt.Errorf("open counter: %w", err)
	}
	n, err := wire.Hook[sequenceHeadFunc]("SequenceHead", wire.SequenceHead)(p)
	if err != nil {
		return 0, fmt.Errorf("decode counter: %w", err)
	}
	return n, nil
}

// passHead returns the last number the passes of series gave (their
// head; 0 when none), read with plain reads (wire.SequenceConfig.PassHead).
func (v *Vault) passHead(ctx context.Context, series string) (uint64, error) {
	given := wire.Hook[numberingGivenFunc]("NumberingGiven", wire.NumberingGiven)
	return given(deferred.Backend{Store: v.store, Sealer: v.seal, Prefix: v.prefix}, series,
		func(key string) (stores.Item, error) { return v.store.Get(ctx, key) })
}

// raiseCounter raises the unpartitioned counter of series to to
// (deferred.Backend.Raise): in tx, from from (a counter at another value
// is deferred.ErrCounterMoved, and nothing is written); with tx nil, from
// whatever it is at, by compare-and-swap, unless it is at or above to.
func (v *Vault) raiseCounter(ctx context.Context, tx stores.Tx, series string, partition []string, from, to uint64) error {
	key, err := v.counterKeyOf(series, partition)
	if err != nil {
		return err
	}
	if tx != nil {
		return v.raiseCounterOnce(tx.Get, tx.Put, nil, key, series, &from, to)
	}
	for range raiseAttempts {
		err = v.raiseCounterOnce(func(key string) (stores.Item, error) { return v.store.Get(ctx, key) }, nil,
			func(key string, ver uint64, value []byte) error {
				_, err := v.store.CompareAndSwap(ctx, key, ver, value)
				return err
			}, key, series, nil, to)
		if !errors.Is(err, stores.ErrConflict) {
			return err
		}
	}
	return err
}

// raiseAttempts bounds the compare-and-swaps of a raise that keeps losing
// to writers of the counter (each of which moved it up).
const raiseAttempts = 16

// raiseCounterOnce reads the counter of series with get and raises it to
// to, writing with put (in a transaction) or cas: when from is set, only
// from it (else deferred.ErrCounterMoved); otherwise unless it is at or
// above to.
func (v *Vault) raiseCounterOnce(get func(string) (stores.Item, error), put func(string, []byte) error,
	cas func(string, uint64, []byte) error, key, series string, from *uint64, to uint64) error {
	it, err := get(key)
	var plain []byte
	switch {
	case errors.Is(err, stores.ErrNotFound):
		it.Version = 0
	case err != nil:
		return err
	default:
		if plain, err = v.seal.Open(key, it.Value); err != nil {
			return fmt.Errorf("open counter: %w", v.openFailed(err))
		}
	}
	cur := uint64(0)
	if plain != nil {
		if cur, err = wire.Hook[sequenceHeadFunc]("SequenceHead", wire.SequenceHead)(plain); err != nil {
			return fmt.Errorf("decode counter: %w", err)
		}
	}
	if from != nil && cur != *from {
		return fmt.Errorf("counter %q is at %d, not %d: %w", series, cur, *from, deferred.ErrCounterMoved)
	}
	raised, err := wire.Hook[sequenceRaiseFunc]("SequenceRaise", wire.SequenceRaise)(plain, to)
	if err != nil || raised == nil {
		return err
	}
	sealed, err := v.seal.Seal(key, raised)
	if err != nil {
		return err
	}
	if put != nil {
		return put(key, sealed)
	}
	return cas(key, it.Version, sealed)
}
