package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envRunMain makes the test binary run main (see TestMain).
const envRunMain = "NOYDB_TEST_RUN_MAIN"

// TestInterruptExits130 runs noydb as its own process on a command that would
// run for an hour, waits for its first line of output, interrupts it as
// Ctrl-C would, and wants exit status 130 with one line saying so.
func TestInterruptExits130(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("os.Interrupt cannot be sent to a process on Windows")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	// The timeout only ends a run whose interrupt went missing; it is no
	// part of the synchronisation.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "--store", "mem:", "bench", "--callers", "1", "--seconds", "3600")
	cmd.Env = append(os.Environ(),
		envRunMain+"=1",
		envStateDir+"="+t.TempDir(),
		strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	out := bufio.NewReader(stdout)
	first, err := out.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "bench: seq next on mem:") {
		// stderr is written until the process ends: read it after Wait.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("first line %q (%v), want the bench header; stderr: %s", first, err, stderr.String())
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	rest, _ := out.ReadString(0)
	err = cmd.Wait()

	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout after the header: %q; stderr: %s", rest, stderr.String())
	require.NoError(t, ctx.Err(), "noydb did not stop on the interrupt")
	assert.Equal(t, exitInterrupt, ee.ExitCode(), "stderr: %s", stderr.String())
	assert.Equal(t, "noydb: interrupted\n", stderr.String())
}
