package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// A handle opened without a definition, which read the series before
// another process defined it with a period, takes no number outside the
// periods: its first allocation refuses (ErrDefinitionMismatch, nothing
// taken) and the next numbers in the period of today, by Next and by a
// numbered write. (Before, it took number 1 of a counter of no period
// in a series counted per month.)
func TestSequenceWithoutDefinitionTakesNoNumberOutsideAPeriodDefinedElsewhere(t *testing.T) {
	for name, newStore := range map[string]func() stores.Store{
		"memstore":     func() stores.Store { return memstore.New() },
		"memstore-cas": func() stores.Store { return faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true}) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore()
			_, v1 := openSession(t, st, "")
			q1, err := v1.Sequence("tills", sequence.Options{})
			require.NoError(t, err)
			_, err = q1.Peek(ctx)
			require.NoError(t, err)
			_, v3 := openSession(t, st, "")
			q3, err := v3.Sequence("tills", sequence.Options{})
			require.NoError(t, err)
			_, err = q3.Peek(ctx)
			require.NoError(t, err)

			_, v2 := openSession(t, st, "")
			q2, err := v2.Sequence("tills", sequence.Options{Period: sequence.PeriodMonth})
			require.NoError(t, err)
			require.NoError(t, q2.Declare(ctx))
			label, err := q2.PeriodLabel(ctx)
			require.NoError(t, err)

			_, err = q1.NextSerial(ctx)
			require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
			s, err := q1.NextSerial(ctx)
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "1", Period: label}, s)

			if name == "memstore" { // a numbered write: the number is taken in its commit
				tills := vault.CollectionOf[Till](v3, "tills")
				put := func() (sequence.Serial, error) {
					var got sequence.Serial
					_, err := tills.PutNumbered(ctx, "r", q3, func(s sequence.Serial) (Till, error) {
						got = s
						return Till{No: s.Formatted}, nil
					})
					return got, err
				}
				_, err = put()
				require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
				got, err := put()
				require.NoError(t, err)
				assert.Equal(t, label, got.Period)
				assert.Equal(t, uint64(2), got.N)
			}

			infos, err := v2.SeriesNamed(ctx, "tills")
			require.NoError(t, err)
			for _, info := range infos {
				assert.Equal(t, label, info.Period, "no counter outside the periods: %+v", info)
			}
		})
	}
}

// The same for a handle whose counter of no period took numbers before
// the series was defined with a period elsewhere: the definition touches
// that counter, so the handle's next number checks it again, refuses
// (nothing taken) and then numbers in the period. (Before, it went on
// taking 2, 3 … outside every period.)
func TestSequenceThatNumberedBeforeAPeriodDefinedElsewhereTakesNoMoreOutsideIt(t *testing.T) {
	for name, newStore := range map[string]func() stores.Store{
		"memstore":     func() stores.Store { return memstore.New() },
		"memstore-cas": func() stores.Store { return faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true}) },
	} {
		for _, how := range []string{"declare", "first number", "update"} {
			if how == "update" && name == "memstore-cas" {
				continue // a vault transaction needs a store with transactions
			}
			t.Run(name+"/"+how, func(t *testing.T) {
				ctx := context.Background()
				st := newStore()
				_, v1 := openSession(t, st, "")
				q1, err := v1.Sequence("tills", sequence.Options{})
				require.NoError(t, err)
				s, err := q1.NextSerial(ctx)
				require.NoError(t, err)
				require.Equal(t, "", s.Period, "no definition yet")

				_, v2 := openSession(t, st, "")
				q2, err := v2.Sequence("tills", sequence.Options{Period: sequence.PeriodMonth})
				require.NoError(t, err)
				switch how {
				case "declare":
					require.NoError(t, q2.Declare(ctx))
				case "update":
					require.NoError(t, v2.Update(ctx, func(tx *vault.Tx) error {
						_, err := tx.Next(q2)
						return err
					}))
				default:
					_, err := q2.Next(ctx)
					require.NoError(t, err)
				}
				label, err := q2.PeriodLabel(ctx)
				require.NoError(t, err)

				_, err = q1.NextSerial(ctx)
				require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
				s, err = q1.NextSerial(ctx)
				require.NoError(t, err)
				assert.Equal(t, label, s.Period)
				infos, err := v2.SeriesNamed(ctx, "tills")
				require.NoError(t, err)
				for _, info := range infos {
					if info.Period == "" {
						assert.Equal(t, uint64(1), info.Head, "only the number taken before the definition")
					}
				}
			})
		}
	}
}
