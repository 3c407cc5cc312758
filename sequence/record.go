package sequence

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/stores"
)

// recordVersion is the first byte of every plaintext this package seals, so
// the layouts below can evolve.
const recordVersion = 1

// closedVersion is the first byte of the state of a closed counter (see
// state).
const closedVersion = 2

// stateClosed is the flag of a closed counter in the flags byte of a
// version 2 state; no other flag is defined.
const stateClosed = 1

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
//
// Layout (version 2), for a closed counter (a period ClosePeriod closed):
//
//	byte     closedVersion (2)
//	uvarint  value
//	byte     flags: stateClosed (the only flag, always set)
//	-- the window, as in version 1, when it is in use --
//
// An open counter is always written in version 1, so its records (and the
// hot path) are what they were before periods existed.
type state struct {
	value     uint64
	watermark [16]byte
	window    []claim // sorted by id; every id is greater than watermark
	closed    bool    // the period is closed: no number may be taken
}

func (s *state) hasWindow() bool {
	return len(s.window) > 0 || s.watermark != [16]byte{}
}

// appendTo appends the encoded state to b.
func (s *state) appendTo(b []byte) []byte {
	if s.closed {
		b = append(b, closedVersion)
		b = codec.AppendUvarint(b, s.value)
		b = append(b, stateClosed)
	} else {
		b = append(b, recordVersion)
		b = codec.AppendUvarint(b, s.value)
	}
	if s.hasWindow() {
		b = append(b, s.watermark[:]...)
		b = codec.AppendUvarint(b, uint64(len(s.window)))
		for _, c := range s.window {
			b = append(b, c.id[:]...)
			b = codec.AppendUvarint(b, c.n)
		}
	}
	return b
}

// maxWindow bounds the window's count when decoding: however large
// Config.ClaimWindow, a stored state is at most stores.MaxValueLen bytes
// and a claim takes at least 17 of them.
const maxWindow = stores.MaxValueLen / 17

func decodeState(b []byte) (state, error) {
	var s state
	r := codec.NewReader(b)
	if len(b) > 0 && b[0] == closedVersion {
		r.Version(closedVersion)
		s.value = r.Uvarint()
		if f := r.Byte(); r.Err() == nil && f != stateClosed {
			r.Failf("unknown flags %#x", f)
		}
		s.closed = true
	} else {
		r.Version(recordVersion)
		s.value = r.Uvarint()
	}
	if r.Err() == nil && r.Len() > 0 {
		copy(s.watermark[:], r.Fixed(16))
		// A claim is a 16-byte id and a uvarint.
		n := r.Count(maxWindow, 17)
		if r.Err() == nil && n == 0 && s.watermark == [16]byte{} {
			// appendTo writes no window then: refuse a second encoding.
			r.Fail("empty window")
		}
		if r.Err() == nil {
			s.window = make([]claim, n)
		}
		for i := 0; i < n && r.Err() == nil; i++ {
			copy(s.window[i].id[:], r.Fixed(16))
			s.window[i].n = r.Uvarint()
			if i > 0 && r.Err() == nil && bytes.Compare(s.window[i-1].id[:], s.window[i].id[:]) >= 0 {
				r.Fail("window out of order")
			}
		}
	}
	if err := r.End(); err != nil {
		return state{}, corrupt(err)
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
	return codec.AppendUvarint([]byte{recordVersion}, n)
}

func decodeNumber(b []byte) (uint64, error) {
	r := codec.NewReader(b)
	r.Version(recordVersion)
	n := r.Uvarint()
	if err := r.End(); err != nil {
		return 0, corrupt(err)
	}
	return n, nil
}

// encodeReason is the plaintext of a void marker: the reason takes the
// rest of the record, unprefixed.
func encodeReason(reason string) []byte {
	return append([]byte{recordVersion}, reason...)
}

func decodeReason(b []byte) (string, error) {
	r := codec.NewReader(b)
	r.Version(recordVersion)
	reason := string(r.Rest())
	if err := r.End(); err != nil {
		return "", corrupt(err)
	}
	return reason, nil
}

// corrupt wraps a decoding failure (a *codec.Error, matching ErrCorrupt).
func corrupt(err error) error {
	return fmt.Errorf("sequence record: %w", err)
}
