package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cmdLineVar sets an environment variable to one line of a file, so a
// script can pass printed output (a recovery code, a public key) on:
//
//	linevar CODE1 codes.txt 1
func cmdLineVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: linevar VAR FILE N")
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n < 1 {
		ts.Fatalf("linevar: line %q", args[2])
	}
	lines := strings.Split(strings.TrimRight(ts.ReadFile(args[1]), "\n"), "\n")
	if n > len(lines) {
		ts.Fatalf("linevar: %s has %d lines", args[1], len(lines))
	}
	ts.Setenv(args[0], strings.TrimSpace(lines[n-1]))
}

// cmdVarFile writes an environment variable's value, and a newline, to a
// file only its owner may read, as a user keeps a recovery code:
//
//	varfile code.txt CODE1
func cmdVarFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: varfile FILE VAR")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(ts.Getenv(args[1])+"\n"), 0o600))
}

// terminalRun runs noydb in this process as on a terminal that answers the
// secret prompts with answers, in order, with env as the environment; it
// returns the exit status, standard output and standard error.
func terminalRun(t *testing.T, env map[string]string, answers []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	data := t.TempDir()
	code := run(context.Background(), args, stdio{
		in: strings.NewReader(""), out: &out, err: &errs, inTerminal: true,
		readPassword: func() ([]byte, error) {
			if len(answers) == 0 {
				return nil, errors.New("no more answers")
			}
			a := answers[0]
			answers = answers[1:]
			return []byte(a), nil
		},
		lookupEnv:     func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		userConfigDir: func() (string, error) { return data, nil },
		userStateDir:  func() (string, error) { return data, nil },
		userDataDir:   func() (string, error) { return data, nil },
	})
	return code, out.String(), errs.String()
}

// TestRecoveryCodeFlagPrompts: --recover on a command that is not 'vault
// recover' asks for the new secret twice on a terminal; two
// different answers change nothing (the code stays good), two equal ones
// recover the vault, whose new secret then opens it.
func TestRecoveryCodeFlagPrompts(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{envTestKDF: "1", envUser: "olga", envSecret: "old",
		envStore: "badger:" + filepath.Join(dir, "data"), envStateDir: filepath.Join(dir, "state")}
	code, _, stderr := terminalRun(t, env, nil, "--vault", "team", "init")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = terminalRun(t, env, nil, "--vault", "team", "put", "notes", "n1", `{"text":"hi"}`, "--new")
	require.Equal(t, exitOK, code, stderr)
	code, stdout, stderr := terminalRun(t, env, nil, "--vault", "team", "vault", "recovery-codes", "-n", "1")
	require.Equal(t, exitOK, code, stderr)
	rc := strings.TrimSpace(stdout)

	delete(env, envSecret) // lost
	env[envRecoveryCode] = rc
	code, _, stderr = terminalRun(t, env, []string{"new", "typo"}, "--vault", "team", "--recover", "get", "notes", "n1")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, `Recovery code: new secret for vault "team" (user "olga"): `)
	assert.Contains(t, stderr, "the two secrets differ")
	assert.NotContains(t, stderr, "Recovery code for vault", "the code came from $"+envRecoveryCode)

	code, stdout, stderr = terminalRun(t, env, []string{"new", "new"}, "--vault", "team", "--recover", "get", "notes", "n1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "hi")
	assert.Contains(t, stderr, `note: vault "team" recovered with a recovery code: the secret of olga is the new one`)

	delete(env, envRecoveryCode)
	env[envSecret] = "new"
	code, stdout, stderr = terminalRun(t, env, nil, "--vault", "team", "get", "notes", "n1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "hi")
	env[envSecret] = "old"
	code, _, stderr = terminalRun(t, env, nil, "--vault", "team", "get", "notes", "n1")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "wrong secret")
}

// TestRecoveryCodePrompt: without --recovery-code-file or
// $NOYDB_RECOVERY_CODE, the code is asked (no echo) on a terminal, before
// the new secret. A mistyped code is refused by its checksum before
// anything is opened: the new secret is not asked, the store and this
// device's state are not created, and the good code then still works.
func TestRecoveryCodePrompt(t *testing.T) {
	dir := t.TempDir()
	data, state := filepath.Join(dir, "data"), filepath.Join(dir, "state")
	env := map[string]string{envTestKDF: "1", envUser: "olga", envSecret: "old",
		envStore: "badger:" + data, envStateDir: state}
	code, _, stderr := terminalRun(t, env, nil, "--vault", "team", "init")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = terminalRun(t, env, nil, "--vault", "team", "put", "notes", "n1", `{"text":"hi"}`, "--new")
	require.Equal(t, exitOK, code, stderr)
	code, stdout, stderr := terminalRun(t, env, nil, "--vault", "team", "vault", "recovery-codes", "-n", "1")
	require.Equal(t, exitOK, code, stderr)
	rc := strings.TrimSpace(stdout)
	delete(env, envSecret) // lost

	// A typo, on a store and state that do not exist yet.
	typo := []byte(rc)
	typo[0] = map[bool]byte{true: 'B', false: 'A'}[typo[0] == 'A']
	elsewhere := map[string]string{envTestKDF: "1", envUser: "olga",
		envStore: "badger:" + filepath.Join(dir, "nothere"), envStateDir: filepath.Join(dir, "nostate")}
	for _, args := range [][]string{
		{"--vault", "team", "vault", "recover"},
		{"--vault", "team", "--recover", "get", "notes", "n1"},
	} {
		code, stdout, stderr = terminalRun(t, elsewhere, []string{string(typo), "new", "new"}, args...)
		assert.Equal(t, exitFailure, code, args)
		assert.Empty(t, stdout, args)
		assert.Equal(t, "Recovery code for vault \"team\": \nnoydb: not a valid recovery code (check it for typos): checksum mismatch\n", stderr, args)
		assert.NoDirExists(t, filepath.Join(dir, "nothere"), args)
		assert.NoDirExists(t, filepath.Join(dir, "nostate"), args)
	}
	// An empty answer opens nothing.
	code, _, stderr = terminalRun(t, env, []string{""}, "--vault", "team", "vault", "recover")
	assert.Equal(t, exitFailure, code)
	assert.Contains(t, stderr, "empty recovery code: nothing was opened")

	code, stdout, stderr = terminalRun(t, env, []string{rc, "new", "new"}, "--vault", "team", "vault", "recover")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, `vault "team" recovered: the secret of olga is the new one`+"\n", stdout)
	assert.Contains(t, stderr, `Recovery code for vault "team": `)
	assert.Contains(t, stderr, `New secret for vault "team" (user "olga"): `)
	assert.NotContains(t, stderr, rc, "the code is never echoed")

	env[envSecret] = "new"
	code, stdout, stderr = terminalRun(t, env, nil, "--vault", "team", "get", "notes", "n1")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "hi")
}
