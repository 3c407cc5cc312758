package vault

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/numbering"
)

// The constructor package numbering hands the vault through internal/wire
// has the type the vault asserts it to.
func TestWireNumbering(t *testing.T) {
	_, ok := wire.NewNumbering.(func(deferred.Backend, string, numbering.Options) (*numbering.Series, deferred.Hooks, error))
	assert.True(t, ok, "wire.NewNumbering is %T", wire.NewNumbering)
}

// A pending mark is sealed by whoever wrote the record: one whose
// provisional id or period label is not one key segment would make
// another device's Sync delete a key outside the record's own handoff
// folder, so it is not pending and names no key.
func TestPendingMarkNamingKeysOutsideItsFolderIsNotPending(t *testing.T) {
	v := &Vault{prefix: "v/"}
	good := []mark{
		{kind: markPending, series: "orders", partition: []string{"0190c1a2-7d3e-7b4c-9a1e-2f3d4c5b6a79"}},
		{kind: markPending, series: "receipts", partition: []string{"0190c1a2-7d3e-7b4c-9a1e-2f3d4c5b6a7a", "2026-12"}},
	}
	for _, m := range good {
		assert.True(t, isPending(m), "%v", m.partition)
	}
	assert.Equal(t, []string{
		"v/_numbering/orders/pending/0190c1a2-7d3e-7b4c-9a1e-2f3d4c5b6a79/r1",
		"v/_numbering/receipts/period/2026-12/pending/0190c1a2-7d3e-7b4c-9a1e-2f3d4c5b6a7a/r1",
	}, v.handoffKeys("r1", good))

	for _, part := range [][]string{
		{""},
		{"p/../../other/pending/p"},
		{"p", "2026-12/pending/q"},
		{"p", ""},
		{"p\n"},
		{string([]byte{0xff})},
		{strings.Repeat("p", MaxNameLen+1)},
	} {
		m := mark{kind: markPending, series: "orders", partition: part}
		// Through the record's sealed form, as a Sync reads it.
		marks, _, err := splitRecord(joinRecord([]mark{m}, []byte(`{}`)))
		require.NoError(t, err)
		assert.False(t, isPending(marks[0]), "%q", part)
		assert.Empty(t, pendingOf(marks, "orders"), "%q", part)
		assert.Empty(t, v.handoffKeys("r1", marks), "%q", part)
	}
}
