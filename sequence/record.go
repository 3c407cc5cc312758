package sequence

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// recordVersion is the first byte of every plaintext this package seals, so
// the layouts below can evolve.
const recordVersion = 1

// claim is one remembered (request id, number) pair of a store without transactions.
type claim struct {
	id [16]byte
	n  uint64
}

// state is the plaintext of a counter record.
//
// Layout (version 1):
//
//	byte     recordVersion
//	uvarint  value: the last number handed out (0: none)
//	-- only when the window below is in use --
//	[16]byte watermark: the newest request id evicted from the window (zero: none)
//	uvarint  count
//	count ×  ([16]byte request id, uvarint number), ascending by id
//
// On transactional stores the window is never used and a record is 2 to 11
// bytes long before sealing.
type state struct {
	value     uint64
	watermark [16]byte
	window    []claim // sorted by id; every id is greater than watermark
}

func (s *state) hasWindow() bool {
	return len(s.window) > 0 || s.watermark != [16]byte{}
}

// appendTo appends the encoded state to b.
func (s *state) appendTo(b []byte) []byte {
	b = append(b, recordVersion)
	b = binary.AppendUvarint(b, s.value)
	if s.hasWindow() {
		b = append(b, s.watermark[:]...)
		b = binary.AppendUvarint(b, uint64(len(s.window)))
		for _, c := range s.window {
			b = append(b, c.id[:]...)
			b = binary.AppendUvarint(b, c.n)
		}
	}
	return b
}

func decodeState(b []byte) (state, error) {
	var s state
	if len(b) < 2 || b[0] != recordVersion {
		return s, ErrCorrupt
	}
	v, n := binary.Uvarint(b[1:])
	if n <= 0 {
		return s, ErrCorrupt
	}
	s.value = v
	b = b[1+n:]
	if len(b) == 0 {
		return s, nil
	}
	if len(b) < 17 {
		return s, ErrCorrupt
	}
	copy(s.watermark[:], b)
	b = b[16:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b))/17 {
		return s, ErrCorrupt
	}
	b = b[n:]
	s.window = make([]claim, count)
	for i := range s.window {
		if len(b) < 17 {
			return s, ErrCorrupt
		}
		copy(s.window[i].id[:], b)
		v, n := binary.Uvarint(b[16:])
		if n <= 0 {
			return s, ErrCorrupt
		}
		s.window[i].n = v
		b = b[16+n:]
		if i > 0 && bytes.Compare(s.window[i-1].id[:], s.window[i].id[:]) >= 0 {
			return s, ErrCorrupt
		}
	}
	if len(b) != 0 {
		return s, ErrCorrupt
	}
	return s, nil
}

// lookup finds id in the window.
func (s *state) lookup(id [16]byte) (n uint64, found, expired bool) {
	i, ok := slices.BinarySearchFunc(s.window, id, cmpClaim)
	if ok {
		return s.window[i].n, true, false
	}
	return 0, false, bytes.Compare(id[:], s.watermark[:]) <= 0
}

// remember records (id, n), evicting the oldest ids beyond limit entries. The
// window slice is copied, never changed in place: a cached state may share it.
func (s *state) remember(id [16]byte, n uint64, limit int) {
	i, _ := slices.BinarySearchFunc(s.window, id, cmpClaim)
	w := make([]claim, 0, len(s.window)+1)
	w = append(w, s.window[:i]...)
	w = append(w, claim{id: id, n: n})
	w = append(w, s.window[i:]...)
	if drop := len(w) - limit; drop > 0 {
		// Every id left is greater than the last one dropped, so it becomes the watermark.
		s.watermark = w[drop-1].id
		w = w[drop:]
	}
	s.window = w
}

func cmpClaim(c claim, id [16]byte) int { return bytes.Compare(c.id[:], id[:]) }

// encodeNumber is the plaintext of a claim record: the number the request got.
func encodeNumber(n uint64) []byte {
	return binary.AppendUvarint([]byte{recordVersion}, n)
}

func decodeNumber(b []byte) (uint64, error) {
	if len(b) < 2 || b[0] != recordVersion {
		return 0, ErrCorrupt
	}
	v, n := binary.Uvarint(b[1:])
	if n <= 0 || 1+n != len(b) {
		return 0, ErrCorrupt
	}
	return v, nil
}

// encodeReason is the plaintext of a void marker.
func encodeReason(reason string) []byte {
	return append([]byte{recordVersion}, reason...)
}

func decodeReason(b []byte) (string, error) {
	if len(b) < 1 || b[0] != recordVersion {
		return "", ErrCorrupt
	}
	return string(b[1:]), nil
}
