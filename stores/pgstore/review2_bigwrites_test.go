package pgstore_test

// Review (issue 11): a transaction's recorded puts are sent as one multi-row
// upsert. Every value may be up to stores.MaxValueLen, and the protocol
// carries one statement's parameters in one message of at most 1 GiB, so a
// transaction that puts 256 values of 4 MiB, which wrote them one statement
// each before, must still commit: the puts have to travel as several
// statements. In the ledger such a batch (maxBatchUpdates is 256) failed as
// a whole at its commit, every caller with it, instead of being split.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

func TestReview2TxWritesOverOneMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB to the server; CI runs it")
	}
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	const n = 257 // 257 × 4 MiB > the 1 GiB a protocol message may hold
	key := func(i int) string { return fmt.Sprintf("big/%03d", i) }
	value := make([]byte, stores.MaxValueLen)
	err := s.Update(ctx, func(tx stores.Tx) error {
		for i := range n {
			value[0], value[len(value)-1] = byte(i), byte(i>>8)
			if err := tx.Put(key(i), value); err != nil { // Put copies value
				return err
			}
		}
		return nil
	})
	require.NoError(t, err, "a transaction of %d values of MaxValueLen", n)

	versions := map[uint64]bool{}
	for i := range n {
		it, err := s.Get(ctx, key(i))
		require.NoError(t, err, key(i))
		if assert.Len(t, it.Value, stores.MaxValueLen, key(i)) {
			assert.Equal(t, []byte{byte(i), byte(i >> 8)}, []byte{it.Value[0], it.Value[len(it.Value)-1]}, key(i))
		}
		assert.False(t, versions[it.Version], "%s: version %d given twice", key(i), it.Version)
		versions[it.Version] = true
	}
}
