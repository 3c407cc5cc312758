package pins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/flock"
)

// A state folder holds, for each vault name N the device has used (h is the
// hex of the first 16 bytes of SHA-256 of N):
//
//	h.vault           the device's record that it used vault N, with the
//	                  vault's identity (its salt); written once, atomically
//	h.a.pins h.b.pins two copies of the pins, written in turn: the identity in
//	                  clear, then, sealed and length-prefixed, a write count
//	                  and the pins body (bytes after it are ignored)
//
// A write overwrites the older copy in place, from its first byte and
// without truncating it (a file that keeps its size costs a tenth of a
// truncated one to fsync), and fsyncs it, so a crash in the middle leaves
// the other, complete copy; Open loads the copy with the highest write count
// that authenticates. Versions before this layout kept
// one file named after the salt (hex(salt).pins); it is read once and
// replaced.
const (
	recordMagic = "NOYDBDEV"
	slotMagic   = "NOYDBPIN"
	formatV     = 2
)

var slotNames = [2]string{".a.pins", ".b.pins"}

// nameHash names a vault's files: vault names may hold bytes a file system
// refuses.
func nameHash(vaultName string) string {
	sum := sha256.Sum256([]byte(vaultName))
	return hex.EncodeToString(sum[:16])
}

// stateFile writes one vault's pins copies. Only the core's one flusher at
// a time calls write.
type stateFile struct {
	dir, base string // base is dir/h
	id        []byte
	key       *crypto.Key
	ad        []byte
	check     []byte // keyCheck(key), to compare keys of later openers
	newest    int    // slot of the newest copy on disk, -1 when none
	exists    [2]bool
	fh        [2]*os.File // open copies, for in-place writes
	seq       uint64      // write count of the newest copy on disk
	lockFH    *flock.File // the folder lock file, while open
}

// keyCheck is a fingerprint of a pins key, safe to keep and compare.
func keyCheck(key *crypto.Key) []byte {
	return key.MAC([]byte("noydb pins key check"))
}

func slotAD(vaultName string, id []byte) []byte {
	return crypto.KeyAD(vaultName, "_pins/"+hex.EncodeToString(id))
}

// write seals body with its write count seq into the older slot, durably.
func (f *stateFile) write(seq uint64, body []byte) error {
	plain := codec.AppendUint64(make([]byte, 0, 8+len(body)), seq)
	plain = append(plain, body...)
	sealed, err := crypto.Seal(f.key, plain, f.ad)
	if err != nil {
		return err
	}
	b := encodeSlot(f.id, sealed)
	slot := 0
	if f.newest == 0 {
		slot = 1
	}
	fh := f.fh[slot]
	if fh == nil {
		if fh, err = openFile(f.base+slotNames[slot], os.O_RDWR|os.O_CREATE); err != nil {
			return err
		}
		f.fh[slot] = fh
	}
	if _, err := fh.WriteAt(b, 0); err != nil {
		return err
	}
	if err := fh.Sync(); err != nil {
		return err
	}
	if !f.exists[slot] {
		if err := syncDir(f.dir); err != nil {
			return err
		}
		f.exists[slot] = true
	}
	f.newest, f.seq = slot, seq
	return nil
}

// lock takes the folder lock of the vault's files (h.lock), shared with
// other processes, waiting for it; unlock releases it.
func (f *stateFile) lock() error {
	if f.lockFH == nil {
		// The folder is the user's alone (prepareFolder): a link here was
		// put by them; refused all the same, like the other files.
		if fi, err := os.Lstat(f.base + ".lock"); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return &FolderError{Path: f.base + ".lock", Reason: "is a symbolic link"}
		}
		fh, err := flock.Open(f.base + ".lock")
		if err != nil {
			return err
		}
		f.lockFH = fh
	}
	return f.lockFH.Lock(context.Background())
}

func (f *stateFile) unlock() error { return f.lockFH.Unlock() }

// close closes the open copies and the lock file.
func (f *stateFile) close() error {
	var errs []error
	if f.lockFH != nil {
		errs = append(errs, f.lockFH.Close())
		f.lockFH = nil
	}
	for i, fh := range f.fh {
		if fh != nil {
			errs = append(errs, fh.Close())
			f.fh[i] = nil
		}
	}
	return errors.Join(errs...)
}

