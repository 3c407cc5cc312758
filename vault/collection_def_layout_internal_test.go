package vault

import (
	"testing"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The collection definition's plaintext layout (collection_def.go), pinned
// to testdata/collection_layouts.json both ways, and its fuzz target.

func collectionDefCase(name string, d collectionDef) codectest.Case {
	return codectest.Case{
		Name: "collection/" + name, Value: d, Err: codec.ErrCorrupt,
		Encode: func() ([]byte, error) { return encodeCollectionDef(d), nil },
		Decode: func(b []byte) (any, error) { return decodeCollectionDef(b) },
	}
}

func TestCollectionDefLayout(t *testing.T) {
	codectest.Check(t, "testdata/collection_layouts.json", []codectest.Case{
		collectionDefCase("empty", collectionDef{}),
		collectionDefCase("two series", collectionDef{series: []string{"invoices", "receipts"}}),
		collectionDefCase("policy", collectionDef{policy: HubWins, hasPolicy: true}),
		collectionDefCase("default policy set", collectionDef{policy: HigherRevisionWins, hasPolicy: true}),
		collectionDefCase("series and merge", collectionDef{series: []string{"FY/номер"}, policy: Merge, hasPolicy: true}),
	})
}

func TestCollectionDefRefusesDisorder(t *testing.T) {
	for name, b := range map[string][]byte{
		"repeated":      append(append([]byte{1, 2}, codec.AppendString(codec.AppendString(nil, "a"), "a")...), 0),
		"out of order":  append(append([]byte{1, 2}, codec.AppendString(codec.AppendString(nil, "b"), "a")...), 0),
		"empty name":    {1, 1, 0, 0},
		"policy beyond": {1, 0, byte(Merge) + 2},
		"version 2":     {2, 0, 0},
	} {
		_, err := decodeCollectionDef(b)
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func FuzzCollectionDef(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/collection_layouts.json", Prefix: "collection/", Err: codec.ErrCorrupt,
		Decode: func(b []byte) (any, error) { return decodeCollectionDef(b) },
		Encode: func(v any) ([]byte, error) { return encodeCollectionDef(v.(collectionDef)), nil },
	})
}
