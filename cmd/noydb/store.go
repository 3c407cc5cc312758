package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// storeSpec is a parsed --store value.
type storeSpec struct {
	kind   string // "badger", "file", "mem" or "postgres"
	dir    string // badger and file
	url    string // postgres, as given (with its password)
	conn   string // postgres, without the schema parameter, for the driver
	schema string // postgres: the schema parameter, "" for pgstore's default
	// readOnly asks for a store that only reads, for commands that only
	// read: it works on a folder the user may not write and does not wait
	// for other readers (badger).
	readOnly bool
	// shortLived: the command makes a few reads or writes and ends; a
	// badger store is opened sized for that (cheaper to open and close).
	shortLived bool
}

// storeOpener opens one kind of store.
type storeOpener func(ctx context.Context, spec storeSpec) (stores.Store, error)

// storeOpeners holds the kinds of store the command opens; each kind but
// mem registers itself from its own file (store_badger.go, …), so each
// driver's import sits in one place.
var storeOpeners = map[string]storeOpener{
	"mem": func(context.Context, storeSpec) (stores.Store, error) { return memstore.New(), nil },
}

// parseStoreSpec parses badger:DIR, file:DIR, mem: and postgres:// URLs.
func parseStoreSpec(s string) (storeSpec, error) {
	switch {
	case s == "mem:" || s == "mem":
		return storeSpec{kind: "mem"}, nil
	case strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://"):
		u, err := url.Parse(s)
		if err != nil {
			return storeSpec{}, usagef("--store: not a valid postgres URL")
		}
		// schema= picks the PostgreSQL schema of the store's tables; the
		// driver does not know it, so it is taken out of the URL.
		q := u.Query()
		schema := q.Get("schema")
		q.Del("schema")
		u.RawQuery = q.Encode()
		return storeSpec{kind: "postgres", url: s, conn: u.String(), schema: schema}, nil
	}
	kind, dir, ok := strings.Cut(s, ":")
	if ok && (kind == "badger" || kind == "file") {
		if dir == "" {
			return storeSpec{}, usagef("--store %s: needs a folder, as in %s:./data", s, kind)
		}
		return storeSpec{kind: kind, dir: dir}, nil
	}
	if looksLikeKeywords(s) {
		return storeSpec{}, usagef("--store %q: a keyword connection string is not taken; write it as a postgres:// URL (postgres://USER@HOST/DB?password=…)", redactLocation(s))
	}
	return storeSpec{}, usagef("--store %q: want badger:DIR, file:DIR, mem: or a postgres:// URL", redactLocation(s))
}

// defaultStore is the store of commands without --store or $NOYDB_STORE:
// badger:<user data folder>/noydb/store, the same from every working folder.
func (a *app) defaultStore() (string, error) {
	if a.io.userDataDir == nil {
		return "", errors.New("no default store: pass --store or set $" + envStore)
	}
	dir, err := a.io.userDataDir()
	if err != nil {
		return "", fmt.Errorf("no default store (%v): pass --store or set $%s", err, envStore)
	}
	return "badger:" + filepath.Join(dir, "noydb", "store"), nil
}

// userDataDir is the per-user data folder of the operating system goos:
// $XDG_DATA_HOME (when absolute) or ~/.local/share on Linux and other
// Unix systems, ~/Library/Application Support on macOS, %LocalAppData% on
// Windows. Go's standard library has no such function.
func userDataDir(goos string, lookupEnv func(string) (string, bool), home func() (string, error)) (string, error) {
	switch goos {
	case "windows":
		if d, _ := lookupEnv("LocalAppData"); d != "" {
			return d, nil
		}
		return "", errors.New("%LocalAppData% is not set")
	case "darwin", "ios":
		return underHome(home, "Library", "Application Support")
	case "plan9":
		return underHome(home, "lib")
	}
	if d, _ := lookupEnv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return d, nil
	}
	return underHome(home, ".local", "share")
}

// userStateDir is the per-user folder for state an application keeps
// between runs: $XDG_STATE_HOME (when absolute) or ~/.local/state on Linux
// and other Unix systems; elsewhere the data folder (userDataDir), as those
// systems have no separate one.
func userStateDir(goos string, lookupEnv func(string) (string, bool), home func() (string, error)) (string, error) {
	switch goos {
	case "windows", "darwin", "ios", "plan9":
		return userDataDir(goos, lookupEnv, home)
	}
	if d, _ := lookupEnv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return d, nil
	}
	return underHome(home, ".local", "state")
}

// underHome is the folder elem below the home folder.
func underHome(home func() (string, error), elem ...string) (string, error) {
	h, err := home()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{h}, elem...)...), nil
}

