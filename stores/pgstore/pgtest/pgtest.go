// Package pgtest connects tests to the throwaway PostgreSQL server that
// scripts/with-postgres starts, and gives each test a schema of its own.
//
// # Usage
//
//	func TestX(t *testing.T) {
//		s := pgtest.Open(t, nil) // a *pgstore.Store in a fresh schema
//		…
//	}
//
// Run such tests through the wrapper, which sets NOYDB_PG_URL:
//
//	scripts/with-postgres go test -race ./...
//
// Without NOYDB_PG_URL the tests skip, unless CI=true, where they fail: CI must
// never pass by skipping. Tests that restart or crash a server start one of
// their own with StartServer, so they never disturb other packages sharing
// the wrapper's server.
//
// # Concurrency
//
// The functions are safe to call from parallel tests; a Server is not safe
// for concurrent use.
package pgtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noydb-go/noydb/stores/pgstore"
)

// Environment variables set by scripts/pg-test-server and scripts/with-postgres.
const (
	// EnvURL holds the connection string of the test server.
	EnvURL = "NOYDB_PG_URL"
	// EnvScript holds the absolute path of scripts/pg-test-server.
	EnvScript = "NOYDB_PG_SCRIPT"
)

// cleanupTimeout bounds the statements run after a test to drop its schema.
const cleanupTimeout = 30 * time.Second

// URL returns the test server's connection string from NOYDB_PG_URL. When it
// is unset the test is skipped, or fails if CI=true.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u != "" {
		return u
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but NOYDB_PG_URL is not set; run tests through scripts/with-postgres")
	}
	t.Skip("NOYDB_PG_URL is not set: no PostgreSQL server; run tests through scripts/with-postgres to include them")
	return ""
}

// Schema returns the name of a schema no other test uses, on the server of
// URL, and drops the schema with everything in it when the test ends. The
// schema itself is not created: pgstore.Open creates it.
func Schema(t testing.TB) string {
	t.Helper()
	return schemaOn(t, URL(t))
}

func schemaOn(t testing.TB, dbURL string) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return name
}

// Open opens a pgstore.Store on the test server in a fresh schema (opts.Schema
// is ignored), closed and dropped when the test ends.
func Open(t testing.TB, opts *pgstore.Options) *pgstore.Store {
	t.Helper()
	return OpenURL(t, URL(t), opts)
}

// OpenURL is Open on the server at dbURL, such as a Server's URL or the
// result of AsyncCommit.
func OpenURL(t testing.TB, dbURL string, opts *pgstore.Options) *pgstore.Store {
	t.Helper()
	var o pgstore.Options
	if opts != nil {
		o = *opts
	}
	o.Schema = schemaOn(t, dbURL)
	s, err := pgstore.Open(context.Background(), dbURL, &o)
	if err != nil {
		t.Fatalf("pgtest: open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Server is a PostgreSQL cluster of one test's own, started by StartServer.
type Server struct {
	// URL is the connection string of the server's test database.
	URL string
	// Dir is the cluster's directory: data, socket, log.
	Dir    string
	script string
}

// StartServer starts a private cluster with scripts/pg-test-server and stops
// and deletes it when the test ends. It takes a few seconds. Like URL, it skips
// (or fails with CI=true) when the wrapper's server is not there, since that
// says whether PostgreSQL is available at all.
func StartServer(t testing.TB) *Server {
	t.Helper()
	URL(t)
	script := os.Getenv(EnvScript)
	if script == "" {
		script = findScript(t)
	}
	out, err := exec.Command(script, "start").Output()
	if err != nil {
		t.Fatalf("pgtest: %s start: %v\n%s", script, err, stderr(err))
	}
	env := parseExports(out)
	srv := &Server{URL: env["NOYDB_PG_URL"], Dir: env["NOYDB_PG_DIR"], script: script}
	if srv.URL == "" || srv.Dir == "" {
		t.Fatalf("pgtest: %s start printed no NOYDB_PG_URL or NOYDB_PG_DIR:\n%s", script, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "stop", srv.Dir).CombinedOutput(); err != nil {
			t.Errorf("pgtest: stop server in %s: %v\n%s", srv.Dir, err, out)
		}
	})
	return srv
}

// Restart stops the server and starts it again on the same port and data.
// With crash the server is stopped in immediate mode, as if the machine had
// lost power: nothing is flushed, and startup replays the write-ahead log.
// Connections open before the restart are broken.
func (s *Server) Restart(t testing.TB, crash bool) {
	t.Helper()
	mode := "fast"
	if crash {
		mode = "immediate"
	}
	if out, err := exec.Command(s.script, "restart", s.Dir, mode).CombinedOutput(); err != nil {
		t.Fatalf("pgtest: restart server in %s: %v\n%s", s.Dir, err, out)
	}
}

// findScript looks for scripts/pg-test-server above the working directory.
func findScript(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	for {
		p := filepath.Join(dir, "scripts", "pg-test-server")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("pgtest: scripts/pg-test-server not found above the working directory, and %s is not set", EnvScript)
		}
		dir = parent
	}
}

// parseExports reads the `export NAME='value'` lines pg-test-server prints.
func parseExports(out []byte) map[string]string {
	env := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export ")
		if !ok {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		env[name] = strings.Trim(value, "'")
	}
	return env
}

func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// AsyncCommit returns connString with synchronous_commit turned off for its
// sessions: commits return before the write-ahead log reaches the disk. That
// keeps every guarantee except surviving a server crash, and makes suites of
// many small commits several times faster. Use it only where durability is not
// what the test checks.
func AsyncCommit(connString string) string {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		if u, err := url.Parse(connString); err == nil {
			q := u.Query()
			q.Set("synchronous_commit", "off")
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return connString + " synchronous_commit=off"
}
