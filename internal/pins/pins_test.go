package pins_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/stores"
)

var testID = []byte("0123456789abcdef")

func newKey(t testing.TB) *crypto.Key {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	return key
}

func open(t testing.TB, dir string, key *crypto.Key) *pins.Set {
	t.Helper()
	s, err := openPins(dir, "books", testID, key)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pinFiles returns the vault's two pins copies, oldest write first.
func pinFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.pins"))
	require.NoError(t, err)
	require.Len(t, m, 2)
	return m
}

// copyDir copies the state folder as it is on disk now, so that what a
// crash would leave can be opened without closing the live Set.
func copyDir(t testing.TB, dir string) string {
	t.Helper()
	to := t.TempDir()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o600))
	}
	return to
}

func TestPinsMoveForwardAndPersist(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	s := open(t, dir, key)
	s.RaiseCounter("c", 57)
	s.RaiseCounter("c", 41) // never moves back
	s.RaiseLedger("l", 9, []byte("mac-9"))
	s.RaiseLedger("l", 3, []byte("mac-3"))
	assert.NoError(t, s.CheckCounter("c", 57))
	assert.ErrorIs(t, s.CheckCounter("c", 41), pins.ErrRollback)
	assert.ErrorIs(t, s.CheckLedger("l", 8, []byte("x")), pins.ErrRollback)
	assert.ErrorIs(t, s.CheckLedger("l", 9, []byte("x")), pins.ErrRollback)
	assert.NoError(t, s.CheckLedger("l", 9, []byte("mac-9")))
	require.NoError(t, s.Close())

	again := open(t, dir, key)
	assert.ErrorIs(t, again.CheckCounter("c", 56), pins.ErrRollback)
	assert.NoError(t, again.CheckCounter("other", 0))
	seq, mac := again.LedgerPin("l")
	assert.Equal(t, uint64(9), seq)
	assert.Equal(t, []byte("mac-9"), mac)
	require.NoError(t, again.Close())

	// Another key cannot read the pins: the device's memory is lost to it.
	_, err := openPins(dir, "books", testID, newKey(t))
	assert.ErrorIs(t, err, pins.ErrStateLost)
	assert.ErrorIs(t, err, crypto.ErrTampered)
}

// A raise returns only once its pin is on disk: what a crash right after it
// would leave holds the pin.
func TestRaiseIsDurableWhenItReturns(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	s := open(t, dir, key)
	for _, n := range []uint64{1, 2, 3, 500} {
		s.RaiseCounter("c", n)
		crashed := copyDir(t, dir)
		c, err := openPins(crashed, "books", testID, key)
		require.NoError(t, err)
		assert.Equal(t, n, c.CounterPin("c"))
		require.NoError(t, c.Close())
	}
	s.RaiseLedger("l", 7, []byte("mac-7"))
	c, err := openPins(copyDir(t, dir), "books", testID, key)
	require.NoError(t, err)
	seq, mac := c.LedgerPin("l")
	assert.Equal(t, uint64(7), seq)
	assert.Equal(t, []byte("mac-7"), mac)
	require.NoError(t, c.Close())
}

