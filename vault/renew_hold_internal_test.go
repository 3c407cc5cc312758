package vault

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// holdKey marks the context of the call whose transactions holdingStore
// holds.
type holdKey struct{}

// holdingStore is a store whose transactions begun under a context marked
// with holdKey wait, before they begin, until release is closed: a renewal
// whose commit is slow (a durable store's, a hub's). It counts the other
// transactions begun while one waits.
type holdingStore struct {
	stores.Store
	tr      stores.Transactor
	release chan struct{}
	waiting atomic.Bool
	others  atomic.Int64
	many    chan struct{} // closed once others reaches manyOthers
	once    sync.Once
}

// manyOthers is more transactions than one commit's retry budget.
const manyOthers = 17

func newHoldingStore(st stores.Store) *holdingStore {
	return &holdingStore{Store: st, tr: st.(stores.Transactor), release: make(chan struct{}), many: make(chan struct{})}
}

func (s *holdingStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if ctx.Value(holdKey{}) != nil {
		s.waiting.Store(true)
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.waiting.Store(false)
	} else if s.waiting.Load() && s.others.Add(1) == manyOthers {
		s.once.Do(func() { close(s.many) })
	}
	return s.tr.Update(ctx, fn)
}

// TestRenewalHoldsTheHandlesCommitsOutsideThem: bob's handle takes numbers
// from four goroutines while it changes bob's secret, and the store holds
// the renewal's commit until one of the handle's commits was held back by
// it, or until the others began more transactions than one commit's retry
// budget (as they did when they retried through the renewal). No number
// fails: the commits wait for the renewal outside their transactions,
// with their whole budget after it; the numbers are 1..n, each once, and
// the ledger verifies (none signed by the old key after the renewal).
func TestRenewalHoldsTheHandlesCommitsOutsideThem(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			st := newHoldingStore(newStore(t))
			olga := openSigning(t, signingCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "bob", Secret([]byte("b")), RoleWriter))
			bob := openSigning(t, signingCfg(st, "bob", "b"))
			held := make(chan struct{})
			var heldOnce sync.Once
			bob.me.onHold = func() { heldOnce.Do(func() { close(held) }) }
			go func() {
				select {
				case <-held:
				case <-st.many:
				}
				close(st.release)
			}()
			seq, err := bob.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			var (
				mu   sync.Mutex
				got  []uint64
				wg   sync.WaitGroup
				fail atomic.Int64
			)
			renewed := make(chan struct{})
			for range 4 {
				wg.Go(func() {
					for n := 0; ; n++ {
						select {
						case <-renewed:
							if n >= 3 {
								return
							}
						default:
						}
						s, err := seq.Next(ctx)
						if err != nil {
							fail.Add(1)
							assert.NoError(t, err)
							return
						}
						mu.Lock()
						got = append(got, s)
						mu.Unlock()
					}
				})
			}
			err = bob.ChangeSecret(context.WithValue(ctx, holdKey{}, true), []byte("b"), []byte("b2"))
			close(renewed)
			wg.Wait()
			require.NoError(t, err)
			assert.Zero(t, fail.Load(), "no number fails because of the renewal")
			select {
			case <-held:
			default:
				t.Error("no commit waited for the renewal")
			}
			s, err := seq.Next(ctx)
			require.NoError(t, err)
			got = append(got, s)
			want := make([]uint64, len(got))
			for i := range want {
				want[i] = uint64(i + 1)
			}
			assert.ElementsMatch(t, want, got, "every number once, none skipped")
			for _, v := range []*Vault{olga, openSigning(t, signingCfg(st, "bob", "b2"))} {
				_, err := v.Audit().Verify(ctx)
				assert.NoError(t, err)
			}
		})
	}
}
