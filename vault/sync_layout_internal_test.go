package vault

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
	"github.com/noydb-go/noydb/ledger"
)

// The sync state layouts of sync.go and sync_manual.go (pull and push
// cursors, a record's base, a kept conflict, a staged commit's intent), pinned to
// testdata/sync_layouts.json both ways, and their fuzz targets.

func syncLayouts() []codectest.Layout {
	return []codectest.Layout{
		{Seeds: "testdata/sync_layouts.json", Prefix: "sync-pull/", Err: codec.ErrCorrupt,
			Decode: func(b []byte) (any, error) { return decodePull(b) },
			Encode: func(v any) ([]byte, error) { return encodePull(v.(pullCursor)), nil }},
		{Seeds: "testdata/sync_layouts.json", Prefix: "sync-push/", Err: codec.ErrCorrupt,
			Decode: func(b []byte) (any, error) { return decodePush(b) },
			Encode: func(v any) ([]byte, error) { return encodePush(v.(uint64)), nil }},
		{Seeds: "testdata/sync_layouts.json", Prefix: "sync-base/", Err: codec.ErrCorrupt,
			Decode: func(b []byte) (any, error) { return decodeBase(b) },
			Encode: func(v any) ([]byte, error) { return encodeBase(v.(base)), nil }},
		{Seeds: "testdata/sync_layouts.json", Prefix: "sync-conflict/", Err: codec.ErrCorrupt,
			Decode: func(b []byte) (any, error) { return decodeKept(b) },
			Encode: func(v any) ([]byte, error) { return encodeKeptAs(v.(keptConflict)), nil }},
		{Seeds: "testdata/sync_layouts.json", Prefix: "sync-intent/", Err: codec.ErrCorrupt,
			Decode: func(b []byte) (any, error) { return decodeIntent(b) },
			Encode: func(v any) ([]byte, error) { return encodeIntent(v.(intent)) }},
	}
}

// encodeKeptAs encodes c in the version it was decoded from: version 1
// (which holds the hub's sealed record inside) is no longer written but
// still read, and its vectors stay.
func encodeKeptAs(c keptConflict) []byte {
	if !c.legacy {
		return encodeKept(c)
	}
	b := []byte{syncVersion}
	b = codec.AppendUvarint(b, c.seq)
	b = codec.AppendUvarint(b, c.rev)
	return codec.AppendBytes(b, c.sealed)
}

// TestSyncLayoutVectors pins the sync state layouts.
func TestSyncLayoutVectors(t *testing.T) {
	ls := syncLayouts()
	cs := func(l codectest.Layout, name string, v any) codectest.Case {
		return codectest.Case{
			Name: l.Prefix + name, Value: v, Err: codec.ErrCorrupt,
			Encode: func() ([]byte, error) { return l.Encode(v) },
			Decode: l.Decode,
		}
	}
	// v1 is a kept conflict of version 1, which holds the hub's sealed
	// record inside: read, no longer written.
	v1 := func(l codectest.Layout, name string, c keptConflict) codectest.Case {
		k := cs(l, name, c)
		c.legacy = true
		k.Value = c
		k.Encode = func() ([]byte, error) { return encodeKeptAs(c), nil }
		return k
	}
	hash := bytes.Repeat([]byte{0xab}, 32)
	codectest.Check(t, "testdata/sync_layouts.json", []codectest.Case{
		cs(ls[0], "start", pullCursor{}),
		cs(ls[0], "at 300", pullCursor{seq: 300, hash: hash}),
		cs(ls[0], "extremes", pullCursor{seq: math.MaxUint64, hash: bytes.Repeat([]byte{0xff}, maxSyncHash)}),
		cs(ls[0], "v2 pulled with all", pullCursor{seq: 300, hash: hash, known: true}),
		cs(ls[0], "v2 pulled with notes and memos", pullCursor{seq: 300, hash: hash, known: true, limited: true,
			cols: []string{"memos", "notes"}}),
		cs(ls[1], "start", uint64(0)),
		cs(ls[1], "at 128", uint64(128)),
		cs(ls[1], "extremes", uint64(math.MaxUint64)),
		cs(ls[2], "hub holds none", base{}),
		cs(ls[2], "deleted at 7", base{rev: 7}),
		cs(ls[2], "revision 3", base{rev: 3, hash: hash}),
		v1(ls[3], "hub deleted", keptConflict{seq: 9, rev: 4}),
		v1(ls[3], "hub record", keptConflict{seq: 12, rev: 5, sealed: []byte("sealed record bytes"),
			hash: cipherHash([]byte("sealed record bytes"))}),
		cs(ls[3], "v2 hub deleted", keptConflict{seq: 9, rev: 4}),
		cs(ls[3], "v2 hub record", keptConflict{seq: 12, rev: 5, hash: hash}),
		cs(ls[4], "empty", intent{}),
		cs(ls[4], "a pull and a conflict", intent{head: 41,
			records: []intentRecord{{key: "v/shop/notes/x", hash: hash}, {key: "v/shop/notes/y"}},
			entries: []ledger.Entry{
				{Kind: ledger.RecordPulled, Collection: "notes", ID: "x", Revision: 3, CipherHash: hash, Number: 77, Time: time.Unix(0, 0).UTC()},
				{Kind: ledger.SyncConflict, Collection: "notes", ID: "y", Revision: 2, Reason: "higher-revision-wins: device lost", Number: 78, Time: time.Unix(0, 0).UTC()},
				{Kind: ledger.RecordPulledDelete, Collection: "notes", ID: "y", Revision: 2, Number: 78, Time: time.Unix(0, 0).UTC()},
			}}),
		cs(ls[4], "a stamped receipt pulled", intent{head: 9,
			records: []intentRecord{{key: "v/shop/receipts/r", hash: hash}},
			entries: []ledger.Entry{
				{Kind: ledger.RecordPulled, Collection: "receipts", ID: "r", Revision: 2, CipherHash: hash, Number: 12, Time: time.Unix(0, 0).UTC()},
			},
			drops: []intentDrop{{key: "v/shop/_numbering/receipt/pending/p1/r", record: "v/shop/receipts/r"}}}),
	})
}

func FuzzSyncPull(f *testing.F)     { codectest.Fuzz(f, syncLayouts()[0]) }
func FuzzSyncPush(f *testing.F)     { codectest.Fuzz(f, syncLayouts()[1]) }
func FuzzSyncBase(f *testing.F)     { codectest.Fuzz(f, syncLayouts()[2]) }
func FuzzSyncConflict(f *testing.F) { codectest.Fuzz(f, syncLayouts()[3]) }
func FuzzSyncIntent(f *testing.F)   { codectest.Fuzz(f, syncLayouts()[4]) }