// Raises that arrive while a write is in flight share the next write.
func TestRaisesWaitingForAWriteShareTheNext(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	s := open(t, dir, key)
	before := s.Writes()

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pins.SetWriteHook(func() error {
		once.Do(func() {
			close(entered)
			<-release
		})
		return nil
	})
	t.Cleanup(func() { pins.SetWriteHook(nil) })

	var wg sync.WaitGroup
	wg.Go(func() { s.RaiseCounter("c", 1) })
	<-entered // the first write is in flight, held
	const waiters = 10
	for i := range waiters {
		wg.Go(func() { s.RaiseCounter("c", uint64(2+i)) })
	}
	for s.Waiting() < waiters {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()

	assert.Equal(t, before+2, s.Writes(), "the ten raises that waited shared one write")
	c, err := openPins(copyDir(t, dir), "books", testID, key)
	require.NoError(t, err)
	assert.Equal(t, uint64(waiters+1), c.CounterPin("c"))
	require.NoError(t, c.Close())
}

// Many concurrent raisers: every raise is durable when it returns, and the
// writes are fewer than the raises.
func TestConcurrentRaisesAreAllDurable(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	s := open(t, dir, key)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				s.RaiseCounter("c", uint64(g*20+i+1))
				s.RaiseLedger("l", uint64(g*20+i+1), []byte{byte(g), byte(i)})
			}
		})
	}
	wg.Wait()
	c, err := openPins(copyDir(t, dir), "books", testID, key)
	require.NoError(t, err)
	assert.Equal(t, uint64(320), c.CounterPin("c"))
	seq, mac := c.LedgerPin("l")
	assert.Equal(t, uint64(320), seq)
	assert.Equal(t, []byte{15, 19}, mac)
	require.NoError(t, c.Close())
}

// A failed write is sticky: every later check fails with it, so nothing is
// issued without a durable pin.
func TestFailedWriteIsSticky(t *testing.T) {
	s := open(t, t.TempDir(), newKey(t))
	require.NoError(t, s.RaiseCounter("c", 3))
	disk := errors.New("disk full")
	pins.SetWriteHook(func() error { return disk })
	t.Cleanup(func() { pins.SetWriteHook(nil) })

	err := s.RaiseCounter("c", 4)
	assert.ErrorIs(t, err, pins.ErrPinsNotSaved, "the raise whose write failed says so")
	assert.ErrorIs(t, err, disk)
	pins.SetWriteHook(nil)
	assert.ErrorIs(t, s.CheckCounter("c", 10), disk)
	assert.ErrorIs(t, s.CheckCounter("c", 10), pins.ErrPinsNotSaved)
	assert.ErrorIs(t, s.CheckLedger("l", 10, nil), disk)
	assert.Equal(t, uint64(1<<64-1), s.CounterPin("c"), "readers are sent to the check")
	seq, _ := s.LedgerPin("l")
	assert.Equal(t, uint64(1<<64-1), seq)
	assert.ErrorIs(t, s.RaiseCounter("c", 5), pins.ErrPinsNotSaved, "a later write does not clear it")
	assert.ErrorIs(t, s.RaiseLedger("l", 1, []byte{1}), pins.ErrPinsNotSaved)
	assert.ErrorIs(t, s.RaiseCounter("c", 2), pins.ErrPinsNotSaved, "not even for a value already pinned")
	assert.ErrorIs(t, s.CheckCounter("c", 10), disk)
	assert.ErrorIs(t, s.Close(), disk)
}

// The state folder removed while the pins are open: the very raise whose
// write fails returns the error, for counters and ledger heads alike.
func TestRemovedFolderFailsTheRaise(t *testing.T) {
	for name, raise := range map[string]func(s *pins.Set) error{
		"counter": func(s *pins.Set) error { return s.RaiseCounter("c", 2) },
		"ledger":  func(s *pins.Set) error { return s.RaiseLedger("l", 2, []byte{2}) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, newKey(t))
			require.NoError(t, s.RaiseCounter("c", 1))
			require.NoError(t, s.RaiseLedger("l", 1, []byte{1}))
			require.NoError(t, os.RemoveAll(dir))
			assert.ErrorIs(t, raise(s), pins.ErrPinsNotSaved)
			assert.ErrorIs(t, s.CheckCounter("c", 10), pins.ErrPinsNotSaved)
			assert.ErrorIs(t, s.Close(), pins.ErrPinsNotSaved)
		})
	}
}

