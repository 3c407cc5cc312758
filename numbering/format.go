package numbering

import (
	"bytes"
	"fmt"

	"github.com/noydb-go/noydb/internal/codec"
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
// encodings (internal/codec) of minimal uvarints and length-prefixed byte strings:
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

// maxStr bounds every string of the layouts above when decoding: ids,
// names, fields, formats and tokens are all far shorter.
const maxStr = 64 << 10

func (h *head) encode() []byte {
	b := []byte{formatVersion}
	b = codec.AppendUvarint(b, h.last)
	b = codec.AppendUvarint(b, h.batches)
	b = codec.AppendString(b, h.collection)
	b = codec.AppendBool(b, h.batch != nil)
	if x := h.batch; x != nil {
		b = codec.AppendBytes(b, x.token)
		for _, v := range []uint64{x.id, x.first, x.last, x.chunks, x.done, x.mark} {
			b = codec.AppendUvarint(b, v)
		}
		b = codec.AppendString(b, x.collection)
		b = codec.AppendString(b, x.field)
		b = codec.AppendString(b, x.format)
	}
	return b
}

func decodeHead(p []byte) (head, error) {
	r := codec.NewReader(p)
	r.Version(formatVersion)
	var h head
	h.last = r.Uvarint()
	h.batches = r.Uvarint()
	h.collection = r.String(maxStr)
	if r.Bool() {
		x := &batch{token: bytes.Clone(r.Bytes(maxStr))}
		for _, v := range []*uint64{&x.id, &x.first, &x.last, &x.chunks, &x.done, &x.mark} {
			*v = r.Uvarint()
		}
		x.collection = r.String(maxStr)
		x.field = r.String(maxStr)
		x.format = r.String(maxStr)
		if r.Err() == nil && (x.first == 0 || x.first > x.last || x.last > h.last || x.done < x.first-1 ||
			x.done > x.last || x.id == 0 || x.id > h.batches || x.chunks == 0) {
			r.Fail("inconsistent batch")
		}
		h.batch = x
	}
	return h, wrapCorrupt(r.End())
}

func encodeChunk(token []byte, batchID uint64, index int, first uint64, items []item) []byte {
	n := 1 + 5*codec.MaxVarintLen + len(token)
	for _, it := range items {
		n += 2*codec.MaxVarintLen + len(it.provisional) + len(it.id)
	}
	b := make([]byte, 0, n)
	b = append(b, formatVersion)
	b = codec.AppendBytes(b, token)
	b = codec.AppendUvarint(b, batchID)
	b = codec.AppendUvarint(b, uint64(index))
	b = codec.AppendUvarint(b, first)
	b = codec.AppendUvarint(b, uint64(len(items)))
	for _, it := range items {
		b = codec.AppendString(b, it.provisional)
		b = codec.AppendString(b, it.id)
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
	r := codec.NewReader(p)
	r.Version(formatVersion)
	c := chunk{token: bytes.Clone(r.Bytes(maxStr))}
	c.batch = r.Uvarint()
	c.index = r.Uvarint()
	c.first = r.Uvarint()
	// An item is two strings of at least a length byte each.
	if n := r.Count(chunkBytes, 2); r.Err() == nil {
		c.items = make([]item, 0, n)
		for range n {
			it := item{provisional: r.String(maxStr), id: r.String(maxStr)}
			if r.Err() != nil {
				break
			}
			c.items = append(c.items, it)
		}
	}
	return c, wrapCorrupt(r.End())
}

func encodePending(id string) []byte {
	return codec.AppendString([]byte{formatVersion}, id)
}

func decodePending(p []byte) (string, error) {
	r := codec.NewReader(p)
	r.Version(formatVersion)
	id := r.String(maxStr)
	return id, wrapCorrupt(r.End())
}

func (a assignment) encode() []byte {
	b := []byte{formatVersion}
	b = codec.AppendUvarint(b, a.number)
	b = codec.AppendBool(b, a.voided)
	b = codec.AppendUvarint(b, a.batch)
	b = codec.AppendString(b, a.provisional)
	return codec.AppendString(b, a.formatted)
}

func decodeAssignment(p []byte) (assignment, error) {
	r := codec.NewReader(p)
	r.Version(formatVersion)
	var a assignment
	a.number = r.Uvarint()
	a.voided = r.Bool()
	a.batch = r.Uvarint()
	a.provisional = r.String(maxStr)
	a.formatted = r.String(maxStr)
	return a, wrapCorrupt(r.End())
}

// wrapCorrupt returns err (a *codec.Error, matching ErrCorrupt) or nil.
func wrapCorrupt(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("numbering record: %w", err)
}
