package numbering

import (
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The fuzz targets of the numbering layouts: decoding never panics, refuses
// with ErrCorrupt, and what it accepts is canonical (it encodes back to the
// input).

func FuzzHead(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "head/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeHead(b) },
		Encode: func(v any) ([]byte, error) { h := v.(head); return h.encode(), nil },
	})
}

func FuzzChunk(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "chunk/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeChunk(b) },
		Encode: func(v any) ([]byte, error) {
			c := v.(chunk)
			return encodeChunk(c.token, c.batch, int(c.index), c.first, c.items), nil
		},
	})
}

func FuzzPending(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "pending/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodePending(b) },
		Encode: func(v any) ([]byte, error) { return encodePending(v.(string)), nil },
	})
}

func FuzzAssignment(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "assignment/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeAssignment(b) },
		Encode: func(v any) ([]byte, error) { return v.(assignment).encode(), nil },
	})
}