// The newest copy torn (truncated, or any byte changed): Open falls back to
// the other copy, and the protection holds for what it covers.
func TestTornNewestCopyFallsBackToTheOther(t *testing.T) {
	damage := map[string]func([]byte) []byte{
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"empty":     func(b []byte) []byte { return nil },
		"bit-flip":  func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"header":    func(b []byte) []byte { b[0] ^= 1; return b },
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			dir, key := t.TempDir(), newKey(t)
			s := open(t, dir, key)
			s.RaiseCounter("c", 10)
			before := contents(t, dir)
			s.RaiseCounter("c", 20)
			newest := rewritten(t, dir, before)
			require.NoError(t, s.Close())

			b, err := os.ReadFile(newest)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(newest, fn(b), 0o600))

			again := open(t, dir, key)
			assert.Equal(t, uint64(10), again.CounterPin("c"))
			assert.ErrorIs(t, again.CheckCounter("c", 9), pins.ErrRollback)
			// The next write replaces the damaged copy; both load again.
			again.RaiseCounter("c", 30)
			require.NoError(t, again.Close())
			third := open(t, dir, key)
			assert.Equal(t, uint64(30), third.CounterPin("c"))
		})
	}
}

// contents reads the pins copies.
func contents(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, p := range pinFiles(t, dir) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		m[p] = string(b)
	}
	return m
}

// rewritten names the one copy whose content differs from before.
func rewritten(t testing.TB, dir string, before map[string]string) string {
	t.Helper()
	var changed []string
	for p, b := range contents(t, dir) {
		if before[p] != b {
			changed = append(changed, p)
		}
	}
	require.Len(t, changed, 1)
	return changed[0]
}

