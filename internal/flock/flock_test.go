package flock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/flock"
)

// The test binary re-executed with childEnv set to a path is a lock holder
// or tester instead of running the tests (modeEnv):
//   - "hold": Lock the file, print "locked", wait for standard input to
//     close, Unlock, print "unlocked", exit 0.
//   - "try": TryLock the file; exit 0 when it got the lock, exitHeld on ErrHeld.
const (
	childEnv = "NOYDB_FLOCK_CHILD"
	modeEnv  = "NOYDB_FLOCK_MODE"
	exitHeld = 3
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(child(path, os.Getenv(modeEnv)))
	}
	os.Exit(m.Run())
}

func child(path, mode string) int {
	f, err := flock.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer f.Close()
	switch mode {
	case "hold":
		if err := f.Lock(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
		if err := f.Unlock(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		fmt.Println("unlocked")
		return 0
	case "try":
		err := f.TryLock()
		if errors.Is(err, flock.ErrHeld) {
			return exitHeld
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "child: unknown mode", mode)
	return 1
}

// proc is a running child.
type proc struct {
	cmd   *exec.Cmd
	out   *bufio.Scanner
	stdin io.WriteCloser
}

func start(t *testing.T, path, mode string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// A binary built with -race sleeps a second at exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), childEnv+"="+path, modeEnv+"="+mode, "GORACE="+gorace)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, out: bufio.NewScanner(stdout), stdin: stdin}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

func (p *proc) expect(t *testing.T, want string) {
	t.Helper()
	require.True(t, p.out.Scan(), "child ended before %q: %v", want, p.out.Err())
	require.Equal(t, want, p.out.Text())
}

// wait closes the child's standard input, waits for it to exit and returns
// its exit code (-1 when killed).
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	_ = p.stdin.Close()
	for p.out.Scan() {
	}
	err := p.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

func open(t *testing.T, path string) *flock.File {
	t.Helper()
	f, err := flock.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestTryLock: two Files of one path exclude each other; Unlock and Close
// release.
func TestTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, b := open(t, path), open(t, path)
	require.NoError(t, a.TryLock())
	assert.ErrorIs(t, b.TryLock(), flock.ErrHeld)
	assert.Error(t, a.TryLock(), "a second TryLock of the holder")
	require.NoError(t, a.Unlock())
	require.NoError(t, a.Unlock(), "Unlock of a File that does not hold the lock")
	require.NoError(t, b.TryLock())
	assert.ErrorIs(t, a.TryLock(), flock.ErrHeld)
	require.NoError(t, b.Close())
	require.NoError(t, a.TryLock(), "Close released the lock")
	other := open(t, filepath.Join(t.TempDir(), "y.lock"))
	assert.NoError(t, other.TryLock(), "another path is another lock")
}

// TestLockWaits: Lock waits for the holder's Unlock, with a context that
// can end (polling) and with one that cannot (waiting in the kernel).
func TestLockWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		{"background", func(*testing.T) context.Context { return context.Background() }},
		{"cancellable", func(t *testing.T) context.Context { return t.Context() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.lock")
			a, b := open(t, path), open(t, path)
			require.NoError(t, a.TryLock())
			got := make(chan error, 1)
			go func() { got <- b.Lock(tc.ctx(t)) }()
			select {
			case err := <-got:
				t.Fatalf("Lock returned %v while the lock was held", err)
			default:
			}
			require.NoError(t, a.Unlock())
			require.NoError(t, <-got)
			assert.ErrorIs(t, a.TryLock(), flock.ErrHeld)
		})
	}
}

// TestLockCancelled: Lock of a held lock returns ctx's error when ctx ends,
// and a Lock with an ended ctx does not try.
func TestLockCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, b := open(t, path), open(t, path)
	require.NoError(t, a.TryLock())
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	cancel()
	require.ErrorIs(t, <-got, context.Canceled)
	require.NoError(t, a.Unlock())
	assert.ErrorIs(t, b.Lock(ctx), context.Canceled, "an ended ctx, a free lock")
	require.NoError(t, b.TryLock(), "the cancelled Lock left nothing held")
}

// TestOpenError: a lock file that cannot be created is an error, not a
// lock.
func TestOpenError(t *testing.T) {
	_, err := flock.Open(filepath.Join(t.TempDir(), "missing", "x.lock"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestTwoProcesses: a child process holding the lock keeps this process
// out (TryLock, and a Lock whose ctx ends), and this process holding it
// keeps a child out; the child's Unlock lets a waiting Lock through.
func TestTwoProcesses(t *testing.T) {
	if !flock.CrossProcess {
		t.Skip("this system has no file lock: the lock is within one process")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	holder := start(t, path, "hold")
	holder.expect(t, "locked")
	f := open(t, path)
	require.ErrorIs(t, f.TryLock(), flock.ErrHeld)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- f.Lock(ctx) }()
	cancel()
	require.ErrorIs(t, <-got, context.Canceled)

	go func() { got <- f.Lock(context.Background()) }()
	require.NoError(t, holder.stdin.Close())
	holder.expect(t, "unlocked")
	require.NoError(t, <-got)
	require.Equal(t, 0, holder.wait(t))

	assert.Equal(t, exitHeld, start(t, path, "try").wait(t), "a child got the lock this process holds")
	require.NoError(t, f.Unlock())
	assert.Equal(t, 0, start(t, path, "try").wait(t), "a child did not get the free lock")
}

// TestHolderKilled: the lock of a process killed with SIGKILL while it
// holds it is free at once.
func TestHolderKilled(t *testing.T) {
	if !flock.CrossProcess {
		t.Skip("this system has no file lock: the lock is within one process")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	holder := start(t, path, "hold")
	holder.expect(t, "locked")
	f := open(t, path)
	require.ErrorIs(t, f.TryLock(), flock.ErrHeld)
	require.NoError(t, holder.cmd.Process.Kill()) // SIGKILL on Unix, TerminateProcess on Windows
	assert.Equal(t, -1, holder.wait(t))
	require.NoError(t, f.TryLock(), "the lock of the killed process is still held")
}
