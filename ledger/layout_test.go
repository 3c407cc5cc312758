package ledger

import (
	"bytes"
	"testing"
	"time"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// TestLayoutVectors pins the stored layouts of this package besides the
// entry encoding (testdata/entries.json): a stored entry (encoding || MAC)
// and the head record, to testdata/layouts.json, both ways.
func TestLayoutVectors(t *testing.T) {
	mac := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }
	rec := func(e Entry, m []byte) record {
		enc, err := e.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return record{entry: e, plain: append(enc, m...), encLen: len(enc)}
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	e1 := Entry{Seq: 1, Time: at, Actor: "ann", Kind: RecordPut, Collection: "invoices", ID: "inv-7",
		Revision: 3, CipherHash: mac(0xab, 32), Series: "invoice", Number: 7}
	e2 := Entry{Seq: 2, Time: at, Actor: "svc", Kind: NumberVoided, Series: "invoice",
		Partition: []string{"2026", "eu"}, Number: 7, Reason: "typo"}
	r1, r2 := rec(e1, mac(1, 32)), rec(e2, mac(2, 32))

	stored := func(name string, r record) codectest.Case {
		return codectest.Case{
			Name: "stored entry/" + name, Value: r, Err: ErrMalformed, PrefixOK: true, TrailingOK: true,
			Encode: func() ([]byte, error) { return r.plain, nil },
			Decode: func(b []byte) (any, error) { return decodeRecord(b, false) },
		}
	}
	hd := func(name string, hs headState) codectest.Case {
		return codectest.Case{
			Name: "head/" + name, Value: hs, Err: ErrMalformed,
			Encode: func() ([]byte, error) { return encodeHead(hs.Head, hs.pending), nil },
			Decode: func(b []byte) (any, error) { return decodeHead(b) },
		}
	}
	codectest.Check(t, "testdata/layouts.json", []codectest.Case{
		stored("record-put", r1),
		stored("number-voided, 1-byte MAC", rec(e2, []byte{9})),
		hd("empty", headState{}),
		hd("no pending", headState{Head: Head{Seq: 2, MAC: mac(2, 32)}}),
		hd("one pending", headState{Head: Head{Seq: 2, MAC: mac(2, 32)}, pending: []record{r2}}),
		hd("two pending", headState{Head: Head{Seq: 2, MAC: mac(2, 32)}, pending: []record{r1, r2}}),
	})
}
