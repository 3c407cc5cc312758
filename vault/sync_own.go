package vault

import (
	"context"

	"github.com/noydb-go/noydb/ledger"
)

// A push whose outcome this device does not know.
//
// A push commits its records on the hub, then acknowledges them on the
// device (their bases, the push cursor) in a local commit of its own. A
// hub commit whose reply is lost (a timeout, a dropped connection, a
// crash between the two commits) leaves the device without that
// acknowledgement: its bases still name what the hub held before the
// push. The device's next pull then meets its own push in the hub's feed.
// Taken for another device's change, it was decided against whatever the
// device changed since, with the old base: a conflict the later change
// could lose (a deletion, which counts the revision after the base, ties
// with the pushed revision and loses the tie), or, for a record the device
// created and had never synced, no conflict at all: the record matched its
// missing base, so the pushed revision applied as the hub's change, and a
// deletion made since was undone without a word.
//
// So a pull recognises the device's own pushes among the feed entries it
// applies: an entry by the device's person whose record is one the device
// sealed itself, in a change after its push cursor (a change it has not
// acknowledged). Such an entry is what the device last synced: the
// record's base moves to it before the entries after it are decided, and
// a change the device made since stands and is pushed, as after an
// acknowledged push. Cipher hashes are of random-nonce ciphertexts, so a
// record sealed by this device is one it wrote; the entry itself is MAC'd
// and chained, so a hub cannot make one up.
//
// A deletion carries no ciphertext: nothing tells the device's own from
// another device's of the same person and revision. It matters only when
// the device wrote the record again after deleting it (a device that
// still holds the deletion matches the hub's), so a deletion by the
// device's person is taken for its own push when the device deleted the
// record after its push cursor, of the revision its base names (a push
// deletes the base's revision), and the record it holds now is one it
// wrote itself after that deletion. Were the deletion another device's,
// both deleted that revision, and the record this device wrote afterwards
// is a record written after both deletions.
//
// A rotation's re-seal of such a push (a new revision of the same
// content) is no change either. A push says so in the hub's feed, under
// the checked signature of its commit: its ledger.RecordPut entry has
// ResealedReason when the record it writes has the content sum of its
// sync base, the hub's record it replaces (pushBatch), however many
// revisions above it: a device that rotated twice before it pushed, or
// whose push re-sealed the record again with a generation it had just
// learnt (sync_reseal.go), pushes one revision two or more above the
// base. (The push used to copy the Reason of the record's last change in
// its ledger as it read it, and the reader took only a re-seal one
// revision above the push for one: both cases above counted as changes,
// the conflict went by revision, and the re-seal, higher, beat the
// device's later change: the pushed value came back on every device.)
// When the device changed the record since, it no longer holds the pushed
// content, so the base it moves to has no content sum to compare the
// hub's side with (sync_content.go): the entries say it instead, when
// every entry of the record after the push, up to the hub's revision, is
// such a re-seal among the entries the pull applies (resealedTo; any
// other entry, changed, is a change made since). When it only
// re-sealed it since (a rotation on the device after the push), its
// record holds the pushed content, as its own ledger says (sameContent),
// and the base takes that record's sum: a change on the hub since applies
// over the device's re-seal, as it would over the push. Without the sum,
// the device's re-seal counted as a change, and a deletion made on another
// device, which ties with it on revision, lost to it: the deleted record
// came back everywhere.
//
// The cost: when the entries a pull applies include some by the device's
// own person, one read of the device's ledger after its push cursor (the
// changes the push that follows reads), once per Sync.

// ownEntry is a record change in the device's own ledger: its record and
// position, and its content: the position of the change that wrote the
// content this one sealed (its own, or, for a re-seal, that of the change
// it re-sealed), among those ownChanges read.
type ownEntry struct {
	k       recKey
	seq     uint64
	content uint64
}

// readOwn takes in e, the next entry of the device's ledger after its
// push cursor (see ownChanges). A re-seal of the device's own continues
// the content of the record's change before it; any other change, its
// own or one a pull or a conflict wrote, starts a new one.
func (s *syncRun) readOwn(e ledger.Entry) {
	k := recKey{e.Collection, e.ID}
	switch {
	case isOwnRecordEntry(e):
		s.own[k] = true
		if e.Kind == ledger.RecordDelete {
			s.ownDels[k] = e.Seq
			s.ownContent[k] = e.Seq
			return
		}
		c := s.ownContent[k]
		if c == 0 || e.Kind != ledger.RecordPut || e.Reason != ResealedReason {
			c = e.Seq
		}
		s.ownContent[k] = c
		s.ownPuts[string(e.CipherHash)] = ownEntry{k, e.Seq, c}
	case e.Collection != "" || e.ID != "":
		delete(s.ownContent, k) // the record changed another way (pulled, a conflict): a content unknown
	}
}

