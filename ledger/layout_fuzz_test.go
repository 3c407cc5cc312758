package ledger

import (
	"fmt"
	"testing"

	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// FuzzStoredEntry: a stored entry's plaintext (encoding || MAC) decodes
// without panicking, or is refused with ErrMalformed; what is accepted is
// canonical.
func FuzzStoredEntry(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "stored entry/", Err: ErrMalformed,
		Decode: func(b []byte) (any, error) { return decodeRecord(b, false) },
		Encode: func(v any) ([]byte, error) {
			r := v.(record)
			enc, err := r.entry.MarshalBinary()
			return append(enc, r.mac()...), err
		},
	})
}

// FuzzHeadRecord: the head record's plaintext decodes without panicking, or
// is refused with ErrMalformed; what is accepted is canonical.
func FuzzHeadRecord(f *testing.F) {
	codectest.Fuzz(f, codectest.Layout{
		Seeds: "testdata/layouts.json", Prefix: "head/", Err: ErrMalformed,
		Decode: func(b []byte) (any, error) { return decodeHead(b) },
		Encode: func(v any) ([]byte, error) {
			hs := v.(headState)
			for _, r := range hs.pending {
				// Re-encode each pending entry from its decoded fields.
				enc, err := r.entry.MarshalBinary()
				if err != nil {
					return nil, err
				}
				if string(enc) != string(r.enc()) {
					return nil, fmt.Errorf("pending entry %d is not canonical", r.entry.Seq)
				}
			}
			return encodeHeadAs(hs), nil
		},
	})
}
