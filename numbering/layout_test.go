package numbering

import (
	"math"
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// TestLayoutVectors pins the stored layouts of this package (series head,
// batch chunk, pending entry, assignment, and those of handoff.go: series
// config, handoff entry, provisional index) to testdata/layouts.json, both
// ways.
func TestLayoutVectors(t *testing.T) {
	hd := func(name string, h head) codectest.Case {
		return codectest.Case{
			Name: "head/" + name, Value: h, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return h.encode(), nil },
			Decode: func(b []byte) (any, error) { return decodeHead(b) },
		}
	}
	ch := func(name string, c chunk) codectest.Case {
		return codectest.Case{
			Name: "chunk/" + name, Value: c, Err: ErrCorrupt,
			Encode: func() ([]byte, error) {
				return encodeChunk(c.token, c.batch, int(c.index), c.first, c.items), nil
			},
			Decode: func(b []byte) (any, error) { return decodeChunk(b) },
		}
	}
	pd := func(name, id string) codectest.Case {
		return codectest.Case{
			Name: "pending/" + name, Value: id, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return encodePending(id), nil },
			Decode: func(b []byte) (any, error) { return decodePending(b) },
		}
	}
	as := func(name string, a assignment) codectest.Case {
		return codectest.Case{
			Name: "assignment/" + name, Value: a, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return a.encode(), nil },
			Decode: func(b []byte) (any, error) { return decodeAssignment(b) },
		}
	}
	cf := func(name string, c seriesConfig) codectest.Case {
		return codectest.Case{
			Name: "config/" + name, Value: c, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return c.encode(), nil },
			Decode: func(b []byte) (any, error) { return decodeConfig(b) },
		}
	}
	en := func(name string, e entry) codectest.Case {
		return codectest.Case{
			Name: "entry/" + name, Value: e, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return e.encode(), nil },
			Decode: decodeEntryValue,
		}
	}
	pv := func(name, id string) codectest.Case {
		return codectest.Case{
			Name: "provisional/" + name, Value: id, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return encodeProvisional(id), nil },
			Decode: func(b []byte) (any, error) { return decodeProvisional(b) },
		}
	}
	const prov = "01890a5d-ac96-774b-bcce-b302099a8057"
	token := []byte("0123456789abcdef")
	codectest.Check(t, "testdata/layouts.json", []codectest.Case{
		hd("empty", head{}),
		hd("idle", head{last: 300, batches: 4, collection: "invoices"}),
		hd("in flight", head{last: 310, batches: 5, collection: "invoices", batch: &batch{
			token: token, id: 5, first: 301, last: 310, chunks: 2, done: 305, mark: 1234,
			collection: "invoices", field: "number", format: "INV-{seq:06}",
		}}),
		hd("in flight none done", head{last: math.MaxUint64, batches: 1, collection: "c", batch: &batch{
			token: []byte{0}, id: 1, first: 1, last: math.MaxUint64, chunks: 1, done: 0,
			collection: "c", field: "n",
		}}),
		ch("empty", chunk{token: token, batch: 1, index: 0, first: 1, items: []item{}}),
		ch("two", chunk{token: token, batch: 5, index: 1, first: 301, items: []item{
			{provisional: prov, id: "inv-1"}, {provisional: prov, id: "inv-2"},
		}}),
		pd("empty", ""),
		pd("id", "inv-7"),
		as("zero", assignment{}),
		as("stamped", assignment{number: 301, batch: 5, provisional: prov, formatted: "INV-000301"}),
		as("voided", assignment{number: 128, voided: true, batch: 2, provisional: prov}),
		cf("empty", seriesConfig{}),
		cf("invoices", seriesConfig{collection: "invoices", format: "INV-{seq:06}"}),
		en("enqueued", entry{id: "inv-7"}),
		en("handoff", entry{id: "inv-7", handoff: true}),
		en("handoff empty", entry{handoff: true}),
		pv("empty", ""),
		pv("id", "inv-7"),
	})
}

// entry is a pending entry of either kind, as decodeEntry reads it.
type entry struct {
	id      string
	handoff bool
}

func (e entry) encode() []byte {
	if e.handoff {
		return encodeHandoff(e.id)
	}
	return encodePending(e.id)
}

func decodeEntryValue(b []byte) (any, error) {
	id, handoff, err := decodeEntry(b)
	return entry{id: id, handoff: handoff}, err
}
