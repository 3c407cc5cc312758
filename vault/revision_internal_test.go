package vault

// Internal tests: they seal records with the vault's own data key, which a
// black-box test cannot reach, to build authentic values a store could only
// replay, never forge.

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
)

type receipt struct {
	Number uint64
	Total  int
}

func internalStores() map[string]func(testing.TB) stores.Store {
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

func openTestVault(t *testing.T, st stores.Store) *Vault {
	t.Helper()
	v, err := Open(context.Background(), Config{
		Store: st, Name: "books", User: "firm", Secret: []byte("s"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// storeKeys copies every key and value of st.
func storeKeys(t *testing.T, st stores.Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	for it, err := range st.List(context.Background(), "") {
		require.NoError(t, err)
		m[it.Key] = string(it.Value)
	}
	return m
}

// A record at the largest revision cannot take another: every write that
// would follow it fails with ErrRevisionOverflow and writes nothing, instead
// of wrapping to 0.
func TestRevisionOverflowRefused(t *testing.T) {
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openTestVault(t, st)
			receipts := CollectionOf[receipt](v, "receipts")
			plain, err := json.Marshal(receipt{Total: 10})
			require.NoError(t, err)
			sealed, err := crypto.SealRecord(v.dk, plain, crypto.RecordRef{Vault: "books", Collection: "receipts", ID: "r-1", Revision: math.MaxUint64})
			require.NoError(t, err)
			_, err = st.Put(ctx, "v/books/receipts/r-1", sealed)
			require.NoError(t, err)
			before := storeKeys(t, st)

			err = receipts.Put(ctx, "r-1", receipt{Total: 11})
			assert.ErrorIs(t, err, ErrRevisionOverflow)

			_, err = jsonRecords(v, "Number").Stamp(ctx, "receipts", "r-1", deferred.Mark{Series: "receipts", N: 1, Formatted: "1"})
			assert.ErrorIs(t, err, ErrRevisionOverflow)
			assert.Equal(t, before, storeKeys(t, st), "nothing written")

			for r, err := range receipts.List(ctx) {
				require.NoError(t, err)
				assert.Equal(t, uint64(math.MaxUint64), r.Revision, "the record itself is readable")
			}
			require.NoError(t, receipts.Delete(ctx, "r-1"), "and can be deleted")
		})
	}
}

// A record's number marks survive the JSON body round trip, and a body
// without marks is stored exactly as before marks existed.
func TestRecordMarksLayout(t *testing.T) {
	body := []byte(`{"Number":1}`)
	assert.Equal(t, body, joinRecord(nil, body), "no marks: plain JSON")
	marks := []mark{
		{kind: markSequence, series: "inv", partition: []string{"2026", "IT"}, n: 2026000001},
		{kind: markNumbering, series: "receipts", n: 7},
	}
	plain := joinRecord(marks, body)
	assert.Equal(t, byte(markedRecord), plain[0])
	got, gotBody, err := splitRecord(plain)
	require.NoError(t, err)
	assert.Equal(t, marks, got)
	assert.Equal(t, body, gotBody)
	n, ok := findMark(got, markSequence, "inv", []string{"2026", "IT"})
	assert.True(t, ok)
	assert.Equal(t, uint64(2026000001), n)
	_, ok = findMark(got, markSequence, "inv", []string{"2026"})
	assert.False(t, ok, "another partition")
	_, ok = findMark(got, markSequence, "receipts", nil)
	assert.False(t, ok, "another kind")

	for i := 1; i < len(plain)-len(body); i++ {
		_, _, err := splitRecord(plain[:i])
		assert.ErrorIs(t, err, codec.ErrCorrupt, "truncated at %d", i)
	}
}

// A stamp over a record that carries another number of the series writes
// nothing and reports that number, so the pass voids the new one.
func TestStampRefusesSecondNumber(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openTestVault(t, st)
	receipts := CollectionOf[receipt](v, "receipts")
	require.NoError(t, receipts.Put(ctx, "r-1", receipt{Total: 10}))
	recs := jsonRecords(v, "Number")
	st1, err := recs.Stamp(ctx, "receipts", "r-1", deferred.Mark{Series: "receipts", N: 1, Formatted: "1"})
	require.NoError(t, err)
	assert.True(t, st1.Stamped)
	before := storeKeys(t, st)

	again, err := recs.Stamp(ctx, "receipts", "r-1", deferred.Mark{Series: "receipts", N: 1, Formatted: "1"})
	require.NoError(t, err)
	assert.Equal(t, deferred.Stamp{Revision: st1.Revision, CipherHash: st1.CipherHash}, again, "idempotent")
	second, err := recs.Stamp(ctx, "receipts", "r-1", deferred.Mark{Series: "receipts", N: 3, Formatted: "3"})
	require.NoError(t, err)
	assert.Equal(t, deferred.Stamp{Revision: st1.Revision, CipherHash: st1.CipherHash, Carries: 1}, second)
	stamps, found, err := stampTxRecords{recs, st}.StampBatch(ctx, "receipts", []string{"r-1"},
		[]deferred.Mark{{Series: "receipts", N: 3, Formatted: "3"}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, found)
	assert.Equal(t, uint64(1), stamps[0].Carries)
	assert.Equal(t, before, storeKeys(t, st), "nothing written")

	n, _, ok, err := recs.Number(ctx, "receipts", "r-1", "receipts")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, uint64(1), n)
	r, err := receipts.Get(ctx, "r-1")
	require.NoError(t, err)
	assert.Equal(t, receipt{Number: 1, Total: 10}, r)
}

// jsonRecords stamps the JSON member field, as the deprecated Numbering does.
func jsonRecords(v *Vault, field string) stampRecords {
	return stampRecords{v: v, apply: func(body []byte, s sequence.Serial) ([]byte, error) {
		out, _, err := setField(body, field, jsonNumber(s))
		return out, err
	}}
}