// writeSynced writes b to a new file at path (one left there before is
// removed first: a torn temporary file, or a link, which is not followed)
// and fsyncs it.
func writeSynced(path string, b []byte) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fh, err := openFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	_, err = fh.Write(b)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	return err
}

// replaceSynced writes b to path atomically: a synced temporary file
// renamed over path, then the folder synced.
func replaceSynced(dir, path string, b []byte) error {
	tmp := path + ".tmp"
	if err := writeSynced(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the folder's entries durable. Windows cannot sync a folder
// (and does not need to).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// The process registry: one core per vault and folder, shared by every Set
// opened on them, so that two DBs of one process never write the same
// files over each other.
var shared = struct {
	mu    sync.Mutex
	cores map[string]*core
}{cores: map[string]*core{}}

func registryKey(dir, vaultName string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state folder: %w", err)
	}
	return filepath.Join(abs, nameHash(vaultName)), nil
}

func openShared(dir, vaultName string, id []byte, key *crypto.Key) (*Set, error) {
	reg, err := registryKey(dir, vaultName)
	if err != nil {
		return nil, err
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if c, ok := shared.cores[reg]; ok {
		if !bytes.Equal(c.file.id, id) {
			return nil, fmt.Errorf("this device has vault %q open with another identity: %w", vaultName, ErrVaultLost)
		}
		if !crypto.EqualMAC(c.file.check, keyCheck(key)) {
			return nil, fmt.Errorf("pins of vault %q: another key: %w", vaultName, crypto.ErrTampered)
		}
		if key != c.file.key {
			key.Wipe() // the core seals with the first opener's copy of it
		}
		c.mu.Lock()
		c.refs++
		c.mu.Unlock()
		return &Set{c: c}, nil
	}
	c, err := load(dir, vaultName, id, key)
	if err != nil {
		return nil, err
	}
	c.reg = reg
	shared.cores[reg] = c
	return &Set{c: c}, nil
}

// release drops one handle; the last one unregisters the core and closes
// its files.
func (c *core) release() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs > 0 {
		return nil
	}
	if c.reg != "" && shared.cores[c.reg] == c {
		delete(shared.cores, c.reg)
	}
	// A raise racing the last Close may still be writing: let it end, then
	// the core is closed (pins stay in memory) and its files with it.
	for c.flushing {
		c.done.Wait()
	}
	c.closed = true
	if c.file != nil {
		c.file.key.Wipe()
		return c.file.close()
	}
	return nil
}

// slotCopy is one pins copy as read from disk.
type slotCopy struct {
	exists bool
	id     []byte // identity in clear; nil when unreadable
	sealed []byte
}

func readSlot(path string) (slotCopy, error) {
	b, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return slotCopy{}, nil
	}
	if err != nil {
		return slotCopy{}, fmt.Errorf("pins: %w", err)
	}
	s := slotCopy{exists: true}
	s.id, s.sealed = decodeSlot(b)
	return s, nil
}

// encodeSlot returns a pins copy: the identity in clear, then the sealed
// write count and body.
func encodeSlot(id, sealed []byte) []byte {
	b := append([]byte(slotMagic), formatV)
	b = codec.AppendBytes(b, id)
	return codec.AppendBytes(b, sealed)
}

// decodeSlot returns the identity and sealed part of a pins copy, or nils
// for a torn or foreign file. Bytes after the sealed part are ignored: a
// copy is overwritten in place without truncating the file.
func decodeSlot(b []byte) (id, sealed []byte) {
	r := magic(b, slotMagic)
	id = r.Bytes(maxField)
	sealed = r.Bytes(maxBody)
	if r.Err() != nil || len(id) == 0 {
		return nil, nil // torn or foreign: not a copy
	}
	return bytes.Clone(id), sealed
}

// magic returns a reader of b past its magic and format version; it has
// failed when b does not start with them.
func magic(b []byte, magic string) codec.Reader {
	r := codec.NewReader(b)
	if string(r.Fixed(len(magic))) != magic {
		r.Fail("not a " + magic + " file")
	}
	r.Version(formatV)
	return r
}

// readRecord returns the identity recorded for the vault, or nil.
func readRecord(path string) ([]byte, error) {
	b, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vault record: %w", err)
	}
	id, _, err := decodeRecord(b)
	if err != nil {
		return nil, fmt.Errorf("vault record %s: %w", path, err)
	}
	return id, nil
}

