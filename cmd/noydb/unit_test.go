package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

func TestParseStoreSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want storeSpec
		str  string
	}{
		{"mem:", storeSpec{kind: "mem"}, "mem:"},
		{"badger:./noydb-data", storeSpec{kind: "badger", dir: "./noydb-data"}, "badger:./noydb-data"},
		{"file:/tmp/a:b", storeSpec{kind: "file", dir: "/tmp/a:b"}, "file:/tmp/a:b"},
		{"postgres://u:pw@db/x?sslmode=disable", storeSpec{kind: "postgres", url: "postgres://u:pw@db/x?sslmode=disable", conn: "postgres://u:pw@db/x?sslmode=disable"}, "postgres://u:xxxxx@db/x?sslmode=disable"},
		{"postgresql://db/x", storeSpec{kind: "postgres", url: "postgresql://db/x", conn: "postgresql://db/x"}, "postgresql://db/x"},
		{"postgres://db/x?schema=books&sslmode=disable", storeSpec{kind: "postgres", url: "postgres://db/x?schema=books&sslmode=disable", conn: "postgres://db/x?sslmode=disable", schema: "books"}, "postgres://db/x?schema=books&sslmode=disable"},
	} {
		got, err := parseStoreSpec(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.str, got.String(), tc.in)
	}
	for _, bad := range []string{"", "badger:", "file:", "sqlite:x", "./dir", "postgres://u:pw@db/%zz"} {
		_, err := parseStoreSpec(bad)
		var ue *usageError
		require.ErrorAs(t, err, &ue, bad)
		assert.NotContains(t, err.Error(), "pw", "a bad URL must not echo its password")
	}
}

func TestScrubHidesPassword(t *testing.T) {
	err := scrub(errors.New(`connect to postgres://u:hunter2@db: failed for password "hunter2"`), "postgres://u:hunter2@db/x")
	assert.NotContains(t, err.Error(), "hunter2")
	plain := errors.New("boom")
	assert.Same(t, plain, scrub(plain, "postgres://db/x"))
}

