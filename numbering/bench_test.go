package numbering_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/filestore"
)

// BenchmarkRunPass measures one pass over n pending records on the file
// store and on badger, durable (fsync on every write) or not, and reports
// records/s; compare 10k with 100k for linear growth. Setting up 100k
// pending records takes minutes on the file store, so run one at a time:
//
//	go test -run '^$' -bench 'RunPass/file-nosync/10k' -benchtime 1x ./numbering/
//
// On badger, 10k is not a fair baseline: its whole data set fits in
// badger's 64 MiB memtable, so every read is a skiplist lookup, while at
// 100k badger has flushed tables to disk and the pass's point reads seek
// and decompress table blocks (and memtable flushes run during the pass).
// That costs a quarter to a third more per record; forcing flushes at 10k
// (an 8 MiB memtable) gives the 100k rate. The pass itself lists nothing per
// step and reads each record a fixed number of times.
func BenchmarkRunPass(b *testing.B) {
	kinds := []struct {
		name string
		open func(tb testing.TB, dir string) stores.Store
	}{
		{"file-nosync", func(tb testing.TB, dir string) stores.Store { return openFileStore(tb, dir) }},
		{"file-sync", func(tb testing.TB, dir string) stores.Store {
			st, err := filestore.Open(dir, nil)
			require.NoError(tb, err)
			tb.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"badger-nosync", func(tb testing.TB, dir string) stores.Store { return openBadger(tb, dir, true) }},
		{"badger-sync", func(tb testing.TB, dir string) stores.Store { return openBadger(tb, dir, false) }},
	}
	for _, kind := range kinds {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%dk", kind.name, n/1000), func(b *testing.B) {
				var total time.Duration
				for range b.N {
					b.StopTimer()
					dir := b.TempDir()
					d := openDevice(b, "till", kind.open(b, dir), receiptOpts)
					ids := make([]string, n)
					for i := range ids {
						ids[i] = fmt.Sprintf("r-%06d", i)
					}
					require.NoError(b, d.writeMany(ids))
					b.StartTimer()
					start := time.Now()
					rep, err := d.series.RunPass(context.Background())
					total += time.Since(start)
					require.NoError(b, err)
					require.Equal(b, n, rep.Assigned)
				}
				b.ReportMetric(float64(n*b.N)/total.Seconds(), "records/s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func openBadger(tb testing.TB, dir string, noSync bool) stores.Store {
	tb.Helper()
	st, err := badgerstore.Open(dir, &badgerstore.Options{NoSync: noSync})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	return st
}
