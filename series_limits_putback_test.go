package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// TestPutBackWiderEntryNumbersNothing: wanda, limited to customers and
// invoices, holds an open handle; olga narrows her to customers, and the
// store puts back wanda's keyring entry from before (MAC intact, wider).
// Her handle takes no number of the invoices series, whether it numbered
// between the narrowing and the put-back or not: what she may number is
// checked against the ledger's grant, not only the stored entry. The
// refusal is ErrNotPermitted, nothing is taken, and a series of customers
// she still numbers.
func TestPutBackWiderEntryNumbersNothing(t *testing.T) {
	for name, newStore := range memAndBadger() {
		for _, between := range []bool{false, true} {
			label := name + "/not numbered since the narrowing"
			if between {
				label = name + "/numbered since the narrowing"
			}
			t.Run(label, func(t *testing.T) {
				ctx := context.Background()
				st := newStore(t)
				olga := openPerson(t, personCfg(st, "olga", "o"))
				require.NoError(t, olga.BindSeries(ctx, "invoices", "inv-no"))
				require.NoError(t, olga.BindSeries(ctx, "customers", "cust-no"))
				require.NoError(t, olga.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers", "invoices"))
				wanda := openPerson(t, personCfg(st, "wanda", "w"))
				inv, err := wanda.Sequence("inv-no", sequence.Options{})
				require.NoError(t, err)
				cust, err := wanda.Sequence("cust-no", sequence.Options{})
				require.NoError(t, err)
				_, err = inv.Next(ctx)
				require.NoError(t, err, "given invoices")
				key := keyringKeyOf(t, st, "wanda")
				wide, err := st.Get(ctx, key)
				require.NoError(t, err)

				require.NoError(t, olga.SetCollections(ctx, "wanda", "customers"))
				if between {
					_, err = inv.Next(ctx)
					require.ErrorIs(t, err, vault.ErrNotPermitted, "narrowed")
				}
				_, err = st.Put(ctx, key, wide.Value)
				require.NoError(t, err)
				before := snapshot(t, st)
				_, err = inv.Next(ctx)
				assert.ErrorIs(t, err, vault.ErrNotPermitted, "the entry put back is wider than the ledger's grant")
				assert.NotErrorIs(t, err, vault.ErrTampered)
				sameStore(t, before, snapshot(t, st), "a refused call takes nothing")
				_, err = cust.Next(ctx)
				assert.NoError(t, err, "customers' series")
				verified(t, olga)
			})
		}
	}
}
