package pins

import (
	"bytes"
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// pinsBody is the decoded pins body, for comparing.
type pinsBody struct {
	counters map[string]uint64
	heads    map[string]head
}

// vaultRecord is a decoded vault record, for comparing.
type vaultRecord struct {
	id   []byte
	name string
}

// slotParts is a decoded pins copy, for comparing.
type slotParts struct{ id, sealed []byte }

// TestLayoutVectors pins the stored layouts of this package (pins body,
// vault record, pins copy) to testdata/layouts.json, both ways.
func TestLayoutVectors(t *testing.T) {
	body := func(name string, p pinsBody) codectest.Case {
		return codectest.Case{
			Name: "body/" + name, Value: p, Err: errMalformed,
			Encode: func() ([]byte, error) {
				c := newCore()
				c.counters, c.heads = p.counters, p.heads
				return c.encodeLocked(), nil
			},
			Decode: func(b []byte) (any, error) {
				c := newCore()
				err := c.decode(b)
				return pinsBody{counters: c.counters, heads: c.heads}, err
			},
		}
	}
	rec := func(name string, v vaultRecord) codectest.Case {
		return codectest.Case{
			Name: "vault record/" + name, Value: v, Err: errMalformed,
			Encode: func() ([]byte, error) { return encodeRecord(v.name, v.id), nil },
			Decode: func(b []byte) (any, error) {
				id, name, err := decodeRecord(b)
				return vaultRecord{id: id, name: name}, err
			},
		}
	}
	slot := func(name string, s slotParts) codectest.Case {
		return codectest.Case{
			Name: "copy/" + name, Value: s, TrailingOK: true,
			Encode: func() ([]byte, error) { return encodeSlot(s.id, s.sealed), nil },
			Decode: func(b []byte) (any, error) {
				id, sealed := decodeSlot(b)
				if id == nil {
					return nil, errMalformed
				}
				return slotParts{id: id, sealed: sealed}, nil
			},
		}
	}
	salt := bytes.Repeat([]byte{0x5a}, 16)
	codectest.Check(t, "testdata/layouts.json", []codectest.Case{
		body("empty", pinsBody{counters: map[string]uint64{}, heads: map[string]head{}}),
		body("counters", pinsBody{
			counters: map[string]uint64{"v/_seq/invoice": 300, "v/_seq/receipt": 1, "": 0},
			heads:    map[string]head{},
		}),
		body("heads", pinsBody{
			counters: map[string]uint64{"v/_seq/invoice": 1 << 40},
			heads: map[string]head{
				"v/_ledger/": {seq: 42, mac: bytes.Repeat([]byte{0xab}, 32)},
				"w/_ledger/": {seq: 1, mac: []byte{1}},
			},
		}),
		rec("vault", vaultRecord{id: salt, name: "accounts"}),
		rec("empty name", vaultRecord{id: []byte{1}, name: ""}),
		slot("copy", slotParts{id: salt, sealed: bytes.Repeat([]byte{0xee}, 40)}),
		slot("empty sealed", slotParts{id: []byte{1}, sealed: []byte{}}),
	})
}
