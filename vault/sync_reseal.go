package vault

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// A device that wrote while it had not heard of a rotation (offline, or
// before its Sync brought the keyring entries of a limited grant) holds
// records sealed by an older generation. Pushed as they are, they would
// stay so on the hub: the rotation's re-seal finished long ago, and no one
// is asked to resume it; after a limited grant they would open with the
// keys the limited person holds. So a push first re-seals locally, with
// the latest generation the keyring step learnt, the records it is about
// to push that are sealed below it: a new revision of unchanged content
// with a ledger.RecordPut entry whose Reason is ResealedReason, as a
// rotation's re-seal writes, which it then pushes. The cost is a check of
// the envelope of each record pushed, and a re-seal of those found stale.

// Changes the person may no longer push.
//
// A handle opened before an owner narrowed its person's collections
// (SetCollections) writes into a collection taken from them until its
// device hears of it: its store still names the older generation, whose
// key of that collection the person holds. Once the Sync's keyring step
// has brought the narrowing, that record cannot be re-sealed (the person
// holds no key of its collection at the new generation), and pushed as it
// is it would be a write of theirs outside their collections, which the
// hub's Verify refuses. A deletion there, which seals nothing, is refused
// by Verify alike. So a push leaves out every change in a collection that
// the person's keyring entry, as the keyring step left it on the device,
// does not give them: the record stays on the device as written, and the
// change is reported in SyncReport.Rejected (noKeyReason) by this Sync and
// every later one while it is held. The push cursor moves past it as past
// any change pushed, in the same local commit that writes a held mark for
// it (syncHeldDir), so that it is not lost: each push first looks at the
// held marks, and pushes those of the collections the person is given
// again (re-sealed with the generation they then hold the key of), as any
// change, then drops their marks in the commit acknowledging them.
//
// A pull (a reader's too) likewise leaves alone the hub's records of
// those collections (sealed with the new generation, they would not
// open: the pull failed on them as if the hub had tampered with them),
// and the pull cursor records the narrowed set, so that they are pulled
// if the person is given the collection again (sync_added.go).
//
// A revoked person's device (a writer's or a reader's) syncs no more: its
// Sync fails with ErrNoAccess once the keyring step has brought the
// revocation, before it pulls or pushes anything.
//
// The cost per Sync: one read of the person's keyring entry, and per push
// round a listing of the held marks (usually none).

// syncHeldDir holds a mark, prefix + "_sync/held/" + coll/id, sealed
// (version byte 1), for each change left out of a push because its
// collection is not among the person's (see above).
const syncHeldDir = syncDir + "held/"

// heldKey is the store key of the held mark of k.
func (v *Vault) heldKey(k recKey) string {
	return v.prefix + syncHeldDir + k.coll + "/" + k.id
}

// noKeyReason is the SyncRejected.Reason of a change held back because
// its collection is no longer among the person's.
func noKeyReason(coll string, gen uint64) string {
	return fmt.Sprintf("collection %q is no longer among the person's (no key of it at generation %d): "+
		"the change is kept on this device, unpushed, until they are given the collection again", coll, gen)
}

// loadGiven reads the person's keyring entry on the device, as the
// keyring step left it, and sets s.given to the collections it gives
// them (nil: all). A revoked person gets ErrNoAccess, as does a handle
// opened before its person was revoked and granted again.
func (s *syncRun) loadGiven(ctx context.Context) error {
	s.given = nil
	it, err := s.v.store.Get(ctx, s.v.prefix+keyringPrefix+s.v.user)
	if err != nil {
		return err
	}
	if !isKeyringV2(it.Value) {
		return nil // a version 1 entry: an owner of all collections
	}
	e, err := s.v.readEntry(s.v.user, it.Value)
	if err != nil {
		return err
	}
	if e.revoked {
		return fmt.Errorf("user %q was revoked: %w", s.v.user, ErrNoAccess)
	}
	// Granted again since the handle opened: the entry is the new grant's,
	// and this handle signs with the old one's key. Refused here, before
	// the pull writes anything on the device (a store without
	// transactions stages a pull before the ledger's guard is asked).
	if m := s.v.signAs; m != nil && !m.holds(e.signPub) {
		return fmt.Errorf("user %q was revoked and granted again since this handle opened: %w", s.v.user, ErrNoAccess)
	}
	if len(e.collections) > 0 {
		cols := slices.Clone(e.collections)
		slices.Sort(cols)
		s.given = &cols
	}
	return nil
}

// mayUse reports whether the person's keyring entry, as the keyring step
// left it, gives them collection coll: whether this Sync may push their
// changes of it, and pull the hub's (a handle opened before a narrowing
// still names the collections taken away in its own list, and holds no key
// of their records sealed since).
func (s *syncRun) mayUse(coll string) bool {
	if s.given == nil {
		return true
	}
	_, ok := slices.BinarySearch(*s.given, coll)
	return ok
}

// refuse splits keys into those the person may push and those they may
// not, which it reports in Rejected (once per Sync).
func (s *syncRun) refuse(keys []recKey) (ok, refused []recKey) {
	for _, k := range keys {
		if s.mayUse(k.coll) {
			ok = append(ok, k)
			continue
		}
		refused = append(refused, k)
		if s.reported == nil {
			s.reported = map[recKey]bool{}
		}
		if !s.reported[k] {
			s.reported[k] = true
			cur, _ := s.v.keys.current()
			s.rep.Rejected = append(s.rep.Rejected, SyncRejected{Collection: k.coll, ID: k.id, Reason: noKeyReason(k.coll, cur), Held: true})
		}
	}
	return ok, refused
}

