package sequence_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
)

// checkOffline runs every allocating method against a store without atomic
// compare-and-swap: each fails with ErrOffline and nothing is written.
// Peek still works and reports want.
func checkOffline(t *testing.T, offline stores.Store, sealer sequence.Sealer, want uint64) {
	t.Helper()
	ctx := context.Background()
	before := listing(t, offline)
	svc := sequence.NewService(offline, sealer, "v/", sequence.Config{Journal: &journal{}})
	q := mustSequence(t, svc, "inv", sequence.Options{Format: "{seq:04}"})

	_, err := q.Next(ctx)
	assert.ErrorIs(t, err, sequence.ErrOffline, "Next")
	_, err = q.NextSerial(ctx)
	assert.ErrorIs(t, err, sequence.ErrOffline, "NextSerial")
	_, err = q.Claim(ctx, sequence.NewRequestID())
	assert.ErrorIs(t, err, sequence.ErrOffline, "Claim")
	assert.ErrorIs(t, q.SeedTo(ctx, 100), sequence.ErrOffline, "SeedTo")
	_, err = q.Bind(ctx, func(stores.Tx, sequence.Serial) error {
		t.Error("fn must not run")
		return nil
	})
	assert.ErrorIs(t, err, sequence.ErrOffline, "Bind")
	assert.ErrorIs(t, q.Void(ctx, 1, "x"), sequence.ErrOffline, "Void")
	assert.Equal(t, before, listing(t, offline), "nothing written")
	assert.Contains(t, err.Error(), `sequence "inv": bind: `)

	n, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, n, "Peek works on every store")
	_, voided, err := q.Voided(ctx, 1)
	require.NoError(t, err)
	assert.False(t, voided)
}

func TestOffline(t *testing.T) {
	ctx := context.Background()
	inner := newMem()
	sealer := newSealer()
	online := mustSequence(t, sequence.NewService(inner, sealer, "v/", sequence.Config{}), "inv")
	for range 3 {
		_, err := online.Next(ctx)
		require.NoError(t, err)
	}
	offline := faultstore.New(inner, faultstore.Options{NotCASAtomic: true})
	checkOffline(t, offline, sealer, 3)
	checkOffline(t, faultstore.New(newMem(), faultstore.Options{NotCASAtomic: true, HideTransactor: true}), sealer, 0)
}

func TestOfflineFilestore(t *testing.T) {
	fs, err := filestore.Open(t.TempDir(), &filestore.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	require.False(t, fs.Capabilities().CASAtomic)
	_, err = fs.Put(context.Background(), "other/record", []byte("x"))
	require.NoError(t, err)
	checkOffline(t, fs, newSealer(), 0)
}
