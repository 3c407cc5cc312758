package codec_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/errs"
)

func TestRoundTrip(t *testing.T) {
	var b []byte
	b = append(b, 7)
	b = codec.AppendUvarint(b, 300)
	b = codec.AppendVarint(b, -62135596800)
	b = codec.AppendUint64(b, math.MaxUint64-1)
	b = codec.AppendBytes(b, []byte{1, 2, 3})
	b = codec.AppendString(b, "héllo")
	b = codec.AppendBool(b, true)
	b = codec.AppendBool(b, false)
	b = codec.AppendUvarint(b, 2)
	b = append(b, "tail"...)

	r := codec.NewReader(b)
	r.Version(7)
	assert.Equal(t, uint64(300), r.Uvarint())
	assert.Equal(t, int64(-62135596800), r.Varint())
	assert.Equal(t, uint64(math.MaxUint64-1), r.Uint64())
	assert.Equal(t, []byte{1, 2, 3}, r.Bytes(3))
	assert.Equal(t, "héllo", r.String(6))
	assert.True(t, r.Bool())
	assert.False(t, r.Bool())
	assert.Equal(t, 2, r.Count(2, 2))
	assert.Equal(t, []byte("tail"), r.Rest())
	require.NoError(t, r.End())
	assert.Equal(t, len(b), r.Offset())
}

// TestRefusals: each way an encoding is refused, with the offset of the
// field at fault; the failure sticks and later reads give zero values.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		read func(r *codec.Reader)
		why  string
		off  int
	}{
		{"empty", nil, func(r *codec.Reader) { r.Byte() }, "truncated", 0},
		{"unknown version", []byte{2}, func(r *codec.Reader) { r.Version(1) }, "unknown version 2", 0},
		{"truncated varint", []byte{0x80}, func(r *codec.Reader) { r.Uvarint() }, "truncated", 0},
		{"non-minimal varint", []byte{0x81, 0x00}, func(r *codec.Reader) { r.Uvarint() }, "non-minimal varint", 0},
		{"non-minimal zero", []byte{0x80, 0x00}, func(r *codec.Reader) { r.Uvarint() }, "non-minimal varint", 0},
		{"varint overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
			func(r *codec.Reader) { r.Uvarint() }, "bad varint", 0},
		{"length over limit", []byte{1, 4, 'a', 'b', 'c', 'd'},
			func(r *codec.Reader) { r.Byte(); r.Bytes(3) }, "field too long (4 bytes, limit 3)", 1},
		{"length beyond end", []byte{5, 'a'}, func(r *codec.Reader) { r.Bytes(10) }, "truncated", 1},
		{"count over limit", []byte{3, 1, 1, 1}, func(r *codec.Reader) { r.Count(2, 1) }, "count 3 out of range", 0},
		{"count beyond end", []byte{3, 1, 1, 1, 1, 1}, func(r *codec.Reader) { r.Count(10, 2) }, "count 3 out of range", 0},
		{"bad flag", []byte{0, 2}, func(r *codec.Reader) { r.Bool(); r.Bool() }, "bad flag", 1},
		{"short fixed", []byte{1, 2, 3}, func(r *codec.Reader) { r.Uint64() }, "truncated", 0},
		{"trailing bytes", []byte{1, 2}, func(r *codec.Reader) { r.Byte() }, "1 trailing bytes", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := codec.NewReader(c.in)
			c.read(&r)
			err := r.End()
			require.ErrorIs(t, err, errs.ErrCorrupt)
			require.ErrorIs(t, err, codec.ErrCorrupt)
			var ce *codec.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, c.why, ce.Why)
			assert.Equal(t, c.off, ce.Off)
			// Sticky: the first failure stays, later reads are zero.
			assert.Zero(t, r.Uvarint())
			assert.Nil(t, r.Bytes(10))
			assert.Equal(t, "", r.String(10))
			assert.Same(t, ce, r.Err().(*codec.Error))
		})
	}
}

// FuzzReader reads arbitrary input as a mix of every field kind chosen by
// ops: it never panics, never reads past the end, and whatever it accepts
// re-encodes to the input.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, []byte{1, 0x81, 0x01, 3, 'a', 'b', 'c', 1})
	f.Add([]byte{6, 5, 4}, []byte{0, 0, 0, 0, 0, 0, 0, 9, 2, 1, 1})
	f.Fuzz(func(t *testing.T, ops, in []byte) {
		r := codec.NewReader(in)
		var out []byte
		for _, op := range ops {
			switch op % 7 {
			case 0:
				out = append(out, r.Byte())
			case 1:
				out = codec.AppendUvarint(out, r.Uvarint())
			case 2:
				out = codec.AppendVarint(out, r.Varint())
			case 3:
				out = codec.AppendUint64(out, r.Uint64())
			case 4:
				out = codec.AppendBytes(out, r.Bytes(int(op)))
			case 5:
				out = codec.AppendBool(out, r.Bool())
			case 6:
				n := r.Count(uint64(op), 1)
				out = codec.AppendUvarint(out, uint64(n))
				for range n {
					out = append(out, r.Byte())
				}
			}
			require.LessOrEqual(t, r.Offset(), len(in))
		}
		if r.Err() != nil {
			require.ErrorIs(t, r.Err(), errs.ErrCorrupt)
			return
		}
		require.Equal(t, string(in[:r.Offset()]), string(out))
	})
}
