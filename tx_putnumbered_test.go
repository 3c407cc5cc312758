package noydb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

type invoice struct {
	No    string `json:"no"`
	Total int    `json:"total"`
}

// Records numbered in a transaction are bound to their numbers (an audit
// counts them bound) and commit with an application event; a transaction
// that fails commits none of the three.
func TestTxPutNumberedBindsAndCommitsWithAnEvent(t *testing.T) {
	ctx := context.Background()
	for name, open := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			v := openVault(t, openDB(t, open(t), "alice", "s3cret"), "books")
			seq, err := v.Sequence("inv", sequence.Options{Format: "INV-{seq:03}"})
			require.NoError(t, err)
			c := vault.CollectionOf[invoice](v, "invoices")
			build := func(total int) func(sequence.Serial) (invoice, error) {
				return func(s sequence.Serial) (invoice, error) { return invoice{No: s.Formatted, Total: total}, nil }
			}

			// A failed transaction: nothing, not even the number.
			boom := errors.New("boom")
			err = v.Update(ctx, func(tx *vault.Tx) error {
				if _, err := c.In(tx).PutNumbered("a", seq, build(1)); err != nil {
					return err
				}
				require.NoError(t, tx.Record("import", []byte("half")))
				return boom
			})
			require.ErrorIs(t, err, boom)
			head, err := seq.Peek(ctx)
			require.NoError(t, err)
			assert.Zero(t, head)
			_, err = c.Get(ctx, "a")
			require.ErrorIs(t, err, vault.ErrNotFound)

			// A build error spoils the transaction, even if fn goes on.
			err = v.Update(ctx, func(tx *vault.Tx) error {
				_, err := c.In(tx).PutNumbered("a", seq, func(sequence.Serial) (invoice, error) { return invoice{}, boom })
				require.ErrorIs(t, err, boom)
				return nil
			})
			require.ErrorIs(t, err, boom)
			head, err = seq.Peek(ctx)
			require.NoError(t, err)
			assert.Zero(t, head, "the number taken before the build failed is not taken")

			// Three records and the event, in one commit.
			err = v.Update(ctx, func(tx *vault.Tx) error {
				tc := c.In(tx)
				for i, id := range []string{"a", "b", "c"} {
					if _, err := tc.PutNumbered(id, seq, build(10*(i+1))); err != nil {
						return err
					}
				}
				return tx.Record("import", []byte("3 done"))
			})
			require.NoError(t, err)
			got, err := c.Get(ctx, "c")
			require.NoError(t, err)
			assert.Equal(t, invoice{No: "INV-003", Total: 30}, got)

			// Again: a record that carries a number keeps it, none taken.
			err = v.Update(ctx, func(tx *vault.Tx) error {
				out, err := c.In(tx).PutNumbered("b", seq, build(99))
				assert.Equal(t, invoice{No: "INV-002", Total: 20}, out)
				return err
			})
			require.NoError(t, err)
			head, err = seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), head)

			rep, err := seq.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, 3, rep.Bound)
			assert.Zero(t, rep.Unbound)

			var events []string
			for e, err := range v.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				if name, data, ok := e.Event(); ok {
					events = append(events, name+":"+string(data))
				}
				if e.Kind == ledger.RecordPut {
					assert.Equal(t, "inv", e.Series, "each put names its number")
				}
			}
			assert.Equal(t, []string{"import:3 done"}, events)

			// A bad event name is refused and leaves the transaction to fn.
			err = v.Update(ctx, func(tx *vault.Tx) error {
				require.ErrorIs(t, tx.Record("", nil), vault.ErrInvalidArgument)
				return c.In(tx).Put("d", invoice{Total: 4})
			})
			require.NoError(t, err)
			_, err = c.Get(ctx, "d")
			require.NoError(t, err)
		})
	}
}
