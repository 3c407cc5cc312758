package ledger_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
)

// TestMACAtNamesTheLedgerUpToAPosition: two ledgers agree at a position
// exactly when they agree on every entry up to it. Entries alike in every
// field (the tests' clock is fixed) after different ones have different
// MACs, entries after a common prefix the same, and a position above the
// head has none.
func TestMACAtNamesTheLedgerUpToAPosition(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			sa, sb, sc := kind.make(), kind.make(), kind.make()
			a, b, c := newLedger(t, sa), newLedger(t, sb), newLedger(t, sc)
			put := func(l *ledger.Ledger, id string) ledger.Head {
				h, err := l.Append(ctx, ledger.Entry{Kind: ledger.RecordPut, Collection: "notes", ID: id, Revision: 1})
				require.NoError(t, err)
				return h
			}
			put(a, "x")
			ha := put(a, "y")
			put(b, "x")
			put(b, "y")
			put(c, "w") // another first entry
			put(c, "y") // the same second entry as a's and b's
			put(a, "z1")
			put(b, "z2")

			at := func(l *ledger.Ledger, seq uint64) []byte {
				m, err := l.MACAt(ctx, seq)
				require.NoError(t, err)
				return m
			}
			assert.Equal(t, ha.MAC, at(a, 2), "the MAC at a position is the head's when it was there")
			assert.Equal(t, at(a, 1), at(b, 1))
			assert.Equal(t, at(a, 2), at(b, 2), "the same ledger up to 2")
			assert.NotEqual(t, at(a, 3), at(b, 3), "different entries at 3")
			assert.NotEqual(t, at(a, 2), at(c, 2), "the same entry at 2 after another first entry")
			assert.Nil(t, at(a, 4), "above the head")
			assert.Nil(t, at(a, 0))
		})
	}
}
