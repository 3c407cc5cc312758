package main

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/badgerstore"
)

// TestReadCommandsOpenReadOnly holds a badger folder the way a reader does
// (a shared lock), which keeps out every writer: the read commands still
// run, at once, and change no file of the folder; a write command cannot.
func TestReadCommandsOpenReadOnly(t *testing.T) {
	cli := newBadgerCLI(t)
	dir, noydb := cli.dir, cli.run
	for _, args := range [][]string{{"init"}, {"seq", "next", "fatture", "--new"}, {"seq", "next", "fatture"}} {
		out, err := noydb(args...)
		require.NoError(t, err, "%v: %s", args, out)
	}

	held, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer held.Close()
	before := files(t, dir)

	for _, args := range [][]string{
		{"--wait", "0", "seq", "peek", "fatture"},
		{"--wait", "0", "seq", "list"},
		{"--wait", "0", "ledger", "verify"},
		{"--wait", "0", "ledger", "tail"},
		{"--wait", "0", "seq", "audit", "fatture"},
	} {
		out, err := noydb(args...)
		assert.NoError(t, err, "%v: %s", args, out)
		if args[3] == "peek" {
			assert.Equal(t, "2\n", out)
		}
	}
	out, err := noydb("--wait", "0", "seq", "next", "fatture")
	assert.Error(t, err, "a writer cannot share the folder with a reader: %s", out)
	assert.Contains(t, out, "in use by another process")
	assert.Equal(t, before, files(t, dir), "the read commands changed no file")
}

// files lists the files of dir with their sizes and modification times.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = info.ModTime().String() + " " + info.Mode().String() + " " + string(rune(info.Size()%0x10ffff))
		return nil
	}))
	return m
}
