package numbering

import (
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The fuzz targets of the layouts of handoff.go: decoding never panics,
// refuses with ErrCorrupt, and what it accepts encodes back to the input.
// The provisional index has the layout of an Enqueue entry, and the same
// decoder: FuzzPending covers it (its vectors pin its bytes still).

func FuzzConfig(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "config/", Err: ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeConfig(b) },
		Encode: func(v any) ([]byte, error) { return v.(seriesConfig).encode(), nil },
	})
}

// FuzzEntry covers a pending entry of either kind (Enqueue or handoff), as
// the pass reads it.
func FuzzEntry(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "entry/", Err: ErrCorrupt,
		Decode: decodeEntryValue,
		Encode: func(v any) ([]byte, error) { return v.(entry).encode(), nil },
	})
}
