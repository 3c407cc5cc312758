package noydb_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// cheapKDF keeps tests fast; production vaults use crypto.DefaultKDF.
var cheapKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

type Invoice struct {
	Number   string
	Customer string
	Total    int
	Notes    string
}

func openDB(t testing.TB, st stores.Store, user, secret string) *noydb.DB {
	t.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{
		User: user, Secret: []byte(secret), Store: st,
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func openVault(t testing.TB, db *noydb.DB, name string) *vault.Vault {
	t.Helper()
	v, err := db.OpenVault(context.Background(), name)
	require.NoError(t, err)
	return v
}

// snapshot returns every key and value of a store.
func snapshot(t testing.TB, st stores.Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	for it, err := range st.List(context.Background(), "") {
		require.NoError(t, err)
		m[it.Key] = string(it.Value)
	}
	return m
}

func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	db := openDB(t, st, "firm", "firm-secret-2026")
	v := openVault(t, db, "books")
	invoices := vault.CollectionOf[Invoice](v, "invoices")

	require.NoError(t, invoices.Put(ctx, "inv-1", Invoice{Customer: "Rossi", Total: 120}))
	got, err := invoices.Get(ctx, "inv-1")
	require.NoError(t, err)
	assert.Equal(t, Invoice{Customer: "Rossi", Total: 120}, got)

	// The store never sees the plaintext.
	for k, val := range snapshot(t, st) {
		assert.NotContains(t, val, "Rossi", "key %q", k)
	}

	seq, err := v.Sequence("invoice-2026", sequence.Options{})
	require.NoError(t, err)
	for want := uint64(1); want <= 3; want++ {
		inv, err := invoices.PutNumbered(ctx, fmt.Sprintf("n-%d", want), seq, func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted, Customer: "Bianchi"}, nil
		})
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(want), inv.Number)
	}
	n, err := invoices.Count(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	var ids []string
	for r, err := range invoices.List(ctx) {
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []string{"inv-1", "n-1", "n-2", "n-3"}, ids)

	require.NoError(t, invoices.Delete(ctx, "inv-1"))
	_, err = invoices.Get(ctx, "inv-1")
	assert.ErrorIs(t, err, vault.ErrNotFound)
	assert.ErrorIs(t, invoices.Delete(ctx, "inv-1"), vault.ErrNotFound)

	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.NoError(t, rep.Problem)
	// 1 put + 3 numbered puts with 3 allocations + 1 delete.
	assert.Equal(t, uint64(8), rep.Entries)

	// A second DB with the same secret reads the same data.
	db2 := openDB(t, st, "firm", "firm-secret-2026")
	v2 := openVault(t, db2, "books")
	got, err = vault.CollectionOf[Invoice](v2, "invoices").Get(ctx, "n-2")
	require.NoError(t, err)
	assert.Equal(t, "2", got.Number)
}

func TestWrongSecret(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openVault(t, openDB(t, st, "firm", "right"), "books")
	require.NoError(t, vault.CollectionOf[Invoice](v, "invoices").Put(ctx, "a", Invoice{Total: 1}))
	before := snapshot(t, st)
	for i := range 100 {
		db := openDB(t, st, "firm", fmt.Sprintf("wrong-%d", i))
		_, err := db.OpenVault(ctx, "books")
		require.ErrorIs(t, err, noydb.ErrWrongSecret)
		assert.NotErrorIs(t, err, noydb.ErrTampered)
	}
	assert.Equal(t, before, snapshot(t, st), "wrong secrets wrote nothing")

	// Another user without a key slot is told so.
	_, err := openDB(t, st, "intruder", "right").OpenVault(ctx, "books")
	assert.ErrorIs(t, err, noydb.ErrNoAccess)
}

func TestEveryBitFlipIsTampered(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openVault(t, openDB(t, st, "firm", "s"), "books")
	c := vault.CollectionOf[Invoice](v, "invoices")
	require.NoError(t, c.Put(ctx, "inv-1", Invoice{Notes: strings.Repeat("x", 1024)}))
	key := "v/books/invoices/inv-1"
	orig, err := st.Get(ctx, key)
	require.NoError(t, err)
	flips := 0
	for i := range len(orig.Value) * 8 {
		b := append([]byte(nil), orig.Value...)
		b[i/8] ^= 1 << (i % 8)
		_, err := st.Put(ctx, key, b)
		require.NoError(t, err)
		_, err = c.Get(ctx, "inv-1")
		if !assert.ErrorIs(t, err, noydb.ErrTampered, "bit %d", i) {
			break
		}
		flips++
	}
	assert.Equal(t, len(orig.Value)*8, flips)
}

