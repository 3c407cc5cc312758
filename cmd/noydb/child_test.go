package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// badgerCLI is noydb run as a child process (this test binary, see
// TestMain) on a badger store of its own, with a cheap key derivation and a
// fixed user and secret. Its context only ends a run that hangs.
type badgerCLI struct {
	dir string // the store's folder
	ctx context.Context
	exe string
	env []string
}

func newBadgerCLI(t *testing.T) *badgerCLI {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &badgerCLI{dir: dir, ctx: ctx, exe: exe, env: append(os.Environ(),
		envRunMain+"=1",
		envStateDir+"="+t.TempDir(),
		envStore+"=badger:"+dir,
		envSecret+"=s",
		envTestKDF+"=1",
		envUser+"=tester",
		strings.TrimSpace("GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0"))}
}

// cmd returns the command running noydb with args.
func (b *badgerCLI) cmd(args ...string) *exec.Cmd {
	c := exec.CommandContext(b.ctx, b.exe, args...)
	c.Env = b.env
	return c
}

// run runs noydb with args and returns its combined output.
func (b *badgerCLI) run(args ...string) (string, error) {
	out, err := b.cmd(args...).CombinedOutput()
	return string(out), err
}
