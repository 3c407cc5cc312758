package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A vault's NextN takes its block in one commit with one ledger entry per
// number, even at MaxNextN on the longest series name and a long partition;
// the audit accounts for every number and the ledger verifies.
func TestVaultNextNBlock(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "books")
	series := strings.Repeat("s", sequence.MaxSeriesLen)
	q, err := v.Sequence(series, sequence.Options{Partition: []any{strings.Repeat("p", 200), 2026}})
	require.NoError(t, err)
	before, err := v.Audit().Head(ctx)
	require.NoError(t, err)

	first, err := q.NextN(ctx, sequence.MaxNextN)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), first)
	n, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(sequence.MaxNextN+1), n)

	after, err := v.Audit().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, before.Seq+sequence.MaxNextN+1, after.Seq, "one ledger entry per number")
	rep, err := q.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(sequence.MaxNextN+1), rep.Head)
	assert.Equal(t, sequence.MaxNextN+1, rep.Unbound)
	assert.Zero(t, rep.Missing)
	vr, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, vr.OK())
}
