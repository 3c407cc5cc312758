package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// Sync on a device store without transactions (a file folder).
//
// A local commit of a sync (applying a window of the hub's feed, the
// acknowledgement of a push, a moved cursor, a resolved conflict) is one
// transaction where the device's store has them. On a store without, the
// commit's function runs against a staging Tx that reads through to the
// store and keeps its writes and ledger entries, which are then written
// in an order that makes every crash point safe:
//
//  1. the intent (prefix + "_sync/apply"), when the commit has ledger
//     entries: the device ledger's head position, the state each record
//     is about to reach (its cipher hash, or deleted) and the entries;
//     then the sides conflicts set aside (keepLost): a conflict's entry
//     says its side is kept, and the record it was read from is about to
//     change, so it is written before either (a crash before the entries
//     leaves it unnamed, and the window, applied again, keeps it again at
//     the same key, or names nothing there);
//  2. the records, each by compare-and-swap against the version the
//     function read (a local write meanwhile is ErrConflict: the commit
//     runs again);
//  3. the ledger entries, by Append (1024 at a time);
//  4. the sync state (bases, kept conflicts, handoffs) in the order
//     written;
//  5. the cursors (pull, push);
//  6. the intent removed.
//
// The handoff entries a commit drops (a pulled revision replaced a pending
// record, see dropLocalHandoffs) are named in the intent with their
// record: a crash after 2 leaves the record at its new state, which a
// second application of the window recognises without dropping anything,
// so recoverStaged drops the handoff entry of each record that reached its
// state (a record that did not keeps its entry: the window is applied
// again and decides again).
//
// Staged commits take turns (lockStaged: a vault mutex, and the store's
// named lock where it has one, so that processes sharing a folder take
// turns too), so one intent exists at a time.
//
// A crash before 3 leaves records the ledger does not show: the next
// Sync first finishes the intent (recoverStaged): each entry of a record
// that is at the state the intent names, and is not in the ledger after
// the intent's head position, is appended. Entries of a record that did
// not reach its state (not written, or written again locally since) are
// dropped: the window is applied again. A crash after 3 leaves the cursor
// behind: the window is applied again, and a record already at the hub's
// revision and cipher hash is recognised (no second entry; its base is
// written). A push whose hub commit succeeded but whose acknowledgement
// (bases, push cursor) was lost is recognised by the next push (the hub
// holds the device's cipher hash). A crash after 2 and before 4 leaves a
// pulled record (or deletion) without its sync base (none, or the one
// before): recoverStaged writes the base of each pulled record that
// reached its state (the hub revision and cipher hash of its entry), so
// that a local change made before the window is applied again (a
// deletion of the pulled record) is this device's change, not taken for
// no change and undone. If the hub changes the record again before the
// window is applied again, and no recovery ran, the record is taken as
// what this device last synced when it has no change of this device's
// own after the push cursor and no kept conflict (applyOne), so the hub's
// change (a deletion, a re-created record at a lower revision) still
// applies. The one repetition a crash
// can cause is a conflict's SyncConflict entry recorded twice, when a
// crash falls after the entries and before the record's base: the
// conflict is decided again, the same way. A record change is never recorded twice; it goes
// unrecorded only when a crash falls before 3 and the record is written
// again locally before the next Sync (the same gap as a local write on
// such a store, see write; Verify passes).
//
// Intent layout, sealed like the other sync state:
//
//	1 || uvarint head seq || count records: (lp key || lp cipher hash, empty: deleted)
//	  || count entries: lp(ledger.Entry binary encoding)
//
// or, when the commit drops handoff entries,
//
//	2 || the same || count drops (≥ 1): (lp handoff key || lp record key)
const (
	syncApplyKey  = syncDir + "apply"
	maxIntentKey  = 64 << 10
	maxIntentItem = 1 << 20
	stagedRetries = 8
)

// transactional reports whether the device's store has transactions.
func (v *Vault) transactional() bool { return isTransactor(v.store) }

// isTransactor reports whether st has transactions.
func isTransactor(st stores.Store) bool {
	_, ok := st.(stores.Transactor)
	return ok && st.Capabilities().Transactions
}

