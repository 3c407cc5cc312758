package badgerstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// TxLimits is badger's own limit on disk, not a guess below it: one write
// more than MaxWrites, or a transaction of twice MaxBytes, is refused with
// ErrTooLarge and writes nothing. (The conformance suite checks that a
// transaction within the limits commits.)
func TestTxLimitsAreBadgers(t *testing.T) {
	st := open(t, t.TempDir(), &badgerstore.Options{NoSync: true})
	l := st.TxLimits()
	ctx := context.Background()
	writeN := func(prefix string, n int, value []byte) error {
		return st.Update(ctx, func(tx stores.Tx) error {
			for i := range n {
				if err := tx.Put(fmt.Sprintf("%s%07d", prefix, i), value); err != nil {
					return err
				}
			}
			return nil
		})
	}
	count := func(prefix string) int {
		n := 0
		for _, err := range st.List(ctx, prefix) {
			require.NoError(t, err)
			n++
		}
		return n
	}
	require.LessOrEqual(t, (l.MaxWrites+1)*(9+l.WriteOverhead), l.MaxBytes, "the count, not the bytes, is what a write too many breaks")
	err := writeN("w/", l.MaxWrites+1, nil)
	require.ErrorIs(t, err, stores.ErrTooLarge, "%d writes with limits %+v", l.MaxWrites+1, l)
	assert.Zero(t, count("w/"))

	n := 2 * l.MaxBytes / (64 << 10)
	err = writeN("b/", n, make([]byte, 64<<10))
	require.ErrorIs(t, err, stores.ErrTooLarge, "%d values of 64 KiB with limits %+v", n, l)
	assert.Zero(t, count("b/"))

	mem := open(t, "", &badgerstore.Options{InMemory: true})
	ml := mem.TxLimits()
	assert.Less(t, ml.MaxWrites, l.MaxWrites, "in memory a write is several entries")
	assert.Less(t, ml.MaxBytes, l.MaxBytes)
}
