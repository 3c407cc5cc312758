// Package codec is the one binary codec of every layout noydb stores:
// ledger entries and head records, numbering heads, chunks, pending entries
// and assignments, rollback pins, and sequence counters. Each layout is a
// version byte followed by fields written with the Append functions and
// read back with a Reader:
//
//   - fixed-width integers, big-endian (AppendUint64);
//   - unsigned varints (AppendUvarint) and zig-zag signed varints
//     (AppendVarint), as encoding/binary writes them: always minimal;
//   - byte strings and strings, a uvarint length then the bytes;
//   - flags, one byte 0 or 1.
//
// A Reader is strict: a varint must be minimal (so every value has exactly
// one encoding), every length and count is checked against a limit given by
// the layout and against the bytes left before anything is allocated, and
// End refuses trailing bytes. Its first failure sticks: later reads return
// zero values, so a decoder reads every field and checks the error once. The
// failure is an *Error giving the byte offset, and it matches
// errs.ErrCorrupt (exported as ledger.ErrMalformed, numbering.ErrCorrupt,
// sequence.ErrCorrupt, ...).
package codec

import (
	"encoding/binary"
	"fmt"

	"github.com/noydb-go/noydb/internal/errs"
)

// ErrCorrupt is matched by every *Error.
var ErrCorrupt = errs.ErrCorrupt

// Error reports where and why an encoding failed to decode.
type Error struct {
	// Off is the byte offset at which decoding failed.
	Off int
	// Why says what was wrong.
	Why string
}

// Error describes the failure.
func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s at byte %d", ErrCorrupt, e.Why, e.Off)
}

// Unwrap returns ErrCorrupt.
func (e *Error) Unwrap() error { return ErrCorrupt }

// AppendUvarint appends the minimal uvarint encoding of v.
func AppendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// AppendVarint appends the minimal zig-zag varint encoding of v.
func AppendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// AppendUint64 appends v as 8 bytes, big-endian.
func AppendUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// AppendBytes appends a uvarint length and p.
func AppendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// AppendString appends a uvarint length and s.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBool appends 1 for true and 0 for false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// MaxVarintLen is the longest encoding of a uvarint, for sizing buffers.
const MaxVarintLen = binary.MaxVarintLen64

// Reader reads an encoding from the front. The zero Reader reads nothing;
// use NewReader.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a Reader of b. Byte strings it returns share b's memory.
// Its methods take a pointer: keep it in a variable (it then costs no
// allocation).
func NewReader(b []byte) Reader { return Reader{b: b} }

// Err returns the first failure, or nil.
func (r *Reader) Err() error { return r.err }

// Offset returns how many bytes have been read.
func (r *Reader) Offset() int { return r.off }

// Len returns how many bytes are left.
func (r *Reader) Len() int { return len(r.b) - r.off }

// Fail records a failure at the current offset, unless one is recorded
// already. Decoders use it for checks of their own (an inconsistent field).
func (r *Reader) Fail(why string) {
	if r.err == nil {
		r.err = &Error{Off: r.off, Why: why}
	}
}

// Failf is Fail with a formatted reason.
func (r *Reader) Failf(format string, args ...any) {
	if r.err == nil {
		r.Fail(fmt.Sprintf(format, args...))
	}
}

// Version reads the version byte and fails unless it is want.
func (r *Reader) Version(want byte) {
	if v := r.Byte(); r.err == nil && v != want {
		r.off--
		r.Failf("unknown version %d", v)
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.Fail("truncated")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// Bool reads a flag: 0 or 1, anything else fails.
func (r *Reader) Bool() bool {
	switch c := r.Byte(); {
	case r.err != nil:
		return false
	case c == 0:
		return false
	case c == 1:
		return true
	}
	r.off--
	r.Fail("bad flag")
	return false
}

// Fixed reads n bytes (sharing the input).
func (r *Reader) Fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b)-r.off {
		r.Fail("truncated")
		return nil
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p
}

// Uint64 reads 8 bytes, big-endian.
func (r *Reader) Uint64() uint64 {
	p := r.Fixed(8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

// Uvarint reads a minimal uvarint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.Fail("truncated")
		return 0
	case n < 0:
		r.Fail("bad varint")
		return 0
	case n > 1 && r.b[r.off+n-1] == 0:
		// A minimal encoding never ends in a zero byte, except 0 itself.
		r.Fail("non-minimal varint")
		return 0
	}
	r.off += n
	return v
}

// Varint reads a minimal zig-zag varint.
func (r *Reader) Varint() int64 {
	u := r.Uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

// Count reads a uvarint count of items that each take at least minSize
// bytes (at least 1 is assumed), and fails when it is above limit or more
// than the bytes left could hold, so a caller may allocate count items.
func (r *Reader) Count(limit uint64, minSize int) int {
	at := r.off
	n := r.Uvarint()
	if r.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > limit || n > uint64(len(r.b)-r.off)/uint64(minSize) {
		r.off = at
		r.Failf("count %d out of range", n)
		return 0
	}
	return int(n)
}

// Bytes reads a uvarint length and that many bytes (sharing the input). It
// fails when the length is above limit or beyond the end.
func (r *Reader) Bytes(limit int) []byte {
	at := r.off
	n := r.Uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(limit) {
		r.off = at
		r.Failf("field too long (%d bytes, limit %d)", n, limit)
		return nil
	}
	return r.Fixed(int(n))
}

// String reads what Bytes reads, as a string (a copy).
func (r *Reader) String(limit int) string {
	return string(r.Bytes(limit))
}

// Rest returns the bytes left (sharing the input) and reads them all.
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	p := r.b[r.off:len(r.b):len(r.b)]
	r.off = len(r.b)
	return p
}

// End fails if bytes are left, and returns the first failure.
func (r *Reader) End() error {
	if r.err == nil && r.off != len(r.b) {
		r.Failf("%d trailing bytes", len(r.b)-r.off)
	}
	return r.err
}
