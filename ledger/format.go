package ledger

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/stores"
)

// Storage layout. Every value is sealed by the Sealer, bound to its key.
//
//	prefix + "_ledger/" + 20-digit zero-padded seq   one entry: encoding || MAC
//	prefix + "_ledger/head"                          the head record
//
// "head" sorts after every 20-digit position, so listing "_ledger/" yields
// the entries in order, then the head. A stored entry's plaintext is the
// entry's canonical encoding (Entry.MarshalBinary) followed by its chain MAC,
//
//	MAC = MACer.MAC(macDomain || len(prevMAC) as one byte || prevMAC || seq as 8 bytes big-endian, encoding)
//
// where prevMAC is the MAC of entry seq-1, empty for entry 1. The head
// record's plaintext is
//
//	[1] version (3)
//	uvarint seq, uvarint len(MAC), MAC       the head: last position and its MAC
//	uvarint people, uvarint linkFrom         the last people entry, where links begin
//	str alone                                the one person of the vault, "" when not alone
//	uvarint n, then n times uvarint len(p), p  pending entries (plaintexts as above)
//
// Pending entries are the last n entries up to seq, committed but perhaps not
// yet written at their own keys (stores without transactions only). People
// entries (PersonGranted, PersonRevoked, KeyringUpgraded) from position
// linkFrom on name the previous one in From (0: none from linkFrom on), and
// people is the last of them (0: none): the replay of the ledger's people
// reads them without the rest (people.go). A head of version 1 has neither
// field: it was written before links were, and the next append begins them.
// alone names the person for whom the ledger's window of Chained entries
// is open (sign.go, "One person"); a head of version 1 or 2 has none: it
// was written before windows were, and its ledger signs every commit.
const (
	dirName     = "_ledger/"
	headName    = "head"
	headVersion = 3
	macDomain   = "noydb ledger entry v1"
	maxMAC      = 255
	seqDigits   = 20
)

// record is a committed entry with its stored plaintext.
type record struct {
	entry  Entry
	plain  []byte // encoding || MAC
	encLen int
	prev   []byte // the MAC of the entry before, when built by this ledger
}

func (r record) enc() []byte { return r.plain[:r.encLen] }
func (r record) mac() []byte { return r.plain[r.encLen:] }

// headState is the decoded head record.
type headState struct {
	Head
	pending []record // the last len(pending) entries, in order
	version byte     // the layout it was decoded from (0: not decoded)
}

// entryKey returns the store key of position seq.
func (l *ledger) entryKey(seq uint64) string {
	var buf [96]byte // room for most prefixes: the string is the one allocation
	return string(appendSeq(append(buf[:0], l.dir...), seq))
}

func appendSeq(b []byte, seq uint64) []byte {
	var d [seqDigits]byte
	for i := seqDigits - 1; i >= 0; i-- {
		d[i] = byte('0' + seq%10)
		seq /= 10
	}
	return append(b, d[:]...)
}

// parseSeq parses a 20-digit position; ok is false for anything else.
func parseSeq(s string) (seq uint64, ok bool) {
	if len(s) != seqDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if seq > (1<<64-1-d)/10 {
			return 0, false
		}
		seq = seq*10 + d
	}
	return seq, true
}

// chainMAC is the MAC of entry seq with encoding enc after prev.
func (l *ledger) chainMAC(prev []byte, seq uint64, enc []byte) []byte {
	return l.appendChainMAC(nil, prev, seq, enc)
}

// macScratch is the scratch of a chain MAC: the first part's bytes, room
// for a MAC to compare, and the parts handed to the MACer (kept off the
// heap of each call).
type macScratch struct {
	prefix, sum []byte
	parts       [2][]byte
}

var macScratches = sync.Pool{New: func() any {
	return &macScratch{prefix: make([]byte, 0, len(macDomain)+1+maxMAC+8), sum: make([]byte, 0, maxMAC)}
}}

// appendChainMAC appends to dst the MAC of entry seq with encoding enc
// after prev: where the MACer appends (crypto.MACer), without allocating
// when dst has room.
func (l *ledger) appendChainMAC(dst, prev []byte, seq uint64, enc []byte) []byte {
	s := macScratches.Get().(*macScratch)
	dst = l.appendChainMACWith(s, dst, prev, seq, enc)
	macScratches.Put(s)
	return dst
}

func (l *ledger) appendChainMACWith(s *macScratch, dst, prev []byte, seq uint64, enc []byte) []byte {
	b := append(s.prefix[:0], macDomain...)
	b = append(b, byte(len(prev)))
	b = append(b, prev...)
	b = codec.AppendUint64(b, seq)
	s.prefix = b[:0]
	s.parts = [2][]byte{b, enc}
	if l.macAppend != nil {
		dst = l.macAppend.AppendMAC(dst, s.parts[:]...)
	} else {
		dst = append(dst, l.mac.MAC(s.parts[:]...)...)
	}
	s.parts = [2][]byte{}
	return dst
}

// chainsOnto reports whether mac is the chain MAC of entry seq with
// encoding enc after prev, comparing in constant time.
func (l *ledger) chainsOnto(prev []byte, seq uint64, enc, mac []byte) bool {
	s := macScratches.Get().(*macScratch)
	s.sum = l.appendChainMACWith(s, s.sum[:0], prev, seq, enc)
	ok := hmac.Equal(s.sum, mac)
	macScratches.Put(s)
	return ok
}

