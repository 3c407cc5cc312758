package ledger_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
)

// entryVector is one known-answer vector of testdata/entries.json. The file
// is published format: never regenerate it, only add to it.
type entryVector struct {
	Name  string       `json:"name"`
	Entry ledger.Entry `json:"entry"`
	Hex   string       `json:"hex"`
}

func loadEntryVectors(tb testing.TB) []entryVector {
	tb.Helper()
	b, err := os.ReadFile("testdata/entries.json")
	require.NoError(tb, err)
	var vs []entryVector
	require.NoError(tb, json.Unmarshal(b, &vs))
	require.NotEmpty(tb, vs)
	return vs
}

func TestEntryVectors(t *testing.T) {
	for _, v := range loadEntryVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			want, err := hex.DecodeString(v.Hex)
			require.NoError(t, err)
			got, err := v.Entry.MarshalBinary()
			require.NoError(t, err)
			assert.Equal(t, v.Hex, hex.EncodeToString(got))

			var e ledger.Entry
			require.NoError(t, e.UnmarshalBinary(want))
			assert.True(t, e.Time.Equal(v.Entry.Time))
			e.Time, v.Entry.Time = time.Time{}, time.Time{}
			assert.Equal(t, v.Entry, e)
		})
	}
}

// chainVector is testdata/chain.json: the head MAC after each append of a
// ledger with the test MACer (HMAC-SHA256 over length-prefixed parts, as
// crypto.Key.MAC) under a fixed key and clock. It pins the MAC input.
type chainVector struct {
	MACKey string    `json:"macKey"`
	Actor  string    `json:"actor"`
	Now    time.Time `json:"now"`
	Steps  []struct {
		Entries []ledger.Entry `json:"entries"`
		Seq     uint64         `json:"seq"`
		MAC     string         `json:"mac"`
	} `json:"steps"`
}

func TestChainVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/chain.json")
	require.NoError(t, err)
	var v chainVector
	require.NoError(t, json.Unmarshal(b, &v))
	require.NotEmpty(t, v.Steps)

	l := ledger.New(memstore.New(), newSealer(t), macer{[]byte(v.MACKey)}, prefix, ledger.Options{
		Actor: v.Actor,
		Now:   func() time.Time { return v.Now },
	})
	for _, s := range v.Steps {
		h, err := l.Append(context.Background(), s.Entries...)
		require.NoError(t, err)
		assert.Equal(t, s.Seq, h.Seq)
		assert.Equal(t, s.MAC, hex.EncodeToString(h.MAC))
	}
	verifyClean(t, l, v.Steps[len(v.Steps)-1].Seq)
}

func TestEntryRoundTrip(t *testing.T) {
	in := fact(7)
	in.Seq = 9
	in.Time = time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("CET", 3600))
	in.Partition = []string{"a", "", "c"}
	b, err := in.MarshalBinary()
	require.NoError(t, err)
	var out ledger.Entry
	require.NoError(t, out.UnmarshalBinary(b))
	assert.True(t, out.Time.Equal(in.Time))
	assert.Equal(t, time.UTC, out.Time.Location())
	out.Time = in.Time
	assert.Equal(t, in, out)

	appended, err := in.AppendBinary([]byte("prefix"))
	require.NoError(t, err)
	assert.Equal(t, append([]byte("prefix"), b...), appended)
}

func TestUnmarshalRejectsNonCanonicalInput(t *testing.T) {
	vs := loadEntryVectors(t)
	good, err := hex.DecodeString(vs[0].Hex) // 01 01 ffdb8ff9ce03 00 00 02 ...
	require.NoError(t, err)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	// good: [0] version, [1] seq, [2:8] seconds, [8] nanoseconds, [9] actor length, [10] kind, ...
	bad := []struct {
		name, why string
		b         []byte
	}{
		{"empty", "truncated", []byte{}},
		{"unknown version", "unknown version", mutate(func(b []byte) []byte { b[0] = 5; return b })},
		{"truncated", "truncated", good[:len(good)-1]},
		{"trailing byte", "trailing", append(append([]byte(nil), good...), 0)},
		{"overlong varint", "non-minimal", mutate(func(b []byte) []byte { return append([]byte{1, 0x81, 0x00}, b[2:]...) })},
		{"unknown kind", "unknown kind", mutate(func(b []byte) []byte { b[10] = 0; return b })},
		{"nanoseconds 1e9", "time out of range", mutate(func(b []byte) []byte {
			return append(append(b[:8:8], 0x80, 0x94, 0xeb, 0xdc, 0x03), good[9:]...)
		})},
		{"time before year 1", "time out of range", mutate(func(b []byte) []byte {
			return append([]byte{1, 1, 0x81, 0xdc, 0x8f, 0xf9, 0xce, 0x03}, good[8:]...)
		})},
		{"field too long", "field too long", mutate(func(b []byte) []byte { return append(b[:9], 0xff, 0xff, 0xff, 0x0f) })},
		{"varint overflow", "bad varint", mutate(func(b []byte) []byte {
			return append([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, b[2:]...)
		})},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			e := ledger.Entry{ID: "unchanged"}
			err := e.UnmarshalBinary(c.b)
			require.ErrorIs(t, err, ledger.ErrMalformed)
			assert.Contains(t, err.Error(), c.why)
			assert.Equal(t, "unchanged", e.ID)
		})
	}
}

// FuzzDecodeEntry: the decoder never panics, rejects with ErrMalformed, and
// accepts only canonical encodings (decode then encode gives the input back).
func FuzzDecodeEntry(f *testing.F) {
	for _, v := range loadEntryVectors(f) {
		b, err := hex.DecodeString(v.Hex)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var e ledger.Entry
		if err := e.UnmarshalBinary(b); err != nil {
			require.ErrorIs(t, err, ledger.ErrMalformed)
			return
		}
		out, err := e.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b, out)
	})
}

// FuzzStoredValues puts arbitrary plaintext, properly sealed, at an entry's
// key or the head's: the ledger reports a problem and never panics or
// accepts it, since the forger has no MAC key.
func FuzzStoredValues(f *testing.F) {
	for _, v := range loadEntryVectors(f) {
		b, err := hex.DecodeString(v.Hex)
		require.NoError(f, err)
		f.Add(false, append(b, make([]byte, 32)...))
		f.Add(true, append([]byte{1, 2, 32}, make([]byte, 33)...))
	}
	f.Add(true, []byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, head bool, plain []byte) {
		st := memstore.New()
		l := newLedger(t, st)
		appendN(t, l, 2)
		key := entryKey(2)
		if head {
			key = headKey
		}
		sealed, err := newSealer(t).Seal(key, plain)
		require.NoError(t, err)
		put(t, st, key, sealed)

		rep, err := l.Verify(context.Background())
		if head && err == nil {
			// Only an empty head ({1,0,0,0}: nothing appended) can verify
			// without the MAC key, and then the entries are ignored.
			assert.Equal(t, uint64(0), rep.Head.Seq)
			return
		}
		require.Error(t, err)
		require.NotNil(t, rep.Problem)
		_, rerr := readErr(l, 1)
		require.Equal(t, err, rerr, "Verify (which skips decoding strings) and Read agree")
		for range l.Read(context.Background(), 2) {
		}
		_, _ = l.Append(context.Background(), fact(3))
	})
}
