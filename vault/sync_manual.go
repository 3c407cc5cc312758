package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// ErrNoConflict: Resolve or ConflictSides named a record that has no
// conflict kept. It matches ErrNotFound.
var ErrNoConflict = fmt.Errorf("no sync conflict kept for this record: %w", ErrNotFound)

// MergeWith makes merge decide the sync conflicts of collection in v: it
// gets the device's and the hub's values and returns the record's value,
// written on this device above both sides' revisions and pushed. When a
// side is a deletion, the conflict is decided as by HigherRevisionWins;
// when merge fails (or panics), it is kept as under Manual. merge may run during any Sync of v; it should only compute. A
// nil merge or an invalid collection name gives an error (ErrInvalidArgument,
// or the name's) and changes nothing. SetConflictPolicy on the collection
// replaces it.
func MergeWith[T any](v *Vault, collection string, merge func(local, hub T) (T, error)) error {
	if err := CheckCollectionName(collection); err != nil {
		return fmt.Errorf("merge with: %w", err)
	}
	if merge == nil {
		return fmt.Errorf("merge with %s: nil merge function: %w", collection, ErrInvalidArgument)
	}
	f := func(local, hub []byte) ([]byte, error) {
		var l, h T
		if err := json.Unmarshal(local, &l); err != nil {
			return nil, fmt.Errorf("decode the device's value: %w", err)
		}
		if err := json.Unmarshal(hub, &h); err != nil {
			return nil, fmt.Errorf("decode the hub's value: %w", err)
		}
		m, err := callMerge(merge, l, h)
		if err != nil {
			return nil, err
		}
		return json.Marshal(m)
	}
	v.syncs.mu.Lock()
	defer v.syncs.mu.Unlock()
	if v.syncs.merges == nil {
		v.syncs.merges = map[string]mergeFunc{}
	}
	v.syncs.merges[collection] = f
	return nil
}

// callMerge runs merge, a panic in it being a failure to merge (the
// conflict is kept): it runs inside a sync, maybe a background one, where
// a panic would take the application down.
func callMerge[T any](merge func(local, hub T) (T, error), l, h T) (m T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("merge function panicked: %v", r)
		}
	}()
	return merge(l, h)
}

// keptConflict is the hub's side of a conflict kept for the application.
//
// Stored in two values, so that no sealed value holds another:
//
//	prefix + "_sync/conflict/" + coll/id   sealed: 2 || uvarint feed seq || uvarint rev || lp(cipher hash of the hub's side; empty: deleted)
//	lostKey(coll, id, feed seq)            the hub's sealed record, as the hub holds it (absent for a deletion)
//
// The hub's side is kept where a policy keeps the side it made lose
// (sync_stored.go: one place and one check for every side a conflict set
// aside), read back by readLost. The sealed record opens on its own (it is
// bound to its vault, collection, id and revision) and the cipher hash in
// the first value says which revision it must be. Version 1 (written
// before) held the sealed record inside the first value, sealed again: a
// record near the store's value limit did not fit, and the sync that kept
// it failed for good. It is still read.
type keptConflict struct {
	seq    uint64 // the hub feed position of the hub's side
	rev    uint64 // its revision (of the deleted record, for a deletion)
	hash   []byte // the cipher hash of its sealed record; nil for a deletion
	sealed []byte // its sealed record; nil for a deletion (and until read, see loadKept)
	legacy bool   // decoded from version 1
}

// keptVersion2 is the layout of a kept conflict whose hub side is stored
// apart (see keptConflict).
const keptVersion2 = 2

func (v *Vault) conflictKey(coll, id string) string {
	return v.prefix + syncConfDir + coll + "/" + id
}

func encodeKept(c keptConflict) []byte {
	b := []byte{keptVersion2}
	b = codec.AppendUvarint(b, c.seq)
	b = codec.AppendUvarint(b, c.rev)
	return codec.AppendBytes(b, c.hash)
}

// maxKeptRecord bounds the sealed record of a kept conflict of version 1
// when decoding.
const maxKeptRecord = 1 << 30

func decodeKept(plain []byte) (keptConflict, error) {
	r := codec.NewReader(plain)
	version := r.Byte()
	if r.Err() == nil && version != syncVersion && version != keptVersion2 {
		r.Failf("unknown version %d", version)
	}
	c := keptConflict{seq: r.Uvarint(), rev: r.Uvarint()}
	switch version {
	case syncVersion:
		c.legacy = true
		if b := r.Bytes(maxKeptRecord); len(b) > 0 {
			c.sealed = append([]byte(nil), b...)
			c.hash = cipherHash(c.sealed)
		}
	case keptVersion2:
		if h := r.Bytes(maxSyncHash); len(h) > 0 {
			c.hash = append([]byte(nil), h...)
		}
	}
	if err := r.End(); err != nil {
		return keptConflict{}, err
	}
	return c, nil
}

