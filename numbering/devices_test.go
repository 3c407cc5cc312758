package numbering_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
)

// TestThreeDevicesOneFolder has three devices (three DB instances on three
// file store handles over one folder) write and enqueue 5,000 receipts in
// total while each of them runs passes over and over from its own
// goroutine. At the end every receipt has exactly one number, the numbers
// are exactly 1..5,000, each batch follows provisional order, and the
// ledger has one entry per number.
//
// Record writes, enqueues and passes all run concurrently; the passes
// contend for the series lock, and the ledger appends of the three devices
// take turns under the folder's lock (filestore implements stores.Locker).
func TestThreeDevicesOneFolder(t *testing.T) {
	total := 5000
	if testing.Short() {
		total = 600
	}
	ctx := context.Background()
	dir := t.TempDir()
	devices := make([]*device, 3)
	for i := range devices {
		// The first open creates the vault; the others join it.
		devices[i] = openDevice(t, fmt.Sprint("till-", i+1), openFileStore(t, dir), receiptOpts)
	}
	ids := make([][]string, len(devices))
	var all []string
	for i := range total {
		d := i % len(devices)
		id := fmt.Sprintf("%s-%04d", devices[d].name, i)
		ids[d] = append(ids[d], id)
		all = append(all, id)
	}

	var (
		writing sync.WaitGroup
		passing sync.WaitGroup
		stop    = make(chan struct{})
		passes  atomic.Int64
		busy    atomic.Int64
		errs    = make(chan error, 2*len(devices))
	)
	for i, d := range devices {
		writing.Go(func() {
			if err := d.writeMany(ids[i]); err != nil {
				errs <- fmt.Errorf("%s: write: %w", d.name, err)
			}
		})
		passing.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := d.series.RunPass(ctx)
				switch {
				case errors.Is(err, numbering.ErrPassRunning):
					busy.Add(1)
					// Pacing, not synchronisation: let the pass in flight work.
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				case err != nil:
					errs <- fmt.Errorf("%s: pass: %w", d.name, err)
					return
				default:
					passes.Add(1)
					// Pacing, not synchronisation: a pass lists the whole
					// folder, so back-to-back passes would each find one
					// record and make the test quadratic.
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		})
	}
	writing.Wait()
	close(stop)
	passing.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// One last pass numbers what was enqueued after the others listed.
	_, err := devices[2].series.RunPass(ctx)
	require.NoError(t, err)
	t.Logf("%d passes completed, %d refused while another ran", passes.Load(), busy.Load())

	got := checkNumbered(t, devices[0], all)
	checkLedger(t, devices[0], got)
	for _, d := range devices[1:] {
		for _, id := range []string{all[0], all[total-1]} {
			a, ok, err := d.series.Lookup(ctx, id)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, got[id], a)
		}
	}
}
