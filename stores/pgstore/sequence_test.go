package pgstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// keySealer binds a value to its key without encrypting it: enough for the
// sequences of a test of the store.
type keySealer struct{}

func (keySealer) Seal(key string, plaintext []byte) ([]byte, error) {
	return append([]byte(key+"\x00"), plaintext...), nil
}

func (keySealer) Open(key string, sealed []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(sealed, []byte(key+"\x00"))
	if !ok {
		return nil, errors.New("sealed for another key")
	}
	return rest, nil
}

// newSequences is the vault's way to make the sequences of a vault.
var newSequences = wire.Hook[func(stores.Store, seal.Sealer, string, wire.SequenceConfig) wire.Sequences[*sequence.Sequence, sequence.Options]](
	"NewSequences", wire.NewSequences)

// TestBareServiceClaimsAndBinds: the sequences of a vault straight on pgstore
// (no vault around them) reads the claim records and the records its Bind calls name in
// one round trip per transaction, and numbers stay exact.
func TestBareServiceClaimsAndBinds(t *testing.T) {
	ctx := guardCtx(t)
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 8})
	q, err := newSequences(s, keySealer{}, "v/bare/", wire.SequenceConfig{}).Sequence("claims", sequence.Options{})
	require.NoError(t, err)

	const callers = 24
	got := make([]uint64, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				got[i], err = q.Claim(ctx, fmt.Sprintf("req-%d", i))
			} else {
				var sr sequence.Serial
				key := fmt.Sprintf("v/bare/records/%d", i)
				sr, err = q.BindKeys(ctx, []string{key}, func(tx stores.Tx, s sequence.Serial) error {
					if _, err := tx.Get(key); !errors.Is(err, stores.ErrNotFound) {
						return fmt.Errorf("record %s: %v", key, err)
					}
					return tx.Put(key, []byte(s.Formatted))
				})
				got[i] = sr.N
			}
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	seen := make(map[uint64]bool)
	for _, n := range got {
		assert.False(t, seen[n], "number %d twice", n)
		seen[n] = true
	}
	for n := uint64(1); n <= callers; n++ {
		assert.True(t, seen[n], "number %d missing", n)
	}
	// A repeated claim gets its number again; a bound record holds its own.
	for i := 0; i < callers; i += 2 {
		n, err := q.Claim(ctx, fmt.Sprintf("req-%d", i))
		require.NoError(t, err)
		assert.Equal(t, got[i], n)
	}
	for i := 1; i < callers; i += 2 {
		it, err := s.Get(ctx, fmt.Sprintf("v/bare/records/%d", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(got[i]), string(it.Value))
	}
}
