package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// terminalAnswer runs the command with standard input a terminal that
// answers input.
func terminalAnswer(t *testing.T, env map[string]string, input string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	data := t.TempDir()
	code := run(context.Background(), args, stdio{
		in: strings.NewReader(input), out: &out, err: &errs, inTerminal: true,
		lookupEnv:     func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		userConfigDir: func() (string, error) { return data, nil },
		userStateDir:  func() (string, error) { return data, nil },
		userDataDir:   func() (string, error) { return data, nil },
	})
	return code, out.String(), errs.String()
}

// Closing a period with no number asks on a terminal: anything but y or
// yes closes nothing; yes closes it.
func TestClosePeriodAsksOnATerminal(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{envTestKDF: "1", envUser: "olga", envSecret: "s",
		envStore: "badger:" + filepath.Join(dir, "data"), envStateDir: filepath.Join(dir, "state")}
	for _, args := range [][]string{{"init"}, {"seq", "create", "invoices", "--period", "year"}} {
		code, _, stderr := terminalAnswer(t, env, "", args...)
		require.Equal(t, exitOK, code, stderr)
	}
	for _, answer := range []string{"\n", "n\n", "no\n", ""} {
		code, stdout, stderr := terminalAnswer(t, env, answer, "seq", "close-period", "invoices", "2090")
		assert.Equal(t, exitUsage, code, "%q", answer)
		assert.Contains(t, stderr, "The period 2090 has not begun", "%q", answer)
		assert.Contains(t, stderr, "Close it for good? [y/N] ", "%q", answer)
		assert.Contains(t, stderr, "not confirmed, nothing closed", "%q", answer)
		assert.Empty(t, stdout)
	}
	code, stdout, stderr := terminalAnswer(t, env, "y\n", "seq", "close-period", "invoices", "2090")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "closed invoices 2090: last number 0\n", stdout)
	// Closed now: no question.
	code, stdout, stderr = terminalAnswer(t, env, "", "seq", "close-period", "invoices", "2090")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "invoices 2090 was closed already: last number 0; nothing to do\n", stdout)
	assert.Empty(t, stderr)
}
