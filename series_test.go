package noydb_test

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Series lists the counters of a vault (one per partition, partitions
// with '/' and '%' decoded) with their heads, and the series numbered by
// passes with their last numbers, collections and formats.
func TestSeriesListsCountersAndPasses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// One folder, seen as a file store (passes) and then listed.
	fs := openFileStore(t, dir)
	v := openVault(t, openDB(t, fs, "alice", "s3cret"), "books")
	c := vault.CollectionOf[Stub](v, "stubs")
	h, err := vault.NumberingOf(c, "tickets", sequence.Options{Format: "T-{seq:03}"}, setStub)
	require.NoError(t, err)
	for _, id := range []string{"a", "b", "c"} {
		r, err := h.Put(ctx, id, Stub{})
		require.NoError(t, err)
		require.True(t, r.Pending)
	}
	_, err = h.Settle(ctx)
	require.NoError(t, err)

	got, err := v.Series(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{{Name: "tickets", Head: 3, Passes: true, Collection: "stubs", Format: "T-{seq:03}"}}, got)

	m := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "books")
	next := func(series string, parts ...any) {
		s, err := m.Sequence(series, sequence.Options{Partition: parts})
		require.NoError(t, err)
		_, err = s.Next(ctx)
		require.NoError(t, err)
	}
	next("inv")
	next("inv")
	next("fatture", 2026, "a/b%c")
	next("fatture", 2025)
	got, err = m.Series(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{
		{Name: "fatture", Partition: []string{"2025"}, Head: 1},
		{Name: "fatture", Partition: []string{"2026", "a/b%c"}, Head: 1},
		{Name: "inv", Head: 2},
	}, got)

	empty := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "books")
	got, err = empty.Series(ctx)
	require.NoError(t, err)
	assert.Empty(t, got)

	require.NoError(t, m.Close())
	_, err = m.Series(ctx)
	assert.ErrorIs(t, err, vault.ErrClosed)
}

