package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// A collection's sync policy can be stored with it, in its collection
// definition (collection_def.go), so that every sync of the vault, on
// every device, decides its conflicts the same way without each caller
// setting it again. SetConflictPolicy, for one vault handle, still comes
// first. And the side a policy made lose is kept, so that it stays
// readable (LostConflicts, Collection.LostValue).

// StoreConflictPolicy stores p as collection's sync policy in its
// collection definition: on this device's store and, on a device of a
// hub, on the hub, where every device's sync reads it. It takes effect at
// the next Sync of every vault handle that has not set the collection's
// policy with SetConflictPolicy (Merge needs a merge function there:
// stored, it decides as Manual wherever none is set). The person must be
// allowed to write the collection (else ErrNotPermitted); a bad name or
// policy gives ErrInvalidArgument. Storing the policy already stored
// writes nothing.
func (v *Vault) StoreConflictPolicy(ctx context.Context, collection string, p SyncPolicy) error {
	if err := CheckCollectionName(collection); err != nil {
		return fmt.Errorf("store conflict policy: %w", err)
	}
	if !p.valid() {
		return fmt.Errorf("store conflict policy %s: %v: %w", collection, p, ErrInvalidArgument)
	}
	if err := v.enter(ctx); err != nil {
		return fmt.Errorf("store conflict policy %s: %w", collection, err)
	}
	defer v.exit()
	if err := v.mayWrite(ctx); err != nil {
		return fmt.Errorf("store conflict policy %s: %w", collection, err)
	}
	if err := v.keys.permits(collection); err != nil {
		return fmt.Errorf("store conflict policy %s: %w", collection, err)
	}
	set := func(d *collectionDef) bool {
		if d.hasPolicy && d.policy == p {
			return false
		}
		d.policy, d.hasPolicy = p, true
		return true
	}
	if v.hub != nil {
		if _, err := v.hub.changeCollectionDef(ctx, collection, set); err != nil {
			return fmt.Errorf("store conflict policy %s: hub: %w", collection, err)
		}
	}
	if _, err := v.changeCollectionDef(ctx, collection, set); err != nil {
		return fmt.Errorf("store conflict policy %s: %w", collection, err)
	}
	return nil
}

// StoredConflictPolicies returns the sync policies stored with the
// vault's collections (StoreConflictPolicy), by collection, as this
// device's store holds them: it reads no hub, so it works offline.
func (v *Vault) StoredConflictPolicies(ctx context.Context) (map[string]SyncPolicy, error) {
	if err := v.enter(ctx); err != nil {
		return nil, fmt.Errorf("stored conflict policies: %w", err)
	}
	defer v.exit()
	out, err := v.storedPolicies(ctx)
	if err != nil {
		return nil, fmt.Errorf("stored conflict policies: %w", err)
	}
	return out, nil
}

// storedPolicies reads the policies stored in v's collection definitions.
func (v *Vault) storedPolicies(ctx context.Context) (map[string]SyncPolicy, error) {
	dir := v.prefix + collectionsDir
	out := map[string]SyncPolicy{}
	for it, err := range stores.ListUnder(ctx, v.store, dir) {
		if err != nil {
			return nil, err
		}
		coll := it.Key[len(dir):]
		if CheckCollectionName(coll) != nil {
			continue // no definition of ours
		}
		d, err := v.openCollectionDef(it.Key, it.Value)
		if err != nil {
			return nil, err
		}
		if d.hasPolicy {
			out[coll] = d.policy
		}
	}
	return out, nil
}

// loadStored reads, for a sync, the policies stored on the hub (every
// device's), and this device's where the hub has none; the hub's are
// copied to this device (but a reader's), so that it shows them offline.
func (s *syncRun) loadStored(ctx context.Context) error {
	own, err := s.v.storedPolicies(ctx)
	if err != nil {
		return err
	}
	hub, err := s.h.storedPolicies(ctx)
	if err != nil {
		return err
	}
	for c, p := range hub {
		if q, ok := own[c]; ok && q == p {
			continue
		}
		own[c] = p
		if _, err := s.v.changeCollectionDef(ctx, c, func(d *collectionDef) bool {
			if d.hasPolicy && d.policy == p {
				return false
			}
			d.policy, d.hasPolicy = p, true
			return true
		}); err != nil && !errors.Is(err, ErrNotPermitted) { // a reader's device keeps none
			return err
		}
	}
	s.stored = own
	return nil
}

// policyOf is the policy that decides a conflict of collection: the one
// SetConflictPolicy (or a merge function) set on the vault handle, else
// the stored one, else HigherRevisionWins. A stored Merge without a merge
// function keeps the conflict (Manual).
func (s *syncRun) policyOf(collection string) SyncPolicy {
	if p, ok := s.v.explicitPolicy(collection); ok {
		return p
	}
	p := s.stored[collection]
	if p == Merge && s.v.mergeOf(collection) == nil {
		return Manual
	}
	return p
}

