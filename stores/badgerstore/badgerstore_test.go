package badgerstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/storetest"
)

// The suite runs on disk without fsync: syncing changes none of the
// promises it checks, only how long its compare-and-swap race takes (12,800
// commits in a row). Durable writes have their own tests below, and the
// benchmarks measure the durable store.
func TestConformanceOnDisk(t *testing.T) {
	storetest.Run(t, func(t *testing.T) stores.Store {
		return open(t, t.TempDir(), &badgerstore.Options{NoSync: true})
	})
}

func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) stores.Store {
		return open(t, "", &badgerstore.Options{InMemory: true})
	})
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) stores.Store { return open(b, b.TempDir(), nil) })
}

// open opens a store and closes it when tb ends.
func open(tb testing.TB, dir string, opts *badgerstore.Options) *badgerstore.Store {
	tb.Helper()
	st, err := badgerstore.Open(dir, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, st.Close()) })
	return st
}

func TestCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *badgerstore.Options
		want stores.Capabilities
	}{
		{"default", nil, stores.Capabilities{CASAtomic: true, Transactions: true, Durable: true}},
		{"no sync", &badgerstore.Options{NoSync: true}, stores.Capabilities{CASAtomic: true, Transactions: true}},
		{"in memory", &badgerstore.Options{InMemory: true}, stores.Capabilities{CASAtomic: true, Transactions: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := ""
			if tc.opts == nil || !tc.opts.InMemory {
				dir = t.TempDir()
			}
			assert.Equal(t, tc.want, open(t, dir, tc.opts).Capabilities())
		})
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	first := open(t, dir, nil)
	_, err := badgerstore.Open(dir, nil)
	require.ErrorIs(t, err, stores.ErrLocked)
	assert.Contains(t, err.Error(), "badger folder "+dir+" is in use by another process")

	// The first store is unharmed, and the folder opens again once it is closed.
	ctx := context.Background()
	_, err = first.Put(ctx, "k", []byte("v"))
	require.NoError(t, err)
	require.NoError(t, first.Close())
	again := open(t, dir, nil)
	it, err := again.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), it.Value)
}

func TestOpenNeedsAFolder(t *testing.T) {
	_, err := badgerstore.Open("", nil)
	assert.Error(t, err)
}

func TestReopenKeepsDataAndVersions(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := badgerstore.Open(dir, nil)
	require.NoError(t, err)
	big := bytes.Repeat([]byte("0123456789abcdef"), stores.MaxValueLen/16)
	vEmpty, err := st.Put(ctx, "empty", nil)
	require.NoError(t, err)
	vBig, err := st.Put(ctx, "big", big)
	require.NoError(t, err)
	vGone, err := st.Put(ctx, "gone", []byte("soon deleted"))
	require.NoError(t, err)
	require.NoError(t, st.Delete(ctx, "gone"))
	require.NoError(t, st.Close())

	st = open(t, dir, nil)
	it, err := st.Get(ctx, "empty")
	require.NoError(t, err, "an empty value survives a reopen")
	assert.Empty(t, it.Value)
	assert.Equal(t, vEmpty, it.Version)
	it, err = st.Get(ctx, "big")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(big, it.Value), "a 4 MiB value survives a reopen")
	assert.Equal(t, vBig, it.Version)
	_, err = st.Get(ctx, "gone")
	assert.ErrorIs(t, err, stores.ErrNotFound)

	v, err := st.CompareAndSwap(ctx, "gone", 0, []byte("back"))
	require.NoError(t, err)
	assert.Greater(t, v, vGone, "versions keep growing across a reopen, so none is reused")
}

func TestListPagesAcrossManyItems(t *testing.T) {
	st := open(t, "", &badgerstore.Options{InMemory: true})
	ctx := context.Background()
	// More than a page of items, and pages cut by size as well as count.
	const n = 700
	for i := range n {
		value := []byte("small")
		if i%100 == 0 {
			value = bytes.Repeat([]byte{byte(i)}, 1<<20)
		}
		_, err := st.Put(ctx, fmt.Sprintf("row/%04d", i), value)
		require.NoError(t, err)
	}
	_, err := st.Put(ctx, "rox", []byte("outside the prefix"))
	require.NoError(t, err)
	i := 0
	for it, err := range st.List(ctx, "row/") {
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("row/%04d", i), it.Key)
		i++
	}
	assert.Equal(t, n, i)
}

