package vault

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The record plaintext layouts of meta.go and records.go, as the values the
// vectors and fuzz targets compare.

// metaPlain is a record plaintext split at its metadata header.
type metaPlain struct {
	header bool // the plaintext starts with the header (false: written before it existed)
	m      meta
	rest   string
}

func (p metaPlain) encode() []byte {
	if !p.header {
		return []byte(p.rest)
	}
	return joinMeta(p.m, []byte(p.rest))
}

func decodeMetaPlain(b []byte) (any, error) {
	m, rest, err := splitMeta(b, "")
	if err != nil {
		return nil, err
	}
	return metaPlain{header: len(b) > 0 && b[0] == metaRecord, m: m, rest: string(rest)}, nil
}

// marksPlain is a record plaintext (after the metadata header) split at
// its marks.
type marksPlain struct {
	marks []mark
	body  string
}

func (p marksPlain) encode() []byte { return joinRecord(p.marks, []byte(p.body)) }

func decodeMarksPlain(b []byte) (any, error) {
	marks, body, err := splitRecord(b)
	if err != nil {
		return nil, err
	}
	return marksPlain{marks: marks, body: string(body)}, nil
}

// TestLayoutVectors pins the record plaintext layouts (the metadata header,
// the number marks) to testdata/layouts.json, both ways. A layout that
// predates another (plain JSON) decodes as it always did, so a strict
// prefix of an encoding may be another valid one, and bytes after the
// header and marks are the record's body.
func TestLayoutVectors(t *testing.T) {
	mt := func(name string, p metaPlain) codectest.Case {
		return codectest.Case{
			Name: "meta/" + name, Value: p, Err: codec.ErrCorrupt, PrefixOK: true, TrailingOK: true,
			Encode: func() ([]byte, error) { return p.encode(), nil },
			Decode: decodeMetaPlain,
		}
	}
	mk := func(name string, p marksPlain) codectest.Case {
		return codectest.Case{
			Name: "marks/" + name, Value: p, Err: codec.ErrCorrupt, PrefixOK: true, TrailingOK: true,
			Encode: func() ([]byte, error) { return p.encode(), nil },
			Decode: decodeMarksPlain,
		}
	}
	at := func(sec, nsec int64) time.Time { return time.Unix(sec, nsec).UTC() }
	const prov = "01890a5d-ac96-774b-bcce-b302099a8057"
	body := `{"Number":1,"Total":10}`
	marked := string(joinRecord([]mark{{kind: markSequence, series: "inv", n: 9}}, []byte(body)))
	codectest.Check(t, "testdata/layouts.json", []codectest.Case{
		mt("before metadata", metaPlain{rest: body}),
		mt("json", metaPlain{header: true, m: meta{modified: at(1764547200, 123456789), author: "firm"}, rest: body}),
		mt("marked", metaPlain{header: true, m: meta{modified: at(1764547200, 0), author: "firm"}, rest: marked}),
		mt("no author empty rest", metaPlain{header: true, m: meta{modified: at(1, 1)}}),
		mt("before 1970", metaPlain{header: true, m: meta{modified: at(-86400, 5), author: "a"}, rest: "{}"}),
		mt("extremes", metaPlain{header: true, m: meta{modified: time.Unix(0, math.MinInt64).UTC(), author: strings.Repeat("é", 100)}, rest: "\x02"}),
		mk("none", marksPlain{body: body}),
		mk("sequence", marksPlain{marks: []mark{{kind: markSequence, series: "inv", n: 9}}, body: body}),
		mk("partitioned and numbering", marksPlain{marks: []mark{
			{kind: markSequence, series: "inv", partition: []string{"2026", "IT"}, n: 2026000001},
			{kind: markNumbering, series: "receipts", n: 7},
		}, body: body}),
		mk("pending", marksPlain{marks: []mark{{kind: markPending, series: "receipts", partition: []string{prov}}}, body: body}),
		mk("extremes", marksPlain{marks: []mark{
			{kind: markNumbering, series: strings.Repeat("s", 200), n: math.MaxUint64},
			{kind: markSequence, series: "x", partition: []string{strings.Repeat("p", 130), "q"}, n: 128},
		}}),
	})
}

