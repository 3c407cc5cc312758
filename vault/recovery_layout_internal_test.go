package vault

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The recovery entry layout of recovery.go (version 1), pinned to
// testdata/recovery_layouts.json both ways, and its fuzz target.

// normalizedRecovery returns r with empty byte and list fields as nil.
func normalizedRecovery(r *recoveryEntry) recoveryEntry {
	n := *r
	nb := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return b
	}
	n.boxPub, n.mac = nb(n.boxPub), nb(n.mac)
	if len(n.slots) == 0 {
		n.slots = nil
	}
	for i := range n.slots {
		s := &n.slots[i]
		s.id, s.salt, s.box, s.key, s.pub = nb(s.id), nb(s.salt), nb(s.box), nb(s.key), nb(s.pub)
	}
	return n
}

func recoveryLayout() codectest.Layout {
	return codectest.Layout{
		Seeds: "testdata/recovery_layouts.json", Prefix: "recovery/", Err: codec.ErrCorrupt,
		Decode: func(b []byte) (any, error) {
			r, err := decodeRecovery(b)
			if err != nil {
				return nil, err
			}
			return normalizedRecovery(r), nil
		},
		Encode: func(v any) ([]byte, error) { r := v.(recoveryEntry); return r.encode(), nil },
	}
}

// TestRecoveryLayoutVectors pins the recovery entry layout.
func TestRecoveryLayoutVectors(t *testing.T) {
	l := recoveryLayout()
	cs := func(name string, r recoveryEntry) codectest.Case {
		return codectest.Case{
			Name: l.Prefix + name, Value: r, Err: codec.ErrCorrupt,
			Encode: func() ([]byte, error) { return l.Encode(r) },
			Decode: l.Decode,
		}
	}
	b := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	kdf := crypto.KDFParams{Time: 3, MemoryKiB: 65536, Threads: 4}
	set := recoveryEntry{user: "olga", serial: 2, boxPub: b(32, 1), mac: b(32, 2), slots: []recoverySlot{
		{id: b(16, 3), used: true},
		{id: b(16, 4), salt: b(16, 5), kdf: kdf, box: b(73, 6)},
	}}
	empty := recoveryEntry{user: "rex", serial: 1, boxPub: b(32, 7), mac: b(32, 8)}
	extremes := set
	extremes.user, extremes.serial = strings.Repeat("u", maxKeyringName), math.MaxUint64
	extremes.slots = []recoverySlot{{id: b(16, 9), salt: b(16, 10),
		kdf: crypto.KDFParams{Time: math.MaxUint32, MemoryKiB: math.MaxUint32, Threads: math.MaxUint8}, box: b(maxKeyringWrapped, 11)}}
	// Layout version 1, as read (the codes' keys wrap the box key).
	for _, r := range []*recoveryEntry{&set, &empty, &extremes} {
		r.version = 1
		for i := range r.slots {
			if !r.slots[i].used {
				r.slots[i].form = slotDirect
			}
		}
	}
	// Layout version 2: a key pair per code, and a code of version 1 kept.
	set2 := recoveryEntry{user: "will", serial: 3, boxPub: b(32, 12), mac: b(32, 13), slots: []recoverySlot{
		{id: b(16, 14), used: true},
		{id: b(16, 15), salt: b(16, 16), kdf: kdf, form: slotKeyPair, key: b(73, 17), pub: b(32, 18), box: b(105, 19)},
		{id: b(16, 20), salt: b(16, 21), kdf: kdf, form: slotDirect, box: b(73, 22)},
	}}
	empty2 := recoveryEntry{user: "rex", serial: 2, boxPub: b(32, 23), mac: b(32, 24)}
	codectest.Check(t, "testdata/recovery_layouts.json", []codectest.Case{
		cs("version 2: a used code, a code's key pair, a version 1 code", set2),
		cs("version 2: revoked", empty2),
		cs("a used and an unused code", set),
		cs("revoked: no codes", empty),
		cs("extremes", extremes),
	})
	_, err := decodeRecovery([]byte{1, 2, 3})
	assert.ErrorIs(t, err, codec.ErrCorrupt)
	bad := set2
	bad.slots = []recoverySlot{{id: b(16, 1), salt: b(16, 2), form: 3, box: b(73, 3)}}
	_, err = decodeRecovery(bad.encode())
	assert.ErrorIs(t, err, codec.ErrCorrupt, "unknown form")
	assert.Equal(t, uint64(0), recoverySerial([]byte("NOYR")))
}

func FuzzRecoveryEntry(f *testing.F) { codectest.Fuzz(f, recoveryLayout()) }
