package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/badgerstore"
)

// TestBusyStoreWaits starts two `seq next` processes on one badger folder
// while the test holds it, as a third noydb would. Both must say once that
// they wait; once the folder is free both succeed, with the numbers 1 and 2:
// the second to get the folder waited for the first.
func TestBusyStoreWaits(t *testing.T) {
	cli := newBadgerCLI(t)
	dir, noydb := cli.dir, cli.cmd
	out, err := noydb("init").CombinedOutput()
	require.NoError(t, err, "%s", out)

	held, err := badgerstore.Open(dir, nil)
	require.NoError(t, err)
	defer held.Close()

	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
		firstErr       string
		stderrDone     chan struct{}
	}
	procs := make([]*proc, 2)
	for i := range procs {
		p := &proc{cmd: noydb("--wait", "1m", "seq", "next", "fatture", "--new")}
		p.cmd.Stdout = &p.stdout
		pipe, err := p.cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, p.cmd.Start())
		// Each says it waits before the folder is freed: its first line.
		r := bufio.NewReader(pipe)
		line, err := r.ReadString('\n')
		p.firstErr = line
		if err != nil || !strings.Contains(line, "waiting up to 1m0s") {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			t.Fatalf("process %d: first stderr line %q (%v), want the waiting line", i, line, err)
		}
		// The rest of stderr goes to the buffer, read to its end before
		// Wait closes the pipe.
		p.stderrDone = make(chan struct{})
		go func() {
			defer close(p.stderrDone)
			_, _ = p.stderr.ReadFrom(r)
		}()
		procs[i] = p
	}
	require.NoError(t, held.Close())

	var got []string
	for i, p := range procs {
		<-p.stderrDone
		err := p.cmd.Wait()
		require.NoError(t, cli.ctx.Err(), "process %d hung", i)
		assert.NoError(t, err, "process %d: stderr %s%s", i, p.firstErr, p.stderr.String())
		assert.Equal(t, "store badger:"+dir+" is in use by another process; waiting up to 1m0s\n", p.firstErr)
		got = append(got, strings.TrimSpace(p.stdout.String()))
	}
	sort.Strings(got)
	assert.Equal(t, []string{"1", "2"}, got, "distinct numbers, none skipped")
}
