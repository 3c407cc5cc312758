package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// TestSyncFigures measures the figures of issue 13 on a PostgreSQL hub and
// badger devices: a push of N changed records, the first pull of them on a
// fresh device, and an incremental sync of 10 changes. It is a measurement,
// not a proof, so it runs only with NOYDB_SYNC_FIGURES=N set (records of
// 1 KiB), under scripts/with-postgres. With NOYDB_SYNC_FIGURES_DEVICE=folder
// the devices are file folders (filestore, with fsync) instead.
func TestSyncFigures(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NOYDB_SYNC_FIGURES"))
	if n <= 0 {
		t.Skip("a measurement: set NOYDB_SYNC_FIGURES=<records> to run it")
	}
	ctx := context.Background()
	hub := pgtest.Open(t, nil)
	newBadger := func() stores.Store {
		if os.Getenv("NOYDB_SYNC_FIGURES_DEVICE") == "folder" {
			st, err := filestore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		}
		st, err := badgerstore.Open(t.TempDir(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a := syncDevice(t, newBadger(), hub)
	na := vault.CollectionOf[Note](a, "notes")
	body := strings.Repeat("x", 1000)
	for start := 0; start < n; start += 1000 {
		batch := map[string]Note{}
		for i := start; i < min(n, start+1000); i++ {
			batch[fmt.Sprintf("r%07d", i)] = Note{body}
		}
		if err := na.PutMany(ctx, batch); errors.Is(err, stores.ErrNotSupported) {
			for id, note := range batch { // a file folder: one at a time
				require.NoError(t, na.Put(ctx, id, note))
			}
		} else {
			require.NoError(t, err)
		}
	}
	t0 := time.Now()
	rep := mustSync(t, a)
	push := time.Since(t0)
	require.Equal(t, n, rep.Pushed)

	b := syncDevice(t, newBadger(), hub)
	t0 = time.Now()
	rep = mustSync(t, b)
	pull := time.Since(t0)
	require.Equal(t, n, rep.Pulled)

	for i := range 10 {
		require.NoError(t, na.Put(ctx, fmt.Sprintf("r%07d", i), Note{"changed"}))
	}
	t0 = time.Now()
	rep = mustSync(t, a)
	incPush := time.Since(t0)
	require.Equal(t, 10, rep.Pushed)
	t0 = time.Now()
	rep = mustSync(t, b)
	incPull := time.Since(t0)
	require.Equal(t, 10, rep.Pulled)
	t.Logf("%d records of 1 KiB: push %v (%.0f records/s), first pull %v (%.0f records/s); 10 changes: push %v, pull %v",
		n, push, float64(n)/push.Seconds(), pull, float64(n)/pull.Seconds(), incPush, incPull)
}
