package vault

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A record written before revisions carried their metadata (plain JSON, or
// marks and JSON) reads with a zero time and an empty author, keeps its
// value, revision and numbers, and gets metadata from its next write.
func TestRecordWithoutMetaReads(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openTestVault(t, st)
	receipts := CollectionOf[receipt](v, "receipts")
	body, err := json.Marshal(receipt{Number: 4, Total: 10})
	require.NoError(t, err)
	marked := joinRecord([]mark{{kind: markNumbering, series: "receipts", n: 4}}, body)
	for id, plain := range map[string][]byte{"plain": body, "marked": marked} {
		sealed, err := crypto.SealRecord(v.dk, plain, crypto.RecordRef{Vault: "books", Collection: "receipts", ID: id, Revision: 3})
		require.NoError(t, err)
		_, err = st.Put(ctx, "v/books/receipts/"+id, sealed)
		require.NoError(t, err)

		r, err := receipts.GetRecord(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, Record[receipt]{ID: id, Revision: 3, Value: receipt{Number: 4, Total: 10}}, r, id)

		u, err := receipts.Update(ctx, id, func(r *receipt) error { r.Total++; return nil })
		require.NoError(t, err, id)
		assert.Equal(t, uint64(4), u.Revision)
		assert.Equal(t, "firm", u.Author)
		assert.False(t, u.Modified.IsZero())
		n, _, ok, err := stampRecords{v: v}.Number(ctx, "receipts", id, "receipts")
		require.NoError(t, err)
		assert.True(t, ok)
		if id == "marked" {
			assert.Equal(t, uint64(4), n, "the number mark is kept")
		} else {
			assert.Zero(t, n)
		}
	}
}

// The metadata header round-trips, is absent from older layouts, and a
// truncated one does not decode (a record carrying it opens as ErrTampered).
func TestRecordMetaLayout(t *testing.T) {
	m := meta{modified: time.Unix(1764547200, 123456789).UTC(), author: "firm"}
	rest := joinRecord([]mark{{kind: markSequence, series: "inv", n: 9}}, []byte(`{"A":1}`))
	plain := joinMeta(m, rest)
	assert.Equal(t, byte(metaRecord), plain[0])
	got, gotRest, err := splitMeta(plain, "")
	require.NoError(t, err)
	assert.Equal(t, m, got)
	assert.Equal(t, rest, gotRest)

	for _, old := range [][]byte{[]byte(`{"A":1}`), rest, {}} {
		got, gotRest, err := splitMeta(old, "firm")
		require.NoError(t, err)
		assert.Equal(t, meta{}, got)
		assert.Equal(t, old, gotRest)
	}
	header := len(plain) - len(rest)
	for i := 1; i < header; i++ {
		_, _, err := splitMeta(plain[:i], "")
		assert.ErrorIs(t, err, codec.ErrCorrupt, "truncated at %d", i)
	}

	v := openTestVault(t, memstore.New())
	sealed, err := crypto.SealRecord(v.dk, plain[:header-1], crypto.RecordRef{Vault: "books", Collection: "receipts", ID: "r", Revision: 1})
	require.NoError(t, err)
	_, err = v.openStored("receipts", "r", stores.Item{Value: sealed}, true)
	assert.ErrorIs(t, err, ErrTampered)
}

// The functions package sequence hands the vault through internal/wire
// are set and of the types the vault asserts (the assertion runs when the
// package initialises; this names the dependency).
func TestWireSequenceHooks(t *testing.T) {
	assert.NotNil(t, seqNextTx)
	assert.NotNil(t, seqCheck)
}

// joinMeta returns rest preceded by the metadata header of m.
func joinMeta(m meta, rest []byte) []byte {
	return appendMeta(nil, m, rest)
}
