// Package pins keeps a device's rollback pins: the highest counter value it
// has seen per series and the last ledger head it has seen (seq and MAC), so
// that a store serving an older snapshot is caught instead of trusted.
//
// Pins live in memory and, when a folder is given, in one sealed file per
// vault in that folder. They only move forward. The file is rewritten in the
// background whenever pins moved (writes coalesce; no timer), and on Close;
// a crash can lose the moves of the last write in flight, never more.
//
// # Concurrency
//
// A Set is safe for concurrent use.
package pins

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/noydb-go/noydb/crypto"
)

// ErrRollback: the store served a counter or ledger head older than one this
// device has already seen.
var ErrRollback = errors.New("store rolled back: it serves older data than this device has seen")

// Set is the pins of one vault.
type Set struct {
	path string // "" keeps pins in memory only
	key  *crypto.Key
	ad   []byte

	mu       sync.Mutex
	counters map[string]uint64
	heads    map[string]head
	dirty    bool
	flushing bool
	closed   bool
	idle     *sync.Cond // signalled when a flush ends
	lastErr  error
}

type head struct {
	seq uint64
	mac []byte
}

// Open loads the pins of the vault identified by id (stable and unique per
// vault, e.g. its random salt) from dir, or starts empty. An empty dir keeps
// the pins in memory. key seals the file.
func Open(dir, vaultName string, id []byte, key *crypto.Key) (*Set, error) {
	s := &Set{key: key, counters: map[string]uint64{}, heads: map[string]head{}}
	s.idle = sync.NewCond(&s.mu)
	s.ad = crypto.KeyAD(vaultName, "_pins")
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	s.path = filepath.Join(dir, fileName(id))
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	plain, err := crypto.Open(key, b, s.ad)
	if err != nil {
		return nil, fmt.Errorf("pins file %s: %w", s.path, err)
	}
	if err := s.decode(plain); err != nil {
		return nil, fmt.Errorf("pins file %s: %w", s.path, err)
	}
	return s, nil
}

func fileName(id []byte) string {
	return fmt.Sprintf("%x.pins", id)
}

// CounterPin returns the pin of the counter at key (0 when none). A reader
// takes it before reading the store and compares what it read with it: a
// pin raised meanwhile by a concurrent writer of this process must not make
// an older, honest read look like a rollback.
func (s *Set) CounterPin(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters[key]
}

// CheckCounter returns an error wrapping ErrRollback when value is below the
// pin of the counter at key.
func (s *Set) CheckCounter(key string, value uint64) error {
	s.mu.Lock()
	pin := s.counters[key]
	s.mu.Unlock()
	if value < pin {
		return fmt.Errorf("counter is at %d but this device already saw %d: %w", value, pin, ErrRollback)
	}
	return nil
}

// RaiseCounter moves the pin of the counter at key up to value.
func (s *Set) RaiseCounter(key string, value uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if value > s.counters[key] {
		s.counters[key] = value
		s.changedLocked()
	}
}

// LedgerPin returns the pinned head of the ledger at key (zero when none).
func (s *Set) LedgerPin(key string) (seq uint64, mac []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.heads[key]
	return h.seq, h.mac
}

// CheckLedger returns an error wrapping ErrRollback when a ledger head at seq
// with mac cannot be a successor of the pinned head of the ledger at key:
// seq is lower, or seq is the pinned position and mac differs. Later
// positions are checked by readers as they pass the pinned one.
func (s *Set) CheckLedger(key string, seq uint64, mac []byte) error {
	s.mu.Lock()
	h := s.heads[key]
	s.mu.Unlock()
	switch {
	case seq < h.seq:
		return fmt.Errorf("ledger head is at %d but this device already saw %d: %w", seq, h.seq, ErrRollback)
	case seq == h.seq && h.seq > 0 && !crypto.EqualMAC(mac, h.mac):
		return fmt.Errorf("ledger entry %d differs from the one this device saw: %w", seq, ErrRollback)
	}
	return nil
}

// RaiseLedger moves the pin of the ledger at key up to seq with its MAC.
func (s *Set) RaiseLedger(key string, seq uint64, mac []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.heads[key].seq {
		s.heads[key] = head{seq: seq, mac: bytes.Clone(mac)}
		s.changedLocked()
	}
}

func (s *Set) changedLocked() {
	if s.path == "" || s.closed {
		return
	}
	s.dirty = true
	if !s.flushing {
		s.flushing = true
		go s.flushLoop()
	}
}

// flushLoop writes the file until no pin moved during the last write.
func (s *Set) flushLoop() {
	s.mu.Lock()
	for s.dirty {
		s.dirty = false
		plain := s.encode()
		s.mu.Unlock()
		err := s.write(plain)
		s.mu.Lock()
		if err != nil {
			s.lastErr = err
		}
	}
	s.flushing = false
	s.idle.Broadcast()
	s.mu.Unlock()
}

func (s *Set) write(plain []byte) error {
	sealed, err := crypto.Seal(s.key, plain, s.ad)
	if err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, sealed, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// Flush waits until every pin moved so far is on disk, and reports the last
// write error, if any.
func (s *Set) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.flushing {
		s.idle.Wait()
	}
	err := s.lastErr
	s.lastErr = nil
	return err
}

// Close flushes the pins; later moves stay in memory only.
func (s *Set) Close() error {
	err := s.Flush()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return err
}

// The file: version byte, then counters and heads, each a count followed by
// length-prefixed keys with their values, in key order.
const fileVersion = 1

func (s *Set) encode() []byte {
	b := []byte{fileVersion}
	keys := make([]string, 0, len(s.counters))
	for k := range s.counters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendBytes(b, []byte(k))
		b = binary.AppendUvarint(b, s.counters[k])
	}
	keys = keys[:0]
	for k := range s.heads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendBytes(b, []byte(k))
		b = binary.AppendUvarint(b, s.heads[k].seq)
		b = appendBytes(b, s.heads[k].mac)
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errMalformed = errors.New("malformed pins")

func (s *Set) decode(b []byte) error {
	if len(b) == 0 || b[0] != fileVersion {
		return errMalformed
	}
	r := reader{b: b[1:]}
	n := r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		k := string(r.bytes())
		s.counters[k] = r.uvarint()
	}
	n = r.uvarint()
	for i := uint64(0); i < n && r.err == nil; i++ {
		k := string(r.bytes())
		seq := r.uvarint()
		s.heads[k] = head{seq: seq, mac: bytes.Clone(r.bytes())}
	}
	if r.err != nil || len(r.b) != 0 {
		return errMalformed
	}
	return nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errMalformed
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errMalformed
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
