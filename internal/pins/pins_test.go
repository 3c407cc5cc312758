package pins_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
)

func TestPinsMoveForwardAndPersist(t *testing.T) {
	dir := t.TempDir()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	id := []byte("0123456789abcdef")

	s, err := pins.Open(dir, "books", id, key)
	require.NoError(t, err)
	s.RaiseCounter("c", 57)
	s.RaiseCounter("c", 41) // never moves back
	s.RaiseLedger("l", 9, []byte("mac-9"))
	s.RaiseLedger("l", 3, []byte("mac-3"))
	assert.NoError(t, s.CheckCounter("c", 57))
	assert.ErrorIs(t, s.CheckCounter("c", 41), pins.ErrRollback)
	require.NoError(t, s.Close())

	again, err := pins.Open(dir, "books", id, key)
	require.NoError(t, err)
	assert.ErrorIs(t, again.CheckCounter("c", 56), pins.ErrRollback)
	assert.NoError(t, again.CheckCounter("other", 0))
	seq, mac := again.LedgerPin("l")
	assert.Equal(t, uint64(9), seq)
	assert.Equal(t, []byte("mac-9"), mac)

	// Another key cannot read the file, and a changed file is refused.
	other, err := crypto.GenerateKey()
	require.NoError(t, err)
	_, err = pins.Open(dir, "books", id, other)
	assert.ErrorIs(t, err, crypto.ErrTampered)
	path := filepath.Join(dir, "30313233343536373839616263646566.pins")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.NoError(t, os.WriteFile(path, b, 0o600))
	_, err = pins.Open(dir, "books", id, key)
	assert.ErrorIs(t, err, crypto.ErrTampered)
}

func TestMemoryOnly(t *testing.T) {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	s, err := pins.Open("", "books", []byte("id"), key)
	require.NoError(t, err)
	s.RaiseCounter("c", 3)
	assert.ErrorIs(t, s.CheckCounter("c", 2), pins.ErrRollback)
	require.NoError(t, s.Close())
}
