package ledger

import (
	"bytes"
	"testing"
	"time"
)

// TestDecodeAllocations: decoding an entry costs one copy of its strings
// (and its cipher hash and partition), no reader.
func TestDecodeAllocations(t *testing.T) {
	e := Entry{Seq: 1, Time: time.Unix(1, 2).UTC(), Actor: "ann", Kind: RecordDelete, Collection: "c", ID: "i", Revision: 2}
	b, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Entry
	if n := testing.AllocsPerRun(100, func() { _ = out.UnmarshalBinary(b) }); n > 1 {
		t.Errorf("UnmarshalBinary allocates %v times, want 1 (the string copy)", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = decodeEntry(b, true) }); n > 0 {
		t.Errorf("a skimming decode allocates %v times, want 0", n)
	}
}

// TestDecodeSignedAllocations: a signed entry with a cipher hash decodes
// in one allocation too: its byte fields are parts of the copy its
// strings are cut from.
func TestDecodeSignedAllocations(t *testing.T) {
	e := signedEntry()
	b, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Entry
	if n := testing.AllocsPerRun(100, func() { _ = out.UnmarshalBinary(b) }); n > 1 {
		t.Errorf("UnmarshalBinary of a signed entry allocates %v times, want 1", n)
	}
}

// TestDecodedFieldsStandApart: the fields of a decoded entry share one
// copy of the input, yet a caller that changes or extends a byte field
// changes no other field, and none of the input.
func TestDecodedFieldsStandApart(t *testing.T) {
	e := signedEntry()
	b, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	input := bytes.Clone(b)
	var out Entry
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]byte{out.CipherHash, out.SigningKey, out.Signature} {
		for i := range f {
			f[i] ^= 0xff
		}
		_ = append(f, 'x', 'x', 'x', 'x')
	}
	if out.Actor != e.Actor || out.Collection != e.Collection || out.ID != e.ID || out.Series != e.Series || out.Reason != e.Reason {
		t.Errorf("strings changed with the byte fields: %+v", out)
	}
	var again Entry
	if err := again.UnmarshalBinary(b); err != nil || !bytes.Equal(b, input) {
		t.Errorf("the input changed with the decoded entry's fields (%v)", err)
	}
	if !bytes.Equal(again.CipherHash, e.CipherHash) || !bytes.Equal(again.Signature, e.Signature) {
		t.Errorf("a second decode sees the first one's changes")
	}
}

func signedEntry() Entry {
	return Entry{Seq: 7, Time: time.Unix(1, 2).UTC(), Actor: "ann", Kind: RecordPut, Collection: "invoices", ID: "i-1",
		Revision: 3, CipherHash: bytes.Repeat([]byte{0xab}, 32), Series: "s", Reason: "why",
		SigningKey: bytes.Repeat([]byte{0x11}, signingKeySize), Signature: bytes.Repeat([]byte{0x22}, signatureSize)}
}
