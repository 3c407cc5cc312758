package faultstore_test

import (
	"testing"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/storetest"
)

// Without faults the wrapper is a faithful store, with or without its Transactor.
func TestConformance(t *testing.T) {
	t.Run("tx", func(t *testing.T) {
		storetest.Run(t, func(*testing.T) stores.Store { return faultstore.New(memstore.New(), faultstore.Options{}) })
	})
	t.Run("cas", func(t *testing.T) {
		storetest.Run(t, func(*testing.T) stores.Store {
			return faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true})
		})
	})
}
