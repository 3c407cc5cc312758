package vault

import (
	"fmt"
	"sync"
	"time"

	"github.com/noydb-go/noydb/internal/codec"
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
//
// The header is read with internal/codec's Reader, so the varints must be
// minimal (as every encoder writes them) and a header that does not decode
// fails with an error matching ErrCorrupt; the vault reports the record as
// ErrTampered.
const metaRecord = 0x02

// maxAuthorLen bounds the author name when decoding.
const maxAuthorLen = 1 << 12

// meta is who wrote a revision, and when.
type meta struct {
	modified time.Time // zero for a record written before metadata existed
	author   string
}

// appendMeta appends rest, preceded by the metadata header of m, to out.
func appendMeta(out []byte, m meta, rest []byte) []byte {
	out = append(out, metaRecord)
	out = codec.AppendVarint(out, m.modified.UnixNano())
	out = codec.AppendString(out, m.author)
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
	r := codec.NewReader(plain)
	r.Version(metaRecord)
	ns := r.Varint()
	author := r.Bytes(maxAuthorLen)
	rest := r.Rest()
	if err := r.Err(); err != nil {
		return meta{}, nil, fmt.Errorf("record metadata: %w", err)
	}
	m := meta{modified: time.Unix(0, ns).UTC(), author: known}
	if string(author) != known {
		m.author = string(author)
	}
	return m, rest, nil
}
