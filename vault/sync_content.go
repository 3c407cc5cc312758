package vault

import (
	"crypto/sha256"
)

// A record's sync base remembers, besides the hub's revision and cipher
// hash, a sum of the record's content as it was then: its metadata
// (write time and author), its numbers and its body, which a re-seal
// keeps as they are (rotate.go). A side of a conflict whose content sum
// is the base's changed nothing but its envelope: a rotation's re-seal
// (RotateKeys, a Revoke that rotates, ResumeRotation, or a push's re-seal
// of a record written before its device heard of a rotation). Such a side
// is no change to decide against: the other side's change applies, with
// no conflict, whatever the collection's policy. Decided by revision, the
// re-seal's new revision, at least as high as a change made concurrently
// on another device (higher when the vault rotated twice, or against a
// deletion, which counts one revision), used to win, and the
// acknowledged change was lost.
//
// The sum is sealed with the rest of the base on the device, never sent
// to the hub. A base written before it existed (layout version 1), or by
// a path that did not open the record (a staged commit finished after a
// crash, a record stamped on the hub), has none: its conflicts are
// decided by the policy alone, as before.

// syncBaseVersion2 is the layout of a base with a content sum:
// 2 || uvarint rev || lp(cipher hash) || lp(content sum).
const syncBaseVersion2 = 2

// contentSum is the sum of a record's content as opened: the SHA-256 of
// its plaintext as sealed (metadata header, marks, body). A re-seal of the
// record has the same sum; any write through the vault a different one
// (its write time is its own).
func contentSum(st stored) []byte {
	h := sha256.New()
	h.Write(appendMeta(make([]byte, 0, 32+len(st.meta.author)), st.meta, nil))
	if len(st.marks) > 0 {
		h.Write(joinRecord(st.marks, nil))
	}
	h.Write(st.body)
	return h.Sum(nil)
}

// onlyResealed reports whether st, one side of a record in a conflict, has
// the content of b, the record's sync base: a re-seal of it and nothing
// more. A base without a sum, or for a record the hub held none of, says
// nothing.
func onlyResealed(st stored, exists bool, b base) bool {
	if !exists || b.sum == nil || b.hash == nil {
		return false
	}
	s := contentSum(st)
	return string(s) == string(b.sum)
}
