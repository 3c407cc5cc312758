package vault

import (
	"encoding/binary"
	"errors"
	"slices"
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
const markedRecord = 0x01

// Kinds of marks.
const (
	// markSequence: the number of a gap-free sequence, taken by PutNumbered.
	markSequence byte = 1
	// markNumbering: the number of a deferred-numbering series, stamped by a pass.
	markNumbering byte = 2
)

// maxMarks bounds the marks of one record when decoding.
const maxMarks = 1 << 10

// errBadMarks: the marks of a record that opened do not decode.
var errBadMarks = errors.New("record number marks do not decode")

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
	b := plain[1:]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		l, ok := uv()
		if !ok || l > uint64(len(b)) {
			return "", false
		}
		s := string(b[:l])
		b = b[l:]
		return s, true
	}
	count, ok := uv()
	if !ok || count == 0 || count > maxMarks {
		return nil, nil, errBadMarks
	}
	marks := make([]mark, 0, count)
	for range count {
		if len(b) == 0 {
			return nil, nil, errBadMarks
		}
		m := mark{kind: b[0]}
		b = b[1:]
		if m.series, ok = str(); !ok {
			return nil, nil, errBadMarks
		}
		parts, ok := uv()
		if !ok || parts > uint64(len(b)) {
			return nil, nil, errBadMarks
		}
		for range parts {
			p, ok := str()
			if !ok {
				return nil, nil, errBadMarks
			}
			m.partition = append(m.partition, p)
		}
		if m.n, ok = uv(); !ok {
			return nil, nil, errBadMarks
		}
		marks = append(marks, m)
	}
	return marks, b, nil
}

// joinRecord is the plaintext of a record with marks and JSON body.
func joinRecord(marks []mark, body []byte) []byte {
	if len(marks) == 0 {
		return body
	}
	n := 1 + binary.MaxVarintLen64 + len(body)
	for _, m := range marks {
		n += 1 + 3*binary.MaxVarintLen64 + len(m.series)
		for _, p := range m.partition {
			n += binary.MaxVarintLen64 + len(p)
		}
	}
	out := make([]byte, 0, n)
	out = append(out, markedRecord)
	out = binary.AppendUvarint(out, uint64(len(marks)))
	for _, m := range marks {
		out = append(out, m.kind)
		out = binary.AppendUvarint(out, uint64(len(m.series)))
		out = append(out, m.series...)
		out = binary.AppendUvarint(out, uint64(len(m.partition)))
		for _, p := range m.partition {
			out = binary.AppendUvarint(out, uint64(len(p)))
			out = append(out, p...)
		}
		out = binary.AppendUvarint(out, m.n)
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
