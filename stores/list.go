package stores

import (
	"context"
	"iter"
)

// ListUnder is st.List(ctx, prefix) for callers that slice the prefix off
// the listed keys: a key outside prefix, which a store that breaks its
// contract may yield, ends the sequence with an error wrapping
// ErrMisbehaving (see CheckListed) instead of reaching the caller.
func ListUnder(ctx context.Context, st Store, prefix string) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		for it, err := range st.List(ctx, prefix) {
			if err == nil {
				err = CheckListed(prefix, it.Key)
			}
			if err != nil {
				yield(Item{}, err)
				return
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}
