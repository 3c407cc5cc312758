package numbering_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPassExclusiveAcrossProcesses: eight processes race for a pass of one
// series on one folder. Exactly one gets the lock (filestore's Locker) and
// holds it, waiting inside its pass, until the seven others have failed
// with ErrPassRunning; then it numbers every record, exactly 1..N.
func TestPassExclusiveAcrossProcesses(t *testing.T) {
	const procs, records = 8, 120
	dir := t.TempDir()
	d := openDevice(t, "till", openFileStore(t, dir), receiptOpts)
	ids := make([]string, records)
	for i := range ids {
		ids[i] = fmt.Sprintf("r-%03d", i)
	}
	require.NoError(t, d.writeMany(ids))

	children := make([]*child, procs)
	for i := range children {
		children[i] = startChild(t, dir, holdEnv+"=1")
	}
	said := make([]string, procs)
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() {
			if c.out.Scan() && c.out.Text() == "ready" && c.out.Scan() {
				said[i] = c.out.Text()
			}
		})
	}
	wg.Wait() // the winner waits inside its pass until its stdin closes
	winner := -1
	for i, line := range said {
		switch line {
		case "locked":
			require.Equal(t, -1, winner, "two passes hold the lock: children %d and %d", winner, i)
			winner = i
		case "running":
		default:
			t.Fatalf("child %d said %q after ready, want locked or running", i, line)
		}
	}
	require.NotEqual(t, -1, winner, "no pass got the lock")
	for i, c := range children {
		if i != winner {
			require.Equal(t, exitPassRunning, c.wait(t), "losing child %d", i)
		}
	}
	w := children[winner]
	require.NoError(t, w.stdin.Close())
	w.expect(t, fmt.Sprintf("done %d", records))
	require.Equal(t, 0, w.wait(t))
	checkLedger(t, d, checkNumbered(t, d, ids))
}