// explicitPolicy is the policy set on v for collection, if any.
func (v *Vault) explicitPolicy(collection string) (SyncPolicy, bool) {
	v.syncs.mu.Lock()
	defer v.syncs.mu.Unlock()
	if _, ok := v.syncs.merges[collection]; ok {
		return Merge, true
	}
	p, ok := v.syncs.policies[collection]
	return p, ok
}

// lostDir holds the losing sides of the conflicts policies decided:
//
//	prefix + "_sync/lost/" + coll/id + "\x00" + 20-digit hub feed position
//
// each the losing record's sealed value as it was (a deletion that lost
// keeps nothing), read back authenticated against the cipher hash of the
// conflict's ledger entry.
const lostDir = "_sync/lost/"

func (v *Vault) lostKey(coll, id string, feed uint64) string {
	return fmt.Sprintf("%s%s%s/%s\x00%020d", v.prefix, lostDir, coll, id, feed)
}

// keepLost keeps, in tx, the losing side's sealed record of the conflict
// decided at hub feed position feed (nil: a deletion lost: nothing to keep).
func (v *Vault) keepLost(tx stores.Tx, coll, id string, feed uint64, sealed []byte) error {
	if sealed == nil {
		return nil
	}
	return tx.Put(v.lostKey(coll, id, feed), sealed)
}

// LostConflict is a sync conflict a policy decided on this device (not one
// kept for the application): which record, which side lost, and what the
// loser was.
type LostConflict struct {
	// Collection and ID name the record.
	Collection, ID string
	// Seq is the position of the conflict's entry in this device's ledger.
	Seq uint64
	// Policy names the policy that decided ("higher-revision-wins", …).
	Policy string
	// HubLost reports that the hub's side lost (else this device's did).
	HubLost bool
	// Revision is the losing side's revision.
	Revision uint64
	// Deleted reports that the losing side was a deletion: it has no value.
	Deleted bool

	feed uint64 // the hub feed position the conflict was decided at
	hash []byte // the losing side's cipher hash, from the ledger
}

// LostConflicts lists the sync conflicts a policy decided on this device,
// oldest first, from its ledger (which it reads whole). The losing value
// of each, unless it was a deletion, is kept: Collection.LostValue reads
// it. It reads no hub.
func (v *Vault) LostConflicts(ctx context.Context) ([]LostConflict, error) {
	if err := v.enter(ctx); err != nil {
		return nil, fmt.Errorf("lost conflicts: %w", err)
	}
	defer v.exit()
	var out []LostConflict
	for e, err := range v.ledger.Read(ctx, 1) {
		if err != nil {
			return nil, fmt.Errorf("lost conflicts: %w", err)
		}
		if e.Kind != ledger.SyncConflict {
			continue
		}
		pol, side, ok := strings.Cut(e.Reason, ": ")
		if !ok || (side != "device lost" && side != "hub lost") {
			continue
		}
		out = append(out, LostConflict{Collection: e.Collection, ID: e.ID, Seq: e.Seq, Policy: pol,
			HubLost: side == "hub lost", Revision: e.Revision, Deleted: len(e.CipherHash) == 0,
			feed: e.Number, hash: e.CipherHash})
	}
	return out, nil
}

// LostValue returns the losing side of lc, a conflict of c's collection
// that LostConflicts listed, as it was when it lost. A deletion, or a
// conflict decided before losing sides were kept, gives ErrNotFound; a
// value the store changed or swapped gives ErrTampered.
func (c *Collection[T]) LostValue(ctx context.Context, lc LostConflict) (Record[T], error) {
	if err := c.begin(ctx, "lost value", lc.ID); err != nil {
		return Record[T]{}, err
	}
	defer c.v.exit()
	if lc.Collection != c.name || lc.hash == nil {
		return Record[T]{}, fmt.Errorf("lost value %s/%s: %w", c.name, lc.ID, ErrNotFound)
	}
	it, err := c.v.store.Get(ctx, c.v.lostKey(c.name, lc.ID, lc.feed))
	if errors.Is(err, stores.ErrNotFound) {
		return Record[T]{}, fmt.Errorf("lost value %s/%s: %w", c.name, lc.ID, ErrNotFound)
	}
	if err != nil {
		return Record[T]{}, fmt.Errorf("lost value %s/%s: %w", c.name, lc.ID, err)
	}
	if !bytes.Equal(cipherHash(it.Value), lc.hash) {
		return Record[T]{}, fmt.Errorf("lost value %s/%s: not the value the ledger records: %w", c.name, lc.ID, ErrTampered)
	}
	r, err := c.decode(lc.ID, it.Value)
	if err != nil {
		return Record[T]{}, fmt.Errorf("lost value %s/%s: %w", c.name, lc.ID, err)
	}
	return r, nil
}