// putKept writes the kept conflict c of k in tx (a conflict kept before
// for k is dropped first, dropKept).
func (v *Vault) putKept(tx stores.Tx, k recKey, c keptConflict) error {
	c.hash = nil
	if c.sealed != nil {
		c.hash = cipherHash(c.sealed)
		if err := v.keepLost(tx, k.coll, k.id, c.seq, c.sealed); err != nil {
			return err
		}
	}
	return v.putSealedValue(tx, v.conflictKey(k.coll, k.id), encodeKept(c))
}

// dropKept deletes the conflict kept for k in tx, if any, with the hub's
// side it kept apart.
func (v *Vault) dropKept(tx stores.Tx, k recKey) error {
	ck := v.conflictKey(k.coll, k.id)
	it, err := tx.Get(ck)
	if errors.Is(err, stores.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	kc, err := v.openKept(ck, it.Value)
	if err != nil {
		return fmt.Errorf("the kept conflict of %s/%s: %w", k.coll, k.id, err)
	}
	if !kc.legacy && kc.hash != nil {
		if err := tx.Delete(v.lostKey(k.coll, k.id, kc.seq)); err != nil {
			return err
		}
	}
	return tx.Delete(ck)
}

// loadKept completes kc, opened from the conflict kept for k, with the
// hub's side read by get (version 2 keeps it apart), checked against the
// cipher hash kc names: another value there (another revision of the
// record, or none) is ErrTampered.
func (v *Vault) loadKept(k recKey, kc keptConflict, get func(key string) (stores.Item, error)) (keptConflict, error) {
	if kc.hash == nil || kc.sealed != nil {
		return kc, nil
	}
	sealed, err := v.readLost(get, k.coll, k.id, kc.seq, kc.hash)
	if errors.Is(err, stores.ErrNotFound) {
		return keptConflict{}, fmt.Errorf("the hub's side of the kept conflict is missing: %w", ErrTampered)
	}
	if err != nil {
		return keptConflict{}, fmt.Errorf("the hub's side of the kept conflict: %w", err)
	}
	kc.sealed = sealed
	return kc, nil
}

// keepOrMerge settles a conflict under Manual or Merge: a merge when it
// can, else the hub's side kept beside the device's record.
func (s *syncRun) keepOrMerge(ctx context.Context, tx stores.Tx, pol SyncPolicy, k recKey, c *SyncConflict, dv version, dst stored, hv version, e ledger.Entry) (int, *SyncConflict, []ledger.Entry, error) {
	if pol == Merge {
		merged, hubMarks, err := s.merge(k, dst, hv)
		if err == nil {
			marks, body, _, err := s.v.keepNumbers(dst.marks, merged, hubMarks)
			if err != nil {
				return 0, nil, nil, err
			}
			sealed, rev, err := s.v.sealNext(k.coll, k.id, joinRecord(marks, body), max(dv.rev, hv.rev))
			if err != nil {
				return 0, nil, nil, err
			}
			if err := s.v.dropLocalHandoffs(tx, k.id, dst.marks, marks); err != nil {
				return 0, nil, nil, err
			}
			if err := s.v.putSealedTx(ctx, tx, k.coll, k.id, sealed, rev, cipherHash(sealed), ledger.Entry{Kind: ledger.RecordPut}); err != nil {
				return 0, nil, nil, err
			}
			c.Merged = true
			return 0, c, []ledger.Entry{
				{Kind: ledger.SyncConflict, Collection: k.coll, ID: k.id, Revision: c.DeviceRevision, CipherHash: dv.hash, Reason: "merge: device merged", Number: e.Seq},
				{Kind: ledger.SyncConflict, Collection: k.coll, ID: k.id, Revision: hv.rev, CipherHash: hv.hash, Reason: "merge: hub merged", Number: e.Seq},
			}, nil
		} else if errors.Is(err, ErrClosed) {
			return 0, nil, nil, err
		} else {
			s.rejected = append(s.rejected, SyncRejected{Collection: k.coll, ID: k.id, Reason: "merge failed, conflict kept: " + err.Error()})
		}
	}
	kept := keptConflict{seq: e.Seq, rev: hv.rev, sealed: hv.sealed}
	if err := s.v.putKept(tx, k, kept); err != nil {
		return 0, nil, nil, err
	}
	c.Kept = true
	return 0, c, []ledger.Entry{{Kind: ledger.SyncConflict, Collection: k.coll, ID: k.id, Revision: hv.rev,
		CipherHash: hv.hash, Reason: pol.String() + ": kept", Number: e.Seq}}, nil
}

// merge runs the collection's merge function on both sides' JSON bodies,
// and returns the merged body with the marks of the hub's side.
func (s *syncRun) merge(k recKey, dst stored, hv version) ([]byte, []mark, error) {
	f := s.v.mergeOf(k.coll)
	if f == nil {
		return nil, nil, errors.New("no merge function")
	}
	hs, err := s.h.openStored(k.coll, k.id, stores.Item{Value: hv.sealed}, true)
	if err != nil {
		return nil, nil, err
	}
	out, err := f(dst.body, hs.body)
	return out, hs.marks, err
}

// PendingConflict is a sync conflict kept for the application: the device
// holds its own side of the record, and the hub's side waits beside it.
type PendingConflict struct {
	// Collection and ID name the record.
	Collection, ID string
	// HubRevision is the revision of the hub's side (for a deletion, the
	// revision it deleted), HubDeleted whether the hub deleted the record.
	HubRevision uint64
	HubDeleted  bool
}

// Conflicts lists the sync conflicts kept for the application (policy
// Manual, or a Merge that could not merge), in collection and id order.
// Resolve each with Collection.Resolve; until then the device keeps its
// side and does not push it.
func (v *Vault) Conflicts(ctx context.Context) ([]PendingConflict, error) {
	if err := v.enter(ctx); err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	defer v.exit()
	dir := v.prefix + syncConfDir
	var out []PendingConflict
	for it, err := range stores.ListUnder(ctx, v.store, dir) {
		if err != nil {
			return nil, fmt.Errorf("conflicts: %w", err)
		}
		coll, id, ok := strings.Cut(it.Key[len(dir):], "/")
		if !ok {
			return nil, fmt.Errorf("conflicts: %s: %w", it.Key, ErrTampered)
		}
		kc, err := v.openKept(it.Key, it.Value)
		if err != nil {
			return nil, fmt.Errorf("conflicts: %s/%s: %w", coll, id, err)
		}
		out = append(out, PendingConflict{Collection: coll, ID: id, HubRevision: kc.rev, HubDeleted: kc.hash == nil})
	}
	return out, nil
}

// keptSideKeys returns, by record, the keys of the hub's sides that the
// conflicts kept on v's store hold apart (see dropKept), read outside any
// transaction: a commit that may drop such a conflict names them with its
// other keys, so that it locks them in key order (see lockKeys) instead of
// after the records. A conflict read here that changes before the commit
// only makes that commit lock one key late.
func (v *Vault) keptSideKeys(ctx context.Context) (map[recKey]string, error) {
	dir := v.prefix + syncConfDir
	var out map[recKey]string
	for it, err := range stores.ListUnder(ctx, v.store, dir) {
		if err != nil {
			return nil, err
		}
		coll, id, ok := strings.Cut(it.Key[len(dir):], "/")
		if !ok {
			continue // the commit's own read says what is wrong
		}
		kc, err := v.openKept(it.Key, it.Value)
		if err != nil || kc.legacy || kc.hash == nil {
			continue
		}
		if out == nil {
			out = map[recKey]string{}
		}
		out[recKey{coll, id}] = v.lostKey(coll, id, kc.seq)
	}
	return out, nil
}

func (v *Vault) openKept(key string, sealed []byte) (keptConflict, error) {
	plain, err := v.seal.Open(key, sealed)
	if err != nil {
		return keptConflict{}, v.openFailed(err)
	}
	kc, err := decodeKept(plain)
	if err != nil {
		return keptConflict{}, ErrTampered
	}
	return kc, nil
}

// ConflictSides returns both sides of the sync conflict kept for the
// record at id: the device's and the hub's, nil for a side that deleted
// the record. A record without a kept conflict gives ErrNoConflict.
func (c *Collection[T]) ConflictSides(ctx context.Context, id string) (device, hub *Record[T], err error) {
	if err := c.begin(ctx, "conflict sides", id); err != nil {
		return nil, nil, err
	}
	defer c.v.exit()
	ck := c.v.conflictKey(c.name, id)
	it, err := c.v.store.Get(ctx, ck)
	if errors.Is(err, stores.ErrNotFound) {
		return nil, nil, fmt.Errorf("conflict sides %s/%s: %w", c.name, id, ErrNoConflict)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("conflict sides %s/%s: %w", c.name, id, err)
	}
	kc, err := c.v.openKept(ck, it.Value)
	if err == nil {
		kc, err = c.v.loadKept(recKey{c.name, id}, kc, func(key string) (stores.Item, error) { return c.v.store.Get(ctx, key) })
	}
	if err != nil {
		return nil, nil, fmt.Errorf("conflict sides %s/%s: %w", c.name, id, err)
	}
	if kc.sealed != nil {
		r, err := c.decode(id, kc.sealed)
		if err != nil {
			return nil, nil, fmt.Errorf("conflict sides %s/%s: hub: %w", c.name, id, err)
		}
		hub = &r
	}
	switch it, err := c.v.store.Get(ctx, c.v.recordKey(c.name, id)); {
	case err == nil:
		r, err := c.decode(id, it.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("conflict sides %s/%s: device: %w", c.name, id, err)
		}
		device = &r
	case !errors.Is(err, stores.ErrNotFound):
		return nil, nil, fmt.Errorf("conflict sides %s/%s: %w", c.name, id, err)
	}
	return device, hub, nil
}

// Resolve settles the sync conflict kept for the record at id: the record
// becomes value (nil: deleted), written on this device above both sides'
// revisions, and the next Sync pushes it. A record without a kept
// conflict gives ErrNoConflict and changes nothing.
func (c *Collection[T]) Resolve(ctx context.Context, id string, value *T) error {
	if err := c.begin(ctx, "resolve", id); err != nil {
		return err
	}
	defer c.v.exit()
	// Without transactions the commit is staged: the record is written
	// before its ledger entry, whose commit would refuse a revoked person
	// only after it (see mayWrite).
	if err := c.v.mayWrite(ctx); err != nil {
		return fmt.Errorf("resolve %s/%s: %w", c.name, id, err)
	}
	var plain []byte
	if value != nil {
		var err error
		if plain, err = json.Marshal(*value); err != nil {
			return fmt.Errorf("resolve %s/%s: encode: %w", c.name, id, err)
		}
	}
	v := c.v
	ck := v.conflictKey(c.name, id)
	// The record's keys include currentGenKey, which its write reads, and
	// the hub's side the conflict keeps apart, which its drop deletes:
	// locked with the others, in key order (see lockKeys).
	lock := append(v.recordKeys(c.name, id), ck)
	if it, err := v.store.Get(ctx, ck); err == nil {
		if kc, err := v.openKept(ck, it.Value); err == nil && !kc.legacy && kc.hash != nil {
			lock = append(lock, v.lostKey(c.name, id, kc.seq))
		}
	}
	err := v.localCommit(ctx, lock, func(tx stores.Tx) error {
		it, err := tx.Get(ck)
		if errors.Is(err, stores.ErrNotFound) {
			return ErrNoConflict
		}
		if err != nil {
			return err
		}
		kc, err := v.openKept(ck, it.Value)
		if err != nil {
			return err
		}
		if kc, err = v.loadKept(recKey{c.name, id}, kc, tx.Get); err != nil {
			return err
		}
		prev, err := v.readTx(tx, c.name, id, true)
		if err != nil {
			return err
		}
		if err := v.dropKept(tx, recKey{c.name, id}); err != nil {
			return err
		}
		top := max(prev.rev, kc.rev)
		if plain == nil {
			// Deleted here (if it is), and a deletion entry that the next
			// push carries to the hub in any case.
			if err := tx.Delete(v.recordKey(c.name, id)); err != nil {
				return err
			}
			return v.appendTx(ctx, tx, ledger.Entry{Kind: ledger.RecordDelete, Collection: c.name, ID: id, Revision: top})
		}
		marks, body := prev.marks, plain
		if kc.sealed != nil {
			// The hub's side may carry a number taken there: it stays.
			hs, err := v.openStoredTx(v.keyTx(tx), c.name, id, stores.Item{Value: kc.sealed}, true)
			if err != nil {
				return err
			}
			if marks, body, _, err = v.keepNumbers(prev.marks, plain, hs.marks); err != nil {
				return err
			}
		}
		sealed, rev, err := v.sealNextTx(tx, c.name, id, joinRecord(marks, body), top)
		if err != nil {
			return err
		}
		return v.putSealedTx(ctx, tx, c.name, id, sealed, rev, cipherHash(sealed), ledger.Entry{Kind: ledger.RecordPut})
	})
	if err != nil {
		return fmt.Errorf("resolve %s/%s: %w", c.name, id, err)
	}
	return nil
}
