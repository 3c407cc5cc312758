package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// TestTxWritesCutIntoStatements: a transaction's recorded puts travel as
// multi-row upserts of at most 64 MiB each, in key order, because the
// protocol carries one statement's parameters in one message of at most
// 1 GiB: a transaction (a ledger batch of 256 callers) putting 256 values of
// 4 MiB must still commit. 17 values of 4 MiB go as two statements.
func TestTxWritesCutIntoStatements(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	sent := pgstore.CountTransactions(s)
	const n = 17 // 17 × 4 MiB > 64 MiB
	key := func(i int) string { return fmt.Sprintf("big/%02d", i) }
	value := make([]byte, stores.MaxValueLen)
	require.NoError(t, s.Update(ctx, func(tx stores.Tx) error {
		for i := n - 1; i >= 0; i-- {
			value[0] = byte(i)
			if err := tx.Put(key(i), value); err != nil {
				return err
			}
		}
		return nil
	}))
	statements, roundTrips := sent()
	assert.Equal(t, int64(4), statements, "BEGIN, two upserts, COMMIT")
	assert.Equal(t, int64(1), roundTrips)
	for i := range n {
		it, err := s.Get(ctx, key(i))
		require.NoError(t, err, key(i))
		assert.Len(t, it.Value, stores.MaxValueLen, key(i))
		assert.Equal(t, byte(i), it.Value[0], key(i))
	}
}
