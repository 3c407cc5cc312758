package filestore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/flock"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/storetest"
)

// Environment of a lock-holding child (TestLockHolderProcess).
const (
	envHolderDir  = "NOYDB_FILESTORE_HOLDER_DIR"
	envHolderName = "NOYDB_FILESTORE_HOLDER_NAME"
)

// TestLockHolderProcess is a lock holder when the tests run it as a child
// (envHolderDir set), and does nothing otherwise: it takes the lock, prints
// "locked" and waits for its standard input to close (or to be killed).
func TestLockHolderProcess(t *testing.T) {
	dir := os.Getenv(envHolderDir)
	if dir == "" {
		return // not a child
	}
	st, err := filestore.Open(dir, nil)
	require.NoError(t, err)
	defer st.Close()
	unlock, err := st.Lock(context.Background(), os.Getenv(envHolderName))
	require.NoError(t, err)
	defer unlock()
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// holdInChild is a storetest.Holder: a child process holding the lock of
// the folder dir.
func holdInChild(dir string) storetest.Holder {
	return func(t *testing.T, name string) func() {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$", "-test.count=1")
		// A binary built with -race sleeps a second at exit unless told not to.
		gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
		cmd.Env = append(os.Environ(), envHolderDir+"="+dir, envHolderName+"="+name, "GORACE="+gorace)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		stdin, err := cmd.StdinPipe() // kept open: the child holds until killed
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = stdin.Close()
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		out := bufio.NewScanner(stdout)
		require.True(t, out.Scan(), "the holder ended before it held the lock: %v", out.Err())
		require.Equal(t, "locked", out.Text())
		return func() {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL: no unlock, no deferred call
			for out.Scan() {
			}
			_ = cmd.Wait()
			require.False(t, cmd.ProcessState.Success(), "the holder exited on its own")
		}
	}
}

// TestLockerDeath: the lock of a process killed while it holds it (kill -9)
// is released.
func TestLockerDeath(t *testing.T) {
	if !flock.CrossProcess {
		t.Skip("this system has no file locks: filestore's locks hold within one process")
	}
	dir := t.TempDir()
	st, err := filestore.Open(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	storetest.RunLockerDeath(t, st, holdInChild(dir))
}