// sameContent reports whether the device sealed both pushed (the cipher
// hash of a push of its own, recognised) and now (that of the record it
// holds) of record k, with one content: now is pushed, or re-seals of it
// and nothing else came between them (no change of its own, nothing a
// pull or a conflict wrote).
func (s *syncRun) sameContent(k recKey, pushed, now []byte) bool {
	p, ok := s.ownPuts[string(pushed)]
	if !ok || p.k != k {
		return false
	}
	d, ok := s.ownPuts[string(now)]
	return ok && d.k == k && d.content == p.content && d.seq >= p.seq
}

// ownPush is the state of a record that a push of this device may have
// left on the hub, as its feed entry names it.
type ownPush struct {
	base
	del bool // a deletion: see pushedBy
	// resealedTo is the revision up to which every entry of the record
	// after the push is a re-seal (see above): rev when none is. changed:
	// an entry of the record after the push is not (a change made since).
	resealedTo uint64
	changed    bool
}

// resealOf reports whether the hub's side hv of the record is the push o
// re-sealed and nothing more (see above).
func (o *ownPush) resealOf(hv version) bool {
	return o != nil && !o.del && !o.changed && hv.exists() && o.resealedTo > o.rev && hv.rev == o.resealedTo
}

// pushedBy reports whether o (nil: none), the last feed entry of record k
// among those a pull applies that ownPushes found to be a push of this
// device's own, is what the device last synced, given its sync base b and
// its record dv: always for a record it sealed; for a deletion, when it
// deleted the base's revision and then wrote dv itself (see above).
func (s *syncRun) pushedBy(k recKey, o *ownPush, b base, dv version) bool {
	if o == nil || !o.del {
		return o != nil
	}
	at, ok := s.ownPuts[string(dv.hash)]
	return o.rev == b.rev && dv.exists() && ok && at.k == k && at.seq > s.ownDels[k]
}

// ownPushes returns, for each record of win (the feed entries a pull
// applies), the last of them that may be a push of this device's own (see
// above), or nil when none may be.
func (s *syncRun) ownPushes(ctx context.Context, win []ledger.Entry) (map[recKey]*ownPush, error) {
	byUser := false
	for _, e := range win {
		if isRecordEntry(e) && e.Actor == s.v.user {
			byUser = true
			break
		}
	}
	if !byUser {
		return nil, nil
	}
	if err := s.ownChanges(ctx); err != nil {
		return nil, err
	}
	if len(s.ownPuts) == 0 && len(s.ownDels) == 0 {
		return nil, nil
	}
	var out map[recKey]*ownPush
	for _, e := range win {
		if !isRecordEntry(e) {
			continue
		}
		k := recKey{e.Collection, e.ID}
		var o *ownPush
		switch {
		case e.Actor != s.v.user:
		case e.Kind == ledger.RecordDelete:
			if _, ok := s.ownDels[k]; ok {
				o = &ownPush{base: base{rev: e.Revision}, del: true}
			}
		case len(e.CipherHash) > 0:
			if at, ok := s.ownPuts[string(e.CipherHash)]; ok && at.k == k {
				o = &ownPush{base: base{rev: e.Revision, hash: e.CipherHash}, resealedTo: e.Revision}
			}
		}
		if o != nil {
			if out == nil {
				out = map[recKey]*ownPush{}
			}
			out[k] = o
			continue
		}
		// A re-seal, by anyone, of the revision a push of the device's own
		// reached (or of a re-seal of it), as many revisions above it as
		// the rotations the re-sealing device made before it pushed; any
		// other entry is a change made since.
		switch p := out[k]; {
		case p == nil || p.del || p.changed:
		case e.Kind == ledger.RecordPut && e.Reason == ResealedReason && e.Revision > p.resealedTo:
			p.resealedTo = e.Revision
		default:
			p.changed = true
		}
	}
	return out, nil
}
