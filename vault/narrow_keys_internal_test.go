package vault

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

// TestGenKeysNarrow: a key set given every collection becomes limited to
// the first list its keyring entry names; a limited one only gains the
// collections a later list adds (sorted, once each); an empty list
// changes nothing. Concurrent calls (under -race) end with the union.
func TestGenKeysNarrow(t *testing.T) {
	g := newGenKeys(map[uint64]*crypto.Key{}, nil)
	g.narrow(nil)
	assert.Nil(t, g.limitedTo())
	require.NoError(t, g.permits("payroll"))

	g.narrow([]string{"notes"})
	assert.Equal(t, []string{"notes"}, g.limitedTo())
	require.NoError(t, g.permits("notes"))
	require.ErrorIs(t, g.permits("payroll"), ErrNotPermitted)

	g.narrow(nil)
	g.narrow([]string{"notes"})
	assert.Equal(t, []string{"notes"}, g.limitedTo())
	g.narrow([]string{"a", "payroll"})
	assert.Equal(t, []string{"a", "notes", "payroll"}, g.limitedTo())

	h := newGenKeys(map[uint64]*crypto.Key{}, nil)
	var wg sync.WaitGroup
	for _, c := range []string{"d", "b", "c", "a"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.narrow([]string{c})
			assert.NoError(t, h.permits(c))
		}()
	}
	wg.Wait()
	assert.Equal(t, []string{"a", "b", "c", "d"}, h.limitedTo())
}
