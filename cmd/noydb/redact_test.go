package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactLocationMasksEveryPasswordForm(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://bob:hunter2@db/books":                                 "postgres://bob:xxxxx@db/books",
		"postgres://bob@db/books?password=hunter2":                        "postgres://bob@db/books?password=xxxxx",
		"postgres://bob@db/books?sslmode=verify-full&sslpassword=hunter2": "postgres://bob@db/books?sslmode=verify-full&sslpassword=xxxxx",
		"postgres://bob@db/books?PassWord=hunter2&schema=x":               "postgres://bob@db/books?PassWord=xxxxx&schema=x",
		"postgres://bob@db/books?pass%77ord=hunter2":                      "postgres://bob@db/books?pass%77ord=xxxxx",
		"postgres://bob@db/books#password=hunter2":                        "postgres://bob@db/books#…",
		"postgres://bob:hunter2@db/%zz":                                   "postgres://…",
		"host=db password=hunter2 dbname=books":                           "host=db password=xxxxx dbname=books",
		"host=db password = 'hun ter2' sslpassword=hunter2":               "host=db password = xxxxx sslpassword=xxxxx",
		`host=db password='it\'s hunter2'`:                                "host=db password=xxxxx",
		"badger:/srv/books":                                               "badger:/srv/books",
		"file:/srv/a=b":                                                   "file:/srv/a=b",
		"mem:":                                                            "mem:",
	} {
		assert.Equal(t, want, redactLocation(in), in)
	}
}

func TestScrubSecretsFindsEveryForm(t *testing.T) {
	for loc, secret := range map[string]string{
		"postgres://bob:hunter2@db/books":               "hunter2",
		"postgres://bob@db/books?password=hunter2":      "hunter2",
		"postgres://bob@db/books?sslpassword=hunter%32": "hunter2",
		"host=db password=hunter2":                      "hunter2",
		"host=db password='hunter2'":                    "hunter2",
		`host=db password='hunter2\'s'`:                 "hunter2's",
	} {
		text := "connect failed for " + secret + " (" + loc + ")"
		assert.NotContains(t, scrubSecrets(text, loc), secret, loc)
	}
	assert.Equal(t, "plain", scrubSecrets("plain", "postgres://db/x", "badger:/x", ""))
}

// secretForms are the ways a store or hub location can carry the password
// "hunter2"; unreachable (port 1) so that opening one fails at once.
var secretForms = []string{
	"postgres://bob:hunter2@127.0.0.1:1/books?sslmode=disable",
	"postgres://bob@127.0.0.1:1/books?sslmode=disable&password=hunter2",
	"postgres://bob@127.0.0.1:1/books?sslmode=disable&sslpassword=hunter2",
	"host=127.0.0.1 port=1 user=bob password=hunter2 dbname=books",
	"host=127.0.0.1 port=1 password='hunter2 x' dbname=books",
}

// Every path that prints a store or hub location (errors, config, config
// set, notes, sync status and its recorded last error, help) is fed each
// form of a password, and none prints it.
func TestNoPrintingPathShowsAStorePassword(t *testing.T) {
	for _, form := range secretForms {
		t.Run("", func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "noydb.conf")
			device := "badger:" + filepath.Join(dir, "device")
			env := map[string]string{
				envConfig: cfg, envSecret: "s3cret", envTestKDF: "1", envUser: "tester",
				envStateDir: filepath.Join(dir, "state"),
			}
			runs := [][]string{
				{"--store", form, "config"},
				{"--store", form, "--json", "config"},
				{"--hub", form, "--store", device, "config"},
				{"--store", form, "--wait", "0", "seq", "peek", "x"},
				{"--store", form, "--wait", "0", "get", "c", "id"},
				{"--store", device, "--hub", form, "--create", "put", "c", "id", "{}"},
				{"--store", device, "--hub", form, "seq", "next", "x"},
				{"--store", device, "--hub", form, "sync"},
				{"--store", device, "--hub", form, "sync", "status"},
				{"--store", device, "--hub", form, "--json", "sync", "status"},
				{"--store", device, "--hub", form, "--store", form, "init"},
				{"--store", form, "forget"},
				{"config", "set", "store", form},
				{"--json", "config", "set", "hub", form},
				{"config"},
				{"--help"},
				{"seq", "next", "--help"},
			}
			env[envHub] = ""
			for _, args := range runs {
				code, stdout, stderr := runWith(t, env, args...)
				assert.NotContains(t, stdout+stderr, "hunter2", "%v: exit %d", args, code)
			}
			// The same from a config file and the environment.
			require.NoError(t, os.WriteFile(cfg, []byte("store = "+form+"\nhub = "+form+"\n"), 0o600))
			for _, args := range [][]string{{"config"}, {"--help"}, {"seq", "peek", "x"}, {"sync", "status"}} {
				code, stdout, stderr := runWith(t, env, args...)
				assert.NotContains(t, stdout+stderr, "hunter2", "config file, %v: exit %d", args, code)
			}
			require.NoError(t, os.Remove(cfg))
			env[envStore], env[envHub] = form, form
			for _, args := range [][]string{{"config"}, {"--help"}, {"seq", "peek", "x"}, {"sync"}} {
				code, stdout, stderr := runWith(t, env, args...)
				assert.NotContains(t, stdout+stderr, "hunter2", "environment, %v: exit %d", args, code)
			}
		})
	}
}

// A URL form is printed, masked, where the command names the store: the
// user sees which server it is about.
func TestConfigShowsTheMaskedLocation(t *testing.T) {
	for _, form := range secretForms[:3] {
		code, stdout, stderr := runWith(t, map[string]string{}, "--store", form, "--hub", form, "config")
		require.Equal(t, exitOK, code, stderr)
		assert.Regexp(t, `(?m)^store +postgres://bob(:xxxxx)?@127\.0\.0\.1:1/books\?`, stdout)
		assert.Regexp(t, `(?m)^hub +postgres://bob(:xxxxx)?@127\.0\.0\.1:1/books\?`, stdout)
	}
	code, _, stderr := runWith(t, map[string]string{}, "--store", secretForms[3], "seq", "peek", "x")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "password=xxxxx")
	assert.Contains(t, stderr, "keyword connection string")
}

// runWith runs the command with env as its whole environment and its
// folders in a temporary folder.
func runWith(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
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
