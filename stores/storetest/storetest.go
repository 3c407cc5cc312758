// Package storetest is the conformance suite for implementations of
// stores.Store, in the spirit of testing/fstest.
//
// # Usage
//
// A store's own tests call Run in one line, with a function that returns a
// fresh, empty store for each subtest:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) stores.Store { return memstore.New() })
//	}
//
// Run starts one named subtest per promise of the stores contract and reports
// every broken promise, not only the first. The suite closes each store when
// its subtest ends (Close must be idempotent), so newStore only needs to clean
// up what it created on disk, for instance with t.TempDir.
//
// Some subtests depend on what a store says it can do: the compare-and-swap
// race runs only when Capabilities().CASAtomic is set, the transaction
// subtests only when the store implements stores.Transactor, TxPrefetch
// only when its Tx also implements stores.Prefetcher, ListAfter, GetMany and
// TxLimits only when the store implements stores.RangeLister,
// stores.MultiGetter and stores.TxSizer, and the Lock subtests only when the
// store implements stores.Locker. RunLockerDeath checks that a
// Locker's lock is released when its holder dies: the store's tests call it
// with a Holder in another process.
//
// Bench measures Put and Get of 1 KiB values the same way on every store.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
)

// suite carries the store constructor through the subtests.
type suite struct {
	newStore func(t *testing.T) stores.Store
}