// parsedStore parses --store, or says why there is no default store.
func (a *app) parsedStore() (storeSpec, error) {
	if a.storeSpec == "" && a.noDefaultStore != nil {
		return storeSpec{}, a.noDefaultStore
	}
	return parseStoreSpec(a.storeSpec)
}

// String returns the spec as the user wrote it, without a password.
func (s storeSpec) String() string {
	switch s.kind {
	case "mem":
		return "mem:"
	case "postgres":
		return redactLocation(s.url)
	}
	return s.kind + ":" + s.dir
}

// open opens the store. mustExist keeps an on-disk store from creating its
// folder: a read command on a mistyped path fails instead of leaving an
// empty store behind.
func (s storeSpec) open(ctx context.Context, mustExist bool) (stores.Store, error) {
	if mustExist && s.dir != "" {
		if _, err := os.Stat(s.dir); errors.Is(err, fs.ErrNotExist) {
			return nil, &missingStoreError{spec: s}
		}
	}
	open, ok := storeOpeners[s.kind]
	if !ok {
		return nil, fmt.Errorf("store %s: this build of noydb cannot open %s stores yet", s, s.kind)
	}
	st, err := open(ctx, s)
	if err != nil {
		if errors.Is(err, stores.ErrLocked) {
			return nil, fmt.Errorf("store %s is in use by another process: %w", s, stores.ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", s, scrub(err, s.url))
	}
	return st, nil
}

// missingStoreError: a read command named an on-disk store that does not exist.
type missingStoreError struct{ spec storeSpec }

func (e *missingStoreError) Error() string {
	return fmt.Sprintf("store %s does not exist: check --store, or create a vault there with 'noydb init'", e.spec)
}

// location names where the store's data is, the same however the user
// wrote it: the absolute folder of badger: and file: stores; the server,
// database and schema of a PostgreSQL store (no user or password). mem:
// has none.
func (s storeSpec) location() (string, error) {
	switch s.kind {
	case "mem":
		return "", nil
	case "postgres":
		u, err := url.Parse(s.conn)
		if err != nil {
			return "", usagef("--store: not a valid postgres URL")
		}
		host := strings.ToLower(u.Hostname())
		port := u.Port()
		if port == "" {
			port = "5432"
		}
		schema := s.schema
		if schema == "" {
			schema = "noydb"
		}
		return "postgres://" + host + ":" + port + "/" + strings.TrimPrefix(u.Path, "/") + "?schema=" + schema, nil
	}
	dir, err := filepath.Abs(s.dir)
	if err != nil {
		return "", fmt.Errorf("store %s: %w", s, err)
	}
	return s.kind + ":" + resolveLinks(dir), nil
}

// resolveLinks resolves the symbolic links of the absolute folder dir as far
// as it exists: the part that does not exist yet (a store 'noydb init' is
// about to create) is kept as written, so a folder has one name before and
// after it is created.
func resolveLinks(dir string) string {
	rest := ""
	for p := dir; ; {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return dir
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// stateDir returns this device's state folder for the store: the root
// (--state-dir, $NOYDB_STATE_DIR, the config file's state-dir, or noydb in
// the user's state folder) joined with a hash of the store's location, so
// each store has its own. A store whose state an earlier release kept under
// noydb/state in the user's configuration folder keeps it there. mem:
// stores get none.
func (a *app) stateDir() (string, error) {
	spec, err := a.parsedStore()
	if err != nil {
		return "", err
	}
	loc, err := spec.location()
	if err != nil || loc == "" {
		return "", err
	}
	sum := sha256.Sum256([]byte(loc))
	leaf := hex.EncodeToString(sum[:12])
	if a.stateRoot != "" {
		return filepath.Join(a.stateRoot, leaf), nil
	}
	if a.io.userConfigDir != nil {
		if cfg, err := a.io.userConfigDir(); err == nil {
			legacy := filepath.Join(cfg, "noydb", "state", leaf)
			if _, err := os.Stat(legacy); err == nil {
				return legacy, nil
			}
		}
	}
	if a.io.userStateDir == nil {
		return "", errors.New("no state folder: pass --state-dir")
	}
	root, err := a.io.userStateDir()
	if err != nil {
		return "", fmt.Errorf("no per-user folder for this device's state (%v): pass --state-dir or set $%s", err, envStateDir)
	}
	return filepath.Join(root, "noydb", leaf), nil
}

// noteStore leaves in the state folder, once, the location of its store,
// for people who look into it (never a password).
func (a *app) noteStore(dir string) {
	spec, err := a.parsedStore()
	if err != nil || dir == "" {
		return
	}
	loc, err := spec.location()
	if err != nil {
		return
	}
	note := filepath.Join(dir, "STORE")
	if _, err := os.Stat(note); errors.Is(err, fs.ErrNotExist) {
		_ = os.WriteFile(note, []byte(loc+"\n"), 0o600)
	}
}