// Both copies damaged, or deleted, for a vault the folder records: a typed
// error, never a fresh start.
func TestLostPinsAreAnError(t *testing.T) {
	for name, fn := range map[string]func(path string) error{
		"deleted": os.Remove,
		"torn":    func(p string) error { return os.WriteFile(p, []byte("NOYD"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			dir, key := t.TempDir(), newKey(t)
			s := open(t, dir, key)
			s.RaiseCounter("c", 10)
			s.RaiseCounter("c", 20)
			require.NoError(t, s.Close())
			for _, p := range pinFiles(t, dir) {
				require.NoError(t, fn(p))
			}
			_, err := openPins(dir, "books", testID, key)
			assert.ErrorIs(t, err, pins.ErrStateLost)

			// Forget is the explicit way to start over.
			require.NoError(t, pins.Forget(dir, "books"))
			again := open(t, dir, key)
			assert.Zero(t, again.CounterPin("c"))
		})
	}
}

// The folder remembers, by vault name, the identity of every vault the
// device used; Open refuses another identity under that name until Forget.
func TestFolderRemembersVaults(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	id, err := pins.Lookup(dir, "books")
	require.NoError(t, err)
	assert.Nil(t, id)

	s := open(t, dir, key)
	id, err = pins.Lookup(dir, "books")
	require.NoError(t, err)
	assert.Equal(t, testID, id, "recorded as soon as the vault is opened")
	assert.Error(t, pins.Forget(dir, "books"), "not while it is open")
	require.NoError(t, s.Close())

	_, err = openPins(dir, "books", []byte("another-identity"), key)
	assert.ErrorIs(t, err, pins.ErrVaultLost)
	assert.ErrorIs(t, err, pins.ErrRollback)

	require.NoError(t, pins.Forget(dir, "books"))
	id, err = pins.Lookup(dir, "books")
	require.NoError(t, err)
	assert.Nil(t, id)
	other := open(t, dir, key)
	require.NoError(t, other.Close())

	// A vault with a name no file system accepts still has its files.
	odd := "b\\o:o*k?s\n"
	o, err := openPins(dir, odd, testID, key)
	require.NoError(t, err)
	require.NoError(t, o.Close())
	id, err = pins.Lookup(dir, odd)
	require.NoError(t, err)
	assert.Equal(t, testID, id)
}

// A crash between the first pins copy and the record: the copy alone tells
// the device that it used the vault.
func TestCopyWithoutRecordStillRemembers(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	s := open(t, dir, key)
	s.RaiseCounter("c", 4)
	require.NoError(t, s.Close())
	rec, err := filepath.Glob(filepath.Join(dir, "*.vault"))
	require.NoError(t, err)
	require.Len(t, rec, 1)
	require.NoError(t, os.Remove(rec[0]))

	id, err := pins.Lookup(dir, "books")
	require.NoError(t, err)
	assert.Equal(t, testID, id)
	_, err = openPins(dir, "books", []byte("another-identity"), key)
	assert.ErrorIs(t, err, pins.ErrVaultLost)
	again := open(t, dir, key)
	assert.Equal(t, uint64(4), again.CounterPin("c"))
}

// Sets of one vault and folder in one process share one memory.
func TestSetsOfOneVaultShare(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	a, b := open(t, dir, key), open(t, dir, key)
	a.RaiseCounter("c", 8)
	assert.ErrorIs(t, b.CheckCounter("c", 7), pins.ErrRollback)
	require.NoError(t, a.Close())
	b.RaiseCounter("c", 9) // still saved: b is open
	require.NoError(t, b.Close())
	c := open(t, dir, key)
	assert.Equal(t, uint64(9), c.CounterPin("c"))
	_, err := openPins(dir, "books", testID, newKey(t))
	assert.ErrorIs(t, err, crypto.ErrTampered, "a second opener with another key is refused")
}

// A closed Set refuses: its readers are sent to a check that fails.
func TestClosedSetRefuses(t *testing.T) {
	for name, dir := range map[string]string{"memory": "", "folder": t.TempDir()} {
		t.Run(name, func(t *testing.T) {
			s, err := openPins(dir, "books", testID, newKey(t))
			require.NoError(t, err)
			s.RaiseCounter("c", 3)
			require.NoError(t, s.Close())
			require.NoError(t, s.Close())
			assert.Equal(t, uint64(1<<64-1), s.CounterPin("c"))
			assert.ErrorIs(t, s.CheckCounter("c", 5), stores.ErrClosed)
			assert.ErrorIs(t, s.CheckLedger("l", 5, nil), stores.ErrClosed)
		})
	}
}

// The layout before version 2 (one file named after the salt) is read once
// and replaced.
func TestLegacyFileIsMigrated(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	// version 1 body: counters {"c": 12}, no heads
	body := []byte{1, 1, 1, 'c', 12, 0}
	sealed, err := crypto.Seal(key.Derive("pins test"), body, crypto.KeyAD("books", "_pins")) // the key openPins gives

	require.NoError(t, err)
	legacy := filepath.Join(dir, "30313233343536373839616263646566.pins")
	require.NoError(t, os.WriteFile(legacy, sealed, 0o600))

	s := open(t, dir, key)
	assert.Equal(t, uint64(12), s.CounterPin("c"))
	_, err = os.Stat(legacy)
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, s.Close())
	again := open(t, dir, key)
	assert.Equal(t, uint64(12), again.CounterPin("c"))
}

func TestMemoryOnly(t *testing.T) {
	s, err := openPins("", "books", []byte("id"), newKey(t))
	require.NoError(t, err)
	s.RaiseCounter("c", 3)
	assert.ErrorIs(t, s.CheckCounter("c", 2), pins.ErrRollback)
	require.NoError(t, s.Close())
}

