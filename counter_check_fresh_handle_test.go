package noydb_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// An Update whose function makes its sequence handle on each run (a
// fresh v.Sequence, or q.At(date) for a series with periods, as the
// documentation shows) while another process moves the ledger all the
// time raises no error: the check against the ledger that another
// writer's move asks for is made once per counter and Update, whatever
// handle names the counter. The numbers are exactly 1..N.
func TestUpdateWithAFreshSequenceHandleEachRunUnderABusyLedger(t *testing.T) {
	date := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	handles := map[string]func(v *vault.Vault) (*sequence.Sequence, error){
		"Sequence": func(v *vault.Vault) (*sequence.Sequence, error) {
			return v.Sequence("invoice", sequence.Options{})
		},
		"At": func(v *vault.Vault) (*sequence.Sequence, error) {
			q, err := v.Sequence("yearly", sequence.Options{Period: sequence.PeriodYear})
			if err != nil {
				return nil, err
			}
			return q.At(date), nil
		},
	}
	for name, newStore := range memAndBadger() {
		for how, handle := range handles {
			t.Run(how+"/"+name, func(t *testing.T) { freshHandleEachRun(t, newStore, handle) })
		}
	}
}

func freshHandleEachRun(t *testing.T, newStore func(testing.TB) stores.Store, handle func(v *vault.Vault) (*sequence.Sequence, error)) {
	ctx := context.Background()
	st := newStore(t)
	_, v1 := openSession(t, st, "")
	_, v2 := openSession(t, st, "")
	other := mustSeq(t, v2, "other")
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if _, err := other.Next(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	const n = 150
	got := make([]uint64, 0, n)
	for range n {
		var s sequence.Serial
		err := v1.Update(ctx, func(tx *vault.Tx) error {
			q, err := handle(v1)
			if err != nil {
				return err
			}
			s, err = tx.Next(q)
			return err
		})
		if err != nil {
			stop.Store(true)
			wg.Wait()
			require.NoError(t, err)
		}
		got = append(got, s.N)
	}
	stop.Store(true)
	wg.Wait()
	for i, g := range got {
		require.Equal(t, uint64(i+1), g)
	}
}
