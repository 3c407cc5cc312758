package sequence

import (
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The fuzz targets of the sequence layouts: decoding never panics, refuses
// with ErrCorrupt, and what it accepts is canonical (it encodes back to the
// input).

func FuzzState(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "state/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeState(b) },
		Encode: func(v any) ([]byte, error) { s := v.(state); return s.appendTo(nil), nil },
	})
}

func FuzzNumber(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "number/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeNumber(b) },
		Encode: func(v any) ([]byte, error) { return encodeNumber(v.(uint64)), nil },
	})
}

func FuzzReason(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "reason/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeReason(b) },
		Encode: func(v any) ([]byte, error) { return encodeReason(v.(string)), nil },
	})
}

func FuzzDefinition(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "definition/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeDefinition(b) },
		Encode: func(v any) ([]byte, error) { return appendDefinition(nil, v.(Definition)), nil },
	})
}
