package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// TestPeopleLinksEveryAppendPath: people entries appended through every
// path (on a store with transactions, Update's batch with closures that
// fail among others and AppendTx in the caller's own transaction; on
// every store, Append and AppendFunc, whose derive fails or gives nothing
// among others) are linked so that a replay by links finds each one the
// replay of every entry finds, from a fresh ledger whose first commit
// holds one; the entries of a failed closure are in neither.
func TestPeopleLinksEveryAppendPath(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		tr, txs := st.(stores.Transactor)
		owner := signedOn(st, "olga", olga, nil)
		grant := func(name string) ledger.Entry {
			return ledger.Entry{Kind: ledger.PersonGranted, ID: name, Reason: "reader", SigningKey: rita.Public()}
		}
		// The first commit of a fresh ledger holds a people entry.
		if txs {
			require.NoError(t, owner.Update(ctx, func(tx stores.Tx) error {
				_, err := owner.AppendTx(ctx, tx, fact(1), grant("p0"))
				return err
			}))
		} else {
			_, err := owner.Append(ctx, fact(1), grant("p0"))
			require.NoError(t, err)
		}

		errRefused := errors.New("refused")
		const n = 24
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := 1; i <= n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("p%d", i)
				if !txs {
					switch i % 4 {
					case 0: // a derive that fails
						_, errs[i-1] = owner.AppendFunc(ctx, func(ledger.Head) ([]ledger.Entry, error) { return nil, errRefused })
					case 2: // a derive that gives nothing, then one that grants
						if _, errs[i-1] = owner.AppendFunc(ctx, func(ledger.Head) ([]ledger.Entry, error) { return nil, nil }); errs[i-1] == nil {
							_, errs[i-1] = owner.AppendFunc(ctx, func(ledger.Head) ([]ledger.Entry, error) {
								return []ledger.Entry{grant(name), fact(100 + i)}, nil
							})
						}
					default:
						_, errs[i-1] = owner.Append(ctx, fact(100+i), grant(name))
					}
					return
				}
				switch i % 4 {
				case 0: // a closure that fails after appending
					errs[i-1] = owner.Update(ctx, func(tx stores.Tx) error {
						if _, err := owner.AppendTx(ctx, tx, grant(fmt.Sprintf("p%d", i))); err != nil {
							return err
						}
						return errRefused
					})
				case 1:
					_, errs[i-1] = owner.Append(ctx, fact(100+i), grant(fmt.Sprintf("p%d", i)))
				case 2: // an append of nothing, then a grant
					errs[i-1] = owner.Update(ctx, func(tx stores.Tx) error {
						if _, err := owner.AppendTx(ctx, tx); err != nil {
							return err
						}
						_, err := owner.AppendTx(ctx, tx, grant(fmt.Sprintf("p%d", i)), fact(100+i))
						return err
					})
				default:
					errs[i-1] = owner.Update(ctx, func(tx stores.Tx) error {
						_, err := owner.AppendTx(ctx, tx, grant(fmt.Sprintf("p%d", i)))
						return err
					})
				}
			}()
		}
		wg.Wait()
		want := []string{"olga", "p0"}
		for i := 1; i <= n; i++ {
			if i%4 == 0 {
				require.ErrorIs(t, errs[i-1], errRefused)
				continue
			}
			require.NoError(t, errs[i-1])
			want = append(want, fmt.Sprintf("p%d", i))
		}
		if txs {
			// In a transaction of the caller's own.
			require.NoError(t, tr.Update(ctx, func(tx stores.Tx) error {
				_, err := owner.AppendTx(ctx, tx, fact(500), grant("own"))
				return err
			}))
			want = append(want, "own")
		}

		for _, l := range []*ledger.Ledger{owner, signedOn(st, "olga", olga, nil)} {
			got, err := replay(t, l, nil)
			require.NoError(t, err)
			all := &ledger.PeopleState{}
			require.NoError(t, l.ReplayAllPeople(ctx, all, rootVouch))
			assert.ElementsMatch(t, want, all.Names())
			assert.ElementsMatch(t, want, got.Names(), "the replay by links")
			_, err = l.Verify(ctx)
			require.NoError(t, err)
		}
	})
}