// Reading the metadata header of a revision by the vault's own user
// allocates nothing (the author shares the vault's string), nor does
// reading a record without marks.
func TestSplitLayoutAllocs(t *testing.T) {
	plain := joinMeta(meta{modified: time.Unix(1764547200, 0).UTC(), author: "firm"}, []byte(`{"A":1}`))
	if n := testing.AllocsPerRun(100, func() { _, _, _ = splitMeta(plain, "firm") }); n != 0 {
		t.Errorf("splitMeta: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = splitRecord(plain[len(plain)-7:]) }); n != 0 {
		t.Errorf("splitRecord without marks: %v allocations", n)
	}
}

// TestLayoutRefusals: each way a metadata header or marks fail to decode,
// with the offset at fault. Non-minimal varints and over-long fields were
// accepted before the layouts moved onto internal/codec; no encoder ever
// wrote them.
func TestLayoutRefusals(t *testing.T) {
	uv := func(b []byte, v uint64) []byte { return codec.AppendUvarint(b, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	n := func(k int, c byte) []byte { return bytes.Repeat([]byte{c}, k) }
	mark1 := []byte{markSequence, 1, 'x', 0}
	cases := []struct {
		name  string
		split func([]byte) error
		in    []byte
		why   string
		off   int
	}{
		{"meta truncated", splitM, []byte{metaRecord}, "truncated", 1},
		{"meta non-minimal time", splitM, []byte{metaRecord, 0x80, 0x00, 0}, "non-minimal varint", 1},
		{"meta time overflow", splitM, cat([]byte{metaRecord}, n(10, 0xff), []byte{1, 0}), "bad varint", 1},
		{"meta non-minimal author length", splitM, []byte{metaRecord, 0, 0x81, 0x00, 'a'}, "non-minimal varint", 2},
		{"meta author too long", splitM, cat([]byte{metaRecord, 0}, uv(nil, maxAuthorLen+1), n(maxAuthorLen+1, 'a')),
			fmt.Sprintf("field too long (%d bytes, limit %d)", maxAuthorLen+1, maxAuthorLen), 2},
		{"meta author beyond end", splitM, []byte{metaRecord, 0, 5, 'a'}, "truncated", 3},
		{"marks none", splitR, []byte{markedRecord, 0, '{', '}'}, "no marks", 2},
		{"marks count over limit", splitR, cat([]byte{markedRecord}, uv(nil, maxMarks+1), n(4*(maxMarks+1), 0)),
			fmt.Sprintf("count %d out of range", maxMarks+1), 1},
		{"marks count beyond end", splitR, cat([]byte{markedRecord, 2}, mark1, []byte{1}), "count 2 out of range", 1},
		{"marks non-minimal count", splitR, cat([]byte{markedRecord, 0x81, 0x00}, mark1, []byte{1}), "non-minimal varint", 1},
		{"marks non-minimal number", splitR, []byte{markedRecord, 1, markSequence, 1, 'x', 0, 0x89, 0x00}, "non-minimal varint", 6},
		{"marks series too long", splitR, cat([]byte{markedRecord, 1, markSequence}, uv(nil, maxMarkField+1), n(maxMarkField+4, 'x')),
			fmt.Sprintf("field too long (%d bytes, limit %d)", maxMarkField+1, maxMarkField), 3},
		{"marks parts over limit", splitR, cat([]byte{markedRecord, 1, markSequence, 1, 'x'}, uv(nil, maxMarkParts+1), n(2*maxMarkParts, 0)),
			fmt.Sprintf("count %d out of range", maxMarkParts+1), 5},
		{"marks part beyond end", splitR, []byte{markedRecord, 1, markSequence, 1, 'x', 1, 9, 'p', 1}, "truncated", 7},
		{"marks number missing", splitR, []byte{markedRecord, 1, markSequence, 1, 'x', 0}, "truncated", 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.split(c.in)
			require.ErrorIs(t, err, codec.ErrCorrupt)
			var ce *codec.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, c.why, ce.Why)
			assert.Equal(t, c.off, ce.Off)
		})
	}
}

func splitM(b []byte) error { _, _, err := splitMeta(b, ""); return err }
func splitR(b []byte) error { _, _, err := splitRecord(b); return err }
