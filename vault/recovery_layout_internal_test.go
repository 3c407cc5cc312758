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
		s.id, s.salt, s.box = nb(s.id), nb(s.salt), nb(s.box)
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
	codectest.Check(t, "testdata/recovery_layouts.json", []codectest.Case{
		cs("a used and an unused code", set),
		cs("revoked: no codes", empty),
		cs("extremes", extremes),
	})
	_, err := decodeRecovery([]byte{1, 2, 3})
	assert.ErrorIs(t, err, codec.ErrCorrupt)
	assert.Equal(t, uint64(0), recoverySerial([]byte("NOYR")))
}

func FuzzRecoveryEntry(f *testing.F) { codectest.Fuzz(f, recoveryLayout()) }
