// Package filestore keeps a store in a folder, one file per key, so that the
// folder can live inside a synced directory (Dropbox, Syncthing, a network
// share) and be used by several processes and devices.
//
// # Usage
//
//	st, err := filestore.Open("/path/to/folder", nil)
//	if err != nil { … }
//	defer st.Close()
//
// # Files
//
// Each key is one file whose name is the lowercase hex of the key (keys
// longer than 120 bytes: the hex of their first 80 bytes, a dash and the hex
// SHA-256 of the whole key), with the extension ".rec". The file holds a
// small header (format magic, version, key length, CRC-32C checksum), the
// key and the value. Every write builds the whole file under a temporary
// name in the same folder, fsyncs it, renames it over the old file and
// fsyncs the folder, so a reader or a crash sees the old file or the new
// one, never a mix. Files that are not record files (temporary files, copies
// a sync tool makes on conflicts, anything else) are ignored; temporary files
// older than an hour, left by a crash, are removed by Open.
//
// Two kinds of lock file live in the folder too, are never removed and hold
// no data: ".noydb-cas.lock", which CompareAndSwap locks (see Concurrency),
// and one ".noydb-lock-<hash>" per name given to Lock or TryLock (the
// ledger's head, a numbering series' pass). They are locked with
// internal/flock (flock(2); LockFileEx on Windows), so a lock is released
// when its process dies, even by SIGKILL. A sync tool may copy them; their
// content is empty and ignored.
//
// # Versions
//
// A new version is the larger of the old version plus one and the current
// time in nanoseconds, and above any version this Store handed out before.
// A version therefore never repeats for a key that keeps existing. After a
// Delete the old version is gone with the file; the clock keeps a recreated
// key from reusing it, unless the clock of the writing machine runs behind
// by more than the time since the old write.
//
// # Concurrency
//
// A Store is safe for concurrent use. Writes to one key are serialized
// inside the Store, and CompareAndSwap holds the exclusive file lock of the
// folder's ".noydb-cas.lock", so it is atomic against every Store and
// process on this machine using the folder (on systems without file locks,
// other than Unix-like ones and Windows, against the Stores of this process
// only).
// It is NOT atomic against devices that share the folder through a sync
// service, whose writes arrive as plain file replacements: two such writers
// racing on one key can both succeed. Capabilities therefore reports
// CASAtomic false, and gap-free numbering on this store uses deferred
// numbering. Whole-file writes stay atomic in every case: with several
// writers the last rename wins. The store has no transactions.
//
// List reads the folder's file names when iteration starts, then reads one
// file per item; it is not a snapshot: a key written meanwhile may show its
// old or its new value, a key deleted meanwhile is skipped, and a key created
// meanwhile may be missed. The loop body may use the store.
//
// # Caveats
//
// Contexts are checked when a call starts and again just before a write is
// made visible; file system calls themselves are not interrupted.
// On a file system with a 255-byte limit on names every key fits; the
// folder path itself must leave room for 229-byte names.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/internal/flock"
	"github.com/noydb-go/noydb/stores"
)

// Options configures Open. A nil *Options or the zero value means durable
// writes.
type Options struct {
	// NoSync skips the fsync of files and of the folder. Writes are faster
	// but a machine crash may lose acknowledged ones, so Capabilities then
	// reports Durable false. Tests and benchmarks may set it.
	NoSync bool
}

// staleTemp is the age after which Open removes a temporary file.
const staleTemp = time.Hour

// lockStripes is how many mutexes serialize writes, by key hash.
const lockStripes = 64

// Store is a stores.Store in a folder. Create it with Open. It is safe for
// concurrent use.
type Store struct {
	dir    string
	noSync bool
	seed   maphash.Seed
	locks  [lockStripes]sync.Mutex
	last   atomic.Uint64 // highest version handed out by this Store

	mu     sync.RWMutex // held for reading by every call, for writing by Close
	closed bool
	dirf   *os.File // the folder, kept open to fsync it

	named   sync.Map    // lock file path -> chan struct{} (full while held), for Lock
	casMu   sync.Mutex  // one compare-and-swap at a time in this Store
	casFile *flock.File // the folder's lock file; its lock serializes processes
}

// casLockName is the folder's compare-and-swap lock file. It is not a record
// file, so List never shows it.
const casLockName = ".noydb-cas.lock"

var (
	_ stores.Store  = (*Store)(nil)
	_ stores.Locker = (*Store)(nil)
)

