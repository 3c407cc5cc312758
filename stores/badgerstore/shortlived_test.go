package badgerstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/storetest"
)

// A short-lived store keeps every promise of a store: the whole suite, on
// disk (without fsync, as TestConformanceOnDisk, for the same reason).
func TestConformanceShortLived(t *testing.T) {
	storetest.Run(t, func(t *testing.T) stores.Store {
		return open(t, t.TempDir(), &badgerstore.Options{ShortLived: true, NoSync: true})
	})
}

// What a short-lived store writes, a store opened with the usual sizes
// reads, and the other way round: values of every size, the 4 MiB ones
// (larger than a short-lived value log file) included, read-only too.
func TestShortLivedAndUsualSizesShareAFolder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	short := &badgerstore.Options{ShortLived: true}
	values := map[string][]byte{
		"small": []byte("v"),
		"mid":   bytes.Repeat([]byte("m"), 700<<10),
		"big":   bytes.Repeat([]byte("0123456789abcdef"), stores.MaxValueLen/16),
	}
	for i, opts := range []*badgerstore.Options{short, nil, short, nil} {
		st, err := badgerstore.Open(dir, opts)
		require.NoError(t, err, "open %d", i)
		for k, v := range values {
			if i > 0 {
				it, err := st.Get(ctx, fmt.Sprintf("%s-%d", k, i-1))
				require.NoError(t, err, "open %d reads %s of open %d", i, k, i-1)
				assert.True(t, bytes.Equal(v, it.Value), "open %d reads %s of open %d", i, k, i-1)
			}
			_, err := st.Put(ctx, fmt.Sprintf("%s-%d", k, i), v)
			require.NoError(t, err)
		}
		require.NoError(t, st.Close())
	}
	ro, err := badgerstore.Open(dir, &badgerstore.Options{ShortLived: true, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	for i := range 4 {
		for k, v := range values {
			it, err := ro.Get(ctx, fmt.Sprintf("%s-%d", k, i))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(v, it.Value), "%s-%d read-only", k, i)
		}
	}
}

// A short-lived store holds a smaller transaction, and says so: TxLimits
// is its own, not the usual store's.
func TestShortLivedTxLimitsAreItsOwn(t *testing.T) {
	usual := open(t, t.TempDir(), &badgerstore.Options{NoSync: true}).TxLimits()
	st := open(t, t.TempDir(), &badgerstore.Options{ShortLived: true, NoSync: true})
	l := st.TxLimits()
	assert.Less(t, l.MaxBytes, usual.MaxBytes)
	assert.GreaterOrEqual(t, l.MaxBytes, 1<<20, "one value just under badger's 1 MiB value threshold fits")

	ctx := context.Background()
	n := 2 * l.MaxBytes / (64 << 10)
	err := st.Update(ctx, func(tx stores.Tx) error {
		for i := range n {
			if err := tx.Put(fmt.Sprintf("b/%07d", i), make([]byte, 64<<10)); err != nil {
				return err
			}
		}
		return nil
	})
	require.ErrorIs(t, err, stores.ErrTooLarge, "%d values of 64 KiB with limits %+v", n, l)
}

// fillLeft is what fillAndDie writes: more than a short-lived memtable
// holds, in values below badger's value threshold, so all of it stays in
// the memtable and its log.
const (
	fillValues = 48
	fillSize   = 300 << 10
)

// fillAndDie opens dir with the usual sizes, writes fillValues values and
// ends the process without closing the store, as a crash would: the
// folder keeps a memtable log of about 14 MiB. It returns an exit status.
func fillAndDie(dir string) int {
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		return 3
	}
	for i := range fillValues {
		if _, err := s.Put(context.Background(), fmt.Sprintf("k%03d", i), bytes.Repeat([]byte{byte(i)}, fillSize)); err != nil {
			return 4
		}
	}
	return 0 // no Close
}

// A folder whose last writer (with the usual sizes) died with a full
// memtable log is opened short-lived, read-only and read-write, without
// losing a write: badger replays the log into a memtable of the writer's
// size, not into a short one it would overflow (which badger answers by
// ending the process).
func TestShortLivedRecoversWhatALongWriterLeft(t *testing.T) {
	for _, ro := range []bool{true, false} {
		t.Run(fmt.Sprintf("readonly=%v", ro), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "BADGERSTORE_TEST_FILL_AND_DIE_IN="+dir)
			require.NoError(t, cmd.Run())
			mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
			require.NoError(t, err)
			require.NotEmpty(t, mems, "the writer left its memtable log")

			if ro {
				// A read-only open needs a writer's recovery first; the
				// short-lived writer gives it.
				_, err := badgerstore.Open(dir, &badgerstore.Options{ShortLived: true, ReadOnly: true})
				require.ErrorIs(t, err, badgerstore.ErrRecoveryNeeded)
			}
			st, err := badgerstore.Open(dir, &badgerstore.Options{ShortLived: true})
			require.NoError(t, err)
			for i := range fillValues {
				it, err := st.Get(context.Background(), fmt.Sprintf("k%03d", i))
				require.NoError(t, err, "value %d", i)
				assert.True(t, bytes.Equal(bytes.Repeat([]byte{byte(i)}, fillSize), it.Value), "value %d", i)
			}
			require.NoError(t, st.Close())
		})
	}
}