// Many writers at once all succeed; with fsync on they share commits.
func TestConcurrentDurablePuts(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 20 {
				_, err := st.Put(ctx, fmt.Sprintf("w%02d/%02d", w, i), []byte(strings.Repeat("x", 1024)))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	n := 0
	for _, err := range st.List(ctx, "") {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 16*20, n)
}

type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}
func (l *recordingLogger) Errorf(f string, a ...any)   { l.add(f, a...) }
func (l *recordingLogger) Warningf(f string, a ...any) { l.add(f, a...) }
func (l *recordingLogger) Infof(f string, a ...any)    { l.add(f, a...) }
func (l *recordingLogger) Debugf(f string, a ...any)   { l.add(f, a...) }

func TestLoggerReceivesBadgerLogs(t *testing.T) {
	logger := &recordingLogger{}
	st, err := badgerstore.Open(t.TempDir(), &badgerstore.Options{Logger: logger})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	logger.mu.Lock()
	defer logger.mu.Unlock()
	assert.NotEmpty(t, logger.lines, "badger logs to the given logger")
}

// Concurrent writes of one key are committed one after the other, each with
// a version of its own, even when they arrive together.
func TestConcurrentPutsOfOneKey(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	ctx := context.Background()
	const writers = 16
	versions := make([]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			v, err := st.Put(ctx, "same", []byte{byte(w)})
			assert.NoError(t, err)
			versions[w] = v
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	last := -1
	for w, v := range versions {
		assert.False(t, seen[v], "version %d handed out twice", v)
		seen[v] = true
		if last < 0 || v > versions[last] {
			last = w
		}
	}
	it, err := st.Get(ctx, "same")
	require.NoError(t, err)
	assert.Equal(t, versions[last], it.Version, "the newest version is the one stored")
	assert.Equal(t, []byte{byte(last)}, it.Value)
}

// Compare-and-swaps that share a commit with others and race with
// transactions on the same keys lose no update, and fsync on does not change
// that.
func TestCompareAndSwapMixedWithUpdates(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	ctx := context.Background()
	const keys, rounds = 6, 15
	for k := range keys {
		_, err := st.Put(ctx, fmt.Sprintf("n%d", k), []byte("0"))
		require.NoError(t, err)
	}
	incr := func(b []byte) []byte {
		n, err := strconv.Atoi(string(b))
		require.NoError(t, err)
		return []byte(strconv.Itoa(n + 1))
	}
	var wg sync.WaitGroup
	for k := range keys {
		key := fmt.Sprintf("n%d", k)
		wg.Go(func() { // compare-and-swap increments
			for range rounds {
				for {
					it, err := st.Get(ctx, key)
					if !assert.NoError(t, err) {
						return
					}
					_, err = st.CompareAndSwap(ctx, key, it.Version, incr(it.Value))
					if errors.Is(err, stores.ErrConflict) {
						continue
					}
					assert.NoError(t, err)
					break
				}
			}
		})
		wg.Go(func() { // transactional increments of the same key
			for range rounds {
				for {
					err := st.Update(ctx, func(tx stores.Tx) error {
						it, err := tx.Get(key)
						if err != nil {
							return err
						}
						return tx.Put(key, incr(it.Value))
					})
					if errors.Is(err, stores.ErrConflict) {
						continue
					}
					assert.NoError(t, err)
					break
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		it, err := st.Get(ctx, fmt.Sprintf("n%d", k))
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(2*rounds), string(it.Value), "key n%d", k)
	}
}

// BenchmarkListFirstOfMany stops a listing at its first item, as a check
// that anything exists under a prefix does, among 1,000 records of 4 KiB.
func BenchmarkListFirstOfMany(b *testing.B) {
	st := open(b, b.TempDir(), &badgerstore.Options{NoSync: true})
	ctx := context.Background()
	value := bytes.Repeat([]byte("x"), 4<<10)
	for i := range 1000 {
		_, err := st.Put(ctx, fmt.Sprintf("rec/%04d", i), value)
		require.NoError(b, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range st.List(ctx, "rec/") {
			if err != nil {
				b.Fatal(err)
			}
			break
		}
	}
}