// localCommit runs fn as one local commit of a sync on the device's
// store: ledger.UpdateKeys (Update when keys is nil) on a store with
// transactions, else a staged commit.
func (v *Vault) localCommit(ctx context.Context, keys []string, fn func(tx stores.Tx) error) error {
	if v.transactional() {
		if keys == nil {
			return v.ledger.Update(ctx, fn)
		}
		return v.ledger.UpdateKeys(ctx, keys, fn)
	}
	unlock, err := v.lockStaged(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	for range stagedRetries {
		t := &stageTx{ctx: ctx, st: v.store, read: map[string]uint64{}, idx: map[string]int{}}
		if err = fn(t); err != nil {
			return err
		}
		if err = v.flushStaged(ctx, t); !errors.Is(err, stores.ErrConflict) {
			return err
		}
	}
	return err
}

// appendTx appends entries in tx: to the ledger in the transaction, or
// kept by a staging Tx for its flush.
func (v *Vault) appendTx(ctx context.Context, tx stores.Tx, entries ...ledger.Entry) error {
	if t, ok := tx.(*stageTx); ok {
		t.entries = append(t.entries, entries...)
		return nil
	}
	_, err := v.ledger.AppendTx(ctx, tx, entries...)
	return err
}

// stageTx is the Tx of a staged commit: reads go to its own writes, then
// to the store (noting the version read); writes are kept.
type stageTx struct {
	ctx     context.Context
	st      stores.Store
	read    map[string]uint64 // the version of each key first read (0: absent)
	ops     []stagedOp
	idx     map[string]int // key -> index in ops
	entries []ledger.Entry
}

type stagedOp struct {
	key   string
	value []byte // nil: delete
}

func (t *stageTx) Get(key string) (stores.Item, error) {
	if i, ok := t.idx[key]; ok {
		if t.ops[i].value == nil {
			return stores.Item{}, stores.ErrNotFound
		}
		return stores.Item{Key: key, Value: t.ops[i].value}, nil
	}
	it, err := t.st.Get(t.ctx, key)
	if _, seen := t.read[key]; !seen {
		switch {
		case err == nil:
			t.read[key] = it.Version
		case errors.Is(err, stores.ErrNotFound):
			t.read[key] = 0
		}
	}
	return it, err
}

func (t *stageTx) Put(key string, value []byte) error {
	t.set(key, bytes.Clone(value))
	return nil
}

func (t *stageTx) Delete(key string) error {
	t.set(key, nil)
	return nil
}

func (t *stageTx) set(key string, value []byte) {
	if i, ok := t.idx[key]; ok {
		t.ops[i].value = value
		return
	}
	t.idx[key] = len(t.ops)
	t.ops = append(t.ops, stagedOp{key: key, value: value})
}

// intent is what a staged commit with ledger entries is about to do.
type intent struct {
	head    uint64
	records []intentRecord
	entries []ledger.Entry
	drops   []intentDrop
}

// intentDrop is a handoff entry a staged commit deletes because of the
// new state of record.
type intentDrop struct {
	key, record string
}

type intentRecord struct {
	key  string
	hash []byte // nil: deleted
}

// intentWithDrops is the version byte of an intent that names handoff
// entries to drop.
const intentWithDrops = 2

func encodeIntent(in intent) ([]byte, error) {
	b := []byte{syncVersion}
	if len(in.drops) > 0 {
		b[0] = intentWithDrops
	}
	b = codec.AppendUvarint(b, in.head)
	b = codec.AppendUvarint(b, uint64(len(in.records)))
	for _, r := range in.records {
		b = codec.AppendString(b, r.key)
		b = codec.AppendBytes(b, r.hash)
	}
	b = codec.AppendUvarint(b, uint64(len(in.entries)))
	for _, e := range in.entries {
		eb, err := e.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = codec.AppendBytes(b, eb)
	}
	if len(in.drops) > 0 {
		b = codec.AppendUvarint(b, uint64(len(in.drops)))
		for _, d := range in.drops {
			b = codec.AppendString(b, d.key)
			b = codec.AppendString(b, d.record)
		}
	}
	return b, nil
}

func decodeIntent(plain []byte) (intent, error) {
	r := codec.NewReader(plain)
	version := r.Byte()
	if r.Err() == nil && version != syncVersion && version != intentWithDrops {
		r.Failf("unknown version %d", version)
	}
	in := intent{head: r.Uvarint()}
	n := r.Count(uint64(r.Len()), 2)
	for range n {
		rec := intentRecord{key: r.String(maxIntentKey)}
		if h := r.Bytes(maxSyncHash); len(h) > 0 {
			rec.hash = bytes.Clone(h)
		}
		in.records = append(in.records, rec)
	}
	n = r.Count(uint64(r.Len()), 1)
	for range n {
		eb := r.Bytes(maxIntentItem)
		if r.Err() != nil {
			break
		}
		var e ledger.Entry
		if err := e.UnmarshalBinary(eb); err != nil {
			r.Fail("entry: " + err.Error())
			break
		}
		in.entries = append(in.entries, e)
	}
	if version == intentWithDrops {
		n = r.Count(uint64(r.Len()), 2)
		if n == 0 && r.Err() == nil {
			r.Fail("no handoff drops") // version 1 has none
		}
		for range n {
			in.drops = append(in.drops, intentDrop{key: r.String(maxIntentKey), record: r.String(maxIntentKey)})
		}
	}
	if err := r.End(); err != nil {
		return intent{}, err
	}
	return in, nil
}

// flushStaged writes a staged commit in the order the file comment gives.
func (v *Vault) flushStaged(ctx context.Context, t *stageTx) error {
	cursors := map[string]bool{v.prefix + syncPullKey: true, v.prefix + syncPushKey: true}
	var kept, recs, rest, last []stagedOp
	for _, op := range t.ops {
		switch {
		case v.isRecordKey(op.key):
			recs = append(recs, op)
		case cursors[op.key]:
			last = append(last, op)
		case op.value != nil && strings.HasPrefix(op.key, v.prefix+lostDir):
			kept = append(kept, op)
		default:
			rest = append(rest, op)
		}
	}
	if len(t.entries) > 0 {
		head, err := v.ledger.Head(ctx)
		if err != nil {
			return err
		}
		in := intent{head: head.Seq, entries: t.entries, drops: v.handoffDrops(t.ops, recs)}
		for _, op := range recs {
			r := intentRecord{key: op.key}
			if op.value != nil {
				r.hash = cipherHash(op.value)
			}
			in.records = append(in.records, r)
		}
		plain, err := encodeIntent(in)
		if err != nil {
			return err
		}
		if err := v.putValue(ctx, syncApplyKey, plain); err != nil {
			return err
		}
	}
	for _, op := range kept {
		if _, err := v.store.Put(ctx, op.key, op.value); err != nil {
			return err
		}
	}
	for _, op := range recs {
		if err := t.writeRecord(ctx, op); err != nil {
			if errors.Is(err, stores.ErrConflict) {
				// A local write meanwhile: the records written so far get
				// their entries, and the commit runs again.
				if rerr := v.finishIntent(ctx); rerr != nil {
					return rerr
				}
			}
			return err
		}
	}
	for es := t.entries; len(es) > 0; {
		n := min(len(es), 1024)
		if _, err := v.ledger.Append(ctx, es[:n]...); err != nil {
			return err
		}
		es = es[n:]
	}
	for _, ops := range [][]stagedOp{rest, last} {
		for _, op := range ops {
			var err error
			if op.value == nil {
				err = v.store.Delete(ctx, op.key)
			} else {
				_, err = v.store.Put(ctx, op.key, op.value)
			}
			if err != nil {
				return err
			}
		}
	}
	if len(t.entries) > 0 {
		return v.store.Delete(ctx, v.prefix+syncApplyKey)
	}
	return nil
}

// handoffDrops returns the handoff entries ops deletes, each with the
// record of recs it belongs to (the one with the entry's id; an entry
// whose record is not among recs is left out).
func (v *Vault) handoffDrops(ops, recs []stagedOp) []intentDrop {
	var out []intentDrop
	for _, op := range ops {
		rest, ok := strings.CutPrefix(op.key, v.prefix+numberingDir)
		if !ok || op.value != nil {
			continue
		}
		// rest: series/pending/provisional/id
		_, rest, ok = strings.Cut(rest, "/"+numberingQueue)
		if !ok {
			continue
		}
		_, id, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		for _, r := range recs {
			_, rid, _ := strings.Cut(strings.TrimPrefix(r.key, v.prefix), "/")
			if rid == id {
				out = append(out, intentDrop{key: op.key, record: r.key})
				break
			}
		}
	}
	return out
}

// writeRecord writes a staged record op where the record is still at the
// version the commit read (ErrConflict if not).
func (t *stageTx) writeRecord(ctx context.Context, op stagedOp) error {
	ver, wasRead := t.read[op.key]
	if op.value != nil {
		if !wasRead {
			_, err := t.st.Put(ctx, op.key, op.value)
			return err
		}
		_, err := t.st.CompareAndSwap(ctx, op.key, ver, op.value)
		return err
	}
	if wasRead {
		// The store has no conditional delete: the version is checked
		// just before (a local write in between is the one race left;
		// the vault's writes and a sync of one process do not overlap on
		// a record's key for longer than that).
		it, err := t.st.Get(ctx, op.key)
		switch {
		case errors.Is(err, stores.ErrNotFound):
			if ver == 0 {
				return nil
			}
			return stores.ErrConflict
		case err != nil:
			return err
		case it.Version != ver:
			return stores.ErrConflict
		}
	}
	return t.st.Delete(ctx, op.key)
}

// isRecordKey reports whether key is a record's (a collection's key:
// collection names never start with '_', the SDK's own data does).
func (v *Vault) isRecordKey(key string) bool {
	rest, ok := strings.CutPrefix(key, v.prefix)
	return ok && rest != "" && rest[0] != '_'
}

// putValue seals plain at the vault key name and puts it in the store.
func (v *Vault) putValue(ctx context.Context, name string, plain []byte) error {
	key := v.prefix + name
	sealed, err := v.seal.Seal(key, plain)
	if err != nil {
		return err
	}
	_, err = v.store.Put(ctx, key, sealed)
	return err
}

// recoverStaged finishes the intent a staged commit left (a crash, or a
// conflict), if any: it appends the entries of the records that reached
// the state the intent names and are not in the ledger yet, then removes
// the intent. Nothing to do on a store with transactions.
func (v *Vault) recoverStaged(ctx context.Context) error {
	if v.transactional() {
		return nil
	}
	unlock, err := v.lockStaged(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return v.finishIntent(ctx)
}

// lockStaged takes the turn of a staged commit: one at a time in this
// vault, and, on a store with named locks (a file folder), among every
// process using the store.
func (v *Vault) lockStaged(ctx context.Context) (func(), error) {
	v.syncs.staged.Lock()
	l, ok := v.store.(stores.Locker)
	if !ok {
		return v.syncs.staged.Unlock, nil
	}
	unlock, err := l.Lock(ctx, v.prefix+syncApplyKey)
	if err != nil {
		v.syncs.staged.Unlock()
		return nil, err
	}
	return func() { unlock(); v.syncs.staged.Unlock() }, nil
}

// finishIntent is recoverStaged with the turn taken.
func (v *Vault) finishIntent(ctx context.Context) error {
	plain, err := v.getSealedValue(ctx, syncApplyKey)
	if err != nil || plain == nil {
		return err
	}
	in, err := decodeIntent(plain)
	if err != nil {
		return fmt.Errorf("sync intent: %w", ErrTampered)
	}
	reached := map[string]bool{}
	for _, r := range in.records {
		it, err := v.store.Get(ctx, r.key)
		switch {
		case errors.Is(err, stores.ErrNotFound):
			reached[r.key] = r.hash == nil
		case err != nil:
			return err
		default:
			reached[r.key] = r.hash != nil && bytes.Equal(cipherHash(it.Value), r.hash)
		}
	}
	// The entries already appended (the Append of a crashed commit).
	present := map[string]int{}
	for e, err := range v.ledger.Read(ctx, in.head+1) {
		if err != nil {
			return err
		}
		present[entryIdentity(e)]++
	}
	var due []ledger.Entry
	for _, e := range in.entries {
		if ok, named := reached[v.recordKey(e.Collection, e.ID)]; named && !ok {
			continue
		}
		if id := entryIdentity(e); present[id] > 0 {
			present[id]--
			continue
		}
		due = append(due, e)
	}
	for len(due) > 0 {
		n := min(len(due), 1024)
		if _, err := v.ledger.Append(ctx, due[:n]...); err != nil {
			return err
		}
		due = due[n:]
	}
	// The sync base of each pulled record that reached its state: a crash
	// between the records and the sync state left it behind (none, or the
	// one before). Without it a change this device makes before the window
	// is applied again (a deletion) would match the missing base and be
	// taken for no change at all (applyOne): the window would bring the
	// record back.
	for _, e := range in.entries {
		if e.Kind != ledger.RecordPulled && e.Kind != ledger.RecordPulledDelete {
			continue
		}
		if !reached[v.recordKey(e.Collection, e.ID)] {
			continue
		}
		b := base{rev: e.Revision}
		if e.Kind == ledger.RecordPulled {
			b.hash = e.CipherHash
		}
		if err := v.putValue(ctx, syncBaseDir+e.Collection+"/"+e.ID, encodeBase(b)); err != nil {
			return err
		}
	}
	for _, d := range in.drops {
		if !reached[d.record] || !strings.HasPrefix(d.key, v.prefix+numberingDir) {
			continue
		}
		if err := v.store.Delete(ctx, d.key); err != nil && !errors.Is(err, stores.ErrNotFound) {
			return err
		}
	}
	return v.store.Delete(ctx, v.prefix+syncApplyKey)
}

// entryIdentity is what names an entry a commit appends (its position,
// time and actor are the ledger's).
func entryIdentity(e ledger.Entry) string {
	b, _ := ledger.Entry{Kind: e.Kind, Collection: e.Collection, ID: e.ID, Revision: e.Revision,
		CipherHash: e.CipherHash, Series: e.Series, Partition: e.Partition, Number: e.Number,
		From: e.From, RequestID: e.RequestID, Reason: e.Reason}.MarshalBinary()
	return string(b)
}
