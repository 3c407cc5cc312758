package memstore_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
)

// TestListOrderAfterMixedWrites: List yields every key under its prefix in
// order whatever mix of new keys (in and out of order), rewrites and
// deletes came between two lists, which the store sorts in only as it
// must.
func TestListOrderAfterMixedWrites(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	st := memstore.New()
	want := map[string]bool{}
	for round := range 300 {
		for range r.IntN(20) {
			var k string
			switch r.IntN(4) {
			case 0: // increasing, as a ledger appends
				k = fmt.Sprintf("l/%08d", round*100+len(want))
			case 1:
				if len(want) > 0 {
					keys := slices.Sorted(maps.Keys(want))
					k = keys[r.IntN(len(keys))]
					require.NoError(t, st.Delete(ctx, k))
					delete(want, k)
					continue
				}
				fallthrough
			default:
				k = fmt.Sprintf("%c/%d", 'a'+r.IntN(20), r.IntN(500))
			}
			_, err := st.Put(ctx, k, []byte{1})
			require.NoError(t, err)
			want[k] = true
		}
		var got []string
		for it, err := range st.List(ctx, "") {
			require.NoError(t, err)
			got = append(got, it.Key)
		}
		require.Equal(t, slices.Sorted(maps.Keys(want)), got, "round %d", round)
	}
}
