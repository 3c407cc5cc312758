package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/ledger"
)

// TestGrantCollections: a PersonGranted entry's collections round-trip
// through the entry encoding; other kinds have none.
func TestGrantCollections(t *testing.T) {
	e := ledger.Entry{Seq: 3, Actor: "olga", Kind: ledger.PersonGranted, ID: "bob", Reason: "writer",
		Partition: []string{"notes", "payroll"}}
	b, err := e.MarshalBinary()
	assert.NoError(t, err)
	var got ledger.Entry
	assert.NoError(t, got.UnmarshalBinary(b))
	cols, limited, ok := got.GrantCollections()
	assert.Equal(t, []string{"notes", "payroll"}, cols)
	assert.True(t, limited)
	assert.True(t, ok)

	e.Partition = nil
	cols, limited, ok = e.GrantCollections()
	assert.Empty(t, cols)
	assert.False(t, limited)
	assert.True(t, ok)

	_, _, ok = ledger.Entry{Kind: ledger.PersonRevoked, ID: "bob"}.GrantCollections()
	assert.False(t, ok)

	e.Partition = make([]string, ledger.MaxGrantCollections+1)
	for i := range e.Partition {
		e.Partition[i] = "c"
	}
	_, err = e.MarshalBinary()
	assert.ErrorIs(t, err, ledger.ErrInvalidEntry)
}
