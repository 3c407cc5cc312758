package vault

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
)

// One series name, one run of numbers. A series can be numbered at write
// time, by the sequence counter of its name (Sequence, Collection.PutNumbered,
// Numbered.Put on a store with transactions), or by the passes of the
// deferred-numbering series of its name (Numbered.Settle, numbering.Series):
// each counts on its own, so numbering one name both ways would give numbers
// twice. The vault refuses the second path with
// numbering.ErrNumberedAtWriteTime: a pass (and Enqueue) when the counter has
// taken numbers (deferred.Backend.Counter, asked in the batch's commit), and
// a write-time number when passes have given numbers (oneSeriesTx, asked in
// the transaction that raises the counter). Both lock the pass head before
// the counter, in key order, as PostgreSQL transactions of the vault lock
// their keys.

// The hooks of packages sequence and numbering the check reads through.
type (
	sequenceHeadFunc   = func(plain []byte) (uint64, error)
	numberingGivenFunc = func(b deferred.Backend, series string, get func(key string) (stores.Item, error)) (uint64, error)
)

// counterHead returns the head of the unpartitioned counter of series (0
// when it has none), read with get.
func (v *Vault) counterHead(series string, get func(key string) (stores.Item, error)) (uint64, error) {
	key := v.prefix + "_sequences/" + series
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

// oneSeriesTx is a transaction of the vault's sequences (ledgerBatch): a
// write that raises the unpartitioned counter of a series whose passes have
// given numbers fails with numbering.ErrNumberedAtWriteTime, so the
// transaction writes nothing.
type oneSeriesTx struct {
	stores.Tx
	v *Vault
}

// oneSeriesPrefetchTx is oneSeriesTx over a transaction that prefetches.
type oneSeriesPrefetchTx struct {
	oneSeriesTx
	p stores.Prefetcher
}

// Prefetch reads keys into the transaction (stores.Prefetcher).
func (t oneSeriesPrefetchTx) Prefetch(keys []string) error { return t.p.Prefetch(keys) }

// oneSeries wraps tx, a transaction of the vault's sequences, in a
// oneSeriesTx that keeps tx's stores.Prefetcher.
func (v *Vault) oneSeries(tx stores.Tx) stores.Tx {
	t := oneSeriesTx{Tx: tx, v: v}
	if p, ok := tx.(stores.Prefetcher); ok {
		return oneSeriesPrefetchTx{oneSeriesTx: t, p: p}
	}
	return t
}

// oneSeriesKeys returns keys, the keys a transaction of the vault's
// sequences reads, with the pass head of every unpartitioned counter among
// them, which oneSeriesTx reads when the counter rises: so it is locked
// with the others, in key order. keys is not changed.
func (v *Vault) oneSeriesKeys(keys []string) []string {
	counterOf := wire.Hook[counterOfFunc]("SequenceCounterOf", wire.SequenceCounterOf)
	out := keys
	for _, k := range keys {
		rel, ok := strings.CutPrefix(k, v.prefix)
		if !ok || !strings.HasPrefix(rel, "_sequences/") {
			continue
		}
		if series, part, ok, err := counterOf(rel); err == nil && ok && len(part) == 0 {
			if h := v.passHeadKey(series); !slices.Contains(out, h) {
				if len(out) == len(keys) {
					out = slices.Clone(keys)
				}
				out = append(out, h)
			}
		}
	}
	return out
}

// passHeadKey is the key of the head of the deferred-numbering series
// (package numbering's layout).
func (v *Vault) passHeadKey(series string) string {
	return v.prefix + "_numbering/" + series + "/head"
}

// Put checks a counter write, then writes.
func (t oneSeriesTx) Put(key string, value []byte) error {
	if err := t.check(key, value); err != nil {
		return err
	}
	return t.Tx.Put(key, value)
}

// check returns numbering.ErrNumberedAtWriteTime when key is the
// unpartitioned counter of a series, value raises its head, and the passes
// of that series have given numbers.
func (t oneSeriesTx) check(key string, value []byte) error {
	rel, ok := strings.CutPrefix(key, t.v.prefix)
	if !ok || !strings.HasPrefix(rel, "_sequences/") {
		return nil
	}
	counterOf := wire.Hook[counterOfFunc]("SequenceCounterOf", wire.SequenceCounterOf)
	series, part, ok, err := counterOf(rel)
	if err != nil || !ok || len(part) != 0 {
		return nil // not an unpartitioned counter: the sequence checks its own keys
	}
	// The pass head first: a series no pass numbered (the usual case) has
	// none, and then neither counter value needs opening.
	given := wire.Hook[numberingGivenFunc]("NumberingGiven", wire.NumberingGiven)
	last, err := given(deferred.Backend{Store: t.v.store, Sealer: t.v.seal, Prefix: t.v.prefix}, series, t.Tx.Get)
	if err != nil || last == 0 {
		return err
	}
	next, err := t.v.openCounterHead(key, value)
	if err != nil {
		return err
	}
	prev, err := t.v.counterHead(series, t.Tx.Get)
	if err != nil {
		return err
	}
	if next > prev {
		return fmt.Errorf("%w: the passes of series %q gave numbers up to %d; number it on one path",
			numbering.ErrNumberedAtWriteTime, series, last)
	}
	return nil
}
