package noydb_test

import (
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// TestSyncPostgresHub: the two-device scenario, on memstore and badger
// devices, and convergence schedules of three devices, with a PostgreSQL
// hub (run under scripts/with-postgres).
func TestSyncPostgresHub(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run("two devices/"+name, func(t *testing.T) {
			twoDevicesConverge(t, pgtest.Open(t, nil), newStore(t), newStore(t))
		})
	}
	t.Run("convergence schedules", func(t *testing.T) {
		convergenceSchedules(t, 30, func() stores.Store { return pgtest.Open(t, nil) }, func(int) stores.Store { return memstore.New() })
	})
}
