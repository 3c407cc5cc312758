package vault

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

func personVault(t *testing.T, st, hub stores.Store, user, secret string) *Vault {
	t.Helper()
	v, err := Open(context.Background(), Config{
		Store: st, Hub: hub, Name: "books", User: user, Secret: []byte(secret),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// A number of a series no owner bound to the collections of the person
// who took it, written past the SDK's check (a member with the store and
// the data key), fails Verify at its position with UnboundSeries; the
// same number after the owner's binding verifies.
func TestVerifyRefusesUnboundNumberOfLimitedPerson(t *testing.T) {
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			olga := personVault(t, st, nil, "olga", "o")
			require.NoError(t, olga.Grant(ctx, "wanda", Secret([]byte("w")), RoleWriter, "customers"))
			wanda := personVault(t, st, nil, "wanda", "w")
			past := wanda.ledger.(seriesLedger).writableLedger
			h, err := past.Append(ctx, ledger.Entry{Kind: ledger.NumberAllocated, Series: "invoices", Number: 1})
			require.NoError(t, err)
			_, err = olga.Audit().Verify(ctx)
			var se *ledger.SignatureError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, ledger.UnboundSeries, se.Problem)
			assert.Equal(t, h.Seq, se.Seq)
		})
	}
	t.Run("bound first", func(t *testing.T) {
		ctx := context.Background()
		st := internalStores()["memstore"](t)
		olga := personVault(t, st, nil, "olga", "o")
		require.NoError(t, olga.Grant(ctx, "wanda", Secret([]byte("w")), RoleWriter, "customers"))
		require.NoError(t, olga.BindSeries(ctx, "customers", "invoices"))
		wanda := personVault(t, st, nil, "wanda", "w")
		_, err := wanda.ledger.(seriesLedger).writableLedger.Append(ctx, ledger.Entry{Kind: ledger.NumberAllocated, Series: "invoices", Number: 1})
		require.NoError(t, err)
		rep, err := olga.Audit().Verify(ctx)
		require.NoError(t, err)
		assert.NoError(t, rep.Problem)
	})
}

// On devices of a hub, the binding is made on the hub, where the numbers
// are: a limited person's device numbers a series once an owner's device
// bound it, and not before; the hub's ledger verifies.
func TestBoundSeriesOnHub(t *testing.T) {
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub := newStore(t)
			olga := personVault(t, newStore(t), hub, "olga", "o")
			require.NoError(t, olga.Grant(ctx, "wanda", Secret([]byte("w")), RoleWriter, "customers"))
			_, err := olga.Sync(ctx)
			require.NoError(t, err)
			wanda := personVault(t, newStore(t), hub, "wanda", "w")
			q, err := wanda.Sequence("customer-no", sequence.Options{})
			require.NoError(t, err)
			_, err = q.Next(ctx)
			require.ErrorIs(t, err, ErrNotPermitted)

			require.NoError(t, olga.BindSeries(ctx, "customers", "customer-no"))
			n, err := q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
			onHub := personVault(t, hub, nil, "olga", "o")
			rep, err := onHub.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.NoError(t, rep.Problem)
		})
	}
}
