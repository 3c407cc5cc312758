package sequence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// declareStores are the stores the guard is checked on: memory and durable
// badger, each with transactions and with compare-and-swap only.
func declareStores(t *testing.T) map[string]func() stores.Store {
	out := map[string]func() stores.Store{}
	for _, kind := range storeKinds {
		out["mem/"+kind.name] = func() stores.Store { return kind.new(newMem(), faultstore.Options{}) }
		out["badger/"+kind.name] = func() stores.Store { return kind.new(openBadger(t), faultstore.Options{}) }
	}
	return out
}

// A handle opened with MustExist on a series nothing was stored of refuses
// every call with ErrNoSuchSeries and writes nothing: a misspelt series
// does not start a new count at 1.
func TestMustExistRefusesAnUndeclaredSeries(t *testing.T) {
	ctx := context.Background()
	for name, open := range declareStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			svc := newService(t, st, sequence.Config{Journal: &journal{}})
			// "invoices" exists; "invoice" (a prefix of it) and "invoicesx"
			// (a longer name) do not.
			_, err := mustSequence(t, svc, "invoices").Next(ctx)
			require.NoError(t, err)
			before := listing(t, st)
			for _, series := range []string{"invoice", "invoicesx", "orders"} {
				q := mustSequence(t, svc, series, sequence.Options{MustExist: true})
				calls := map[string]error{}
				_, calls["Next"] = q.Next(ctx)
				_, calls["NextSerial"] = q.NextSerial(ctx)
				calls["SeedTo"] = q.SeedTo(ctx, 5)
				_, calls["Peek"] = q.Peek(ctx)
				calls["Void"] = q.Void(ctx, 1, "typo")
				_, calls["Claim"] = q.Claim(ctx, "req-1")
				for call, err := range calls {
					require.ErrorIs(t, err, sequence.ErrNoSuchSeries, "%s %s", series, call)
					var ne *sequence.NoSuchSeriesError
					require.True(t, errors.As(err, &ne), "%s %s: %v", series, call, err)
					assert.Equal(t, series, ne.Series)
				}
				ok, err := q.Exists(ctx)
				require.NoError(t, err)
				assert.False(t, ok, series)
			}
			assert.Equal(t, before, listing(t, st), "nothing written")

			q := mustSequence(t, svc, "invoices", sequence.Options{MustExist: true})
			n, err := q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n, "an existing series numbers on")
		})
	}
}

// A series that exists only through one partition's counter, or only
// through a definition, exists for every handle of it.
func TestMustExistFindsPartitionsAndDefinitions(t *testing.T) {
	ctx := context.Background()
	for name, open := range declareStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			sealer := newSealer()
			svc := sequence.NewService(st, sealer, "v/", sequence.Config{Journal: &journal{}})
			_, err := mustSequence(t, svc, "fatture", sequence.Options{Partition: []any{2026}}).Next(ctx)
			require.NoError(t, err)
			require.NoError(t, mustSequence(t, svc, "tickets", sequence.Options{Format: "T-{seq}"}).Declare(ctx))

			// A fresh service: nothing known in memory.
			fresh := sequence.NewService(st, sealer, "v/", sequence.Config{Journal: &journal{}})
			n, err := mustSequence(t, fresh, "fatture", sequence.Options{Partition: []any{2027}, MustExist: true}).Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n, "a new partition of an existing series")
			s, err := mustSequence(t, fresh, "tickets", sequence.Options{MustExist: true}).NextSerial(ctx)
			require.NoError(t, err)
			assert.Equal(t, "T-1", s.Formatted, "a declared series, with its stored format")
		})
	}
}

// Declare stores the handle's definition without taking a number, once;
// a different definition is refused, and a series declared without one
// keeps none.
func TestDeclareStoresTheDefinitionOnce(t *testing.T) {
	ctx := context.Background()
	for name, open := range declareStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			sealer := newSealer()
			svc := sequence.NewService(st, sealer, "v/", sequence.Config{Journal: &journal{}})
			q := mustSequence(t, svc, "invoices", sequence.Options{Format: "INV-{seq:04}", Period: sequence.PeriodYear})
			require.NoError(t, q.Declare(ctx))
			require.NoError(t, q.Declare(ctx), "again: the same definition")
			head, err := q.Peek(ctx)
			require.NoError(t, err)
			assert.Zero(t, head, "no number taken")
			def, err := mustSequence(t, sequence.NewService(st, sealer, "v/", sequence.Config{}), "invoices").Definition(ctx)
			require.NoError(t, err)
			assert.Equal(t, "INV-{seq:04}", def.Format)
			assert.Equal(t, sequence.PeriodYear, def.Period)

			err = mustSequence(t, svc, "invoices", sequence.Options{Format: "F-{seq}"}).Declare(ctx)
			require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)

			plain := mustSequence(t, svc, "plain")
			require.NoError(t, plain.Declare(ctx))
			_, err = mustSequence(t, svc, "plain", sequence.Options{Format: "P-{seq}"}).Next(ctx)
			require.ErrorIs(t, err, sequence.ErrDefinitionMismatch, "declared without a format: keeps none")
			n, err := mustSequence(t, svc, "plain", sequence.Options{MustExist: true}).Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
		})
	}
}

// Declare needs atomic compare-and-swap, as a number does.
func TestDeclareOfflineWritesNothing(t *testing.T) {
	st := faultstore.New(newMem(), faultstore.Options{HideTransactor: true, NotCASAtomic: true})
	svc := newService(t, st, sequence.Config{})
	err := mustSequence(t, svc, "invoices").Declare(context.Background())
	require.ErrorIs(t, err, sequence.ErrOffline)
	assert.Empty(t, listing(t, st))
}