// loadHeld reads the held marks into s.held.
func (s *syncRun) loadHeld(ctx context.Context) error {
	dir := s.v.prefix + syncHeldDir
	s.held = map[recKey]bool{}
	for it, err := range stores.ListUnder(ctx, s.v.store, dir) {
		if err != nil {
			return err
		}
		coll, id, ok := strings.Cut(it.Key[len(dir):], "/")
		if !ok {
			return fmt.Errorf("held change %s: %w", it.Key, ErrTampered)
		}
		plain, err := s.v.seal.Open(it.Key, it.Value)
		if err != nil {
			return fmt.Errorf("held change %s/%s: %w", coll, id, s.v.openFailed(err))
		}
		if len(plain) != 1 || plain[0] != syncVersion {
			return fmt.Errorf("held change %s/%s: unknown layout: %w", coll, id, ErrTampered)
		}
		s.held[recKey{coll, id}] = true
	}
	return nil
}

// pushHeld pushes the held changes of the collections the person is given
// again (the others are reported in Rejected), without moving the push
// cursor, and returns those left behind because the hub's record moved.
func (s *syncRun) pushHeld(ctx context.Context) ([]recKey, error) {
	if err := s.loadHeld(ctx); err != nil {
		return nil, err
	}
	if len(s.held) == 0 {
		return nil, nil
	}
	keys := make([]recKey, 0, len(s.held))
	for k := range s.held {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b recKey) int {
		if c := strings.Compare(a.coll, b.coll); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	keys, _ = s.refuse(keys)
	if len(keys) == 0 {
		return nil, nil
	}
	from, err := s.loadPush(ctx)
	if err != nil {
		return nil, err
	}
	var stale []recKey
	for i := 0; i < len(keys); i += syncBatch {
		batch := keys[i:min(i+syncBatch, len(keys))]
		first := make(map[recKey]uint64, len(batch))
		for _, k := range batch {
			first[k] = from + 1 // the cursor stays where it is
		}
		st, err := s.pushBatch(ctx, batch, first, from, from)
		if err != nil {
			return nil, err
		}
		stale = append(stale, st...)
	}
	return stale, nil
}

// resealBeforePush re-seals those of the device's records got (sealed
// values by store key, as pushBatch fetched them for keys) sealed below
// the handle's current generation, and refreshes got with what it wrote.
func (s *syncRun) resealBeforePush(ctx context.Context, keys []recKey, got map[string][]byte) error {
	cur, _ := s.v.keys.current()
	if cur <= 1 {
		return nil
	}
	var stale []recKey
	var full []string
	for _, k := range keys {
		key := s.v.recordKey(k.coll, k.id)
		sealed, ok := got[key]
		if !ok {
			continue
		}
		if g, err := recordGeneration(sealed); err == nil && g < cur {
			stale = append(stale, k)
			full = append(full, key)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if isTransactor(s.v.store) {
		for i := 0; i < len(stale); i += resealBatch {
			n := min(len(stale), i+resealBatch)
			// A record that does not open is left as it is (done.bad):
			// pushBatch rejects it.
			if _, err := s.v.resealKeys(ctx, stale[i:n], cur); err != nil {
				return fmt.Errorf("re-seal before push: %w", err)
			}
		}
	} else {
		for _, k := range stale {
			if err := s.v.resealCAS(ctx, k, cur); err != nil {
				return fmt.Errorf("re-seal before push: %w", err)
			}
		}
	}
	again, err := fetch(ctx, s.v.store, full)
	if err != nil {
		return err
	}
	for _, key := range full {
		if sealed, ok := again[key]; ok {
			got[key] = sealed
		} else {
			delete(got, key) // deleted meanwhile
		}
	}
	return nil
}

// resealCAS re-seals record k with generation gen on a store without
// transactions: a compare-and-swap of the record, then its ledger entry
// (as every write there: a crash between leaves a record change the
// ledger does not show).
func (v *Vault) resealCAS(ctx context.Context, k recKey, gen uint64) error {
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	key := v.recordKey(k.coll, k.id)
	var e *ledger.Entry
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		e = nil
		it, err := v.store.Get(ctx, key)
		if errors.Is(err, stores.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if g, err := recordGeneration(it.Value); err == nil && g >= gen {
			return nil // written again meanwhile
		}
		plain, rev, err := v.openRecordTx(nil, k.coll, k.id, it.Value)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", k.coll, k.id, err)
		}
		if rev == math.MaxUint64 {
			clear(plain)
			return fmt.Errorf("%s/%s: %w", k.coll, k.id, ErrRevisionOverflow)
		}
		sealed, err := v.sealRecord(k.coll, k.id, plain, rev+1)
		clear(plain)
		if err != nil {
			return closedIfWiped(err)
		}
		if _, err := v.store.CompareAndSwap(ctx, key, it.Version, sealed); err != nil {
			return err
		}
		e = &ledger.Entry{Kind: ledger.RecordPut, Collection: k.coll, ID: k.id, Revision: rev + 1,
			CipherHash: cipherHash(sealed), Reason: ResealedReason}
		return nil
	})
	if err != nil || e == nil {
		return closedIfWiped(err)
	}
	_, err = v.ledger.Append(ctx, *e)
	return closedIfWiped(err)
}
