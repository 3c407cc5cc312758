package filestore

import (
	"strings"
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// fileRecord is a decoded record file, for the vectors and the fuzz target.
type fileRecord struct {
	Key     string
	Version uint64
	Value   []byte
}

func decodeFileRecord(b []byte) (any, error) {
	key, version, value, ok := decodeRecord(b)
	if !ok {
		return nil, ErrCorrupt
	}
	return fileRecord{key, version, append([]byte{}, value...)}, nil
}

func encodeFileRecord(v any) ([]byte, error) {
	r := v.(fileRecord)
	return encodeRecord(r.Key, r.Version, r.Value), nil
}

// TestLayoutVectors pins the record file layout to testdata/layouts.json,
// both ways: a truncated or extended file fails its checksum.
func TestLayoutVectors(t *testing.T) {
	rec := func(name string, r fileRecord) codectest.Case {
		return codectest.Case{
			Name: "record/" + name, Value: r, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return encodeFileRecord(r) },
			Decode: decodeFileRecord,
		}
	}
	codectest.Check(t, "testdata/layouts.json", []codectest.Case{
		rec("small", fileRecord{Key: "v/books/_header", Version: 1, Value: []byte("sealed")}),
		rec("empty value", fileRecord{Key: "k", Version: 7, Value: []byte{}}),
		rec("large version", fileRecord{Key: "v/books/invoices/inv-1", Version: 1<<63 + 5, Value: []byte{0, 1, 2, 0xff}}),
		rec("long key", fileRecord{Key: strings.Repeat("k", 300), Version: 2, Value: []byte("x")}),
	})
}

// FuzzRecordFile: decoding a record file never panics, refuses with
// ErrCorrupt, and an accepted file re-encodes to itself.
func FuzzRecordFile(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "record/",
		Decode: decodeFileRecord, Encode: encodeFileRecord, Err: ErrCorrupt,
	})
}