// Run checks that the stores built by newStore keep every promise of the
// stores contract. newStore is called once per subtest and must return an
// empty store.
func Run(t *testing.T, newStore func(t *testing.T) stores.Store) {
	s := suite{newStore: newStore}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Capabilities", s.testCapabilities},
		{"GetMissing", s.testGetMissing},
		{"PutGet", s.testPutGet},
		{"Overwrite", s.testOverwrite},
		{"VersionsChangeOnEveryWrite", s.testVersionsChange},
		{"VersionNotReusedAfterDelete", s.testVersionNotReused},
		{"CompareAndSwapCreate", s.testCASCreate},
		{"CompareAndSwapUpdate", s.testCASUpdate},
		{"CompareAndSwapStale", s.testCASStale},
		{"CompareAndSwapAfterDelete", s.testCASAfterDelete},
		{"Delete", s.testDelete},
		{"ListOrder", s.testListOrder},
		{"ListPrefixBounds", s.testListPrefixBounds},
		{"ListEmptyPrefixListsAll", s.testListAll},
		{"ListBreakEarly", s.testListBreakEarly},
		{"ListBodyMayUseStore", s.testListBodyMayUseStore},
		{"OddKeys", s.testOddKeys},
		{"InvalidKeys", s.testInvalidKeys},
		{"EmptyValue", s.testEmptyValue},
		{"LargeValues", s.testLargeValues},
		{"TooLargeValue", s.testTooLarge},
		{"ValueNotAliased", s.testValueNotAliased},
		{"Closed", s.testClosed},
		{"CancelledContext", s.testCancelled},
		{"ConcurrentListWhileWriting", s.testConcurrentList},
		{"ConcurrentGetWhilePutting", s.testConcurrentGet},
		{"CompareAndSwapRace", s.testCASRace},
		{"TxCommit", s.testTxCommit},
		{"TxRollback", s.testTxRollback},
		{"TxReadOwnWrites", s.testTxReadOwnWrites},
		{"TxValueNotAliased", s.testTxValueNotAliased},
		{"TxShared", s.testTxShared},
		{"TxBadInput", s.testTxBadInput},
		{"TxCancelledDuringFn", s.testTxCancelled},
		{"TxConcurrentWriter", s.testTxConcurrentWriter},
		{"TxIncrementRace", s.testTxIncrementRace},
		{"TxTransferRace", s.testTxTransferRace},
		{"TxPrefetch", s.testTxPrefetch},
		{"TxLimits", s.testTxLimits},
		{"ListAfter", s.testListAfter},
		{"GetMany", s.testGetMany},
		{"LockExclusion", s.testLockExclusion},
		{"LockUnlock", s.testLockUnlock},
		{"LockWaits", s.testLockWaits},
		{"LockCancelWhileWaiting", s.testLockCancel},
		{"LockClosed", s.testLockClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

// open returns a fresh store that is closed when t ends.
func (s suite) open(t *testing.T) stores.Store {
	t.Helper()
	st := s.newStore(t)
	require.NotNil(t, st, "newStore returned nil")
	t.Cleanup(func() {
		assert.NoError(t, st.Close(), "Close at the end of the subtest")
	})
	return st
}

// openTx returns a fresh store as a Transactor, or skips t when the store
// does not implement one.
func (s suite) openTx(t *testing.T) (stores.Store, stores.Transactor) {
	t.Helper()
	st := s.open(t)
	tr, ok := st.(stores.Transactor)
	if !ok {
		t.Skip("store does not implement stores.Transactor")
	}
	return st, tr
}

// put writes value at key and fails the test at once if that does not work:
// it is used to set up the state a check starts from.
func put(t testing.TB, st stores.Store, key string, value []byte) uint64 {
	t.Helper()
	v, err := st.Put(context.Background(), key, value)
	require.NoError(t, err, "Put %q", key)
	require.NotZero(t, v, "Put %q returned version 0", key)
	return v
}

// checkItem asserts that key holds value at version (any nonzero version when
// version is 0).
func checkItem(t testing.TB, st stores.Store, key string, value []byte, version uint64) bool {
	t.Helper()
	it, err := st.Get(context.Background(), key)
	if !assert.NoError(t, err, "Get %q", key) {
		return false
	}
	ok := assert.Equal(t, key, it.Key, "Get %q: item key", key)
	ok = assertBytes(t, value, it.Value, "Get %q: value", key) && ok
	if version != 0 {
		ok = assert.Equal(t, version, it.Version, "Get %q: version", key) && ok
	} else {
		ok = assert.NotZero(t, it.Version, "Get %q: version", key) && ok
	}
	return ok
}

// checkMissing asserts that key does not exist.
func checkMissing(t testing.TB, st stores.Store, key string) bool {
	t.Helper()
	_, err := st.Get(context.Background(), key)
	return assert.ErrorIs(t, err, stores.ErrNotFound, "Get %q", key)
}

// assertBytes compares two values without dumping large ones into the log.
func assertBytes(t testing.TB, want, got []byte, msgAndArgs ...any) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	if len(want) <= 64 && len(got) <= 64 {
		return assert.Equal(t, want, got, msgAndArgs...)
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	return assert.Fail(t, fmt.Sprintf("values differ: want %d bytes, got %d bytes, first difference at byte %d",
		len(want), len(got), i), msgAndArgs...)
}

// list collects every item under prefix, failing t on an error.
func list(t testing.TB, st stores.Store, prefix string) []stores.Item {
	t.Helper()
	var items []stores.Item
	for it, err := range st.List(context.Background(), prefix) {
		if !assert.NoError(t, err, "List %q", prefix) {
			break
		}
		items = append(items, it)
	}
	return items
}

// keysOf returns the keys of items, in order (nil for none).
func keysOf(items []stores.Item) []string {
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	return keys
}

// pattern returns n bytes that depend on seed, so two values of the same
// length differ.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// counter parses a decimal counter value.
func counter(t testing.TB, v []byte) int {
	t.Helper()
	n, err := strconv.Atoi(string(v))
	if !assert.NoError(t, err, "counter value %q", v) {
		return -1
	}
	return n
}

func (s suite) testCapabilities(t *testing.T) {
	st := s.open(t)
	caps := st.Capabilities()
	_, isTx := st.(stores.Transactor)
	assert.Equal(t, isTx, caps.Transactions,
		"Capabilities().Transactions must be true exactly when the store implements stores.Transactor")
	assert.Equal(t, caps, st.Capabilities(), "Capabilities must not change")
}

func (s suite) testGetMissing(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	it, err := st.Get(ctx, "missing")
	assert.ErrorIs(t, err, stores.ErrNotFound)
	assert.Zero(t, it.Version, "a missing key has no version")
	assert.Empty(t, list(t, st, ""), "an empty store lists nothing")
	assert.NoError(t, st.Delete(ctx, "missing"), "deleting a missing key is not an error")
	put(t, st, "present", []byte("x"))
	checkMissing(t, st, "presen")
	checkMissing(t, st, "present\x00")
}

func (s suite) testPutGet(t *testing.T) {
	st := s.open(t)
	value := []byte("hello, store")
	v, err := st.Put(context.Background(), "greeting", value)
	require.NoError(t, err)
	assert.NotZero(t, v, "Put must return a nonzero version")
	checkItem(t, st, "greeting", value, v)
	items := list(t, st, "")
	if assert.Len(t, items, 1) {
		assert.Equal(t, "greeting", items[0].Key)
		assert.Equal(t, value, items[0].Value)
		assert.Equal(t, v, items[0].Version, "List and Get report the same version")
	}
}

func (s suite) testOverwrite(t *testing.T) {
	st := s.open(t)
	v1 := put(t, st, "k", []byte("first"))
	v2 := put(t, st, "k", []byte("second, longer than the first"))
	assert.NotEqual(t, v1, v2, "an overwrite changes the version")
	checkItem(t, st, "k", []byte("second, longer than the first"), v2)
	v3 := put(t, st, "k", []byte("3"))
	assert.NotContains(t, []uint64{v1, v2}, v3)
	checkItem(t, st, "k", []byte("3"), v3)
	assert.Len(t, list(t, st, ""), 1, "overwrites do not add keys")
}

func (s suite) testVersionsChange(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	seen := map[uint64]bool{}
	last := uint64(0)
	for i := range 20 {
		value := []byte("same value every time")
		var v uint64
		var err error
		if i%2 == 0 {
			v, err = st.Put(ctx, "k", value)
		} else {
			v, err = st.CompareAndSwap(ctx, "k", last, value)
		}
		require.NoError(t, err, "write %d", i)
		assert.NotZero(t, v, "write %d: version", i)
		assert.False(t, seen[v], "write %d: version %d was already used for this key", i, v)
		seen[v] = true
		last = v
	}
	// Writes to other keys do not disturb this key's version.
	put(t, st, "other", []byte("x"))
	checkItem(t, st, "k", []byte("same value every time"), last)
}

func (s suite) testVersionNotReused(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	seen := map[uint64]bool{}
	for round := range 10 {
		v := put(t, st, "phoenix", []byte("again"))
		assert.False(t, seen[v], "round %d: version %d reused after delete and recreate", round, v)
		seen[v] = true
		require.NoError(t, st.Delete(ctx, "phoenix"))
		checkMissing(t, st, "phoenix")
	}
	// Re-creating through compare-and-swap must not reuse one either.
	v, err := st.CompareAndSwap(ctx, "phoenix", 0, []byte("cas"))
	require.NoError(t, err)
	assert.False(t, seen[v], "version %d reused after delete and recreate by CompareAndSwap", v)
	// And no earlier version matches the new incarnation.
	for old := range seen {
		_, err := st.CompareAndSwap(ctx, "phoenix", old, []byte("stale"))
		assert.ErrorIs(t, err, stores.ErrConflict, "CompareAndSwap with version %d of an earlier incarnation", old)
	}
	checkItem(t, st, "phoenix", []byte("cas"), v)
}

func (s suite) testCASCreate(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	v, err := st.CompareAndSwap(ctx, "new", 0, []byte("created"))
	require.NoError(t, err, "CompareAndSwap with expected 0 on a missing key creates it")
	assert.NotZero(t, v)
	checkItem(t, st, "new", []byte("created"), v)

	_, err = st.CompareAndSwap(ctx, "new", 0, []byte("again"))
	assert.ErrorIs(t, err, stores.ErrConflict, "expected 0 on an existing key conflicts")
	checkItem(t, st, "new", []byte("created"), v)

	_, err = st.CompareAndSwap(ctx, "absent", 12345, []byte("x"))
	assert.ErrorIs(t, err, stores.ErrConflict, "a nonzero expected version on a missing key conflicts")
	checkMissing(t, st, "absent")
}

func (s suite) testCASUpdate(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	v1 := put(t, st, "k", []byte("one"))
	v2, err := st.CompareAndSwap(ctx, "k", v1, []byte("two"))
	require.NoError(t, err)
	assert.NotZero(t, v2)
	assert.NotEqual(t, v1, v2)
	checkItem(t, st, "k", []byte("two"), v2)
	v3, err := st.CompareAndSwap(ctx, "k", v2, []byte("three"))
	require.NoError(t, err)
	assert.NotContains(t, []uint64{v1, v2}, v3)
	checkItem(t, st, "k", []byte("three"), v3)
}

func (s suite) testCASStale(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	v1 := put(t, st, "k", []byte("one"))
	v2 := put(t, st, "k", []byte("two"))
	got, err := st.CompareAndSwap(ctx, "k", v1, []byte("stale write"))
	assert.ErrorIs(t, err, stores.ErrConflict, "a stale expected version conflicts")
	assert.Zero(t, got, "a conflicting CompareAndSwap returns version 0")
	checkItem(t, st, "k", []byte("two"), v2)
	_, err = st.CompareAndSwap(ctx, "k", v2+v1+1, []byte("made-up version"))
	assert.ErrorIs(t, err, stores.ErrConflict, "a version the key never had conflicts")
	checkItem(t, st, "k", []byte("two"), v2)
	assert.Len(t, list(t, st, ""), 1)
}

func (s suite) testCASAfterDelete(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	v1 := put(t, st, "k", []byte("one"))
	require.NoError(t, st.Delete(ctx, "k"))
	_, err := st.CompareAndSwap(ctx, "k", v1, []byte("resurrect"))
	assert.ErrorIs(t, err, stores.ErrConflict, "the version of a deleted key no longer matches")
	checkMissing(t, st, "k")
	v2, err := st.CompareAndSwap(ctx, "k", 0, []byte("fresh"))
	assert.NoError(t, err, "expected 0 matches a deleted key")
	assert.NotEqual(t, v1, v2)
	checkItem(t, st, "k", []byte("fresh"), v2)
}

func (s suite) testDelete(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	put(t, st, "a", []byte("1"))
	vb := put(t, st, "b", []byte("2"))
	put(t, st, "c", []byte("3"))
	assert.NoError(t, st.Delete(ctx, "a"))
	checkMissing(t, st, "a")
	checkItem(t, st, "b", []byte("2"), vb)
	assert.Equal(t, []string{"b", "c"}, keysOf(list(t, st, "")))
	assert.NoError(t, st.Delete(ctx, "a"), "deleting twice is not an error")
	assert.NoError(t, st.Delete(ctx, "never-existed"))
	assert.NoError(t, st.Delete(ctx, "c"))
	assert.Equal(t, []string{"b"}, keysOf(list(t, st, "")))
}

func (s suite) testListOrder(t *testing.T) {
	st := s.open(t)
	// Insert in an order unrelated to the byte order.
	var keys []string
	versions := map[string]uint64{}
	for i := range 60 {
		k := fmt.Sprintf("item/%02d", (i*37)%60)
		keys = append(keys, k)
		versions[k] = put(t, st, k, []byte("value of "+k))
	}
	slices.Sort(keys)
	items := list(t, st, "item/")
	assert.Equal(t, keys, keysOf(items), "List yields keys in ascending byte order")
	for _, it := range items {
		assert.Equal(t, []byte("value of "+it.Key), it.Value, "List value of %q", it.Key)
		assert.Equal(t, versions[it.Key], it.Version, "List version of %q", it.Key)
	}
}

func (s suite) testListPrefixBounds(t *testing.T) {
	st := s.open(t)
	keys := []string{
		"a", "a/", "a/b", "a/b/c", "a0", "ab", "ab\xff", "a\x00", "a\x00\x00",
		"a\xff", "a\xff\x00", "a\xff\xff", "b", "\x00", "\x01", "\xff", "\xff\xff",
		"\xff\xff\xff", "é", "é/x",
	}
	versions := map[string]uint64{}
	for _, k := range keys {
		versions[k] = put(t, st, k, []byte(k))
	}
	slices.Sort(keys)
	prefixes := []string{
		"", "a", "a/", "a/b", "a/b/c", "a/b/c/", "a\x00", "a\xff", "a\xff\xff", "ab",
		"\x00", "\xff", "\xff\xff", "\xff\xff\xff\xff", "b", "c", "é", "\xc3", "zz",
	}
	for _, p := range prefixes {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, p) {
				want = append(want, k)
			}
		}
		items := list(t, st, p)
		assert.Equal(t, want, keysOf(items), "List %q", p)
		for _, it := range items {
			assert.Equal(t, []byte(it.Key), it.Value, "List %q: value of %q", p, it.Key)
			assert.Equal(t, versions[it.Key], it.Version, "List %q: version of %q", p, it.Key)
		}
	}
}

