package noydb_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// TestRecoveryCodeRace: two opens racing with the same code: exactly one
// recovers; the other gets ErrRecoveryCodeUsed (or, when it lost while its
// own read was current, stores.ErrConflict, and then ErrRecoveryCodeUsed on
// its retry). The winner's new secret opens; the loser's does not.
func TestRecoveryCodeRace(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openPerson(t, personCfg(st, "olga", "o"))
			codes, err := v.RecoveryCodes(ctx, 1)
			require.NoError(t, err)
			require.NoError(t, v.Close())

			secrets := []string{"first", "second"}
			errs := make([]error, len(secrets))
			var wg sync.WaitGroup
			for i, s := range secrets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w, err := vault.Open(ctx, recoverCfg(st, "olga", codes[0], s))
					for errors.Is(err, stores.ErrConflict) {
						w, err = vault.Open(ctx, recoverCfg(st, "olga", codes[0], s))
					}
					errs[i] = err
					if err == nil {
						_ = w.Close()
					}
				}()
			}
			wg.Wait()
			won := -1
			for i, err := range errs {
				if err == nil {
					require.Equal(t, -1, won, "two opens recovered with one code")
					won = i
					continue
				}
				assert.ErrorIs(t, err, vault.ErrRecoveryCodeUsed)
			}
			require.NotEqual(t, -1, won, "no open recovered: %v", errs)
			openPerson(t, personCfg(st, "olga", secrets[won]))
			_, err = vault.Open(ctx, personCfg(st, "olga", secrets[1-won]))
			assert.ErrorIs(t, err, vault.ErrWrongSecret)
			verified(t, openPerson(t, personCfg(st, "olga", secrets[won])))
		})
	}
}
