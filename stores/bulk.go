package stores

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
)

// Bulk paths. Local-first sync moves many records at a time between a
// device's store and a hub's: it reads a change feed from a device's cursor,
// fetches the records the feed names, and writes them in large
// transactions. Three optional interfaces let a store do each of these in
// few steps; the functions ListAfter and GetMany use them when a store has
// them and fall back on the Store methods otherwise, so callers need not
// care which stores implement what.
//
// A store that wraps another (to add timeouts, faults or counters) keeps
// the fast paths of the store it wraps by implementing RangeLister and
// MultiGetter with these functions on the inner store: they use the inner
// store's methods when it has them and fall back otherwise. A wrapper that
// does not loses them silently: the answers stay right, but a ListAfter
// through it lists the whole prefix.

// RangeLister is implemented by stores that can start a listing after a
// given key without reading the keys before it, such as a feed's entries
// after a device's cursor: the cost of the read then depends on what it
// yields, not on how many keys sort before after.
type RangeLister interface {
	// ListAfter is List(ctx, prefix) without the keys less than or equal
	// to after: it yields the items whose keys start with prefix and sort
	// strictly after after, in ascending key order, under the same terms
	// as List (an error ends the sequence, the loop body may use the
	// store, and it need not be a snapshot). after need not exist, nor
	// start with prefix; an empty after lists the whole prefix.
	ListAfter(ctx context.Context, prefix, after string) iter.Seq2[Item, error]
}

// MultiGetter is implemented by stores that can read many keys in one step,
// such as pgstore, where each Get is a round trip to the server. It only
// reads: unlike Prefetcher it takes no locks, so it suits a read outside any
// transaction, such as fetching the records a change feed names.
type MultiGetter interface {
	// GetMany returns the items of the keys that exist, in ascending key
	// order, each once: missing keys are left out, and keys may be given
	// in any order, duplicates included. An invalid key returns
	// ErrInvalidKey and reads nothing. The items need not be one snapshot
	// when keys is large (a store may read them in several steps); each
	// item is a value its key held during the call.
	GetMany(ctx context.Context, keys []string) ([]Item, error)
}

// TxLimits says how much one transaction of a store may write. A
// transaction whose writes stay within both bounds is never refused for
// its size; a larger one may fail with an error wrapping ErrTooLarge,
// having written nothing. Each Put or Delete of a key counts once, even
// when the transaction writes that key again.
type TxLimits struct {
	// MaxWrites is the most writes one transaction may make.
	MaxWrites int
	// MaxBytes bounds the sum, over the transaction's writes, of
	// len(key)+len(value)+WriteOverhead (a Delete has no value).
	MaxBytes int
	// WriteOverhead is what each write counts for beyond its key and value.
	WriteOverhead int
}

// Fits reports whether a transaction making writes writes whose keys and
// values add up to size bytes stays within l.
func (l TxLimits) Fits(writes, size int) bool {
	return writes <= l.MaxWrites && size+writes*l.WriteOverhead <= l.MaxBytes
}

// TxSizer is implemented by Transactors that refuse transactions above a
// size, such as badgerstore (whose limits come from badger's memtable
// size), so that a caller writing a large batch atomically can split it into
// transactions that fit beforehand, rather than try and halve on
// ErrTooLarge. A Transactor that does not implement it states no limit; a
// caller then keeps the ErrTooLarge fallback.
type TxSizer interface {
	// TxLimits reports the store's limits; they do not change while the
	// store is open.
	TxLimits() TxLimits
}

// ListAfter yields the items of st whose keys start with prefix and sort
// after after, in ascending key order. It calls st's ListAfter when st is a
// RangeLister, or else lists the whole prefix and skips the keys up to
// after. An item that breaks the order, repeats a key, or lies outside the
// asked range ends the sequence with an error wrapping ErrMisbehaving,
// and nothing is trusted from that answer.
func ListAfter(ctx context.Context, st Store, prefix, after string) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		var seq iter.Seq2[Item, error]
		rl, ranged := st.(RangeLister)
		if ranged {
			seq = rl.ListAfter(ctx, prefix, after)
		} else {
			seq = st.List(ctx, prefix)
		}
		prev, first := "", true
		for it, err := range seq {
			if err == nil {
				err = CheckListed(prefix, it.Key)
			}
			if err == nil && !first && it.Key <= prev {
				err = fmt.Errorf("list %q yielded key %q after %q: %w", prefix, it.Key, prev, ErrMisbehaving)
			}
			if err != nil {
				yield(Item{}, err)
				return
			}
			prev, first = it.Key, false
			if it.Key <= after {
				if ranged {
					yield(Item{}, fmt.Errorf("list %q after %q yielded key %q: %w", prefix, after, it.Key, ErrMisbehaving))
					return
				}
				continue
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}

// GetMany returns the items of the keys of st that exist, in ascending key
// order, each once (see MultiGetter). It calls st's GetMany when st is a
// MultiGetter, or else Gets the keys one at a time. An answer holding a key
// that was not asked for, or a key twice, or keys out of order, returns an
// error wrapping ErrMisbehaving.
func GetMany(ctx context.Context, st Store, keys []string) ([]Item, error) {
	for _, key := range keys {
		if err := CheckKey(key); err != nil {
			return nil, err
		}
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	want = slices.Compact(want)
	if mg, ok := st.(MultiGetter); ok {
		items, err := mg.GetMany(ctx, keys)
		if err != nil {
			return nil, err
		}
		if err := checkGotMany(want, items); err != nil {
			return nil, err
		}
		return items, nil
	}
	var items []Item
	for _, key := range want {
		it, err := st.Get(ctx, key)
		switch {
		case err == nil:
			if it.Key != key {
				return nil, fmt.Errorf("get %q returned key %q: %w", key, it.Key, ErrMisbehaving)
			}
			items = append(items, it)
		case errors.Is(err, ErrNotFound):
		default:
			return nil, err
		}
	}
	return items, nil
}

// checkGotMany checks that items are distinct keys of want (sorted and
// distinct), in ascending order.
func checkGotMany(want []string, items []Item) error {
	j := 0
	for _, it := range items {
		for j < len(want) && want[j] < it.Key {
			j++
		}
		if j == len(want) || want[j] != it.Key {
			return fmt.Errorf("get many returned key %q out of order, twice or not asked for: %w", it.Key, ErrMisbehaving)
		}
		j++
	}
	return nil
}
