package noydb_test

import (
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// TestSyncPostgresHub: the two-device scenario, on memstore and badger
// devices and on a file-folder device with a badger one, the same record
// changed on a folder and a badger device, and convergence schedules of
// three devices (one on a file folder in some), with a PostgreSQL hub
// (run under scripts/with-postgres).
func TestSyncPostgresHub(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run("two devices/"+name, func(t *testing.T) {
			twoDevicesConverge(t, pgtest.Open(t, nil), newStore(t), newStore(t))
		})
	}
	t.Run("two devices/filestore and badgerstore", func(t *testing.T) {
		twoDevicesConverge(t, pgtest.Open(t, nil), newFolder(t), memAndBadger()["badgerstore"](t))
	})
	t.Run("same record on both/filestore and badgerstore", func(t *testing.T) {
		sameRecordOnBoth(t, pgtest.Open(t, nil), newFolder(t), memAndBadger()["badgerstore"](t))
	})
	t.Run("convergence schedules with a file folder", func(t *testing.T) {
		convergenceSchedules(t, 10, func() stores.Store { return pgtest.Open(t, nil) }, func(i int) stores.Store {
			if i == 0 {
				return newFolder(t)
			}
			return memstore.New()
		})
	})
	t.Run("convergence schedules", func(t *testing.T) {
		convergenceSchedules(t, 30, func() stores.Store { return pgtest.Open(t, nil) }, func(int) stores.Store { return memstore.New() })
	})
}
