package vault

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// Collections added to a limited person.
//
// A person limited to some collections pulls only theirs (pullWindow), and
// the pull cursor moves past the feed entries of the others. The cursor
// records the collections it was pulled with (layout version 2); when the
// person's collections grow (SetCollections, an owner's widening), pullAdded
// reads the feed again from its start up to the cursor and applies the
// records of the added collections only, then records the new set. The
// cursor itself does not move: the catch-up reads the same feed the device
// applied (its entry at the cursor must still hash as recorded, and the
// hub's ledger checks its chain and head pin as on any read), and the pull
// that follows goes on from where it was.
//
// A crash, or a record ahead of its entry (a hub commit in flight), leaves
// the cursor's set as it was: the next sync does the catch-up again, and
// what it applied already is applied again unchanged.

// pullAdded pulls the records, written before the pull cursor, of the
// collections the person was given since it was written, and sets s.with
// to the collections the cursor then records.
func (s *syncRun) pullAdded(ctx context.Context) error {
	lim := s.v.keys.limitedTo()
	now := pullCursor{known: true, limited: lim != nil, cols: slices.Clone(lim)}
	if now.limited { // as far as the keyring entry still gives them (sync_reseal.go)
		now.cols = slices.DeleteFunc(now.cols, func(c string) bool { return !s.mayUse(c) })
	}
	s.with = now
	cur, err := s.loadPull(ctx)
	if err != nil {
		return err
	}
	if !cur.known || !cur.limited || cur.seq == 0 {
		return nil // pulled with all collections (or, before version 2, with those of now), or nothing yet
	}
	before := cur.cols
	added := func(coll string) bool { return !slices.Contains(before, coll) }
	if now.limited && !slices.ContainsFunc(now.cols, added) {
		return nil // none added (a narrowed set is recorded by the next commit)
	}
	// Until the catch-up is done, the cursor keeps the old set.
	s.with = cur
	var todo []ledger.Entry
	sawCursor := false
	for e, err := range s.h.ledger.Read(ctx, 1) {
		if err != nil {
			return feedErr(err)
		}
		if e.Seq == cur.seq {
			if !bytes.Equal(entryHash(e), cur.hash) {
				return fmt.Errorf("%w: the feed entry at %d is not the one this device applied (a rolled back or forked hub)", ErrHubTampered, e.Seq)
			}
			sawCursor = true
		}
		if isRecordEntry(e) && added(e.Collection) && s.v.keys.permits(e.Collection) == nil && s.mayUse(e.Collection) {
			todo = append(todo, e)
		}
		if e.Seq >= cur.seq {
			break
		}
	}
	if !sawCursor {
		return fmt.Errorf("the hub's feed no longer holds entry %d: %w", cur.seq, ErrRollback)
	}
	hold := cur
	s.only, s.hold = added, &hold
	defer func() { s.only, s.hold = nil, nil }()
	for start := 0; start < len(todo); {
		end := min(start+syncBatch, len(todo))
		n, err := s.pullWindow(ctx, todo[start:end], todo[end:])
		if err != nil {
			return err
		}
		if n == 0 {
			return nil // a record ahead of its entry: the next sync catches up again
		}
		start += n
	}
	s.with = now
	s.only, s.hold = nil, nil
	// Record the new set now, even when no later entry moves the cursor.
	return s.v.localCommit(ctx, nil, func(tx stores.Tx) error {
		return s.v.putSealedValue(tx, syncPullKey, encodePull(s.pulledWith(cur)))
	})
}