// decodeRecord decodes a vault record: the vault's identity and name.
func decodeRecord(b []byte) (id []byte, vaultName string, err error) {
	r := magic(b, recordMagic)
	id = r.Bytes(maxField)
	vaultName = r.String(maxField) // the vault name, for people reading the folder
	if r.Err() == nil && len(id) == 0 {
		r.Fail("empty identity")
	}
	if err := r.End(); err != nil {
		return nil, "", fmt.Errorf("pins: %w", err)
	}
	return bytes.Clone(id), vaultName, nil
}

func encodeRecord(vaultName string, id []byte) []byte {
	b := append([]byte(recordMagic), formatV)
	b = codec.AppendBytes(b, id)
	return codec.AppendString(b, vaultName)
}

// Lookup returns the identity (salt) of the vault named vaultName that the
// state folder dir records this device has used, or nil when it has none.
func Lookup(dir, vaultName string) ([]byte, error) {
	if dir == "" {
		return nil, nil
	}
	switch err := checkFolder(dir); {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil // no folder yet: no vault used
	case err != nil:
		return nil, err
	}
	base := filepath.Join(dir, nameHash(vaultName))
	id, err := readRecord(base + ".vault")
	if id != nil || err != nil {
		return id, err
	}
	// A crash between the first pins copy and the record leaves copies only.
	for _, n := range slotNames {
		s, err := readSlot(base + n)
		if err != nil {
			return nil, err
		}
		if s.id != nil {
			return s.id, nil
		}
	}
	return nil, nil
}

// Forget erases from dir what this device knew of the vault named
// vaultName: its record and its pins. The next Open starts afresh, without
// the protection those pins gave. It fails while a Set of the vault is open
// in this process.
func Forget(dir, vaultName string) error {
	if dir == "" {
		return nil
	}
	if err := checkFolder(dir); errors.Is(err, fs.ErrNotExist) {
		return nil // no folder: nothing known
	} else if err != nil {
		return err
	}
	reg, err := registryKey(dir, vaultName)
	if err != nil {
		return err
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if _, open := shared.cores[reg]; open {
		return fmt.Errorf("forget vault %q: it is open in this process; close it first", vaultName)
	}
	id, _ := Lookup(dir, vaultName)
	base := filepath.Join(dir, nameHash(vaultName))
	paths := []string{base + slotNames[0], base + slotNames[1], base + ".vault.tmp", base + ".lock"}
	if id != nil {
		paths = append(paths, filepath.Join(dir, legacyName(id)))
	}
	paths = append(paths, base+".vault") // last: the device remembers until all is gone
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("forget vault %q: %w", vaultName, err)
		}
	}
	if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forget vault %q: %w", vaultName, err)
	}
	return nil
}

func legacyName(id []byte) string {
	return fmt.Sprintf("%x.pins", id)
}

// diskCopies is what readCopies found of a vault's pins copies.
type diskCopies struct {
	best    int // slot of the newest copy that authenticates, -1 if none
	seq     uint64
	mem     *core // its pins
	authErr error // why a copy of this vault did not authenticate
	ours    bool  // a copy of this vault exists, readable or not
	other   bool  // a copy of another identity exists
	exists  [2]bool
}

// readCopies reads both copies and picks the newest that authenticates.
func (f *stateFile) readCopies() (diskCopies, error) {
	d := diskCopies{best: -1}
	for i, n := range slotNames {
		s, err := readSlot(f.base + n)
		if err != nil {
			return d, err
		}
		d.exists[i] = s.exists
		switch {
		case s.id == nil:
			continue // torn or foreign: whose it was is unknown
		case !bytes.Equal(s.id, f.id):
			d.other = true
			continue
		}
		d.ours = true
		plain, err := crypto.Open(f.key, s.sealed, f.ad)
		if err != nil {
			d.authErr = err
			continue
		}
		m := newCore()
		r := codec.NewReader(plain)
		seq := r.Uint64() // the write count, then the body
		if r.Err() != nil || m.decode(r.Rest()) != nil {
			d.authErr = errMalformed
			continue
		}
		if d.best < 0 || seq > d.seq {
			d.best, d.seq, d.mem = i, seq, m
		}
	}
	return d, nil
}