func (s suite) testListAll(t *testing.T) {
	st := s.open(t)
	var keys []string
	for i := range 30 {
		k := fmt.Sprintf("%c/%d", 'a'+i%5, i)
		keys = append(keys, k)
		put(t, st, k, []byte{byte(i)})
	}
	slices.Sort(keys)
	assert.Equal(t, keys, keysOf(list(t, st, "")), "the empty prefix lists every key")
}

func (s suite) testListBreakEarly(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	for i := range 10 {
		put(t, st, fmt.Sprintf("k%d", i), []byte("v"))
	}
	var got []string
	for it, err := range st.List(ctx, "k") {
		require.NoError(t, err)
		got = append(got, it.Key)
		if len(got) == 3 {
			break
		}
	}
	assert.Equal(t, []string{"k0", "k1", "k2"}, got)
	// Stopping early must release whatever the iteration held.
	v := put(t, st, "k9", []byte("after break"))
	checkItem(t, st, "k9", []byte("after break"), v)
	assert.Len(t, list(t, st, "k"), 10)
	for range st.List(ctx, "") {
		break
	}
	assert.NoError(t, st.Delete(ctx, "k0"))
	assert.Len(t, list(t, st, "k"), 9)
}

func (s suite) testListBodyMayUseStore(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	for i := range 20 {
		put(t, st, fmt.Sprintf("job/%02d", i), []byte("todo"))
	}
	// Deleting and rewriting keys from inside the loop must not deadlock or
	// make the iteration yield a key twice or out of order.
	var seen []string
	for it, err := range st.List(ctx, "job/") {
		if !assert.NoError(t, err) {
			break
		}
		seen = append(seen, it.Key)
		assert.NoError(t, st.Delete(ctx, it.Key))
		_, err = st.Put(ctx, "done/"+it.Key, it.Value)
		assert.NoError(t, err)
		_, err = st.Get(ctx, "done/"+it.Key)
		assert.NoError(t, err)
	}
	assert.Len(t, seen, 20)
	assert.True(t, slices.IsSorted(seen), "keys in order")
	assert.Equal(t, len(seen), len(slices.Compact(slices.Clone(seen))), "no key yielded twice")
	assert.Empty(t, list(t, st, "job/"))
	assert.Len(t, list(t, st, "done/"), 20)
}

