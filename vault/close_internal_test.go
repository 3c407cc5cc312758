package vault

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
)

// Close wipes the data key and every key derived from it that the vault
// holds: the ledger's chain key and the sequences' claim key. (The rollback
// pins' key, used only with a state folder, is the pins' to wipe: see
// internal/pins TestKeyWipedWithTheLastSet.)
func TestCloseWipesDerivedKeys(t *testing.T) {
	ctx := context.Background()
	v := openTestVault(t, memstore.New())
	seq, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	_, err = seq.Next(ctx)
	require.NoError(t, err)
	msg := []byte("probe")
	require.NotNil(t, v.macer.MAC(msg))
	require.NotNil(t, v.claims.MAC(msg))
	require.False(t, v.dk.Wiped())

	require.NoError(t, v.Close())
	assert.True(t, v.dk.Wiped(), "data key")
	assert.Nil(t, v.macer.MAC(msg), "ledger chain key")
	assert.Nil(t, v.claims.MAC(msg), "claim key")
}
