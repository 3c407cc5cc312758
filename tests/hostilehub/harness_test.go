// Package hostilehub_test proves what a hostile hub can and cannot do to
// the devices of a vault: every test runs devices on memstore and badger
// against a hub behind a faultstore.Adversary (memstore, and PostgreSQL
// through scripts/with-postgres), makes the hub misbehave, and checks that
// no number is given twice or that the misbehaviour is detected, with the
// error the README's threat table names.
package hostilehub_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// cheapKDF keeps the tests' key derivations fast.
var cheapKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

// deviceStores are the stores devices run on: in memory, and badger on
// disk.
func deviceStores() map[string]func(testing.TB) stores.Store {
	return map[string]func(testing.TB) stores.Store{
		"memstore": func(testing.TB) stores.Store { return memstore.New() },
		"badger": func(t testing.TB) stores.Store {
			st, err := badgerstore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// hubStores are the hubs, each behind an Adversary: memstore, and
// PostgreSQL when scripts/with-postgres gives a server (the PostgreSQL
// cases skip without one, and fail without one under CI=true).
func hubStores() map[string]func(testing.TB) *faultstore.Adversary {
	return map[string]func(testing.TB) *faultstore.Adversary{
		"memhub": func(testing.TB) *faultstore.Adversary { return faultstore.NewAdversary(memstore.New()) },
		"pghub":  func(t testing.TB) *faultstore.Adversary { return faultstore.NewAdversary(pgtest.Open(t, nil)) },
	}
}

// setup is one combination of stores a test runs on.
type setup struct {
	// newDevice makes a device's store.
	newDevice func(testing.TB) stores.Store
	// hub is the hub, and newHub makes another of its kind.
	hub    *faultstore.Adversary
	newHub func(testing.TB) *faultstore.Adversary
}

// eachSetup runs fn for every device store with every hub.
func eachSetup(t *testing.T, fn func(t *testing.T, s setup)) {
	for hubName, newHub := range hubStores() {
		for devName, newDevice := range deviceStores() {
			t.Run(devName+"-devices/"+hubName, func(t *testing.T) {
				fn(t, setup{newDevice: newDevice, hub: newHub(t), newHub: newHub})
			})
		}
	}
}

// deviceOpts tunes a device.
type deviceOpts struct {
	stateDir string
}

// openDevice opens the vault "shop" as alice on device, a device of hub.
func openDevice(t testing.TB, device, hub stores.Store, o deviceOpts) *vault.Vault {
	t.Helper()
	v, err := openDeviceErr(device, hub, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func openDeviceErr(device, hub stores.Store, o deviceOpts) (*vault.Vault, error) {
	return vault.Open(context.Background(), vault.Config{
		Store: device, Hub: hub, Name: "shop", User: "alice", Secret: []byte("s3cret"),
		KDF: cheapKDF, InsecureAllowWeakKDF: true, StateDir: o.stateDir,
	})
}

// openAlone opens the vault "shop" as alice on device, with no hub.
func openAlone(t testing.TB, device stores.Store) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), vault.Config{
		Store: device, Name: "shop", User: "alice", Secret: []byte("s3cret"),
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	return v
}

// Note is the record the tests write.
type Note struct {
	Text string
}

// Order is a numbered record.
type Order struct {
	Number string
	Total  int
}

// notes returns the notes of v as "text@revision" by id.
func notes(t testing.TB, v *vault.Vault) map[string]string {
	t.Helper()
	out := map[string]string{}
	for r, err := range vault.CollectionOf[Note](v, "notes").List(context.Background()) {
		require.NoError(t, err)
		out[r.ID] = fmt.Sprintf("%s@%d", r.Value.Text, r.Revision)
	}
	return out
}

// mustSync syncs v and returns the report.
func mustSync(t testing.TB, v *vault.Vault) vault.SyncReport {
	t.Helper()
	rep, err := v.Sync(context.Background())
	require.NoError(t, err)
	return rep
}

// take takes n numbers of series from v.
func take(t testing.TB, v *vault.Vault, series string, n int) []uint64 {
	t.Helper()
	q, err := v.Sequence(series, sequence.Options{})
	require.NoError(t, err)
	out := make([]uint64, n)
	for i := range out {
		out[i], err = q.Next(context.Background())
		require.NoError(t, err)
	}
	return out
}

// sequenceOptions are the options of the tests' plain series.
func sequenceOptions() sequence.Options { return sequence.Options{} }
