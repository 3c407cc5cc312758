package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// configRun runs noydb in this process with $NOYDB_CONFIG set to cfg and no
// other environment, and returns the exit status and standard error.
func configRun(t *testing.T, cfg string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	env := map[string]string{envConfig: cfg}
	data := t.TempDir()
	code := run(context.Background(), args, stdio{
		in: strings.NewReader(""), out: &out, err: &errs,
		lookupEnv:     func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		userConfigDir: func() (string, error) { return data, nil },
		userStateDir:  func() (string, error) { return data, nil },
		userDataDir:   func() (string, error) { return data, nil },
	})
	return code, out.String(), errs.String()
}

// A value holding a line break (or any control character) would write a
// second line into the config file: 'config set user' could then set the
// store. It is refused as a usage error and the file is left as it was.
func TestConfigSetRefusesLineBreaks(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "noydb.conf")
	code, _, stderr := configRun(t, cfg, "config", "set", "vault", "books")
	require.Equal(t, exitOK, code, stderr)
	before, err := os.ReadFile(cfg)
	require.NoError(t, err)

	for key, value := range map[string]string{
		"user":      "bob\nstore = mem:",
		"state-dir": "/tmp/x\rstore = mem:",
		"store":     "badger:/tmp/x\nuser = mallory",
		"wait":      "5s\nuser = mallory",
	} {
		code, _, stderr := configRun(t, cfg, "config", "set", key, value)
		assert.Equal(t, exitUsage, code, "%s: %s", key, stderr)
		after, err := os.ReadFile(cfg)
		require.NoError(t, err)
		assert.Equal(t, string(before), string(after), key)
	}
	code, stdout, stderr := configRun(t, cfg, "config")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^store +badger:`, stdout, "no injected store")
	assert.Regexp(t, `(?m)^vault +books +\(config file `, stdout)
}

// A config file too large for a few settings (or a device such as
// /dev/zero named by $NOYDB_CONFIG) is refused, not read to its end.
func TestConfigFileTooLarge(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "noydb.conf")
	big := strings.Repeat("# "+strings.Repeat("x", 1000)+"\n", 1000) + "vault = books\n"
	require.NoError(t, os.WriteFile(cfg, []byte(big), 0o600))
	code, _, stderr := configRun(t, cfg, "config")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "too large")

	if runtime.GOOS == "windows" {
		return // no /dev/zero
	}
	code, _, stderr = configRun(t, "/dev/zero", "config")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "too large")
}

// The config file applies in every working folder, so a store folder in it
// is absolute: a relative one would name another store in each folder, the
// duplicate numbers the default store exists to prevent.
func TestConfigRefusesRelativeStore(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "noydb.conf")
	code, _, stderr := configRun(t, cfg, "config", "set", "store", "badger:./data")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "absolute")
	_, err := os.Stat(cfg)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")

	require.NoError(t, os.WriteFile(cfg, []byte("vault = books\nstore = file:data\n"), 0o600))
	code, _, stderr = configRun(t, cfg, "seq", "peek", "x")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "line 2")
	assert.Contains(t, stderr, "absolute")
}
