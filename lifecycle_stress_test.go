package noydb_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
)

// Goroutines open a vault, take numbers, close it with its own Close and
// forget it, all at once on one DB with a state folder: no call hangs or
// panics, every failure is one of the documented ones, and no number is
// taken twice; afterwards the numbers taken are exactly 1..N.
func TestOpenCloseForgetInterleaved(t *testing.T) {
	const workers, rounds = 6, 30
	ctx := context.Background()
	db := openWithState(t, memstore.New(), t.TempDir())
	var mu sync.Mutex
	taken := map[uint64]int{}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range rounds {
				v, err := db.OpenVault(ctx, "books")
				if !assert.NoError(t, err) {
					return
				}
				seq, err := v.Sequence("inv", sequence.Options{})
				require.NoError(t, err)
				n, err := seq.Next(ctx)
				switch {
				case err == nil:
					mu.Lock()
					taken[n]++
					mu.Unlock()
				case errors.Is(err, noydb.ErrClosed):
				default:
					t.Errorf("next: %v", err)
				}
				switch (g + i) % 3 {
				case 0:
					assert.NoError(t, v.Close())
				case 1:
					// Refused while the vault is open or closing anywhere in
					// the process; a nil error forgot it.
					_ = db.ForgetVault(ctx, "books")
				}
			}
		})
	}
	wg.Wait()
	v, err := db.OpenVault(ctx, "books")
	require.NoError(t, err)
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	top, err := seq.Peek(ctx)
	require.NoError(t, err)
	require.Len(t, taken, int(top), "every number taken was returned once")
	for n := uint64(1); n <= top; n++ {
		assert.Equal(t, 1, taken[n], "number %d", n)
	}
	require.NoError(t, db.Close())
	_, err = db.OpenVault(ctx, "books")
	assert.ErrorIs(t, err, noydb.ErrClosed)
}