// Processes sharing a state folder take turns writing, and each write holds
// the union of what all of them have seen: no process's pins are lost.
func TestProcessesSharingAFolderMerge(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	a, err := pins.OpenAsAnotherProcess(dir, "books", testID, key.Derive("pins test"))
	require.NoError(t, err)
	b, err := pins.OpenAsAnotherProcess(dir, "books", testID, key.Derive("pins test"))
	require.NoError(t, err)
	a.RaiseCounter("c", 5)
	b.RaiseCounter("d", 7)
	b.RaiseLedger("l", 3, []byte("mac-3"))
	a.RaiseCounter("c", 6)
	assert.Equal(t, uint64(7), a.CounterPin("d"), "a took in what b wrote")
	assert.ErrorIs(t, a.CheckCounter("d", 6), pins.ErrRollback)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	s := open(t, dir, key)
	assert.Equal(t, uint64(6), s.CounterPin("c"))
	assert.Equal(t, uint64(7), s.CounterPin("d"))
	seq, mac := s.LedgerPin("l")
	assert.Equal(t, uint64(3), seq)
	assert.Equal(t, []byte("mac-3"), mac)
}

// Copies removed while the vault is open are written again.
func TestCopiesRemovedWhileOpenAreWrittenAgain(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	s := open(t, dir, key)
	s.RaiseCounter("c", 5)
	for _, p := range pinFiles(t, dir) {
		require.NoError(t, os.Remove(p))
	}
	s.RaiseCounter("c", 6)
	c, err := openPins(copyDir(t, dir), "books", testID, key)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), c.CounterPin("c"))
	require.NoError(t, c.Close())
}

// Raises racing the last Close neither race nor panic; every raise that
// returned without an error is on disk, and one that could not reach the
// disk before the files were closed says so.
func TestRaisesRacingClose(t *testing.T) {
	dir, key := t.TempDir(), newKey(t)
	s, err := openPins(dir, "books", testID, key)
	require.NoError(t, err)
	require.NoError(t, s.RaiseCounter("c", 1))
	var wg sync.WaitGroup
	saved := make([]uint64, 8) // per goroutine: the highest value raised without an error
	failed := make([]error, 8) // per goroutine: a raise error other than closed
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				v := uint64(2 + g*50 + i)
				switch err := s.RaiseCounter("c", v); {
				case err == nil:
					saved[g] = v
				case !errors.Is(err, stores.ErrClosed) && failed[g] == nil:
					failed[g] = err
				}
			}
		})
	}
	require.NoError(t, s.Close())
	wg.Wait()
	again := open(t, dir, key)
	for g := range 8 {
		assert.NoError(t, failed[g])
		assert.GreaterOrEqual(t, again.CounterPin("c"), saved[g], "goroutine %d", g)
	}
	assert.GreaterOrEqual(t, again.CounterPin("c"), uint64(1))
}

// openPins is pins.Open with a fresh key of the same bytes as key (derived
// from it): Open takes its key over and wipes it when the last Set closes,
// so a test that reopens needs a key of its own for each Open.
func openPins(dir, vaultName string, id []byte, key *crypto.Key) (*pins.Set, error) {
	return pins.Open(dir, vaultName, id, key.Derive("pins test"))
}

// The key given to Open is wiped when the last Set of the vault closes; a
// second opener's key, joining the first, at once.
func TestKeyWipedWithTheLastSet(t *testing.T) {
	dir, root := t.TempDir(), newKey(t)
	k1, k2 := root.Derive("pins"), root.Derive("pins")
	s1, err := pins.Open(dir, "books", testID, k1)
	require.NoError(t, err)
	s2, err := pins.Open(dir, "books", testID, k2)
	require.NoError(t, err)
	assert.True(t, k2.Wiped(), "the joining opener's key")
	assert.False(t, k1.Wiped(), "the key the pins seal with")
	require.NoError(t, s1.RaiseCounter("c", 1))
	require.NoError(t, s1.Close())
	assert.False(t, k1.Wiped(), "a Set is still open")
	require.NoError(t, s2.RaiseCounter("c", 2))
	require.NoError(t, s2.Close())
	assert.True(t, k1.Wiped(), "the last Set closed")

	s3, err := pins.Open(dir, "books", testID, root.Derive("pins"))
	require.NoError(t, err)
	defer s3.Close()
	assert.Equal(t, uint64(2), s3.CounterPin("c"), "what the wiped key sealed still opens with the same key")
}
