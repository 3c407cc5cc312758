package sequence

import (
	"math"
	"testing"
	"time"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// TestLayoutVectors pins the stored layouts of this package (counter state,
// claim number, void reason, series definition) to testdata/layouts.json, both ways.
func TestLayoutVectors(t *testing.T) {
	id := func(b byte) (x [16]byte) {
		for i := range x {
			x[i] = b + byte(i)
		}
		return x
	}
	st := func(name string, s state) codectest.Case {
		return codectest.Case{
			Name: "state/" + name, Value: s, Err: ErrCorrupt, PrefixOK: s.hasWindow(),
			Encode: func() ([]byte, error) { return s.appendTo(nil), nil },
			Decode: func(b []byte) (any, error) { return decodeState(b) },
		}
	}
	num := func(name string, n uint64) codectest.Case {
		return codectest.Case{
			Name: "number/" + name, Value: n, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return encodeNumber(n), nil },
			Decode: func(b []byte) (any, error) { return decodeNumber(b) },
		}
	}
	reason := func(name, r string) codectest.Case {
		return codectest.Case{
			Name: "reason/" + name, Value: r, Err: ErrCorrupt, PrefixOK: true, TrailingOK: true,
			Encode: func() ([]byte, error) { return encodeReason(r), nil },
			Decode: func(b []byte) (any, error) { return decodeReason(b) },
		}
	}
	def := func(name string, d Definition) codectest.Case {
		return codectest.Case{
			Name: "definition/" + name, Value: d, Err: ErrCorrupt,
			Encode: func() ([]byte, error) { return appendDefinition(nil, d), nil },
			Decode: func(b []byte) (any, error) { return decodeDefinition(b) },
		}
	}
	codectest.Check(t, "testdata/layouts.json", []codectest.Case{
		def("zero", Definition{}),
		def("format", Definition{Format: "INV-{seq:05}"}),
		def("full", Definition{
			Format: "FY{TFY}/{seq:04}", Period: PeriodFiscalYear,
			FiscalStart: MonthDay{Month: time.April, Day: 1}, Zone: "Europe/Rome",
			Meta: map[string]string{"code": "A1B2", "branch": "Milano"}, Corrects: "invoices",
		}),
		def("year", Definition{Period: PeriodYear}),
		st("zero", state{}),
		st("value 300", state{value: 300}),
		st("max", state{value: math.MaxUint64}),
		st("watermark only", state{value: 5, watermark: id(1), window: []claim{}}),
		st("window", state{value: 9, watermark: id(1), window: []claim{{id: id(2), n: 8}, {id: id(0x80), n: 9}}}),
		st("window no watermark", state{value: 200, window: []claim{{id: id(3), n: 200}}}),
		st("closed zero", state{closed: true}),
		st("closed 300", state{value: 300, closed: true}),
		st("closed window", state{value: 9, watermark: id(1), window: []claim{{id: id(2), n: 9}}, closed: true}),
		num("zero", 0),
		num("one", 1),
		num("128", 128),
		num("max", math.MaxUint64),
		reason("empty", ""),
		reason("text", "typo in invoice, reissued"),
	})
}
