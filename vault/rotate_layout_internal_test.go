package vault

import (
	"math"
	"testing"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The rotation mark's plaintext layout (rotate.go), pinned to
// testdata/rotate_layouts.json both ways, and its fuzz target.

func rotationCase(name string, gen uint64) codectest.Case {
	return codectest.Case{
		Name: "rotation/" + name, Value: gen, Err: codec.ErrCorrupt,
		Encode: func() ([]byte, error) { return encodeRotationMark(gen), nil },
		Decode: func(b []byte) (any, error) { return decodeRotationMark(b) },
	}
}

func TestRotationMarkLayout(t *testing.T) {
	codectest.Check(t, "testdata/rotate_layouts.json", []codectest.Case{
		rotationCase("second generation", 2),
		rotationCase("two bytes", 300),
		rotationCase("largest", math.MaxUint64),
	})
}

func FuzzRotationMark(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/rotate_layouts.json", Prefix: "rotation/", Err: codec.ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeRotationMark(b) },
		Encode: func(v any) ([]byte, error) { return encodeRotationMark(v.(uint64)), nil },
	})
}
