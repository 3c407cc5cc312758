package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores/memstore"
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
	e3 := e1
	e3.SigningKey, e3.Signature = mac(0x11, 32), mac(0x22, 64)
	e4 := e2
	e4.Signature = mac(0x33, 64)
	e5 := Entry{Seq: 3, Time: at, Actor: "olga", Kind: SeriesBound, Series: "invoice", Collection: "invoices",
		Signature: mac(0x44, 64)}

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
			Encode: func() ([]byte, error) {
				return encodeHeadAs(hs), nil
			},
			Decode: func(b []byte) (any, error) { return decodeHead(b) },
		}
	}
	v1 := func(hs headState) headState { hs.version = 1; return hs }
	v2 := func(hs headState) headState { hs.version = 2; return hs }
	v3 := func(hs headState) headState { hs.version = 3; return hs }
	e6 := Entry{Seq: 1, Time: at, Actor: "olga", Kind: NumberAllocated, Series: "invoice", Number: 1,
		SigningKey: mac(0x11, 32), Chained: true}
	e7 := Entry{Seq: 2, Time: at, Actor: "olga", Kind: RecordPut, Collection: "invoices", ID: "inv-1",
		Revision: 1, CipherHash: mac(0xab, 32), Chained: true}
	codectest.Check(t, "testdata/layouts.json", []codectest.Case{
		stored("record-put", r1),
		stored("number-voided, 1-byte MAC", rec(e2, []byte{9})),
		stored("signed record-put with signing key", rec(e3, mac(3, 32))),
		stored("signed number-voided", rec(e4, mac(4, 32))),
		stored("signed series-bound", rec(e5, mac(5, 32))),
		stored("chained genesis number-allocated", rec(e6, mac(6, 32))),
		stored("chained record-put", rec(e7, mac(7, 32))),
		hd("empty", v1(headState{})),
		hd("no pending", v1(headState{Head: Head{Seq: 2, MAC: mac(2, 32)}})),
		hd("one pending", v1(headState{Head: Head{Seq: 2, MAC: mac(2, 32)}, pending: []record{r2}})),
		hd("two pending", v1(headState{Head: Head{Seq: 2, MAC: mac(2, 32)}, pending: []record{r1, r2}})),
		hd("v2 empty", v2(headState{})),
		hd("v2 no people", v2(headState{Head: Head{Seq: 2, MAC: mac(2, 32), linkFrom: 1}})),
		hd("v2 people linked from 1", v2(headState{Head: Head{Seq: 9, MAC: mac(9, 32), people: 7, linkFrom: 1}})),
		hd("v2 people linked from an upgrade", v2(headState{Head: Head{Seq: 9, MAC: mac(9, 32), people: 5, linkFrom: 4}})),
		hd("v2 two pending", v2(headState{Head: Head{Seq: 2, MAC: mac(2, 32), people: 0, linkFrom: 1}, pending: []record{r1, r2}})),
		hd("v3 empty", v3(headState{})),
		hd("v3 not alone", v3(headState{Head: Head{Seq: 9, MAC: mac(9, 32), people: 7, linkFrom: 1}})),
		hd("v3 alone", v3(headState{Head: Head{Seq: 2, MAC: mac(2, 32), linkFrom: 1, alone: "olga"}})),
		hd("v3 alone, one pending", v3(headState{Head: Head{Seq: 2, MAC: mac(2, 32), linkFrom: 1, alone: "olga"},
			pending: []record{rec(e7, mac(2, 32))}})),
	})
}

// encodeHeadAs encodes hs in the layout it was decoded from.
func encodeHeadAs(hs headState) []byte {
	switch hs.version {
	case 1:
		return encodeHeadV1(hs.Head, hs.pending)
	case 2:
		return encodeHeadV2(hs.Head, hs.pending)
	}
	return encodeHead(hs.Head, hs.pending)
}

