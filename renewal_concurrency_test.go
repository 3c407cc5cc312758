package noydb_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// TestRenewalWhileTheHandleWrites: bob's handle takes numbers from eight
// goroutines while it changes bob's secret, which renews his signing key.
// The numbers given are each given once, from 1 with none skipped, the
// commits around the renewal are signed by the key that held at their
// position (the ledger verifies: none signed by the old key after the
// renewal, none by the new one before it), and the handle takes numbers
// with the new key after. No call fails because of the renewal: its
// commits wait for it outside their transactions, however long the
// renewal's commit takes (a durable store's).
func TestRenewalWhileTheHandleWrites(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			seq, err := bob.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			const workers, each = 8, 40
			var (
				mu  sync.Mutex
				got []uint64
				wg  sync.WaitGroup
			)
			start := make(chan struct{})
			for range workers {
				wg.Go(func() {
					<-start
					for range each {
						s, err := seq.Next(ctx)
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						got = append(got, s)
						mu.Unlock()
					}
				})
			}
			close(start)
			require.NoError(t, bob.ChangeSecret(ctx, []byte("b"), []byte("b2")))
			wg.Wait()
			s, err := seq.Next(ctx)
			require.NoError(t, err)
			got = append(got, s)
			require.Len(t, got, workers*each+1, "every call took a number")
			want := make([]uint64, len(got))
			for i := range want {
				want[i] = uint64(i + 1)
			}
			assert.ElementsMatch(t, want, got, "every number once, none skipped")
			verified(t, olga)
			verified(t, openPerson(t, personCfg(st, "bob", "b2")))
		})
	}
}
