package vault

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"
)

// Record metadata: when a revision was written, and by whom.
//
// Every revision written by this release starts its sealed plaintext with
// a metadata header:
//
//	metaRecord (0x02) || varint(unix nanoseconds, UTC) || lp(author) || rest
//
// where rest is one of the layouts of records.go (JSON text, or a marked
// record) and lp(s) = uvarint len(s) || s. The header sits inside the
// sealed plaintext, so the store can neither read nor change when or by
// whom a record was written without the record failing to open.
//
// Compatibility: a record written before the header existed starts with
// JSON text or markedRecord, never 0x02, and reads with a zero time and an
// empty author. A release that predates the header fails to decode a
// record that carries one (a JSON error) rather than misread it, as it does
// for marked records.
const metaRecord = 0x02

// maxAuthorLen bounds the author name when decoding.
const maxAuthorLen = 1 << 12

// errBadMeta: the metadata header of a record that opened does not decode.
var errBadMeta = errors.New("record metadata does not decode")

// meta is who wrote a revision, and when.
type meta struct {
	modified time.Time // zero for a record written before metadata existed
	author   string
}

// joinMeta returns rest preceded by the metadata header of m.
func joinMeta(m meta, rest []byte) []byte {
	return appendMeta(make([]byte, 0, 1+2*binary.MaxVarintLen64+len(m.author)+len(rest)), m, rest)
}

// appendMeta appends rest, preceded by the metadata header of m, to out.
func appendMeta(out []byte, m meta, rest []byte) []byte {
	out = append(out, metaRecord)
	out = binary.AppendVarint(out, m.modified.UnixNano())
	out = binary.AppendUvarint(out, uint64(len(m.author)))
	out = append(out, m.author...)
	return append(out, rest...)
}

// plainBufs recycles the buffers plaintexts are assembled in before they
// are sealed (the sealed copy is what is kept).
var plainBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledPlain bounds the buffers kept in plainBufs.
const maxPooledPlain = 64 << 10

// splitMeta returns the metadata of a record plaintext and the rest of it
// (aliasing plain). A plaintext without the header has zero metadata. An
// author equal to known (the vault's user) shares its string.
func splitMeta(plain []byte, known string) (meta, []byte, error) {
	if len(plain) == 0 || plain[0] != metaRecord {
		return meta{}, plain, nil
	}
	b := plain[1:]
	ns, n := binary.Varint(b)
	if n <= 0 {
		return meta{}, nil, errBadMeta
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > maxAuthorLen || l > uint64(len(b)-n) {
		return meta{}, nil, errBadMeta
	}
	b = b[n:]
	m := meta{modified: time.Unix(0, ns).UTC(), author: known}
	if string(b[:l]) != known {
		m.author = string(b[:l])
	}
	return m, b[l:], nil
}
