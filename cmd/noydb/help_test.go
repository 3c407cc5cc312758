package main

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helpWidth is the widest line the help texts may have: an 80-column
// terminal shows them without wrapping.
const helpWidth = 80

// helpRoot is the root command of an app that reads no environment and no
// config file.
func helpRoot(t *testing.T) *cobra.Command {
	t.Helper()
	noConfig := filepath.Join(t.TempDir(), "config")
	a := &app{io: stdio{lookupEnv: func(k string) (string, bool) {
		if k == envConfig {
			return noConfig, true
		}
		return "", false
	}}}
	return a.rootCmd()
}

// assertFits checks that every line of text is at most helpWidth columns
// (counted in runes: the help has "…" but no wide characters).
func assertFits(t *testing.T, what, text string) {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), helpWidth, "%s, line %d: %q", what, i+1, line)
	}
}

// TestRootLongHelpFitsEightyColumns: every line of 'noydb --help's long
// text is at most 80 columns. Before, a line about mem: stores ran to 115
// and the postgres:// one to 83.
func TestRootLongHelpFitsEightyColumns(t *testing.T) {
	root := helpRoot(t)
	require.NotEmpty(t, root.Long)
	assertFits(t, "noydb", root.Long)
}

// TestEveryLongHelpFitsEightyColumns is the same for the long text of
// every subcommand ('noydb number' had a 113-column line). Examples are
// command lines to copy, and may be longer.
func TestEveryLongHelpFitsEightyColumns(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		assertFits(t, c.CommandPath(), c.Long)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(helpRoot(t))
}
