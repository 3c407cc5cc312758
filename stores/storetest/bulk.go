package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
)

// The bulk paths of local-first sync: stores.RangeLister, stores.MultiGetter
// and stores.TxSizer. Each subtest runs only on stores that implement its
// interface.

// openAs returns a fresh store as an I, or skips t when it is not one.
func openAs[I any](t *testing.T, s suite) (stores.Store, I) {
	t.Helper()
	st := s.open(t)
	i, ok := st.(I)
	if !ok {
		var zero I
		t.Skipf("store does not implement %T", &zero)
	}
	return st, i
}

// listAfter collects rl.ListAfter(prefix, after), failing t on an error.
func listAfter(t testing.TB, rl stores.RangeLister, prefix, after string) []stores.Item {
	t.Helper()
	var items []stores.Item
	for it, err := range rl.ListAfter(context.Background(), prefix, after) {
		require.NoError(t, err, "ListAfter(%q, %q)", prefix, after)
		items = append(items, it)
	}
	return items
}

// ListAfter yields exactly the keys under the prefix that sort after the
// given key, whether that key exists, lies under the prefix or not, with
// the values and versions List gives; across pages; and the stores.ListAfter
// function gives the same.
func (s suite) testListAfter(t *testing.T) {
	st, rl := openAs[stores.RangeLister](t, s)
	ctx := context.Background()
	for _, k := range []string{"a", "f/", "f/1", "f/2", "f/2\x00", "f/3", "f/\xff", "g"} {
		put(t, st, k, []byte("v:"+k))
	}
	all := list(t, st, "f/")
	assert.Equal(t, all, listAfter(t, rl, "f/", ""), "an empty after lists the whole prefix")
	for _, tc := range []struct {
		prefix, after string
		want          []string
	}{
		{"f/", "f/2", []string{"f/2\x00", "f/3", "f/\xff"}},
		{"f/", "f/25", []string{"f/3", "f/\xff"}}, // a key that does not exist
		{"f/", "f/", []string{"f/1", "f/2", "f/2\x00", "f/3", "f/\xff"}},
		{"f/", "a", []string{"f/", "f/1", "f/2", "f/2\x00", "f/3", "f/\xff"}}, // before the prefix
		{"f/", "f", []string{"f/", "f/1", "f/2", "f/2\x00", "f/3", "f/\xff"}},
		{"f/", "f/\xff", nil},
		{"f/", "z", nil}, // after the prefix
		{"", "f/3", []string{"f/\xff", "g"}},
		{"", "", []string{"a", "f/", "f/1", "f/2", "f/2\x00", "f/3", "f/\xff", "g"}},
		{"h/", "", nil},
	} {
		got := listAfter(t, rl, tc.prefix, tc.after)
		assert.Equal(t, tc.want, keysOf(got), "ListAfter(%q, %q)", tc.prefix, tc.after)
		listed := list(t, st, tc.prefix)
		for _, it := range got {
			for _, l := range listed {
				if l.Key == it.Key {
					assert.Equal(t, l, it, "ListAfter(%q, %q) item %q against List", tc.prefix, tc.after, it.Key)
				}
			}
		}
		var viaFunc []stores.Item
		for it, err := range stores.ListAfter(ctx, st, tc.prefix, tc.after) {
			require.NoError(t, err)
			viaFunc = append(viaFunc, it)
		}
		assert.Equal(t, got, viaFunc, "stores.ListAfter(%q, %q)", tc.prefix, tc.after)
	}

	// Across pages: 600 keys (stores list in pages of a few hundred).
	const n = 600
	for i := range n {
		put(t, st, fmt.Sprintf("p/%04d", i), []byte{byte(i)})
	}
	for _, from := range []int{-1, 0, 100, 255, 256, 257, 511, 598, 599} {
		after := ""
		if from >= 0 {
			after = fmt.Sprintf("p/%04d", from)
		}
		got := listAfter(t, rl, "p/", after)
		if !assert.Len(t, got, n-1-from, "ListAfter(p/, %q)", after) {
			continue
		}
		for j, it := range got {
			i := from + 1 + j
			assert.Equal(t, fmt.Sprintf("p/%04d", i), it.Key)
			assert.Equal(t, []byte{byte(i)}, it.Value)
		}
	}

	// Breaking early, and writing from the loop body.
	seen := 0
	for it, err := range rl.ListAfter(ctx, "p/", "p/0300") {
		require.NoError(t, err)
		_, err = st.Put(ctx, it.Key+"/x", []byte("x"))
		require.NoError(t, err, "Put from the loop body")
		seen++
		if seen == 3 {
			break
		}
	}
	assert.Equal(t, 3, seen)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, err := range rl.ListAfter(cancelled, "p/", "p/0001") {
		assert.ErrorIs(t, err, context.Canceled, "ListAfter with a cancelled context")
	}
	require.NoError(t, st.Close())
	for _, err := range rl.ListAfter(ctx, "p/", "p/0001") {
		assert.ErrorIs(t, err, stores.ErrClosed, "ListAfter of a closed store")
	}
}

