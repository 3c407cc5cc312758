package vault

import (
	"fmt"
	"slices"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/sequence"
)

// The plaintext of a sealed record is one of two layouts, told apart by
// its first byte:
//
//   - JSON text: a record that carries no number. Every record written
//     before numbered records carried their numbers has this layout.
//   - markedRecord (0x01, which never starts JSON text), then
//     uvarint count, count × mark, then the JSON text. A mark is
//     byte kind, lp(series), uvarint parts, parts × lp(part), uvarint number,
//     with lp(s) = uvarint len(s) || s.
//
// The marks are inside the sealed plaintext, so they are as authenticated
// as the record: a record says itself which numbers it carries, and the
// store cannot take a number off a record, or give it one, without the
// record failing to open. A release that predates marks fails to decode a
// marked record (JSON error) rather than misread it.
//
// The marks are read with internal/codec's Reader: varints must be minimal
// (as every encoder writes them), counts and lengths are bounded (maxMarks,
// maxMarkParts, maxMarkField) before anything is allocated, and marks that
// do not decode fail with an error matching ErrCorrupt; the vault reports
// the record as ErrTampered. A mark of a kind this release does not know is
// kept, not refused.
const markedRecord = 0x01

// Kinds of marks.
const (
	// markSequence: the number of a gap-free sequence, taken by PutNumbered.
	markSequence byte = 1
	// markNumbering: the number of a deferred-numbering series, stamped by a pass.
	markNumbering byte = 2
)

// Bounds of the marks of one record, when decoding.
const (
	// maxMarks bounds the marks of one record.
	maxMarks = 1 << 10
	// maxMarkParts bounds the partition components of a mark: a sequence's
	// partition encodes to at most sequence.MaxPartitionLen bytes, at least
	// one a component.
	maxMarkParts = sequence.MaxPartitionLen
	// maxMarkField bounds a series name or partition component: both are
	// parts of store keys, far shorter.
	maxMarkField = 64 << 10
	// minMarkLen is the fewest bytes a mark takes: kind, empty series, no
	// partition, a one-byte number.
	minMarkLen = 4
)

// mark is one number a record carries.
type mark struct {
	kind      byte
	series    string
	partition []string
	n         uint64
}

func (m mark) same(kind byte, series string, partition []string) bool {
	return m.kind == kind && m.series == series && slices.Equal(m.partition, partition)
}

// find returns the number marks carry for kind, series and partition.
func findMark(marks []mark, kind byte, series string, partition []string) (uint64, bool) {
	for _, m := range marks {
		if m.same(kind, series, partition) {
			return m.n, true
		}
	}
	return 0, false
}

// splitRecord returns the marks and the JSON body of a record plaintext.
// The body aliases plain.
func splitRecord(plain []byte) ([]mark, []byte, error) {
	if len(plain) == 0 || plain[0] != markedRecord {
		return nil, plain, nil
	}
	r := codec.NewReader(plain)
	r.Version(markedRecord)
	count := r.Count(maxMarks, minMarkLen)
	if count == 0 {
		r.Fail("no marks") // joinRecord writes no header then
	}
	marks := make([]mark, 0, count)
	for range count {
		m := mark{kind: r.Byte(), series: r.String(maxMarkField)}
		if parts := r.Count(maxMarkParts, 1); parts > 0 {
			m.partition = make([]string, parts)
			for i := range m.partition {
				m.partition[i] = r.String(maxMarkField)
			}
		}
		m.n = r.Uvarint()
		if r.Err() != nil {
			break
		}
		marks = append(marks, m)
	}
	body := r.Rest()
	if err := r.Err(); err != nil {
		return nil, nil, fmt.Errorf("record marks: %w", err)
	}
	return marks, body, nil
}

// joinRecord is the plaintext of a record with marks and JSON body.
func joinRecord(marks []mark, body []byte) []byte {
	if len(marks) == 0 {
		return body
	}
	n := 1 + codec.MaxVarintLen + len(body)
	for _, m := range marks {
		n += 1 + 3*codec.MaxVarintLen + len(m.series)
		for _, p := range m.partition {
			n += codec.MaxVarintLen + len(p)
		}
	}
	out := make([]byte, 0, n)
	out = append(out, markedRecord)
	out = codec.AppendUvarint(out, uint64(len(marks)))
	for _, m := range marks {
		out = append(out, m.kind)
		out = codec.AppendString(out, m.series)
		out = codec.AppendUvarint(out, uint64(len(m.partition)))
		for _, p := range m.partition {
			out = codec.AppendString(out, p)
		}
		out = codec.AppendUvarint(out, m.n)
	}
	return append(out, body...)
}

// withMark returns marks with m added, or replacing the mark of the same
// kind, series and partition. marks is not changed.
func withMark(marks []mark, m mark) []mark {
	out := make([]mark, 0, len(marks)+1)
	for _, o := range marks {
		if !o.same(m.kind, m.series, m.partition) {
			out = append(out, o)
		}
	}
	return append(out, m)
}
