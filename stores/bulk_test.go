package stores_test

import (
	"context"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

func filled(t *testing.T, keys ...string) stores.Store {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	for _, k := range keys {
		_, err := st.Put(context.Background(), k, []byte("v:"+k))
		require.NoError(t, err)
	}
	// Only the Store methods: memstore also lists ranges, which the
	// fallbacks below must not use.
	return struct{ stores.Store }{st}
}

func collect(t *testing.T, seq iter.Seq2[stores.Item, error]) ([]string, error) {
	t.Helper()
	var keys []string
	for it, err := range seq {
		if err != nil {
			return keys, err
		}
		keys = append(keys, it.Key)
	}
	return keys, nil
}

// On a store without ListAfter or GetMany, the functions fall
// back on List and Get with the same answers.
func TestBulkFallbacks(t *testing.T) {
	st := filled(t, "a", "f/1", "f/2", "f/3", "g")
	ctx := context.Background()
	require.NotImplements(t, (*stores.RangeLister)(nil), st)
	require.NotImplements(t, (*stores.MultiGetter)(nil), st)

	keys, err := collect(t, stores.ListAfter(ctx, st, "f/", "f/1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"f/2", "f/3"}, keys)
	keys, err = collect(t, stores.ListAfter(ctx, st, "f/", ""))
	require.NoError(t, err)
	assert.Equal(t, []string{"f/1", "f/2", "f/3"}, keys)

	items, err := stores.GetMany(ctx, st, []string{"g", "x", "a", "g"})
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.Equal(t, "a", items[0].Key)
	assert.Equal(t, []byte("v:a"), items[0].Value)
	assert.Equal(t, "g", items[1].Key)
	_, err = stores.GetMany(ctx, st, []string{"a", ""})
	assert.ErrorIs(t, err, stores.ErrInvalidKey)
}

// liar is a store whose ListAfter and GetMany answer what it is told to.
type liar struct {
	stores.Store
	listed []stores.Item
	got    []stores.Item
}

func (l *liar) ListAfter(context.Context, string, string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for _, it := range l.listed {
			if !yield(it, nil) {
				return
			}
		}
	}
}

func (l *liar) GetMany(context.Context, []string) ([]stores.Item, error) { return l.got, nil }

func items(keys ...string) []stores.Item {
	out := make([]stores.Item, len(keys))
	for i, k := range keys {
		out[i] = stores.Item{Key: k, Value: []byte(k), Version: 1}
	}
	return out
}

// An answer out of the asked range or order ends in ErrMisbehaving, after
// the items that came before it; nothing past it reaches the caller.
func TestBulkMisbehavingStore(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		listed []string
		before []string // what reaches the caller before the error
	}{
		"outside the prefix": {[]string{"f/2", "g"}, []string{"f/2"}},
		"at the cursor":      {[]string{"f/1", "f/2"}, nil},
		"before the cursor":  {[]string{"f/0"}, nil},
		"out of order":       {[]string{"f/3", "f/2"}, []string{"f/3"}},
		"twice":              {[]string{"f/2", "f/2"}, []string{"f/2"}},
		"below the prefix":   {[]string{"e"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			st := &liar{Store: filled(t), listed: items(tc.listed...)}
			keys, err := collect(t, stores.ListAfter(ctx, st, "f/", "f/1"))
			assert.ErrorIs(t, err, stores.ErrMisbehaving)
			assert.Equal(t, tc.before, keys)
		})
	}
	st := &liar{Store: filled(t), listed: items("f/2", "f/3")}
	keys, err := collect(t, stores.ListAfter(ctx, st, "f/", "f/1"))
	require.NoError(t, err, "an honest answer")
	assert.Equal(t, []string{"f/2", "f/3"}, keys)

	for name, got := range map[string][]string{
		"not asked for": {"a", "z"},
		"out of order":  {"b", "a"},
		"twice":         {"a", "a"},
	} {
		t.Run(name, func(t *testing.T) {
			st := &liar{Store: filled(t), got: items(got...)}
			_, err := stores.GetMany(ctx, st, []string{"a", "b", "c"})
			assert.ErrorIs(t, err, stores.ErrMisbehaving)
		})
	}
	st = &liar{Store: filled(t), got: items("a", "c")}
	got, err := stores.GetMany(ctx, st, []string{"c", "b", "a"})
	require.NoError(t, err, "an honest answer")
	assert.Len(t, got, 2)
}

func TestTxLimitsFits(t *testing.T) {
	l := stores.TxLimits{MaxWrites: 3, MaxBytes: 100, WriteOverhead: 10}
	assert.True(t, l.Fits(0, 0))
	assert.True(t, l.Fits(3, 70))
	assert.False(t, l.Fits(3, 71), "70 bytes and 3 overheads of 10 fill 100")
	assert.False(t, l.Fits(4, 0), "one write too many")
}
