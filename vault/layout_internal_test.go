package vault

import (
	"math"
	"strings"
	"testing"
	"time"

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
			Name: "meta/" + name, Value: p, Err: errBadMeta, PrefixOK: true, TrailingOK: true,
			Encode: func() ([]byte, error) { return p.encode(), nil },
			Decode: decodeMetaPlain,
		}
	}
	mk := func(name string, p marksPlain) codectest.Case {
		return codectest.Case{
			Name: "marks/" + name, Value: p, Err: errBadMarks, PrefixOK: true, TrailingOK: true,
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