func TestMovedCiphertextIsTampered(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	db := openDB(t, st, "firm", "s")
	books, other := openVault(t, db, "books"), openVault(t, db, "other")
	inv := vault.CollectionOf[Invoice](books, "invoices")
	rec := vault.CollectionOf[Invoice](books, "receipts")
	oinv := vault.CollectionOf[Invoice](other, "invoices")
	require.NoError(t, inv.Put(ctx, "a", Invoice{Total: 1}))
	require.NoError(t, inv.Put(ctx, "b", Invoice{Total: 2}))
	require.NoError(t, rec.Put(ctx, "a", Invoice{Total: 3}))
	require.NoError(t, oinv.Put(ctx, "a", Invoice{Total: 4}))
	rev1, err := st.Get(ctx, "v/books/invoices/a")
	require.NoError(t, err)
	require.NoError(t, inv.Put(ctx, "a", Invoice{Total: 10})) // revision 2

	copyTo := func(dst string, val []byte) {
		_, err := st.Put(ctx, dst, val)
		require.NoError(t, err)
	}
	cur, err := st.Get(ctx, "v/books/invoices/a")
	require.NoError(t, err)

	copyTo("v/books/invoices/b", cur.Value) // another id
	_, err = inv.Get(ctx, "b")
	assert.ErrorIs(t, err, noydb.ErrTampered, "copied to another id")

	copyTo("v/books/receipts/a", cur.Value) // another collection
	_, err = rec.Get(ctx, "a")
	assert.ErrorIs(t, err, noydb.ErrTampered, "copied to another collection")

	copyTo("v/other/invoices/a", cur.Value) // another vault
	_, err = oinv.Get(ctx, "a")
	assert.ErrorIs(t, err, noydb.ErrTampered, "copied to another vault")

	// An older revision re-labelled as the newer one.
	old := append([]byte(nil), rev1.Value...)
	newRev, err := crypto.RecordRevision(cur.Value)
	require.NoError(t, err)
	oldRev, err := crypto.RecordRevision(old)
	require.NoError(t, err)
	require.Equal(t, oldRev+1, newRev)
	relabel(t, old, oldRev, newRev)
	copyTo("v/books/invoices/a", old)
	_, err = inv.Get(ctx, "a")
	assert.ErrorIs(t, err, noydb.ErrTampered, "older revision re-labelled")
}

// relabel rewrites the clear revision of a record envelope in place.
func relabel(t testing.TB, env []byte, from, to uint64) {
	t.Helper()
	var f, g [8]byte
	for i := range 8 {
		f[7-i] = byte(from >> (8 * i))
		g[7-i] = byte(to >> (8 * i))
	}
	i := strings.Index(string(env), string(f[:]))
	require.GreaterOrEqual(t, i, 0, "revision bytes not found in envelope")
	copy(env[i:], g[:])
	got, err := crypto.RecordRevision(env)
	require.NoError(t, err)
	require.Equal(t, to, got)
}

func TestHeaderCostTampering(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		kdf  crypto.KDFParams
	}{
		{"lowered", crypto.KDFParams{Time: 1, MemoryKiB: 8 * 1024, Threads: 1}},
		{"raised time", crypto.KDFParams{Time: 1000, MemoryKiB: 64 * 1024, Threads: 4}},
		{"raised memory", crypto.KDFParams{Time: 3, MemoryKiB: 16 << 20, Threads: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New()
			db, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("s"), Store: st,
				KDF: crypto.KDFParams{Time: 2, MemoryKiB: 19 * 1024, Threads: 1}})
			require.NoError(t, err)
			_, err = db.OpenVault(ctx, "books")
			require.NoError(t, err)
			it, err := st.Get(ctx, "v/books/_header")
			require.NoError(t, err)
			_, err = st.Put(ctx, "v/books/_header", withCost(it.Value, tc.kdf))
			require.NoError(t, err)

			db2, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("s"), Store: st})
			require.NoError(t, err)
			_, err = db2.OpenVault(ctx, "books")
			assert.ErrorIs(t, err, noydb.ErrWeakKDF)
		})
	}
}