// syncDisk takes in the copies on disk, which another process using the folder
// may have written since: a copy that went missing is created again on the
// next write, and a newer one is merged into memory (pins only move up).
// The caller holds the folder lock and not c.mu.
func (c *core) syncDisk() error {
	f := c.file
	d, err := f.readCopies()
	if err != nil {
		return err
	}
	for i := range f.fh {
		if !d.exists[i] && f.fh[i] != nil {
			_ = f.fh[i].Close() // removed under us: write a new file
			f.fh[i], f.exists[i] = nil, false
		}
	}
	if d.best < 0 {
		return nil
	}
	// Write next over the other slot than the newest good copy, whoever
	// wrote it, so that a crash mid-write always leaves one.
	f.seq, f.newest = max(f.seq, d.seq), d.best
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range d.mem.counters {
		if v > c.counters[k] {
			c.counters[k] = v
		}
	}
	for k, h := range d.mem.heads {
		if h.seq > c.heads[k].seq {
			c.heads[k] = h
		}
	}
	return nil
}

// flush writes every pin moved up to now and returns the move count it
// covers. It holds the folder lock throughout, so that processes sharing
// the folder take turns and each writes the union of what all have seen.
func (c *core) flush() (uint64, error) {
	f := c.file
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.unlock()
	if err := c.syncDisk(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	upto := c.moves
	plain := c.encodeLocked()
	c.mu.Unlock()
	if testHookWrite != nil {
		if err := testHookWrite(); err != nil {
			return 0, err
		}
	}
	if err := f.write(f.seq+1, plain); err != nil {
		return 0, err
	}
	return upto, nil
}

// load reads the vault's pins from dir, or starts them and records the
// vault as used.
func load(dir, vaultName string, id []byte, key *crypto.Key) (*core, error) {
	if err := prepareFolder(dir); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, nameHash(vaultName))
	f := &stateFile{dir: dir, base: base, id: bytes.Clone(id), key: key, ad: slotAD(vaultName, id), check: keyCheck(key), newest: -1}
	c := newCore()
	c.file = f
	if err := f.lock(); err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	c, err := c.loadLocked(vaultName)
	if uerr := f.unlock(); err == nil && uerr != nil {
		err = fmt.Errorf("pins: %w", uerr)
	}
	if err != nil {
		_ = f.close()
		return nil, err
	}
	return c, nil
}

func (c *core) loadLocked(vaultName string) (*core, error) {
	f := c.file
	known, err := readRecord(f.base + ".vault")
	if err != nil {
		return nil, err
	}
	if known != nil && !bytes.Equal(known, f.id) {
		return nil, fmt.Errorf("this device used vault %q with another identity: %w", vaultName, ErrVaultLost)
	}
	d, err := f.readCopies()
	if err != nil {
		return nil, err
	}
	f.exists = d.exists
	switch {
	case known == nil && d.other:
		return nil, fmt.Errorf("this device used vault %q with another identity: %w", vaultName, ErrVaultLost)
	case d.best >= 0:
		c.counters, c.heads = d.mem.counters, d.mem.heads
		f.seq, f.newest = d.seq, d.best
		if known == nil {
			if err := replaceSynced(f.dir, f.base+".vault", encodeRecord(vaultName, f.id)); err != nil {
				return nil, fmt.Errorf("pins: %w", err)
			}
		}
		return c, nil
	case known != nil || d.ours:
		if d.authErr != nil {
			return nil, fmt.Errorf("pins of vault %q in %s: %w: %w", vaultName, f.dir, ErrStateLost, d.authErr)
		}
		return nil, fmt.Errorf("pins of vault %q in %s: %w", vaultName, f.dir, ErrStateLost)
	}
	// First use on this device (perhaps after an older layout).
	legacy := filepath.Join(f.dir, legacyName(f.id))
	if err := c.loadLegacy(legacy, vaultName, f.key); err != nil {
		return nil, err
	}
	if err := f.write(1, c.encodeLocked()); err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	if err := replaceSynced(f.dir, f.base+".vault", encodeRecord(vaultName, f.id)); err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	if err := os.Remove(legacy); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return c, nil
}

// loadLegacy reads a pins file of the layout before version 2, if any.
func (c *core) loadLegacy(path, vaultName string, key *crypto.Key) error {
	b, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	plain, err := crypto.Open(key, b, crypto.KeyAD(vaultName, "_pins"))
	if err != nil {
		return fmt.Errorf("pins file %s: %w", path, err)
	}
	if err := c.decode(plain); err != nil {
		return fmt.Errorf("pins file %s: %w", path, err)
	}
	return nil
}
