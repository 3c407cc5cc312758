package noydb_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// TestUpdateLockOrderCollectionsBelowReserved: a vault.Update writing
// records of collections whose names sort below '_' (uppercase letters,
// digits: their keys sort below the current generation's) locks its keys
// in ascending order, as a plain Put of those collections does (see
// lockOrderStore for the model of pgstore's locks).
func TestUpdateLockOrderCollectionsBelowReserved(t *testing.T) {
	ctx := context.Background()
	st := &lockOrderStore{Store: memstore.New()}
	v := openPerson(t, personCfg(st, "olga", "o"))
	for _, name := range []string{"Notes", "2026", "notes"} {
		c := vault.CollectionOf[Note](v, name)
		require.NoError(t, c.Put(ctx, "a", Note{Text: "x"}))
		assert.Empty(t, st.outOfOrder(), "%s: Put: keys locked out of order", name)
		require.NoError(t, v.Update(ctx, func(tx *vault.Tx) error {
			if err := c.In(tx).Put("b", Note{Text: "y"}); err != nil {
				return err
			}
			return c.In(tx).Put("a", Note{Text: "z"})
		}))
		assert.Empty(t, st.outOfOrder(), "%s: vault.Update: keys locked out of order", name)
	}
}

// TestUpdateBelowReservedPGNoDeadlocks: on PostgreSQL, two handles of one
// vault (two processes, say) write the same records of collections named
// below '_' at once, over and over: one by plain Puts, the other by
// vault.Updates that write all of them (in descending id order) and number
// each with tx.Next. No transaction deadlocks; the numbers are exactly 1..N; every
// record reads; the ledger verifies.
func TestUpdateBelowReservedPGNoDeadlocks(t *testing.T) {
	ctx := context.Background()
	st := &deadlockCounter{Store: pgtest.Open(t, nil)}
	first := openPerson(t, personCfg(st, "olga", "o"))
	second := openPerson(t, personCfg(st, "olga", "o"))
	const (
		rounds = 60 // each writes the same records again
		width  = 4
	)
	seq, err := second.Sequence("Slips", sequence.Options{})
	require.NoError(t, err)
	var (
		mu  sync.Mutex
		got []uint64
		wg  sync.WaitGroup
	)
	for _, name := range []string{"Notes", "2026"} {
		puts, updates := vault.CollectionOf[Slip](first, name), vault.CollectionOf[Slip](second, name)
		wg.Go(func() {
			for r := range rounds {
				for i := range width {
					id := fmt.Sprintf("r-%d", i)
					if !assert.NoError(t, puts.Put(ctx, id, Slip{Text: fmt.Sprint("put ", r)}), "put") {
						return
					}
				}
			}
		})
		wg.Go(func() {
			for r := range rounds {
				var taken []uint64
				err := second.Update(ctx, func(tx *vault.Tx) error {
					taken = taken[:0]
					for i := width - 1; i >= 0; i-- {
						s, err := tx.Next(seq)
						if err != nil {
							return err
						}
						taken = append(taken, s.N)
						if err := updates.In(tx).Put(fmt.Sprintf("r-%d", i), Slip{No: s.N, Text: fmt.Sprint("update ", r)}); err != nil {
							return err
						}
					}
					return nil
				})
				if !assert.NoError(t, err, "update") {
					return
				}
				mu.Lock()
				got = append(got, taken...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	t.Logf("deadlocks: %d", st.deadlocks.Load())
	assert.Zero(t, st.deadlocks.Load(), "transactions PostgreSQL ended as deadlocked")
	want := make([]uint64, 2*rounds*width)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	assert.Equal(t, want, slices.Sorted(slices.Values(got)), "exactly 1..N")
	for _, name := range []string{"Notes", "2026"} {
		n := 0
		for _, err := range vault.CollectionOf[Slip](first, name).List(ctx) {
			if assert.NoError(t, err, name) {
				n++
			}
		}
		assert.Equal(t, width, n, "%s: every record reads", name)
	}
	for i, v := range []*vault.Vault{first, second} {
		rep, err := v.Audit().Verify(ctx)
		require.NoError(t, err, "handle %d", i)
		assert.NoError(t, rep.Problem, "handle %d", i)
	}
}
