package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// factsAfterTx runs l.FactsAfterTx in a transaction of st and returns what
// it says of the counters of series a and b, and the head.
func factsAfterTx(t *testing.T, st stores.Store, l *ledger.Ledger, after ledger.Head) (a, b uint64, head ledger.Head, err error) {
	t.Helper()
	err = st.(stores.Transactor).Update(context.Background(), func(tx stores.Tx) error {
		var err error
		head, err = l.FactsAfterTx(tx, after, ledger.NumberFactsKind, func(f any) error {
			nf := f.(*ledger.NumberFacts)
			a, b = nf.Counter("a", nil).Highest, nf.Counter("b", nil).Highest
			return nil
		})
		return err
	})
	return a, b, head, err
}

// In a transaction, a ledger folds the entries another writer appended
// after a position its facts held through, and those alone: what a check
// made against Facts needs to hold at a commit.
func TestFactsAfterTxFoldsOnlyTheEntriesSinceAPosition(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		if _, ok := st.(stores.Transactor); !ok || !st.Capabilities().Transactions {
			t.Skip("no transactions: FactsAfterTx runs only in one")
		}
		ctx := context.Background()
		l, other := newLedger(t, st), newLedger(t, st)
		_, err := l.Append(ctx, allocated("a", 7))
		require.NoError(t, err)
		checked, err := l.Facts(ctx, ledger.NumberFactsKind, func(any) error { return nil })
		require.NoError(t, err)

		a, b, head, err := factsAfterTx(t, st, l, checked)
		require.NoError(t, err)
		assert.Equal(t, [2]uint64{0, 0}, [2]uint64{a, b}, "nothing since")
		assert.Equal(t, checked.Seq, head.Seq)

		_, err = other.Append(ctx, allocated("a", 3))
		require.NoError(t, err)
		_, err = other.Append(ctx, allocated("b", 5), fact(1))
		require.NoError(t, err)
		a, b, head, err = factsAfterTx(t, st, l, checked)
		require.NoError(t, err)
		assert.Equal(t, [2]uint64{3, 5}, [2]uint64{a, b}, "the entries since the position alone")
		assert.Equal(t, checked.Seq+3, head.Seq)

		// From the start (an empty ledger at the check).
		a, b, _, err = factsAfterTx(t, st, l, ledger.Head{})
		require.NoError(t, err)
		assert.Equal(t, [2]uint64{7, 5}, [2]uint64{a, b})
	})
}

// A position the ledger in the transaction does not hold (beyond its
// head, or holding another entry) is a rollback; one too far behind the
// head is ErrFactsFar.
func TestFactsAfterTxRefusesAPositionItDoesNotHold(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		if _, ok := st.(stores.Transactor); !ok || !st.Capabilities().Transactions {
			t.Skip("no transactions: FactsAfterTx runs only in one")
		}
		ctx := context.Background()
		l := newLedger(t, st)
		_, err := l.Append(ctx, allocated("a", 1), allocated("a", 2))
		require.NoError(t, err)
		head, err := l.Head(ctx)
		require.NoError(t, err)

		_, _, _, err = factsAfterTx(t, st, l, ledger.Head{Seq: head.Seq + 1, MAC: head.MAC})
		assert.ErrorIs(t, err, pins.ErrRollback, "beyond the head")
		other := ledger.Head{Seq: head.Seq, MAC: append([]byte{}, head.MAC...)}
		other.MAC[0] ^= 1
		_, _, _, err = factsAfterTx(t, st, l, other)
		assert.ErrorIs(t, err, pins.ErrRollback, "another entry at the position")
		first := ledger.Head{Seq: 1, MAC: append([]byte{}, head.MAC...)}
		_, _, _, err = factsAfterTx(t, st, l, first)
		assert.ErrorIs(t, err, ledger.ErrTampered, "entries that do not chain onto the position")

		entries := make([]ledger.Entry, ledger.MaxFactsAfterTx+1)
		for i := range entries {
			entries[i] = fact(i)
		}
		_, err = l.Append(ctx, entries...)
		require.NoError(t, err)
		_, _, _, err = factsAfterTx(t, st, l, head)
		assert.ErrorIs(t, err, ledger.ErrFactsFar)
	})
}
