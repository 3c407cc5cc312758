// Package pins keeps a device's rollback pins: the highest counter value it
// has seen per series and the last ledger head it has seen (seq and MAC), so
// that a store serving an older snapshot is caught instead of trusted.
//
// Pins live in memory and, when a state folder is given, in files in that
// folder (see state.go for the layout). They only move forward. With a
// folder, a raise returns only once the pin it made is on disk (fsynced):
// raises that arrive while a write is in flight share the next write, so
// many callers pay for one. A failed write is sticky: from then on every
// check of the Set fails with it, so nothing more is issued unprotected.
//
// # Concurrency
//
// A Set is safe for concurrent use. Sets opened in one process for the same
// vault and folder share one memory and one writer. Processes sharing a
// folder take turns under a file lock (internal/flock: flock(2), LockFileEx
// on Windows; on other systems only within one process, so there one
// process at a time should use a folder) and each write holds the union of
// the pins all of them have seen.
package pins

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/errs"
	"github.com/noydb-go/noydb/stores"
)

// ErrRollback: the store served a counter or ledger head older than one this
// device has already seen.
var ErrRollback = errors.New("store rolled back: it serves older data than this device has seen")

// ErrVaultLost: the store holds no vault by a name this device has used, or
// holds one with another identity (its header was replaced), so opening it
// would silently start over. It matches ErrRollback too.
var ErrVaultLost = fmt.Errorf("vault lost or replaced by the store (%w)", ErrRollback)

// ErrStateLost: the state folder says this device has used the vault, but
// its pins are missing or damaged beyond the last good copy, so the
// protection they gave would silently restart.
var ErrStateLost = errors.New("rollback pins of a vault this device has used are missing or damaged")

// ErrUnpinned marks the error of a write that committed although the pin
// covering it could not be saved: the writer must report the write as done
// (with the numbers or head it made) and the error together. Such an error
// also wraps the raise's own (ErrPinsNotSaved, or a closed Set's).
var ErrUnpinned = errors.New("committed, but the rollback pin covering it was not saved")

// ErrPinsNotSaved: a pin could not be written to the state folder (the disk
// is full, failing, or the folder is gone), so what it was to protect is not
// protected against a rollback. It is sticky: once a write has failed, every
// check and raise of the Set fails with an error wrapping it.
var ErrPinsNotSaved = errors.New("rollback pins could not be saved to the state folder")

// Set is one handle on the pins of one vault.
type Set struct {
	c      *core
	closed atomic.Bool
}

// core is the memory of one vault's pins, shared by the Sets of a process.
type core struct {
	file *stateFile // nil keeps pins in memory only
	reg  string     // key in the process registry ("" when in memory)

	mu       sync.Mutex
	counters map[string]uint64
	heads    map[string]head
	refs     int

	// Durability: moves counts pin moves; durable is the highest move count
	// on disk. One writer at a time (flushing); the others wait on done.
	moves    uint64
	durable  uint64
	flushing bool
	done     *sync.Cond
	err      error  // sticky write error
	writes   uint64 // writes done, for tests
	waiting  int    // raisers waiting for a write in flight, for tests
	closed   bool   // the last handle is closed: pins stay in memory
}

// testHookWrite, when set by a test, runs before each write and may fail it.
var testHookWrite func() error

type head struct {
	seq uint64
	mac []byte
}

func newCore() *core {
	c := &core{counters: map[string]uint64{}, heads: map[string]head{}, refs: 1}
	c.done = sync.NewCond(&c.mu)
	return c
}

// Open returns the pins of the vault named vaultName whose identity is id
// (its random salt), sealed with key, kept in dir. An empty dir keeps the
// pins in memory.
//
// With a dir, Open loads the newest copy of the pins that authenticates. For
// a vault this device has never used, it records in dir that it now uses the
// vault with identity id before it returns. It fails with an error wrapping
// ErrVaultLost when dir records another identity for the name (see Lookup
// and Forget), and with one wrapping ErrStateLost when dir records the vault
// but none of its pins can be read.
//
// With a dir, a successful Open takes key over: it is wiped once no open Set
// of the vault in this process needs it (a later opener's key, which must be
// equal to the first's, at once). Without a dir, key is not used (it may be
// nil) and stays the caller's.
func Open(dir, vaultName string, id []byte, key *crypto.Key) (*Set, error) {
	if dir == "" {
		return &Set{c: newCore()}, nil
	}
	return openShared(dir, vaultName, id, key)
}

// sticky is the pin a failed or closed Set reports: every value read from
// the store is below it, so the caller asks Check*, which returns the error.
const sticky = math.MaxUint64

// errClosed is what a closed Set's checks return.
var errClosed = fmt.Errorf("rollback pins: %w", stores.ErrClosed)

// CounterPin returns the pin of the counter at key (0 when none). A reader
// takes it before reading the store and compares what it read with it: a
// pin raised meanwhile by a concurrent writer of this process must not make
// an older, honest read look like a rollback. A closed Set, or one whose
// last write failed, returns math.MaxUint64, so that the next check fails.
func (s *Set) CounterPin(key string) uint64 {
	if s.closed.Load() {
		return sticky
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return sticky
	}
	return c.counters[key]
}

// CheckCounter returns an error wrapping ErrRollback when value is below the
// pin of the counter at key, and the Set's own error when it is closed or
// its last write failed.
func (s *Set) CheckCounter(key string, value uint64) error {
	if s.closed.Load() {
		return errClosed
	}
	c := s.c
	c.mu.Lock()
	pin, err := c.counters[key], c.err
	c.mu.Unlock()
	switch {
	case err != nil:
		return err
	case value < pin:
		return fmt.Errorf("counter is at %d but this device already saw %d: %w", value, pin, ErrRollback)
	}
	return nil
}