// Open opens the store in folder dir, creating the folder if it is missing.
func Open(dir string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("filestore: open %q: %w", dir, err)
	}
	dirf, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("filestore: open %q: %w", dir, err)
	}
	if fi, err := dirf.Stat(); err != nil || !fi.IsDir() {
		dirf.Close()
		if err == nil {
			err = errors.New("not a directory")
		}
		return nil, fmt.Errorf("filestore: open %q: %w", dir, err)
	}
	casFile, err := flock.Open(filepath.Join(dir, casLockName))
	if err != nil {
		dirf.Close()
		return nil, fmt.Errorf("filestore: open %q: %w", dir, err)
	}
	s := &Store{dir: dir, noSync: opts.NoSync, seed: maphash.MakeSeed(), dirf: dirf, casFile: casFile}
	s.removeStaleTemps()
	return s, nil
}

// Dir returns the store's folder.
func (s *Store) Dir() string {
	return s.dir
}

// removeStaleTemps deletes temporary files a crashed writer left behind.
// Younger ones may belong to a write in progress in another process.
func (s *Store) removeStaleTemps() {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(s.dir, e.Name()))
		}
	}
}

// Capabilities reports Durable (unless NoSync) and Shared; compare-and-swap
// is not atomic across devices syncing the folder, and there are no transactions.
func (s *Store) Capabilities() stores.Capabilities {
	return stores.Capabilities{Durable: !s.noSync, Shared: true}
}

// begin checks the arguments every keyed call shares and holds off Close
// until the returned function is called.
func (s *Store) begin(ctx context.Context, key string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := stores.CheckKey(key); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, stores.ErrClosed
	}
	return s.mu.RUnlock, nil
}

func (s *Store) path(key string) string {
	return filepath.Join(s.dir, fileName(key))
}

func (s *Store) lock(key string) *sync.Mutex {
	return &s.locks[maphash.String(s.seed, key)%lockStripes]
}

// Get returns the item at key.
func (s *Store) Get(ctx context.Context, key string) (stores.Item, error) {
	done, err := s.begin(ctx, key)
	if err != nil {
		return stores.Item{}, err
	}
	defer done()
	it, err := s.read(key)
	if err != nil {
		return stores.Item{}, fmt.Errorf("filestore: get: %w", err)
	}
	return it, nil
}

// read returns the item stored in key's file.
func (s *Store) read(key string) (stores.Item, error) {
	name := fileName(key)
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return stores.Item{}, stores.ErrNotFound
	}
	if err != nil {
		return stores.Item{}, err
	}
	k, version, value, ok := decodeRecord(b)
	if !ok || k != key {
		return stores.Item{}, fmt.Errorf("%w: %s", ErrCorrupt, name)
	}
	return stores.Item{Key: key, Value: value, Version: version}, nil
}

// currentVersion returns the version in key's file, 0 if there is none,
// reading only the file's header.
func (s *Store) currentVersion(key string) (uint64, error) {
	name := fileName(key)
	f, err := os.Open(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [headerSize]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return 0, fmt.Errorf("%w: %s", ErrCorrupt, name)
	}
	h, ok := parseHeader(b[:])
	if !ok || h.keyLen != len(key) {
		return 0, fmt.Errorf("%w: %s", ErrCorrupt, name)
	}
	return h.version, nil
}

// nextVersion returns a version above old, above every version this Store
// handed out and, while the clock moves forward, above every version any
// writer handed out before now.
func (s *Store) nextVersion(old uint64) uint64 {
	v := max(old+1, uint64(time.Now().UnixNano()))
	for {
		last := s.last.Load()
		next := max(v, last+1)
		if s.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Put writes value at key.
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.write(ctx, "put", key, value, false, 0)
}

// CompareAndSwap writes value at key if its version is expected. It is
// atomic only against other callers of this Store; see the package
// documentation.
func (s *Store) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	return s.write(ctx, "compare and swap", key, value, true, expected)
}

func (s *Store) write(ctx context.Context, op, key string, value []byte, cas bool, expected uint64) (uint64, error) {
	done, err := s.begin(ctx, key)
	if err != nil {
		return 0, err
	}
	defer done()
	if err := stores.CheckValue(value); err != nil {
		return 0, err
	}
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	if cas {
		// Processes on this machine sharing the folder take turns, so the
		// compare and the write are atomic among them. Devices syncing the
		// folder from elsewhere are not covered: CASAtomic stays false.
		s.casMu.Lock()
		defer s.casMu.Unlock()
		if err := s.casFile.Lock(context.Background()); err != nil {
			return 0, fmt.Errorf("filestore: %s: lock folder: %w", op, err)
		}
		defer func() { _ = s.casFile.Unlock() }()
	}
	var old uint64
	if cas {
		// Check the whole file: the version is only trusted with its checksum.
		var it stores.Item
		it, err = s.read(key)
		if errors.Is(err, stores.ErrNotFound) {
			err = nil
		}
		old = it.Version
	} else {
		old, err = s.currentVersion(key)
	}
	switch {
	case err != nil && !cas && errors.Is(err, ErrCorrupt):
		// Put replaces a damaged file; the clock still gives a new version.
		old = 0
	case err != nil:
		return 0, fmt.Errorf("filestore: %s: %w", op, err)
	case cas && old != expected:
		return 0, stores.ErrConflict
	}
	version := s.nextVersion(old)
	if err := s.replace(ctx, fileName(key), encodeRecord(key, version, value)); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return 0, err
		}
		return 0, fmt.Errorf("filestore: %s: %w", op, err)
	}
	return version, nil
}

