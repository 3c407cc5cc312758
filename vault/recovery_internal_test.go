package vault

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestRecoveryTypoRunsNoDerivation counts the derivations of recovery
// keys: issuing n codes runs n, a mistyped code none, a right one one.
func TestRecoveryTypoRunsNoDerivation(t *testing.T) {
	var n atomic.Int64
	saved := deriveRecoveryKey
	deriveRecoveryKey = func(secret, salt []byte, p crypto.KDFParams) (*crypto.Key, error) {
		n.Add(1)
		return saved(secret, salt, p)
	}
	t.Cleanup(func() { deriveRecoveryKey = saved })

	ctx := context.Background()
	st := memstore.New()
	cfg := Config{Store: st, Name: "v", User: "olga", Secret: []byte("o"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true}
	v, err := Open(ctx, cfg)
	require.NoError(t, err)
	codes, err := v.RecoveryCodes(ctx, 3)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	assert.Equal(t, int64(3), n.Load())

	typo := []byte(codes[0])
	typo[2] = map[bool]byte{true: 'Z', false: 'Y'}[typo[2] == 'Y']
	rc := cfg
	rc.Secret, rc.RecoveryCode, rc.NewSecret = nil, string(typo), []byte("new")
	_, err = Open(ctx, rc)
	require.ErrorIs(t, err, ErrBadRecoveryCode)
	assert.Equal(t, int64(3), n.Load(), "a typo derives nothing")

	rc.RecoveryCode = codes[0]
	w, err := Open(ctx, rc)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, int64(4), n.Load())

	// A used code is refused before deriving too.
	_, err = Open(ctx, rc)
	require.ErrorIs(t, err, ErrRecoveryCodeUsed)
	assert.Equal(t, int64(4), n.Load())
}
