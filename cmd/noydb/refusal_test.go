package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A refusal of a reader's write fits two lines of an 80-column terminal,
// whatever the write: it names the role and whom to ask, not every way to
// change people. Before, one ran to about 500 characters.
func TestReaderRefusalFitsTwoLines(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "rita.txt")
	require.NoError(t, os.WriteFile(secret, []byte("rita-secret"), 0o600))
	env := map[string]string{envTestKDF: "1", envUser: "olga", envSecret: "s",
		envStore: "badger:" + filepath.Join(dir, "data"), envStateDir: filepath.Join(dir, "state")}
	for _, args := range [][]string{
		{"init"}, {"put", "notes", "n1", "{}", "--new"}, {"seq", "next", "invoices", "--new"},
		{"people", "add", "rita", "--role", "reader", "--new-secret-file", secret},
	} {
		code, _, stderr := runWith(t, env, args...)
		require.Equal(t, exitOK, code, "%v: %s", args, stderr)
	}
	env[envUser], env[envSecret] = "rita", "rita-secret"
	for _, args := range [][]string{
		{"put", "notes", "n2", "{}"},
		{"delete", "notes", "n1"},
		{"seq", "next", "invoices"},
		{"seq", "seed", "invoices", "9"},
		{"seq", "void", "invoices", "1", "--reason", "x"},
		{"people", "add", "eve", "--role", "reader", "--new-secret-file", secret},
		{"people", "remove", "olga"},
	} {
		code, _, stderr := runWith(t, env, args...)
		assert.Equal(t, exitFailure, code, "%v: %s", args, stderr)
		msg := strings.TrimSuffix(stderr, "\n")
		assert.Contains(t, msg, `"rita" is a reader of vault "default"`, "%v", args)
		assert.LessOrEqual(t, utf8.RuneCountInString(msg), 2*helpWidth, "%v: %s", args, msg)
		assert.NotContains(t, msg, "\n", "%v", args)
	}
}