// encodeHeadV2 is the head record of layout version 2, which releases
// before the window of one person wrote: version 3 without alone.
func encodeHeadV2(head Head, pending []record) []byte {
	b := []byte{2}
	b = codec.AppendUvarint(b, head.Seq)
	b = codec.AppendBytes(b, head.MAC)
	b = codec.AppendUvarint(b, head.people)
	b = codec.AppendUvarint(b, head.linkFrom)
	b = codec.AppendUvarint(b, uint64(len(pending)))
	for _, r := range pending {
		b = codec.AppendBytes(b, r.plain)
	}
	return b
}

// encodeHeadV1 is the head record of layout version 1, which releases
// before people links wrote: the version byte, the position and its MAC,
// and the pending entries.
func encodeHeadV1(head Head, pending []record) []byte {
	b := []byte{1}
	b = codec.AppendUvarint(b, head.Seq)
	b = codec.AppendBytes(b, head.MAC)
	b = codec.AppendUvarint(b, uint64(len(pending)))
	for _, r := range pending {
		b = codec.AppendBytes(b, r.plain)
	}
	return b
}

// seedSigner signs with an Ed25519 key from a fixed seed.
type seedSigner struct{ priv ed25519.PrivateKey }

func (s seedSigner) Public() []byte                  { return s.priv.Public().(ed25519.PublicKey) }
func (s seedSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// TestSignedVectors pins what an entry's signature covers: the stored
// plaintexts (encoding, signature, MAC) of the first four entries of a
// signed ledger under fixed keys and clock (two commits of one entry, one
// of two: a covered entry and the signed last), in testdata/signed.json. Ed25519
// signatures are deterministic, so any change to the signed message shows.
func TestSignedVectors(t *testing.T) {
	st := memstore.New()
	s := seedSigner{priv: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))}
	l := newLedger(st, plainSealer{}, hmacMACer{key: []byte("mac key for the signed vectors..")}, "v/t/", wire.LedgerOptions{
		Actor: "olga", Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }, Signer: s})
	ctx := context.Background()
	_, err := l.Append(ctx, Entry{Kind: RecordPut, Collection: "notes", ID: "n-1", Revision: 1, CipherHash: bytes.Repeat([]byte{0xab}, 32)})
	require.NoError(t, err)
	_, err = l.Append(ctx, Entry{Kind: AppEvent, Reason: "login"})
	require.NoError(t, err)
	// A commit of two entries: 3 is covered, 4 signed over both.
	_, err = l.Append(ctx, Entry{Kind: AppEvent, Reason: "export"}, Entry{Kind: AppEvent, Reason: "logout"})
	require.NoError(t, err)
	var cases []codectest.Case
	for seq := uint64(1); seq <= 4; seq++ {
		it, err := st.Get(ctx, l.entryKey(seq))
		require.NoError(t, err)
		r, err := decodeRecord(it.Value, false)
		require.NoError(t, err)
		cases = append(cases, codectest.Case{
			Name: fmt.Sprintf("signed ledger entry %d", seq), Value: r, Err: ErrMalformed, PrefixOK: true, TrailingOK: true,
			Encode: func() ([]byte, error) { return r.plain, nil },
			Decode: func(b []byte) (any, error) { return decodeRecord(b, false) },
		})
	}
	codectest.Check(t, "testdata/signed.json", cases)
	verifier := newLedger(st, plainSealer{}, hmacMACer{key: []byte("mac key for the signed vectors..")}, "v/t/", wire.LedgerOptions{})
	rep, err := verifier.Verify(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), rep.Entries)
}

// plainSealer stores plaintexts as they are.
type plainSealer struct{}

func (plainSealer) Seal(_ string, p []byte) ([]byte, error) { return bytes.Clone(p), nil }
func (plainSealer) Open(_ string, s []byte) ([]byte, error) { return bytes.Clone(s), nil }

// hmacMACer is HMAC-SHA256 over length-prefixed parts.
type hmacMACer struct{ key []byte }

func (m hmacMACer) MAC(parts ...[]byte) []byte {
	h := hmac.New(sha256.New, m.key)
	for _, p := range parts {
		h.Write(codec.AppendUint64(nil, uint64(len(p))))
		h.Write(p)
	}
	return h.Sum(nil)
}