func (s suite) testOddKeys(t *testing.T) {
	st := s.open(t)
	keys := []string{
		"\x00", "\x00\x00", "a\x00b", "/", "//", "/a/", "a/../b", ".", "..", "...",
		"日本語/キー", "\xff\xfe\xfd", "\xc3\x28", "CON", "con", "Aa", "aA", "AA",
		" spaced ", "tab\tnl\n", "%2F", "back\\slash", "colon:star*q?",
		".nyd-tmp-0123", "0123abcd", "~", strings.Repeat("k", 1024), strings.Repeat("\xff", 1024),
		strings.Repeat("\x00", 1024), strings.Repeat("x", stores.MaxKeyLen),
		strings.Repeat("p", 2000) + "1", strings.Repeat("p", 2000) + "2",
		strings.Repeat("p", 200) + "1", strings.Repeat("p", 200) + "2", strings.Repeat("p", 200),
	}
	versions := map[string]uint64{}
	for i, k := range keys {
		versions[k] = put(t, st, k, pattern(10+i, byte(i)))
	}
	for i, k := range keys {
		checkItem(t, st, k, pattern(10+i, byte(i)), versions[k])
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	items := list(t, st, "")
	assert.Equal(t, sorted, keysOf(items), "odd keys list in byte order")
	for _, it := range items {
		assert.Equal(t, versions[it.Key], it.Version, "List version of %q", it.Key)
	}
	longP := list(t, st, strings.Repeat("p", 1500))
	assert.Equal(t, []string{strings.Repeat("p", 2000) + "1", strings.Repeat("p", 2000) + "2"}, keysOf(longP),
		"List with a long prefix")
	for _, k := range keys {
		assert.NoError(t, st.Delete(context.Background(), k), "Delete %q", k)
	}
	assert.Empty(t, list(t, st, ""))
}

func (s suite) testInvalidKeys(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	for _, key := range []string{"", strings.Repeat("x", stores.MaxKeyLen+1)} {
		name := fmt.Sprintf("key of %d bytes", len(key))
		_, err := st.Get(ctx, key)
		assert.ErrorIs(t, err, stores.ErrInvalidKey, "Get, %s", name)
		_, err = st.Put(ctx, key, []byte("v"))
		assert.ErrorIs(t, err, stores.ErrInvalidKey, "Put, %s", name)
		_, err = st.CompareAndSwap(ctx, key, 0, []byte("v"))
		assert.ErrorIs(t, err, stores.ErrInvalidKey, "CompareAndSwap, %s", name)
		err = st.Delete(ctx, key)
		assert.ErrorIs(t, err, stores.ErrInvalidKey, "Delete, %s", name)
	}
	assert.Empty(t, list(t, st, ""), "invalid keys write nothing")
}

func (s suite) testEmptyValue(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	for _, tc := range []struct {
		key   string
		value []byte
	}{{"nil", nil}, {"empty", []byte{}}} {
		v, err := st.Put(ctx, tc.key, tc.value)
		require.NoError(t, err, "Put of a %s value", tc.key)
		it, err := st.Get(ctx, tc.key)
		if assert.NoError(t, err, "Get of a %s value", tc.key) {
			assert.Empty(t, it.Value, "a %s value reads back empty", tc.key)
			assert.Equal(t, v, it.Version)
		}
		v2, err := st.CompareAndSwap(ctx, tc.key, v, tc.value)
		assert.NoError(t, err, "CompareAndSwap to a %s value", tc.key)
		assert.NotEqual(t, v, v2)
	}
	items := list(t, st, "")
	assert.Equal(t, []string{"empty", "nil"}, keysOf(items), "empty values are listed")
	for _, it := range items {
		assert.Empty(t, it.Value)
	}
}

func (s suite) testLargeValues(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	for _, n := range []int{1 << 20, stores.MaxValueLen} {
		key := fmt.Sprintf("large/%d", n)
		value := pattern(n, byte(n>>16))
		v, err := st.Put(ctx, key, value)
		if !assert.NoError(t, err, "Put of %d bytes", n) {
			continue
		}
		checkItem(t, st, key, value, v)
		smaller := pattern(n/2, 7)
		v2, err := st.CompareAndSwap(ctx, key, v, smaller)
		if assert.NoError(t, err, "shrinking a %d-byte value", n) {
			checkItem(t, st, key, smaller, v2)
			v3, err := st.CompareAndSwap(ctx, key, v2, value)
			if assert.NoError(t, err, "growing back to %d bytes", n) {
				checkItem(t, st, key, value, v3)
			}
		}
	}
	items := list(t, st, "large/")
	if assert.Len(t, items, 2) {
		assert.Len(t, items[0].Value, 1<<20)
		assert.Len(t, items[1].Value, stores.MaxValueLen)
	}
	assert.NoError(t, st.Delete(ctx, fmt.Sprintf("large/%d", stores.MaxValueLen)))
	assert.Len(t, list(t, st, "large/"), 1)
}

func (s suite) testTooLarge(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	v := put(t, st, "k", []byte("small"))
	big := make([]byte, stores.MaxValueLen+1)
	_, err := st.Put(ctx, "k", big)
	assert.ErrorIs(t, err, stores.ErrTooLarge, "Put")
	_, err = st.Put(ctx, "new", big)
	assert.ErrorIs(t, err, stores.ErrTooLarge, "Put of a new key")
	_, err = st.CompareAndSwap(ctx, "k", v, big)
	assert.ErrorIs(t, err, stores.ErrTooLarge, "CompareAndSwap")
	checkItem(t, st, "k", []byte("small"), v)
	checkMissing(t, st, "new")
}

func (s suite) testValueNotAliased(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()

	buf := []byte("original")
	v := put(t, st, "put", buf)
	copy(buf, "CHANGED!")
	checkItem(t, st, "put", []byte("original"), v)

	buf = []byte("original")
	v, err := st.CompareAndSwap(ctx, "cas", 0, buf)
	require.NoError(t, err)
	copy(buf, "CHANGED!")
	checkItem(t, st, "cas", []byte("original"), v)

	it, err := st.Get(ctx, "put")
	require.NoError(t, err)
	copy(it.Value, "mutated!")
	checkItem(t, st, "put", []byte("original"), 0)

	for it, err := range st.List(ctx, "") {
		require.NoError(t, err)
		copy(it.Value, "mutated!")
	}
	checkItem(t, st, "put", []byte("original"), 0)
	checkItem(t, st, "cas", []byte("original"), 0)

	// Two reads do not share a buffer either.
	a, err := st.Get(ctx, "put")
	require.NoError(t, err)
	b, err := st.Get(ctx, "put")
	require.NoError(t, err)
	copy(a.Value, "mutated!")
	assert.Equal(t, []byte("original"), b.Value)
}

func (s suite) testClosed(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	v := put(t, st, "k", []byte("v"))
	require.NoError(t, st.Close())

	_, err := st.Get(ctx, "k")
	assert.ErrorIs(t, err, stores.ErrClosed, "Get")
	_, err = st.Put(ctx, "k", []byte("w"))
	assert.ErrorIs(t, err, stores.ErrClosed, "Put")
	_, err = st.CompareAndSwap(ctx, "k", v, []byte("w"))
	assert.ErrorIs(t, err, stores.ErrClosed, "CompareAndSwap")
	assert.ErrorIs(t, st.Delete(ctx, "k"), stores.ErrClosed, "Delete")
	n := 0
	for it, err := range st.List(ctx, "") {
		n++
		assert.ErrorIs(t, err, stores.ErrClosed, "List")
		assert.Zero(t, it, "List yields a zero item with its error")
	}
	assert.Equal(t, 1, n, "List of a closed store yields exactly one error")
	if tr, ok := st.(stores.Transactor); ok {
		called := false
		err := tr.Update(ctx, func(stores.Tx) error { called = true; return nil })
		assert.ErrorIs(t, err, stores.ErrClosed, "Update")
		assert.False(t, called, "Update of a closed store must not run fn")
	}
	assert.NoError(t, st.Close(), "Close twice")
}

func (s suite) testCancelled(t *testing.T) {
	st := s.open(t)
	bg := context.Background()
	v := put(t, st, "k", []byte("old"))
	ctx, cancel := context.WithCancel(bg)
	cancel()

	_, err := st.Get(ctx, "k")
	assert.ErrorIs(t, err, context.Canceled, "Get")
	_, err = st.Put(ctx, "k", []byte("new"))
	assert.ErrorIs(t, err, context.Canceled, "Put")
	_, err = st.Put(ctx, "fresh", []byte("new"))
	assert.ErrorIs(t, err, context.Canceled, "Put of a new key")
	_, err = st.CompareAndSwap(ctx, "k", v, []byte("new"))
	assert.ErrorIs(t, err, context.Canceled, "CompareAndSwap")
	_, err = st.CompareAndSwap(ctx, "fresh", 0, []byte("new"))
	assert.ErrorIs(t, err, context.Canceled, "CompareAndSwap of a new key")
	assert.ErrorIs(t, st.Delete(ctx, "k"), context.Canceled, "Delete")
	n := 0
	for _, err := range st.List(ctx, "") {
		n++
		assert.ErrorIs(t, err, context.Canceled, "List")
	}
	assert.Equal(t, 1, n, "List with a cancelled context yields exactly one error")
	if tr, ok := st.(stores.Transactor); ok {
		err := tr.Update(ctx, func(tx stores.Tx) error { return tx.Put("fresh", []byte("new")) })
		assert.ErrorIs(t, err, context.Canceled, "Update")
	}
	expired, cancel2 := context.WithTimeout(bg, -1)
	defer cancel2()
	_, err = st.Put(expired, "fresh", []byte("new"))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Put with an expired deadline")

	checkItem(t, st, "k", []byte("old"), v)
	checkMissing(t, st, "fresh")
}