// GetMany returns exactly the existing keys asked for, sorted and each once,
// with what Get returns; refuses an invalid key; hands out values the caller
// may change; and the stores.GetMany function gives the same.
func (s suite) testGetMany(t *testing.T) {
	st, mg := openAs[stores.MultiGetter](t, s)
	ctx := context.Background()
	put(t, st, "a", []byte("A"))
	put(t, st, "b", pattern(70_000, 3))
	put(t, st, "c", nil)
	put(t, st, "odd\x00/\xff", []byte("odd"))

	got, err := mg.GetMany(ctx, []string{"c", "x", "odd\x00/\xff", "a", "a", "b"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "odd\x00/\xff"}, keysOf(got))
	for _, it := range got {
		want, err := st.Get(ctx, it.Key)
		require.NoError(t, err)
		assert.Equal(t, want.Version, it.Version, "version of %q", it.Key)
		assertBytes(t, want.Value, it.Value, "value of %q", it.Key)
	}
	viaFunc, err := stores.GetMany(ctx, st, []string{"c", "x", "odd\x00/\xff", "a", "a", "b"})
	require.NoError(t, err)
	assert.Equal(t, got, viaFunc, "stores.GetMany")

	got[0].Value[0] = 'Z'
	checkItem(t, st, "a", []byte("A"), 0)

	none, err := mg.GetMany(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, none, "GetMany of no keys")
	none, err = mg.GetMany(ctx, []string{"x", "y"})
	require.NoError(t, err)
	assert.Empty(t, none, "GetMany of missing keys")

	for _, bad := range [][]string{{"a", ""}, {string(make([]byte, stores.MaxKeyLen+1))}} {
		_, err := mg.GetMany(ctx, bad)
		assert.ErrorIs(t, err, stores.ErrInvalidKey)
		_, err = stores.GetMany(ctx, st, bad)
		assert.ErrorIs(t, err, stores.ErrInvalidKey)
	}

	// Many keys, half of them missing, in reverse order.
	var keys, want []string
	for i := 999; i >= 0; i-- {
		k := fmt.Sprintf("m/%04d", i)
		keys = append(keys, k)
		if i%2 == 0 {
			put(t, st, k, []byte(k))
		}
	}
	for i := 0; i < 1000; i += 2 {
		want = append(want, fmt.Sprintf("m/%04d", i))
	}
	got, err = mg.GetMany(ctx, keys)
	require.NoError(t, err)
	assert.Equal(t, want, keysOf(got))
	for _, it := range got {
		assert.Equal(t, it.Key, string(it.Value))
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = mg.GetMany(cancelled, []string{"a"})
	assert.ErrorIs(t, err, context.Canceled, "GetMany with a cancelled context")
	require.NoError(t, st.Close())
	_, err = mg.GetMany(ctx, []string{"a"})
	assert.ErrorIs(t, err, stores.ErrClosed, "GetMany of a closed store")
}

// A transaction as large as TxLimits allows, in writes and in bytes,
// commits; one above may fail, but then with ErrTooLarge and having written
// nothing.
func (s suite) testTxLimits(t *testing.T) {
	st, sizer := openAs[stores.TxSizer](t, s)
	tr, ok := st.(stores.Transactor)
	require.True(t, ok, "a TxSizer must be a Transactor")
	l := sizer.TxLimits()
	require.Positive(t, l.MaxWrites)
	require.Positive(t, l.MaxBytes)
	require.GreaterOrEqual(t, l.WriteOverhead, 0)
	ctx := context.Background()

	// As many writes as allowed, of short keys and empty values.
	const keyLen = len("w/0000000")
	n := min(l.MaxWrites, l.MaxBytes/(keyLen+l.WriteOverhead))
	require.True(t, l.Fits(n, n*keyLen))
	writeN := func(prefix string, n int, value func(i int) []byte) error {
		return tr.Update(ctx, func(tx stores.Tx) error {
			for i := range n {
				if err := tx.Put(fmt.Sprintf("%s%07d", prefix, i), value(i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	require.NoError(t, writeN("w/", n, func(int) []byte { return nil }), "%d writes within %+v", n, l)
	assert.Len(t, list(t, st, "w/"), n)

	// As many bytes as allowed, in values of 64 KiB and one that fills the rest.
	const chunk = 64 << 10
	per := keyLen + chunk + l.WriteOverhead
	full := l.MaxBytes / per
	rest := l.MaxBytes - full*per - keyLen - l.WriteOverhead
	sizes := make([]int, full, full+1)
	for i := range sizes {
		sizes[i] = chunk
	}
	if rest >= 0 {
		sizes = append(sizes, rest)
	}
	total := 0
	for _, size := range sizes {
		total += keyLen + size
	}
	require.True(t, l.Fits(len(sizes), total))
	require.NoError(t, writeN("b/", len(sizes), func(i int) []byte { return pattern(sizes[i], byte(i)) }),
		"%d bytes within %+v", total, l)
	got := list(t, st, "b/")
	require.Len(t, got, len(sizes))
	for i, it := range got {
		assertBytes(t, pattern(sizes[i], byte(i)), it.Value, "value %d", i)
	}

	// Twice the bytes allowed: refused as too large, or committed whole.
	over := min(2*l.MaxBytes/chunk+1, l.MaxWrites+1)
	overValue := pattern(chunk, 1)
	err := writeN("o/", over, func(int) []byte { return overValue })
	if err != nil {
		assert.ErrorIs(t, err, stores.ErrTooLarge, "a transaction above the limits")
		assert.Empty(t, list(t, st, "o/"), "a refused transaction wrote nothing")
	} else {
		assert.Len(t, list(t, st, "o/"), over)
	}
}
