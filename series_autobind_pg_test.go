package noydb_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// TestFirstNumberedRecordsBindWithoutDeadlocksPG: on PostgreSQL, an
// owner's handle numbers first records of new series in a collection (each
// binding its series in the record's commit: PutNumbered, and
// PutNumbered in an Update) while another handle binds other series to
// the same collection (BindSeries). No transaction deadlocks, every
// record is there, a person limited to the collection numbers every
// series, and the ledger verifies.
func TestFirstNumberedRecordsBindWithoutDeadlocksPG(t *testing.T) {
	ctx := context.Background()
	st := &deadlockCounter{Store: pgtest.Open(t, nil)}
	first := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, first.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"))
	second := openPerson(t, personCfg(st, "olga", "o"))
	const rounds = 12
	build := func(s sequence.Serial) (Customer, error) { return Customer{No: s.Formatted}, nil }
	var wg sync.WaitGroup
	wg.Go(func() {
		customers := vault.CollectionOf[Customer](first, "customers")
		for i := range rounds {
			q, err := first.Sequence(fmt.Sprintf("put-%02d", i), sequence.Options{})
			if !assert.NoError(t, err) {
				return
			}
			_, err = customers.PutNumbered(ctx, fmt.Sprintf("p-%02d", i), q, build)
			if !assert.NoError(t, err, "put numbered") {
				return
			}
		}
	})
	wg.Go(func() {
		customers := vault.CollectionOf[Customer](first, "customers")
		for i := range rounds {
			q, err := first.Sequence(fmt.Sprintf("upd-%02d", i), sequence.Options{})
			if !assert.NoError(t, err) {
				return
			}
			err = first.Update(ctx, func(tx *vault.Tx) error {
				_, err := customers.In(tx).PutNumbered(fmt.Sprintf("u-%02d", i), q, build)
				return err
			})
			if !assert.NoError(t, err, "update") {
				return
			}
		}
	})
	wg.Go(func() {
		for i := range rounds {
			if !assert.NoError(t, second.BindSeries(ctx, "customers", fmt.Sprintf("bound-%02d", i)), "bind") {
				return
			}
		}
	})
	wg.Wait()
	t.Logf("deadlocks: %d", st.deadlocks.Load())
	assert.Zero(t, st.deadlocks.Load(), "transactions PostgreSQL ended as deadlocked")
	wanda := openPerson(t, personCfg(st, "wanda", "w"))
	for i := range rounds {
		for _, s := range []string{"put-%02d", "upd-%02d", "bound-%02d"} {
			q, err := wanda.Sequence(fmt.Sprintf(s, i), sequence.Options{})
			require.NoError(t, err)
			_, err = q.Next(ctx)
			assert.NoError(t, err, s, i)
		}
	}
	n, err := vault.CollectionOf[Customer](first, "customers").Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*rounds, n)
	verified(t, first)
}