// RaiseCounter moves the pin of the counter at key up to value. With a state
// folder it returns once the pin is on disk. When it cannot be made durable
// it returns an error wrapping ErrPinsNotSaved (the Set's checks fail with it
// from now on), or one wrapping stores.ErrClosed when the Set's memory was
// closed first.
func (s *Set) RaiseCounter(key string, value uint64) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if value > c.counters[key] {
		c.counters[key] = value
		c.moves++
	}
	return c.settleLocked()
}

// LedgerPin returns the pinned head of the ledger at key (zero when none).
// A closed Set, or one whose last write failed, returns seq math.MaxUint64,
// so that the next check fails.
func (s *Set) LedgerPin(key string) (seq uint64, mac []byte) {
	if s.closed.Load() {
		return sticky, nil
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return sticky, nil
	}
	h := c.heads[key]
	return h.seq, h.mac
}

// CheckLedger returns an error wrapping ErrRollback when a ledger head at seq
// with mac cannot be a successor of the pinned head of the ledger at key:
// seq is lower, or seq is the pinned position and mac differs. Later
// positions are checked by readers as they pass the pinned one. A closed
// Set, or one whose last write failed, returns its own error.
func (s *Set) CheckLedger(key string, seq uint64, mac []byte) error {
	if s.closed.Load() {
		return errClosed
	}
	c := s.c
	c.mu.Lock()
	h, err := c.heads[key], c.err
	c.mu.Unlock()
	switch {
	case err != nil:
		return err
	case seq < h.seq:
		return fmt.Errorf("ledger head is at %d but this device already saw %d: %w", seq, h.seq, ErrRollback)
	case seq == h.seq && h.seq > 0 && !crypto.EqualMAC(mac, h.mac):
		return fmt.Errorf("ledger entry %d differs from the one this device saw: %w", seq, ErrRollback)
	}
	return nil
}

// RaiseLedger moves the pin of the ledger at key up to seq with its MAC.
// With a state folder it returns once the pin is on disk; its error is
// RaiseCounter's.
func (s *Set) RaiseLedger(key string, seq uint64, mac []byte) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq > c.heads[key].seq {
		c.heads[key] = head{seq: seq, mac: bytes.Clone(mac)}
		c.moves++
	}
	return c.settleLocked()
}

// settleLocked returns once every pin moved so far is on disk, or a write
// failed. The first caller to find no write in flight writes, for itself and
// for every move made before it encoded; callers arriving meanwhile wait for
// the write after it, which one of them starts. It returns the sticky write
// error, if any, and errClosed when the memory was closed (its files with
// it) before the moves reached the disk.
func (c *core) settleLocked() error {
	if c.file == nil {
		return nil
	}
	target := c.moves
	for c.err == nil && !c.closed && c.durable < target {
		if c.flushing {
			c.waiting++
			c.done.Wait()
			c.waiting--
			continue
		}
		c.flushing = true
		c.mu.Unlock()
		upto, err := c.flush()
		c.mu.Lock()
		c.flushing = false
		if err != nil {
			c.err = fmt.Errorf("%w, so nothing more is issued: %w", ErrPinsNotSaved, err)
		} else {
			c.durable = upto
			c.writes++
		}
		c.done.Broadcast()
	}
	if c.err == nil && c.closed && c.durable < target {
		return errClosed // closed while this raise waited
	}
	return c.err
}

// Flush waits until every pin moved so far is on disk and returns the
// Set's write error, if any.
func (s *Set) Flush() error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settleLocked()
}

// Close flushes the pins and closes this handle: its checks then fail with
// an error wrapping stores.ErrClosed. Close is idempotent.
func (s *Set) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.Flush()
	return errors.Join(err, s.c.release())
}

// The pins body: version byte, then counters and heads, each a count
// followed by length-prefixed keys with their values, in key order.
const bodyVersion = 1

func (c *core) encodeLocked() []byte {
	b := []byte{bodyVersion}
	keys := make([]string, 0, max(len(c.counters), len(c.heads)))
	for k := range c.counters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = codec.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = codec.AppendString(b, k)
		b = codec.AppendUvarint(b, c.counters[k])
	}
	keys = keys[:0]
	for k := range c.heads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = codec.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = codec.AppendString(b, k)
		b = codec.AppendUvarint(b, c.heads[k].seq)
		b = codec.AppendBytes(b, c.heads[k].mac)
	}
	return b
}

// Limits of the pins layouts when decoding, far above any valid value.
const (
	maxField = 64 << 10  // a key, a MAC, a vault identity or name
	maxBody  = 256 << 20 // the sealed pins body
)

// errMalformed is matched by every failure to decode a pins layout: it is
// the one corrupt-data error.
var errMalformed = errs.ErrCorrupt

// decode fills the maps of c from a body.
func (c *core) decode(b []byte) error {
	r := codec.NewReader(b)
	r.Version(bodyVersion)
	// Keys are written in ascending order, once each: refuse anything else,
	// so that a body has one encoding.
	key := func(i int, prev string) string {
		k := r.String(maxField)
		if i > 0 && r.Err() == nil && k <= prev {
			r.Fail("keys out of order")
		}
		return k
	}
	n := r.Count(math.MaxInt, 2) // a key (at least its length) and a uvarint
	for i, k := 0, ""; i < n && r.Err() == nil; i++ {
		k = key(i, k)
		c.counters[k] = r.Uvarint()
	}
	n = r.Count(math.MaxInt, 3) // a key, a uvarint and a MAC
	for i, k := 0, ""; i < n && r.Err() == nil; i++ {
		k = key(i, k)
		seq := r.Uvarint()
		c.heads[k] = head{seq: seq, mac: bytes.Clone(r.Bytes(maxField))}
	}
	if err := r.End(); err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	return nil
}
