package ledger

import (
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
