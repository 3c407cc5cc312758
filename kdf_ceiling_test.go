package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// openCeiling opens a DB on st with cheap creation costs and the given ceiling.
func openCeiling(t testing.TB, st stores.Store, kdf, ceiling crypto.KDFParams) *noydb.DB {
	t.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{
		User: "firm", Secret: []byte("s"), Store: st,
		KDF: kdf, MaxKDF: ceiling, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A store that raises the costs in a vault header gets the open refused with
// ErrKDFTooCostly before any derivation (so these cases cost nothing, even the
// 4 GiB one), and nothing is written.
func TestInflatedHeaderIsRefused(t *testing.T) {
	for storeName, newStore := range memAndBadger() {
		for name, raised := range map[string]crypto.KDFParams{
			"4 GiB t=3":     {Time: 3, MemoryKiB: 4 << 20, Threads: 4},
			"2 GiB":         {Time: 1, MemoryKiB: 2 << 20, Threads: 1},
			"t=11":          {Time: 11, MemoryKiB: 64, Threads: 1},
			"t=16":          {Time: 16, MemoryKiB: 64 * 1024, Threads: 4},
			"17 threads":    {Time: 1, MemoryKiB: 8 * 17, Threads: 17},
			"255 threads":   {Time: 1, MemoryKiB: 8 * 255, Threads: 255},
			"above format":  {Time: 17, MemoryKiB: 64, Threads: 1},
			"memory > 4GiB": {Time: 1, MemoryKiB: 4<<20 + 1, Threads: 1},
		} {
			t.Run(storeName+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				adv := faultstore.NewAdversary(newStore(t))
				db := openDB(t, adv.Store(), "firm", "s")
				seq, err := openVault(t, db, "books").Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				_, err = seq.Next(ctx)
				require.NoError(t, err)
				require.NoError(t, db.Close())

				it, err := adv.Raw().Get(ctx, "v/books/_header")
				require.NoError(t, err)
				require.NoError(t, adv.Set(ctx, "v/books/_header", withCost(it.Value, raised)))
				before, err := adv.Snapshot(ctx)
				require.NoError(t, err)

				db2 := openDB(t, adv.Store(), "firm", "s")
				_, err = db2.OpenVault(ctx, "books")
				assert.ErrorIs(t, err, noydb.ErrKDFTooCostly)
				assert.ErrorIs(t, err, noydb.ErrWeakKDF)
				after, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				assert.Equal(t, before, after, "a refused open writes nothing")
			})
		}
	}
}

// The ceiling is the opener's: a vault made with costs above a low ceiling
// opens only for an opener that raised its ceiling to cover them. Small costs
// stand in for the 1 GiB default; the mechanism is the same.
func TestRaisedCeilingOpensCostlierVault(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstoreNew())
	cost := crypto.KDFParams{Time: 3, MemoryKiB: 256, Threads: 2}

	// Creating a vault above one's own ceiling is refused, writing nothing.
	_, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("s"), KDF: cost,
		MaxKDF: crypto.KDFParams{Time: 2}, InsecureAllowWeakKDF: true})
	assert.ErrorIs(t, err, noydb.ErrKDFTooCostly)
	_, err = vault.Open(ctx, vault.Config{Store: adv.Store(), Name: "books", User: "firm", Secret: []byte("s"),
		KDF: cost, MaxKDF: crypto.KDFParams{MemoryKiB: 128}, InsecureAllowWeakKDF: true})
	assert.ErrorIs(t, err, vault.ErrKDFTooCostly)
	keys, err := adv.Keys(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, keys)

	db := openCeiling(t, adv.Store(), cost, cost)
	c := vault.CollectionOf[Invoice](openVault(t, db, "books"), "invoices")
	require.NoError(t, c.Put(ctx, "inv-1", Invoice{Total: 9}))
	require.NoError(t, db.Close())

	for name, low := range map[string]crypto.KDFParams{
		"time":    {Time: 2, MemoryKiB: 256, Threads: 2},
		"memory":  {Time: 3, MemoryKiB: 255, Threads: 2},
		"threads": {Time: 3, MemoryKiB: 256, Threads: 1},
	} {
		_, err := openCeiling(t, adv.Store(), crypto.KDFParams{}, low).OpenVault(ctx, "books")
		assert.ErrorIs(t, err, noydb.ErrKDFTooCostly, name)
		_, err = vault.Open(ctx, vault.Config{Store: adv.Store(), Name: "books", User: "firm", Secret: []byte("s"),
			MaxKDF: low, InsecureAllowWeakKDF: true})
		assert.ErrorIs(t, err, vault.ErrKDFTooCostly, name)
	}

	// The creator's costs, or a zero ceiling (the 1 GiB default), open it.
	for name, ceiling := range map[string]crypto.KDFParams{"exact": cost, "default": {}} {
		db := openCeiling(t, adv.Store(), crypto.KDFParams{}, ceiling)
		got, err := vault.CollectionOf[Invoice](openVault(t, db, "books"), "invoices").Get(ctx, "inv-1")
		require.NoError(t, err, name)
		assert.Equal(t, 9, got.Total, name)
	}
}

// BenchmarkRefuseInflatedHeader measures how long OpenVault takes to refuse a
// header raised to 4 GiB, t=3: no derivation happens, so it is the cost of
// reading the header.
func BenchmarkRefuseInflatedHeader(b *testing.B) {
	ctx := context.Background()
	st := memstoreNew()
	db := openDB(b, st, "firm", "s")
	openVault(b, db, "books")
	require.NoError(b, db.Close())
	it, err := st.Get(ctx, "v/books/_header")
	require.NoError(b, err)
	_, err = st.Put(ctx, "v/books/_header", withCost(it.Value, crypto.KDFParams{Time: 3, MemoryKiB: 4 << 20, Threads: 4}))
	require.NoError(b, err)
	for b.Loop() {
		_, err := vault.Open(ctx, vault.Config{Store: st, Name: "books", User: "firm", Secret: []byte("s")})
		if err == nil {
			b.Fatal("inflated header accepted")
		}
	}
}
