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

// A config file kept as a symbolic link (a dotfiles repository) stays one:
// 'config set' writes through the link instead of replacing it.
func TestConfigSetWritesThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "dotfiles", "noydb.conf")
	require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o700))
	require.NoError(t, os.WriteFile(target, []byte("# mine\n"), 0o600))
	link := filepath.Join(dir, "config")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	code, _, stderr := configRun(t, link, "config", "set", "vault", "books")
	require.Equal(t, exitOK, code, stderr)
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "still a link")
	data, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "# mine\nvault = books\n", string(data))
}

// $NOYDB_CONFIG naming something other than a regular file (/dev/null to
// run without a config file, a pipe) is never replaced by 'config set'.
func TestConfigSetLeavesADeviceAlone(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/null")
	}
	before, err := os.Stat(os.DevNull)
	require.NoError(t, err)
	code, _, stderr := configRun(t, os.DevNull, "config", "set", "vault", "books")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "not a regular file")
	after, err := os.Stat(os.DevNull)
	require.NoError(t, err)
	assert.Equal(t, before.Mode(), after.Mode(), "still the device")

	// And reading it is an empty config file.
	code, stdout, stderr := configRun(t, os.DevNull, "config")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?m)^vault +default +\(default\)$`, stdout)
}

// 'config set store' with a PostgreSQL URL keeps the password in the file
// (0600) but never prints it, in text or JSON.
func TestConfigSetHidesAPassword(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "noydb.conf")
	url := "postgres://u:hunter2@db.example/books?sslmode=disable"
	for _, args := range [][]string{{"config", "set", "store", url}, {"--json", "config", "set", "store", url}, {"config"}} {
		code, stdout, stderr := configRun(t, cfg, args...)
		require.Equal(t, exitOK, code, stderr)
		assert.NotContains(t, stdout+stderr, "hunter2", "%v", args)
		assert.Contains(t, stdout, "db.example", "%v", args)
	}
	data, err := os.ReadFile(cfg)
	require.NoError(t, err)
	assert.Equal(t, "store = "+url+"\n", string(data))
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(cfg)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
}

// Help shows --store's default, which $NOYDB_STORE or the config file may
// set to a PostgreSQL URL: without its password.
func TestHelpHidesTheStorePassword(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "noydb.conf")
	require.NoError(t, os.WriteFile(cfg, []byte("store = postgres://u:hunter2@db.example/books\n"), 0o600))
	for _, args := range [][]string{{"--help"}, {"seq", "peek", "--help"}} {
		code, stdout, stderr := configRun(t, cfg, args...)
		require.Equal(t, exitOK, code, stderr)
		assert.NotContains(t, stdout+stderr, "hunter2", "%v", args)
		assert.Contains(t, stdout, "postgres://u:xxxxx@db.example/books", "%v", args)
	}
}