func TestNamesAndClose(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, memstore.New(), "firm", "s")
	for _, name := range []string{"", "a/b", "nul\x00", "_hidden", strings.Repeat("v", 129)} {
		_, err := db.OpenVault(ctx, name)
		assert.Error(t, err, "vault %q", name)
	}
	v := openVault(t, db, "books")
	_, err := vault.CollectionOf[Invoice](v, "_sequences").Get(ctx, "x")
	assert.ErrorIs(t, err, vault.ErrReservedName)
	assert.ErrorIs(t, vault.CollectionOf[Invoice](v, "a/b").Put(ctx, "x", Invoice{}), vault.ErrInvalidName)
	c := vault.CollectionOf[Invoice](v, "invoices")
	for _, id := range []string{"", "nul\x00", strings.Repeat("i", vault.MaxIDLen+1)} {
		assert.ErrorIs(t, c.Put(ctx, id, Invoice{}), vault.ErrInvalidName, "id %q", id)
	}
	require.NoError(t, c.Put(ctx, "ok", Invoice{}))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, c.Put(cancelled, "x", Invoice{}), context.Canceled)
	_, err = c.Get(cancelled, "ok")
	assert.ErrorIs(t, err, context.Canceled)
	_, err = c.Get(ctx, "x")
	assert.ErrorIs(t, err, vault.ErrNotFound, "a cancelled put wrote nothing")

	require.NoError(t, db.Close())
	require.NoError(t, db.Close())
	assert.ErrorIs(t, c.Put(ctx, "x", Invoice{}), noydb.ErrClosed)
	_, err = c.Get(ctx, "ok")
	assert.ErrorIs(t, err, noydb.ErrClosed)
	assert.ErrorIs(t, c.Delete(ctx, "ok"), noydb.ErrClosed)
	_, err = c.Count(ctx)
	assert.ErrorIs(t, err, noydb.ErrClosed)
	for _, err := range c.List(ctx) {
		assert.ErrorIs(t, err, noydb.ErrClosed)
	}
	_, err = db.OpenVault(ctx, "books")
	assert.ErrorIs(t, err, noydb.ErrClosed)
}

// TestFirstOpenRace opens one new vault from several DBs at once: all must end
// up with the one data key that was committed.
func TestFirstOpenRace(t *testing.T) {
	for name, newStore := range raceStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			const n = 8
			vaults := make([]*vault.Vault, n)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				db := openDB(t, st, "firm", "s")
				wg.Go(func() { vaults[i], errs[i] = db.OpenVault(ctx, "books") })
			}
			wg.Wait()
			for i := range n {
				require.NoError(t, errs[i])
			}
			// Every opener can read what every other wrote.
			for i, v := range vaults {
				require.NoError(t, vault.CollectionOf[int](v, "c").Put(ctx, fmt.Sprint(i), i))
			}
			for _, v := range vaults {
				c := vault.CollectionOf[int](v, "c")
				for i := range n {
					got, err := c.Get(ctx, fmt.Sprint(i))
					require.NoError(t, err)
					assert.Equal(t, i, got)
				}
			}
		})
	}
}

func TestErrorsAreDistinct(t *testing.T) {
	for _, e := range []error{noydb.ErrWrongSecret, noydb.ErrNoAccess, noydb.ErrWeakKDF, noydb.ErrTampered} {
		assert.False(t, errors.Is(e, noydb.ErrClosed))
	}
	assert.False(t, errors.Is(noydb.ErrWrongSecret, noydb.ErrTampered))
}

// withCost rewrites the cost fields of an encoded vault header, as a store
// could: the last 9 bytes are time (4), memory (4) and threads (1), big-endian.
func withCost(header []byte, p crypto.KDFParams) []byte {
	b := append([]byte(nil), header...)
	n := len(b)
	binary.BigEndian.PutUint32(b[n-9:], p.Time)
	binary.BigEndian.PutUint32(b[n-5:], p.MemoryKiB)
	b[n-1] = p.Threads
	return b
}