func TestUnescapeHTML(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"x"}`:                       `{"a":"x"}`,
		`{"a":"\u003cb\u003e \u0026 c"}`:  `{"a":"<b> & c"}`,
		`{"a":"\\u003c"}`:                 `{"a":"\\u003c"}`, // an escaped backslash, then text
		`{"a":"\\\u003c"}`:                `{"a":"\\<"}`,
		`{"a":"\u00e9\u2028"}`:            `{"a":"\u00e9\u2028"}`,
		`{"a":"\"\u0026\""}`:              `{"a":"\"&\""}`,
		`"\u003`:                          `"\u003`,
		`["\u003c","\u003e","\u0026",""]`: `["<",">","&",""]`,
	} {
		got := unescapeHTML([]byte(in))
		assert.Equal(t, want, string(got), in)
		if json.Valid([]byte(in)) {
			var a, b any
			require.NoError(t, json.Unmarshal([]byte(in), &a), in)
			require.NoError(t, json.Unmarshal(got, &b), in)
			assert.Equal(t, a, b, "same meaning: %s", in)
		}
	}
}

func TestPlural(t *testing.T) {
	assert.Equal(t, "0 entries", plural(0, "entry", "entries"))
	assert.Equal(t, "1 entry", plural(1, "entry", "entries"))
	assert.Equal(t, "2 keys", plural(2, "key", "keys"))
}

func TestExactSet(t *testing.T) {
	assert.Empty(t, exactSet(nil, 0))
	assert.Empty(t, exactSet([]uint64{3, 1, 2}, 3))
	assert.Contains(t, exactSet([]uint64{1, 2, 2}, 3), "number 2 issued twice")
	assert.Contains(t, exactSet([]uint64{1, 3}, 3), "number 2 never issued")
	assert.Contains(t, exactSet([]uint64{1, 2}, 3), "2 numbers issued but the counter is at 3")
}

func TestParseCallers(t *testing.T) {
	got, err := parseCallers("1, 8,64")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 8, 64}, got)
	for _, bad := range []string{"", "0", "1,,2", "-1", "x", "100001"} {
		_, err := parseCallers(bad)
		assert.Error(t, err, bad)
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	p := newProgressBar(&buf, "verifying", 200, clock)
	p.set(10)
	assert.Empty(t, buf.String(), "nothing is drawn for work that ends quickly")
	now = now.Add(time.Second)
	p.set(100)
	assert.Equal(t, "\rverifying [===============>              ]  50%  100/200  ETA 1s", buf.String())
	p.set(150)
	assert.NotContains(t, buf.String(), "150/200", "redraws are throttled")
	now = now.Add(time.Second)
	p.set(250) // more than announced (the ledger grew meanwhile)
	assert.Contains(t, buf.String(), "[==============================] 100%  250/250")
	p.done()
	assert.True(t, strings.HasSuffix(buf.String(), "\r"), "done erases the line")

	var off progressBar
	off.set(1)
	off.done()

	// A bar measuring time shows its own counts, and a shorter line
	// overwrites a longer one completely.
	buf.Reset()
	now = time.Unix(0, 0)
	taken := "123456 numbers"
	q := newProgressBar(&buf, "8 callers", 1000, clock)
	q.counts = func(uint64, uint64) string { return taken }
	now = now.Add(time.Second)
	q.set(500)
	assert.Equal(t, "\r8 callers [===============>              ]  50%  123456 numbers  ETA 1s", buf.String())
	buf.Reset()
	taken = "9 numbers"
	now = now.Add(time.Second)
	q.set(600)
	assert.Equal(t, "\r8 callers [==================>           ]  60%  9 numbers  ETA 1s     ", buf.String())
	buf.Reset()
	q.done()
	assert.Equal(t, "\r"+strings.Repeat(" ", len("8 callers [===============>              ]  50%  123456 numbers  ETA 1s"))+"\r", buf.String())
}

func TestSecretFileMode(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("file modes are not checked on " + runtime.GOOS)
	}
	for _, ok := range []fs.FileMode{0o600, 0o400, 0o700, 0o200} {
		assert.NoError(t, secretFileMode("--secret-file", "s", ok, false), "%04o", ok)
	}
	for _, open := range []fs.FileMode{0o640, 0o604, 0o620, 0o602, 0o610, 0o601, 0o644, 0o666, 0o777} {
		err := secretFileMode("--secret-file", "s", open, false)
		require.Error(t, err, "%04o", open)
		assert.Contains(t, err.Error(), "chmod 600 s", "%04o", open)
		assert.NoError(t, secretFileMode("--secret-file", "s", open, true), "--insecure-secret-file accepts %04o", open)
	}
}

func TestBuildVersion(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}}
	dirty := append(slices.Clone(rev), debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	clean := append(slices.Clone(rev), debug.BuildSetting{Key: "vcs.modified", Value: "false"})
	for _, tc := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"release", "v1.2.3", nil, "v1.2.3"},
		{"checkout", "(devel)", nil, "(devel)"},
		{"no version", "", nil, "(devel)"},
		{"checkout with revision", "(devel)", clean, "(devel), revision 0123456789abcdef0123456789abcdef01234567"},
		{"local changes", "(devel)", dirty, "(devel), revision 0123456789abcdef0123456789abcdef01234567 with local changes"},
		{"pseudo-version", "v0.0.0-20261130120000-0123456789ab", clean, "v0.0.0-20261130120000-0123456789ab, revision 0123456789abcdef0123456789abcdef01234567"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/noydb-go/noydb", Version: tc.version}, Settings: tc.settings}
		assert.Equal(t, tc.want, buildVersion(bi), tc.name)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"books", "books", 0},
		{"bokos", "books", 2},
		{"bookz", "books", 1},
		{"", "abc", 3},
		{"fattura", "fatture", 1},
		{"città", "citta", 1},
	} {
		assert.Equal(t, tc.want, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}

// userDataDir follows each system's convention, and a relative
// $XDG_DATA_HOME is ignored as the XDG specification asks.
func TestUserDataDir(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	home := func() (string, error) { return "/h", nil }
	noHome := func() (string, error) { return "", errors.New("$HOME is not defined") }
	for _, tc := range []struct {
		goos string
		env  map[string]string
		home func() (string, error)
		want string
	}{
		{"linux", nil, home, filepath.Join("/h", ".local", "share")},
		{"linux", map[string]string{"XDG_DATA_HOME": "/x"}, noHome, "/x"},
		{"linux", map[string]string{"XDG_DATA_HOME": "rel"}, home, filepath.Join("/h", ".local", "share")},
		{"freebsd", nil, home, filepath.Join("/h", ".local", "share")},
		{"darwin", map[string]string{"XDG_DATA_HOME": "/x"}, home, filepath.Join("/h", "Library", "Application Support")},
		{"windows", map[string]string{"LocalAppData": `C:\Users\u\AppData\Local`}, noHome, `C:\Users\u\AppData\Local`},
	} {
		got, err := userDataDir(tc.goos, env(tc.env), tc.home)
		require.NoError(t, err, tc.goos)
		assert.Equal(t, tc.want, got, "%s %v", tc.goos, tc.env)
	}
	_, err := userDataDir("linux", env(nil), noHome)
	assert.ErrorContains(t, err, "$HOME")
	_, err = userDataDir("windows", env(nil), home)
	assert.ErrorContains(t, err, "LocalAppData")
}

// userStateDir is $XDG_STATE_HOME or ~/.local/state on Unix systems and the
// data folder where the system has no separate state folder.
func TestUserStateDir(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	home := func() (string, error) { return "/h", nil }
	for _, tc := range []struct {
		goos string
		env  map[string]string
		want string
	}{
		{"linux", nil, filepath.Join("/h", ".local", "state")},
		{"linux", map[string]string{"XDG_STATE_HOME": "/s"}, "/s"},
		{"linux", map[string]string{"XDG_STATE_HOME": "rel"}, filepath.Join("/h", ".local", "state")},
		{"darwin", map[string]string{"XDG_STATE_HOME": "/s"}, filepath.Join("/h", "Library", "Application Support")},
		{"windows", map[string]string{"LocalAppData": `C:\L`}, `C:\L`},
	} {
		got, err := userStateDir(tc.goos, env(tc.env), home)
		require.NoError(t, err, tc.goos)
		assert.Equal(t, tc.want, got, "%s %v", tc.goos, tc.env)
	}
}

// Read commands open badger read-only; where badger has none (Windows,
// Plan 9: its Open says so) or a crash needs a writer's recovery, they open
// it as a writer rather than fail.
func TestReadOnlyOpenFallsBackToAWriter(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("badgerstore: open x: %w", badgerstore.ErrRecoveryNeeded),
		fmt.Errorf("badgerstore: open x: %w", badger.ErrWindowsNotSupported),
		fmt.Errorf("badgerstore: open x: %w", badger.ErrPlan9NotSupported),
	} {
		assert.True(t, writerNeeded(err), err.Error())
	}
	for _, err := range []error{nil, stores.ErrLocked, errors.New("badgerstore: open x: permission denied")} {
		assert.False(t, writerNeeded(err), "%v", err)
	}
}
