package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// TestPeopleConcurrentGrants: owners on two handles of one store grant
// at once. Distinct people are all granted, each with one ledger entry;
// for one name, exactly one grant wins and the others fail with
// ErrPersonExists or a conflict, writing nothing.
func TestPeopleConcurrentGrants(t *testing.T) {
	kinds := memAndBadger()
	kinds["filestore"] = func(t testing.TB) stores.Store {
		st, err := filestore.Open(t.TempDir(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	for name, newStore := range kinds {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owners := []*vault.Vault{openPerson(t, personCfg(st, "olga", "o")), openPerson(t, personCfg(st, "olga", "o"))}
			const each = 4
			var wg sync.WaitGroup
			errs := make([]error, 2*each)
			for i := range 2 * each {
				wg.Go(func() {
					errs[i] = owners[i%2].Grant(ctx, fmt.Sprintf("p%d", i), vault.Secret([]byte("s")), vault.RoleWriter)
				})
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "p%d", i)
			}
			same := make([]error, 2*each)
			for i := range 2 * each {
				wg.Go(func() {
					same[i] = owners[i%2].Grant(ctx, "dup", vault.Secret(fmt.Appendf(nil, "s%d", i)), vault.RoleReader)
				})
			}
			wg.Wait()
			won := 0
			for _, err := range same {
				if err == nil {
					won++
					continue
				}
				assert.True(t, errors.Is(err, vault.ErrPersonExists) || errors.Is(err, stores.ErrConflict), "%v", err)
			}
			assert.Equal(t, 1, won)

			ps, err := owners[0].People(ctx)
			require.NoError(t, err)
			assert.Len(t, ps, 2*each+2)
			verified(t, owners[0])
			grants := map[string]int{}
			for _, k := range peopleKinds(t, owners[0]) {
				grants[k]++
			}
			want := map[string]int{"person-granted olga dup": 1}
			for i := range 2 * each {
				want[fmt.Sprintf("person-granted olga p%d", i)] = 1
			}
			assert.Equal(t, want, grants)
			for i := range 2 * each {
				openPerson(t, personCfg(st, fmt.Sprintf("p%d", i), "s"))
			}
		})
	}
}
