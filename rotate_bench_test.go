package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// BenchmarkRotateReseal measures the re-sealing of a rotation on memstore:
// 50,000 records of about 60 bytes, each iteration one rotation (a new
// generation and all records re-sealed with their ledger entries). It
// reports records/s, and the longest gap between two progress calls.
//
//	go test -run '^$' -bench BenchmarkRotateReseal -benchtime 5x .
func BenchmarkRotateReseal(b *testing.B) {
	ctx := context.Background()
	v := openPerson(b, personCfg(memstore.New(), "olga", "o"))
	const n = 50000
	putNotes(b, v, n)
	var gap time.Duration
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		last := time.Now()
		rot, err := v.RotateKeys(ctx, vault.WithRotationProgress(func(vault.RotationProgress) {
			now := time.Now()
			gap = max(gap, now.Sub(last))
			last = now
		}))
		require.NoError(b, err)
		require.NoError(b, rot.Wait(ctx))
		require.Equal(b, uint64(n), rot.Progress().Done)
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "records/s")
	b.ReportMetric(gap.Seconds()*1000, "max-progress-gap-ms")
}
