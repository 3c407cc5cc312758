package pins

import (
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The fuzz targets of the pins layouts: decoding never panics, refuses with
// the corrupt-data error, and what it accepts is canonical (it encodes back
// to the input; a copy, which ignores what follows it, to a prefix).

func FuzzBody(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "body/", Err: errMalformed,
		Decode: func(b []byte) (any, error) {
			c := newCore()
			err := c.decode(b)
			return pinsBody{counters: c.counters, heads: c.heads}, err
		},
		Encode: func(v any) ([]byte, error) {
			c := newCore()
			c.counters, c.heads = v.(pinsBody).counters, v.(pinsBody).heads
			return c.encodeLocked(), nil
		},
	})
}

func FuzzVaultRecord(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "vault record/", Err: errMalformed,
		Decode: func(b []byte) (any, error) {
			id, name, err := decodeRecord(b)
			return vaultRecord{id: id, name: name}, err
		},
		Encode: func(v any) ([]byte, error) {
			r := v.(vaultRecord)
			return encodeRecord(r.name, r.id), nil
		},
	})
}

func FuzzCopy(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "copy/", TrailingIgnored: true,
		Decode: func(b []byte) (any, error) {
			id, sealed := decodeSlot(b)
			if id == nil {
				return nil, errMalformed
			}
			return slotParts{id: id, sealed: sealed}, nil
		},
		Encode: func(v any) ([]byte, error) {
			s := v.(slotParts)
			return encodeSlot(s.id, s.sealed), nil
		},
	})
}