// openEntry authenticates and decodes the value stored at key, position seq
// (with skim, see decodeEntry).
func (l *ledger) openEntry(key string, seq uint64, sealed []byte, skim bool) (record, error) {
	plain, err := l.sealer.Open(key, sealed)
	if err != nil {
		return record{}, &TamperError{Seq: seq, Err: err}
	}
	r, err := decodeRecord(plain, skim)
	if err != nil {
		return record{}, &TamperError{Seq: seq, Err: err}
	}
	if r.entry.Seq != seq {
		return record{}, &TamperError{Seq: seq, Err: fmt.Errorf("%w: entry at position %d says %d", ErrMalformed, seq, r.entry.Seq)}
	}
	return r, nil
}

func decodeRecord(plain []byte, skim bool) (record, error) {
	e, n, err := decodeEntry(plain, skim)
	if err != nil {
		return record{}, err
	}
	if m := len(plain) - n; m == 0 || m > maxMAC {
		return record{}, fmt.Errorf("%w: MAC of %d bytes", ErrMalformed, m)
	}
	return record{entry: e, plain: plain, encLen: n}, nil
}

// headBuffers holds scratch for head records being sealed.
var headBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// sealHead seals the head record for head with the given pending entries.
func (l *ledger) sealHead(head Head, pending []record) ([]byte, error) {
	bp := headBuffers.Get().(*[]byte)
	plain := appendHead((*bp)[:0], head, pending)
	sealed, err := l.sealer.Seal(l.headKey, plain)
	if len(pending) == 0 { // a head carrying entries is rare and large: not kept
		clear(plain)
		*bp = plain[:0]
		headBuffers.Put(bp)
	}
	if err != nil {
		return nil, fmt.Errorf("seal head: %w", err)
	}
	return sealed, nil
}

// encodeHead returns the head record's plaintext.
func encodeHead(head Head, pending []record) []byte {
	return appendHead(nil, head, pending)
}

// appendHead appends the head record's plaintext to b.
func appendHead(b []byte, head Head, pending []record) []byte {
	n := 1 + 4*codec.MaxVarintLen + len(head.MAC) + len(head.alone)
	for _, r := range pending {
		n += codec.MaxVarintLen + len(r.plain)
	}
	b = slices.Grow(b, n)
	b = append(b, headVersion)
	b = codec.AppendUvarint(b, head.Seq)
	b = codec.AppendBytes(b, head.MAC)
	b = codec.AppendUvarint(b, head.people)
	b = codec.AppendUvarint(b, head.linkFrom)
	b = codec.AppendString(b, head.alone)
	b = codec.AppendUvarint(b, uint64(len(pending)))
	for _, r := range pending {
		b = codec.AppendBytes(b, r.plain)
	}
	return b
}

// openHead authenticates and decodes the head record.
func (l *ledger) openHead(sealed []byte) (headState, error) {
	plain, err := l.sealer.Open(l.headKey, sealed)
	if err != nil {
		return headState{}, &TamperError{Err: err}
	}
	hs, err := decodeHead(plain)
	if err != nil {
		return headState{}, &TamperError{Err: err}
	}
	return hs, nil
}

func decodeHead(plain []byte) (headState, error) {
	r := codec.NewReader(plain)
	version := r.Byte()
	if r.Err() == nil && (version < 1 || version > headVersion) {
		r.Failf("unknown version %d", version)
	}
	hs := headState{version: version}
	hs.Seq = r.Uvarint()
	if mac := r.Bytes(maxMAC); r.Err() == nil && (len(mac) == 0) != (hs.Seq == 0) {
		r.Fail("bad head MAC")
	} else if len(mac) > 0 {
		hs.MAC = mac
	}
	if version >= 2 {
		hs.people, hs.linkFrom = r.Uvarint(), r.Uvarint()
		if r.Err() == nil && ((hs.linkFrom == 0) != (hs.Seq == 0) || hs.linkFrom > hs.Seq+1 || hs.people > hs.Seq ||
			(hs.people != 0 && hs.people < hs.linkFrom)) {
			r.Fail("people link out of place")
		}
	}
	if version >= 3 {
		if a := r.Bytes(maxField); len(a) > 0 {
			if hs.Seq == 0 {
				r.Fail("alone in an empty ledger")
			}
			hs.alone = string(a)
		}
	}
	// Each pending entry takes at least 3 bytes (a length, a version, a MAC byte).
	n := r.Count(hs.Seq, 3)
	for i := range n {
		rec, err := decodeRecord(r.Bytes(maxBatchBytes+maxMAC), false)
		if r.Err() != nil {
			break
		}
		if err != nil {
			return headState{}, err
		}
		if rec.entry.Seq != hs.Seq-uint64(n)+1+uint64(i) {
			r.Fail("pending entry out of place")
		}
		hs.pending = append(hs.pending, rec)
	}
	if err := r.End(); err != nil {
		return headState{}, err
	}
	if len(hs.pending) > 0 && !hmac.Equal(hs.pending[len(hs.pending)-1].mac(), hs.MAC) {
		return headState{}, fmt.Errorf("%w: head MAC is not its last pending entry's", ErrMalformed)
	}
	return hs, nil
}

// loadHead reads the head record and its store version (0: no head yet).
func (l *ledger) loadHead(ctx context.Context) (headState, uint64, error) {
	return l.loadHeadAfter(ctx, l.pinned())
}

// loadHeadAfter is loadHead checking the head against pin, the device's pin
// taken before the read.
func (l *ledger) loadHeadAfter(ctx context.Context, pin Head) (headState, uint64, error) {
	it, err := l.store.Get(ctx, l.headKey)
	if errors.Is(err, stores.ErrNotFound) {
		return headState{}, 0, l.checkPin(Head{}, pin)
	}
	if err != nil {
		return headState{}, 0, err
	}
	hs, err := l.openHead(it.Value)
	if err != nil {
		return headState{}, 0, err
	}
	if err := l.checkPin(hs.Head, pin); err != nil {
		return headState{}, 0, err
	}
	return hs, it.Version, nil
}