// A counter key the vault never wrote is reported, never listed: a key
// whose name is not a series is the store misbehaving, a value that does
// not authenticate is tampering.
func TestSeriesRefusesStrayKeys(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		key  string
		want error
	}{
		"invalid series name": {"v/books/_sequences/", stores.ErrMisbehaving},
		// The partition "a\x00b" is encoded a%00b: this key names no
		// counter the vault can write, and reading "a\x00b" would read
		// another key, listing a counter that is not there.
		"partition with a raw NUL":  {"v/books/_sequences/inv\x00a\x00b", stores.ErrMisbehaving},
		"empty partition component": {"v/books/_sequences/inv\x002026//a", stores.ErrMisbehaving},
		"forged counter":            {"v/books/_sequences/ghost", vault.ErrTampered},
		"forged pass series":        {"v/books/_numbering/ghost/head", vault.ErrTampered},
	} {
		t.Run(name, func(t *testing.T) {
			st := memstore.New()
			v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
			_, err := st.Put(ctx, tc.key, []byte("not sealed by the vault"))
			require.NoError(t, err)
			_, err = v.Series(ctx)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

// A store that yields a key twice, or out of order, breaks the List
// contract: Series reports it rather than listing a counter twice.
func TestSeriesRefusesARepeatedKey(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	v := openVault(t, openDB(t, adv.Store(), "alice", "s3cret"), "books")
	for _, series := range []string{"inv", "orders"} {
		s, err := v.Sequence(series, sequence.Options{})
		require.NoError(t, err)
		_, err = s.Next(ctx)
		require.NoError(t, err)
	}
	got, err := v.Series(ctx)
	require.NoError(t, err)
	require.Equal(t, []vault.SeriesInfo{{Name: "inv", Head: 1}, {Name: "orders", Head: 1}}, got)

	// The real counter of orders, yielded once more before the real ones.
	it, err := adv.Raw().Get(ctx, "v/books/_sequences/orders")
	require.NoError(t, err)
	adv.InjectList("v/books/_sequences/", it)
	_, err = v.Series(ctx)
	assert.ErrorIs(t, err, stores.ErrMisbehaving)
}

// Series lists only its own vault's series, also next to a vault whose
// name extends its own (books, books2): the key prefixes end in '/'.
func TestSeriesOfAVaultNamedAsAPrefixOfAnother(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs := openFileStore(t, dir)
	db := openDB(t, fs, "alice", "s3cret")
	books, books2 := openVault(t, db, "books"), openVault(t, db, "books2")
	for _, v := range []*vault.Vault{books, books2} {
		h, err := vault.NumberingOf(vault.CollectionOf[Stub](v, "stubs"), v.Name()+"-t", sequence.Options{}, setStub)
		require.NoError(t, err)
		_, err = h.Put(ctx, "a", Stub{})
		require.NoError(t, err)
		_, err = h.Settle(ctx)
		require.NoError(t, err)
	}
	got, err := books.Series(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{{Name: "books-t", Head: 1, Passes: true, Collection: "stubs"}}, got)

	mdb := openDB(t, memstore.New(), "alice", "s3cret")
	m, m2 := openVault(t, mdb, "books"), openVault(t, mdb, "books2")
	for _, v := range []*vault.Vault{m, m2, m2} {
		s, err := v.Sequence(v.Name()+"-c", sequence.Options{})
		require.NoError(t, err)
		_, err = s.Next(ctx)
		require.NoError(t, err)
	}
	got, err = m.Series(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{{Name: "books-c", Head: 1}}, got)
	got, err = m2.Series(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{{Name: "books2-c", Head: 2}}, got)
}

// Partitions holding the bytes the key layout escapes ('/', '%', NUL,
// \x01) are listed as they were given, each with its own head.
func TestSeriesListsPartitionsWithEscapedBytes(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "books")
	parts := [][]any{{"a\x00b"}, {"a", "b"}, {"a/b"}, {"\x01", "%00"}, {"%2F"}}
	for i, p := range parts {
		s, err := v.Sequence("inv", sequence.Options{Partition: p})
		require.NoError(t, err)
		for range i + 1 {
			_, err = s.Next(ctx)
			require.NoError(t, err)
		}
	}
	got, err := v.Series(ctx)
	require.NoError(t, err)
	heads := map[string]uint64{}
	for _, s := range got {
		require.Equal(t, "inv", s.Name)
		heads[fmt.Sprintf("%q", s.Partition)] = s.Head
	}
	assert.Equal(t, map[string]uint64{
		`["a\x00b"]`: 1, `["a" "b"]`: 2, `["a/b"]`: 3, `["\x01" "%00"]`: 4, `["%2F"]`: 5,
	}, heads)
}

// SeriesNamed reads one series: its counters of every partition (not those
// of a longer name starting with it) and its deferred series, reading one
// key of the deferred series' folder however many records it holds.
func TestSeriesNamedReadsOneSeries(t *testing.T) {
	ctx := context.Background()
	counted := &listCounter{Store: openFileStore(t, t.TempDir())}
	v := openVault(t, openDB(t, counted, "alice", "s3cret"), "books")
	c := vault.CollectionOf[Stub](v, "stubs")
	h, err := vault.NumberingOf(c, "tickets", sequence.Options{}, setStub)
	require.NoError(t, err)
	for i := range 50 {
		_, err := h.Put(ctx, fmt.Sprintf("t-%02d", i), Stub{})
		require.NoError(t, err)
	}
	_, err = h.Settle(ctx)
	require.NoError(t, err)

	counted.items.Store(0)
	got, err := v.SeriesNamed(ctx, "tickets")
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{{Name: "tickets", Head: 50, Passes: true, Collection: "stubs"}}, got)
	assert.LessOrEqual(t, counted.items.Load(), int64(2), "items read from listings")

	counted.items.Store(0)
	all, err := v.Series(ctx)
	require.NoError(t, err)
	assert.Equal(t, got, all)
	assert.Greater(t, counted.items.Load(), int64(100), "Series reads every key of the deferred series")

	none, err := v.SeriesNamed(ctx, "ticket")
	require.NoError(t, err)
	assert.Empty(t, none, "a prefix of a series' name is no series")
	_, err = v.SeriesNamed(ctx, "")
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)

	m := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "books")
	for _, name := range []string{"inv", "inv2", "inv/x"} {
		for _, p := range []any{2025, 2026} {
			s, err := m.Sequence(name, sequence.Options{Partition: []any{p}})
			require.NoError(t, err)
			_, err = s.Next(ctx)
			require.NoError(t, err)
		}
	}
	got, err = m.SeriesNamed(ctx, "inv")
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{
		{Name: "inv", Partition: []string{"2025"}, Head: 1},
		{Name: "inv", Partition: []string{"2026"}, Head: 1},
	}, got)
	got, err = m.SeriesNamed(ctx, "inv/x")
	require.NoError(t, err)
	assert.Len(t, got, 2)
}

// listCounter counts the items its store's List yields.
type listCounter struct {
	stores.Store
	items atomic.Int64
}

func (l *listCounter) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for it, err := range l.Store.List(ctx, prefix) {
			l.items.Add(1)
			if !yield(it, err) {
				return
			}
		}
	}
}
