package numbering

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Storage layout, relative to the vault's key prefix. Every value is sealed
// by the Sealer, bound to its key.
//
//	_numbering/<series>/head                          the series head (commit point)
//	_numbering/<series>/batch/<10-digit chunk>        record ids of the batch in flight
//	_numbering/<series>/pending/<provisional>/<id>    a record waiting for its number
//	_numbering/<series>/assigned/<id>                 a record's number, once stamped
//
// Series names hold no '/', so one series' keys never fall under another's
// prefix. Provisional ids are canonical UUIDv7 text (36 bytes, lowercase),
// so a pending key splits unambiguously and pending keys sort by
// provisional time, then record id. Plaintexts are versioned binary
// encodings of uvarints and length-prefixed byte strings:
//
//	head:     [1] version, uvarint last, uvarint batches, str collection,
//	          [1] in flight (0 or 1), then when 1: str token, uvarint id,
//	          first, last, chunks, done, mark, str collection, field, format
//	chunk:    [1] version, str token, uvarint batch, uvarint index,
//	          uvarint first, uvarint n, n times (str provisional, str id)
//	pending:  [1] version, str id
//	assigned: [1] version, uvarint number, [1] voided (0 or 1), uvarint
//	          batch, str provisional, str formatted
const (
	dirName        = "_numbering/"
	headName       = "head"
	batchDir       = "batch/"
	pendingDir     = "pending/"
	assignedDir    = "assigned/"
	formatVersion  = 1
	provisionalLen = 36
	chunkDigits    = 10
)

func (s *Series) headKey() string { return s.dir + headName }
func (s *Series) chunkKey(i int) string {
	return s.dir + batchDir + fmt.Sprintf("%0*d", chunkDigits, i)
}
func (s *Series) assignedKey(id string) string { return s.dir + assignedDir + id }
func (s *Series) pendingKey(provisional, id string) string {
	return s.dir + pendingDir + provisional + "/" + id
}

// head is the decoded series head.
type head struct {
	last       uint64 // highest number committed
	batches    uint64 // batches committed so far (the id of the last one)
	collection string // the collection the series numbers ("" before its first batch)
	batch      *batch // the batch in flight, nil when none
}

// batch is the header of a committed batch: it gives numbers first..last to
// the records listed, in order, in its chunks. The record ids themselves are
// in the chunks, written before the head that commits them.
type batch struct {
	token      []byte // random, tells this batch's chunks from stale ones
	id         uint64
	first      uint64
	last       uint64
	chunks     uint64
	done       uint64 // numbers up to done are finished (stamped, recorded, indexed)
	mark       uint64 // ledger position before any entry for numbers after done
	collection string
	field      string
	format     string
}

// item is one record of a batch, or one pending entry.
type item struct {
	provisional string
	id          string
}

// assignment is the decoded value of an assigned/<id> key.
type assignment struct {
	number      uint64
	voided      bool
	batch       uint64
	provisional string
	formatted   string
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func (h *head) encode() []byte {
	b := []byte{formatVersion}
	b = binary.AppendUvarint(b, h.last)
	b = binary.AppendUvarint(b, h.batches)
	b = appendStr(b, h.collection)
	b = appendBool(b, h.batch != nil)
	if x := h.batch; x != nil {
		b = appendStr(b, string(x.token))
		for _, v := range []uint64{x.id, x.first, x.last, x.chunks, x.done, x.mark} {
			b = binary.AppendUvarint(b, v)
		}
		b = appendStr(b, x.collection)
		b = appendStr(b, x.field)
		b = appendStr(b, x.format)
	}
	return b
}

func decodeHead(p []byte) (head, error) {
	r := reader{b: p}
	r.version()
	var h head
	h.last = r.uvarint()
	h.batches = r.uvarint()
	h.collection = r.str()
	if r.bool() {
		x := &batch{token: []byte(r.str())}
		for _, v := range []*uint64{&x.id, &x.first, &x.last, &x.chunks, &x.done, &x.mark} {
			*v = r.uvarint()
		}
		x.collection = r.str()
		x.field = r.str()
		x.format = r.str()
		if r.err == nil && (x.first == 0 || x.first > x.last || x.last > h.last || x.done < x.first-1 ||
			x.done > x.last || x.id == 0 || x.id > h.batches || x.chunks == 0) {
			r.fail("inconsistent batch")
		}
		h.batch = x
	}
	return h, r.end()
}

func encodeChunk(token []byte, batchID uint64, index int, first uint64, items []item) []byte {
	n := 32 + len(token)
	for _, it := range items {
		n += 2*binary.MaxVarintLen32 + len(it.provisional) + len(it.id)
	}
	b := make([]byte, 0, n)
	b = append(b, formatVersion)
	b = appendStr(b, string(token))
	b = binary.AppendUvarint(b, batchID)
	b = binary.AppendUvarint(b, uint64(index))
	b = binary.AppendUvarint(b, first)
	b = binary.AppendUvarint(b, uint64(len(items)))
	for _, it := range items {
		b = appendStr(b, it.provisional)
		b = appendStr(b, it.id)
	}
	return b
}

// chunk is a decoded batch chunk.
type chunk struct {
	token []byte
	batch uint64
	index uint64
	first uint64
	items []item
}

func decodeChunk(p []byte) (chunk, error) {
	r := reader{b: p}
	r.version()
	c := chunk{token: []byte(r.str())}
	c.batch = r.uvarint()
	c.index = r.uvarint()
	c.first = r.uvarint()
	n := r.uvarint()
	if r.err == nil && n > uint64(len(p)) {
		r.fail("item count")
	}
	if r.err == nil {
		c.items = make([]item, 0, n)
		for range n {
			it := item{provisional: r.str(), id: r.str()}
			if r.err != nil {
				break
			}
			c.items = append(c.items, it)
		}
	}
	return c, r.end()
}

func encodePending(id string) []byte {
	return appendStr([]byte{formatVersion}, id)
}

func decodePending(p []byte) (string, error) {
	r := reader{b: p}
	r.version()
	id := r.str()
	return id, r.end()
}

func (a assignment) encode() []byte {
	b := []byte{formatVersion}
	b = binary.AppendUvarint(b, a.number)
	b = appendBool(b, a.voided)
	b = binary.AppendUvarint(b, a.batch)
	b = appendStr(b, a.provisional)
	return appendStr(b, a.formatted)
}

func decodeAssignment(p []byte) (assignment, error) {
	r := reader{b: p}
	r.version()
	var a assignment
	a.number = r.uvarint()
	a.voided = r.bool()
	a.batch = r.uvarint()
	a.provisional = r.str()
	a.formatted = r.str()
	return a, r.end()
}

// reader decodes the encodings above; the first failure sticks and makes
// every later read return zero.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", ErrCorrupt, why, r.off)
	}
}

func (r *reader) version() {
	if v := r.byte(); r.err == nil && v != formatVersion {
		r.fail("unknown version " + strconv.Itoa(int(v)))
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("truncated")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad flag")
	return false
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.off += n
	return v
}

func (r *reader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail("truncated")
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}

// end reports the first failure, or trailing bytes.
func (r *reader) end() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("trailing bytes")
	}
	return r.err
}
