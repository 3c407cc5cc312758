package filestore_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) stores.Store { return open(t, t.TempDir(), nil) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) stores.Store { return open(b, b.TempDir(), nil) })
}

// open opens a store in dir and closes it when tb ends.
func open(tb testing.TB, dir string, opts *filestore.Options) *filestore.Store {
	tb.Helper()
	st, err := filestore.Open(dir, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, st.Close()) })
	return st
}

// record builds a record file by hand from the layout documented in
// record.go, so that a change of the format breaks this test.
func record(key string, version uint64, value []byte) []byte {
	b := []byte("NYF1")
	b = binary.BigEndian.AppendUint64(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, 0, 0, 0, 0)
	b = append(b, key...)
	b = append(b, value...)
	table := crc32.MakeTable(crc32.Castagnoli)
	sum := crc32.Update(crc32.Checksum(b[4:16], table), table, b[20:])
	binary.BigEndian.PutUint32(b[16:], sum)
	return b
}

func TestCapabilities(t *testing.T) {
	st := open(t, t.TempDir(), nil)
	assert.Equal(t, stores.Capabilities{Durable: true, Shared: true}, st.Capabilities())
	fast := open(t, t.TempDir(), &filestore.Options{NoSync: true})
	assert.Equal(t, stores.Capabilities{Durable: false, Shared: true}, fast.Capabilities())
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	st, err := filestore.Open(dir, nil)
	require.NoError(t, err)
	v1, err := st.Put(ctx, "invoice/1", []byte("sealed bytes"))
	require.NoError(t, err)
	long := strings.Repeat("L", stores.MaxKeyLen)
	_, err = st.Put(ctx, long, []byte("long key"))
	require.NoError(t, err)
	require.NoError(t, st.Close())

	st = open(t, dir, nil)
	it, err := st.Get(ctx, "invoice/1")
	require.NoError(t, err)
	assert.Equal(t, []byte("sealed bytes"), it.Value)
	assert.Equal(t, v1, it.Version)
	v2, err := st.CompareAndSwap(ctx, "invoice/1", v1, []byte("updated"))
	require.NoError(t, err)
	assert.Greater(t, v2, v1, "versions keep growing across a reopen")
	it, err = st.Get(ctx, long)
	require.NoError(t, err)
	assert.Equal(t, []byte("long key"), it.Value)
}

func TestFileNames(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	ctx := context.Background()
	keys := []string{"a", "A", "日本", "\x00/\xff", strings.Repeat("k", 120), strings.Repeat("k", 121),
		strings.Repeat("\xff", stores.MaxKeyLen)}
	for _, k := range keys {
		_, err := st.Put(ctx, k, []byte("v"))
		require.NoError(t, err)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, len(keys)+1, "one file per key, and the folder's lock file")
	for _, e := range entries {
		name := e.Name()
		if name == ".noydb-cas.lock" {
			continue
		}
		assert.LessOrEqual(t, len(name), 255, "file name length")
		assert.Equal(t, strings.ToLower(name), name, "file names are lower case")
		assert.True(t, strings.HasSuffix(name, ".rec"))
	}
	assert.FileExists(t, filepath.Join(dir, hex.EncodeToString([]byte("A"))+".rec"))
}

func TestKnownRecordFormat(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	// A file written by another device whose clock runs far ahead.
	const future = uint64(1) << 62
	name := filepath.Join(dir, hex.EncodeToString([]byte("k"))+".rec")
	require.NoError(t, os.WriteFile(name, record("k", future, []byte("from afar")), 0o600))

	st := open(t, dir, nil)
	it, err := st.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, stores.Item{Key: "k", Value: []byte("from afar"), Version: future}, it)

	v, err := st.Put(ctx, "k", []byte("mine"))
	require.NoError(t, err)
	assert.Greater(t, v, future, "a new version exceeds the old one even when the old one is ahead of the clock")
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, record("k", v, []byte("mine")), b, "the file layout is stable")
}

func TestForeignFilesIgnored(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	ctx := context.Background()
	_, err := st.Put(ctx, "k", []byte("v"))
	require.NoError(t, err)
	foreign := map[string][]byte{
		".nyd-tmp-123456":                  record("k", 1, []byte("half written")),
		"notes.txt":                        []byte("hello"),
		"6B.rec":                           record("k", 1, []byte("upper case")),
		"6.rec":                            []byte("odd hex"),
		"6b (conflicted copy 2026).rec":    record("k", 1, []byte("sync conflict")),
		".syncthing.6b.rec.tmp":            []byte("sync temp"),
		strings.Repeat("6b", 10) + "-.rec": []byte("bad long name"),
	}
	for name, b := range foreign {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "6c.rec"), 0o700))

	var keys []string
	for it, err := range st.List(ctx, "") {
		require.NoError(t, err)
		keys = append(keys, it.Key)
	}
	assert.Equal(t, []string{"k"}, keys)
	it, err := st.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, []byte("v"), it.Value)
}

func TestOpenRemovesStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".nyd-tmp-stale")
	fresh := filepath.Join(dir, ".nyd-tmp-fresh")
	require.NoError(t, os.WriteFile(stale, []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(fresh, []byte("x"), 0o600))
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	open(t, dir, nil)
	assert.NoFileExists(t, stale, "a temporary file left by a crash is removed")
	assert.FileExists(t, fresh, "a temporary file that may belong to a running write is kept")
}

func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, nil)
	ctx := context.Background()
	v, err := st.Put(ctx, "k", []byte("value"))
	require.NoError(t, err)
	name := filepath.Join(dir, hex.EncodeToString([]byte("k"))+".rec")
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.NoError(t, os.WriteFile(name, b, 0o600))

	_, err = st.Get(ctx, "k")
	assert.ErrorIs(t, err, filestore.ErrCorrupt, "a flipped bit is detected")
	for _, err := range st.List(ctx, "") {
		assert.ErrorIs(t, err, filestore.ErrCorrupt, "List reports the damaged file")
	}
	_, err = st.CompareAndSwap(ctx, "k", v, []byte("x"))
	assert.ErrorIs(t, err, filestore.ErrCorrupt, "CompareAndSwap cannot check a damaged file's version")

	// A record under the wrong name is damage too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, hex.EncodeToString([]byte("j"))+".rec"),
		record("k", 5, []byte("misplaced")), 0o600))
	_, err = st.Get(ctx, "j")
	assert.ErrorIs(t, err, filestore.ErrCorrupt)

	v2, err := st.Put(ctx, "k", []byte("repaired"))
	require.NoError(t, err, "Put replaces a damaged file")
	it, err := st.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, stores.Item{Key: "k", Value: []byte("repaired"), Version: v2}, it)
}

func TestTwoStoresShareAFolder(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, nil)
	b := open(t, dir, nil)
	ctx := context.Background()
	v, err := a.Put(ctx, "k", []byte("from a"))
	require.NoError(t, err)
	it, err := b.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, stores.Item{Key: "k", Value: []byte("from a"), Version: v}, it)
	v2, err := b.CompareAndSwap(ctx, "k", v, []byte("from b"))
	require.NoError(t, err)
	_, err = a.CompareAndSwap(ctx, "k", v, []byte("stale"))
	assert.ErrorIs(t, err, stores.ErrConflict, "a sees b's write")
	require.NoError(t, a.Delete(ctx, "k"))
	_, err = b.Get(ctx, "k")
	assert.ErrorIs(t, err, stores.ErrNotFound)
	_, err = b.CompareAndSwap(ctx, "k", v2, []byte("resurrect"))
	assert.ErrorIs(t, err, stores.ErrConflict)
}

// Compare-and-swap is atomic among the callers of one Store, even though
// the store does not claim CASAtomic.
func TestCompareAndSwapRaceInOneStore(t *testing.T) {
	st := open(t, t.TempDir(), &filestore.Options{NoSync: true})
	raceIncrements(t, []*filestore.Store{st}, 16, 25)
}

// raceIncrements has workers goroutines, spread over sts (Stores on one
// folder), each add 1 to a counter rounds times by read and compare-and-swap,
// retrying conflicts, and checks that no increment was lost.
func raceIncrements(t *testing.T, sts []*filestore.Store, workers, rounds int) {
	ctx := context.Background()
	_, err := sts[0].Put(ctx, "n", []byte("0"))
	require.NoError(t, err)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		st := sts[w%len(sts)]
		wg.Go(func() {
			<-start
			for range rounds {
				for {
					it, err := st.Get(ctx, "n")
					if !assert.NoError(t, err) {
						return
					}
					n, _ := strconv.Atoi(string(it.Value))
					_, err = st.CompareAndSwap(ctx, "n", it.Version, []byte(strconv.Itoa(n+1)))
					if errors.Is(err, stores.ErrConflict) {
						continue
					}
					if assert.NoError(t, err) {
						break
					}
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	it, err := sts[len(sts)-1].Get(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(workers*rounds), string(it.Value))
}

func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := filestore.Open(file, nil)
	assert.Error(t, err, "a file is not a folder")
	_, err = filestore.Open(filepath.Join(file, "below"), nil)
	assert.Error(t, err)
}

// Two Stores on one folder (as two processes would have) take turns on the
// folder lock: no increment is lost.
func TestCompareAndSwapRaceAcrossStores(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, &filestore.Options{NoSync: true}), open(t, dir, &filestore.Options{NoSync: true})
	raceIncrements(t, []*filestore.Store{a, b}, 8, 25)
	assert.Equal(t, dir, a.Dir())
}

// Lock is exclusive across Stores on one folder, and gives up with ctx.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, nil), open(t, dir, nil)
	ctx := context.Background()
	unlock, err := a.Lock(ctx, "head")
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = b.Lock(short, "head")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "held by the other Store")
	other, err := b.Lock(ctx, "another name")
	require.NoError(t, err)
	other()

	unlock()
	again, err := b.Lock(ctx, "head")
	require.NoError(t, err)
	again()

	require.NoError(t, a.Close())
	_, err = a.Lock(ctx, "head")
	assert.ErrorIs(t, err, stores.ErrClosed)
}