// replace atomically gives file name the content b.
func (s *Store) replace(ctx context.Context, name string, b []byte) (err error) {
	f, err := os.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(b); err != nil {
		return err
	}
	if !s.noSync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(s.dir, name)); err != nil {
		return err
	}
	return s.syncDir()
}

// syncDir makes renames and removals in the folder durable.
func (s *Store) syncDir() error {
	if s.noSync || runtime.GOOS == "windows" {
		return nil
	}
	return s.dirf.Sync()
}

// Delete removes key.
func (s *Store) Delete(ctx context.Context, key string) error {
	done, err := s.begin(ctx, key)
	if err != nil {
		return err
	}
	defer done()
	mu := s.lock(key)
	mu.Lock()
	defer mu.Unlock()
	err = os.Remove(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = s.syncDir()
	}
	if err != nil {
		return fmt.Errorf("filestore: delete: %w", err)
	}
	return nil
}

// listed is one record file found by List.
type listed struct {
	key  string
	name string
}

// List yields the items under prefix in key order. See the package
// documentation for what it sees of concurrent writes.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		files, err := s.scan(ctx, prefix)
		if err != nil {
			yield(stores.Item{}, err)
			return
		}
		for _, f := range files {
			it, err := s.listRead(ctx, f)
			if errors.Is(err, stores.ErrNotFound) {
				continue // deleted since the scan
			}
			if err != nil {
				yield(stores.Item{}, err)
				return
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}

// scan returns the record files whose keys start with prefix, in key order.
func (s *Store) scan(ctx context.Context, prefix string) ([]listed, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, stores.ErrClosed
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("filestore: list: %w", err)
	}
	var files []listed
	for _, e := range entries {
		info, ok := parseName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if !info.long {
			if strings.HasPrefix(info.key, prefix) {
				files = append(files, listed{key: info.key, name: e.Name()})
			}
			continue
		}
		// The name holds only the first longPrefixLen bytes of the key.
		if !strings.HasPrefix(info.key, prefix) && !strings.HasPrefix(prefix, info.key) {
			continue
		}
		key, err := s.keyIn(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("filestore: list: %w", err)
		}
		if strings.HasPrefix(key, prefix) {
			files = append(files, listed{key: key, name: e.Name()})
		}
	}
	slices.SortFunc(files, func(a, b listed) int { return strings.Compare(a.key, b.key) })
	return files, nil
}

// keyIn reads the key stored in a record file.
func (s *Store) keyIn(name string) (string, error) {
	f, err := os.Open(filepath.Join(s.dir, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	var hb [headerSize]byte
	if _, err := io.ReadFull(f, hb[:]); err != nil {
		return "", fmt.Errorf("%w: %s", ErrCorrupt, name)
	}
	h, ok := parseHeader(hb[:])
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrCorrupt, name)
	}
	key := make([]byte, h.keyLen)
	if _, err := io.ReadFull(f, key); err != nil || fileName(string(key)) != name {
		return "", fmt.Errorf("%w: %s", ErrCorrupt, name)
	}
	return string(key), nil
}

// listRead reads one listed file for List.
func (s *Store) listRead(ctx context.Context, f listed) (stores.Item, error) {
	if err := ctx.Err(); err != nil {
		return stores.Item{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return stores.Item{}, stores.ErrClosed
	}
	it, err := s.read(f.key)
	if err != nil && !errors.Is(err, stores.ErrNotFound) {
		return stores.Item{}, fmt.Errorf("filestore: list: %w", err)
	}
	return it, err
}

// Close releases the folder. Later calls return stores.ErrClosed; closing
// twice is not an error.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := errors.Join(s.casFile.Close(), s.dirf.Close()); err != nil {
		return fmt.Errorf("filestore: close: %w", err)
	}
	return nil
}
