package vault

import (
	"testing"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The fuzz targets of the record plaintext layouts: decoding never panics,
// refuses with ErrCorrupt (the vault then reports ErrTampered), and what it
// accepts is canonical: it encodes back to the input, the bytes after the
// header or marks being the rest of the value.

func FuzzRecordMeta(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "meta/", Err: codec.ErrCorrupt,
		Decode: decodeMetaPlain,
		Encode: func(v any) ([]byte, error) { return v.(metaPlain).encode(), nil },
	})
}

func FuzzRecordMarks(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "marks/", Err: codec.ErrCorrupt,
		Decode: decodeMarksPlain,
		Encode: func(v any) ([]byte, error) { return v.(marksPlain).encode(), nil },
	})
}
