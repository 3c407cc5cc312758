// Package hostile_test holds the proofs against hostile members: a person
// of the vault with the raw store and every key their keyring entry ever
// held tries to raise their role, plant a person, read after their
// revocation, or forge a record, a ledger entry or a pulled change. Each
// attempt is refused or detected, or is a row of the README's threat table
// ("hostile member" column).
package hostile_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Note is the record type of these tests.
type Note struct {
	Text string `json:"text"`
}

var cheapKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

// memAndBadger are the stores every case runs on.
func memAndBadger() map[string]func(testing.TB) stores.Store {
	return map[string]func(testing.TB) stores.Store{
		"memstore": func(testing.TB) stores.Store { return memstore.New() },
		"badgerstore": func(t testing.TB) stores.Store {
			st, err := badgerstore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// cfg is the Config of user on st for the vault "team".
func cfg(st stores.Store, user, secret string) vault.Config {
	return vault.Config{Store: st, Name: vaultName, User: user, Secret: []byte(secret), KDF: cheapKDF, InsecureAllowWeakKDF: true}
}

// onHub is cfg on a device of hub.
func onHub(device, hub stores.Store, user, secret string) vault.Config {
	c := cfg(device, user, secret)
	c.Hub = hub
	return c
}

// open opens the vault as c says and closes it with the test.
func open(t testing.TB, c vault.Config) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func put(t testing.TB, v *vault.Vault, coll, id, text string) {
	t.Helper()
	require.NoError(t, vault.CollectionOf[Note](v, coll).Put(context.Background(), id, Note{Text: text}))
}

// verified asserts that v's ledger verifies.
func verified(t testing.TB, v *vault.Vault) {
	t.Helper()
	rep, err := v.Audit().Verify(context.Background())
	require.NoError(t, err)
	assert.NoError(t, rep.Problem)
}

func mustSync(t testing.TB, v *vault.Vault) {
	t.Helper()
	_, err := v.Sync(context.Background())
	require.NoError(t, err)
}

// resealed waits for v's last rotation to re-seal every record.
func resealed(t testing.TB, v *vault.Vault) {
	t.Helper()
	require.NoError(t, v.Rotation().Wait(context.Background()))
}
