package noydb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// grantEntries returns the collections of every PersonGranted entry of
// user in v's ledger, in order ("*" standing for every collection).
func grantEntries(t testing.TB, v *vault.Vault, user string) [][]string {
	t.Helper()
	var got [][]string
	for e, err := range v.Audit().Read(context.Background(), 0) {
		require.NoError(t, err)
		cols, limited, ok := e.GrantCollections()
		if !ok || e.ID != user {
			continue
		}
		if !limited {
			cols = []string{"*"}
		}
		got = append(got, cols)
	}
	return got
}

// TestGrantEntriesNameCollections: a grant and every change of a person's
// collections write a PersonGranted entry naming the collections, sorted
// and unique; a grant to every collection names none.
func TestGrantEntriesNameCollections(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "payroll", "notes", "notes"))
	require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
	require.NoError(t, owner.SetCollections(ctx, "bob", "notes", "tasks"))
	require.NoError(t, owner.SetCollections(ctx, "bob"))
	require.NoError(t, owner.Grant(ctx, "carl", vault.Secret([]byte("c")), vault.RoleReader))
	assert.Equal(t, [][]string{{"notes", "payroll"}, {"notes"}, {"notes", "tasks"}, {"*"}}, grantEntries(t, owner, "bob"))
	assert.Equal(t, [][]string{{"*"}}, grantEntries(t, owner, "carl"))

	many := make([]string, ledger.MaxGrantCollections+1)
	for i := range many {
		many[i] = "c" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	err := owner.Grant(ctx, "dan", vault.Secret([]byte("d")), vault.RoleWriter, many...)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	_, err = st.Get(ctx, "v/team/_keyring/dan")
	assert.Error(t, err, "a refused grant wrote a keyring entry")
	report, err := owner.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, report.OK(), "%v", report.Problem)
}

// TestSetCollectionsRefusesPutBackRevokedEntry: carl's entry put back as
// it was before his revocation is refused by SetCollections (which would
// wrap every generation's key for it), nothing written. The ledger holds
// his revocation, so the refusal says he is revoked (ErrNoAccess), not
// that the store altered something (the authority check's kind).
func TestSetCollectionsRefusesPutBackRevokedEntry(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "carl", vault.Secret([]byte("c")), vault.RoleWriter, "notes"))
	saved, err := st.Get(ctx, "v/team/_keyring/carl")
	require.NoError(t, err)
	require.NoError(t, owner.Revoke(ctx, "carl"))
	require.NoError(t, owner.Rotation().Wait(ctx))
	_, err = st.Put(ctx, "v/team/_keyring/carl", saved.Value)
	require.NoError(t, err)

	err = owner.SetCollections(ctx, "carl")
	assert.ErrorIs(t, err, vault.ErrNoAccess)
	assert.NotErrorIs(t, err, vault.ErrTampered)
	after, err := st.Get(ctx, "v/team/_keyring/carl")
	require.NoError(t, err)
	assert.Equal(t, saved.Value, after.Value, "the refused change wrote the entry")
}

// BenchmarkRotateLedgerSize: RotateKeys (no record to re-seal) on a vault
// whose ledger holds n application events and three people, by a handle
// whose people index is warm (it rotated before) or cold (just opened,
// so it reads the whole ledger once).
//
//	go test -run '^$' -bench BenchmarkRotateLedgerSize -benchtime 20x .
func BenchmarkRotateLedgerSize(b *testing.B) {
	for _, n := range []int{1_000, 20_000} {
		ctx := context.Background()
		st := memstore.New()
		owner := openPerson(b, personCfg(st, "olga", "o"))
		require.NoError(b, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
		require.NoError(b, owner.Grant(ctx, "carl", vault.Secret([]byte("c")), vault.RoleReader))
		for i := range n {
			_, err := owner.Record(ctx, "tick", []byte{byte(i)})
			require.NoError(b, err)
		}
		rotate := func(v *vault.Vault) {
			rot, err := v.RotateKeys(ctx)
			require.NoError(b, err)
			require.NoError(b, rot.Wait(ctx))
			require.Empty(b, rot.Skipped())
		}
		b.Run(fmt.Sprintf("warm/entries=%d", n), func(b *testing.B) {
			rotate(owner)
			b.ResetTimer()
			for range b.N {
				rotate(owner)
			}
		})
		b.Run(fmt.Sprintf("cold/entries=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
				require.NoError(b, err)
				b.StartTimer()
				rotate(v)
				b.StopTimer()
				require.NoError(b, v.Close())
				b.StartTimer()
			}
		})
	}
}
