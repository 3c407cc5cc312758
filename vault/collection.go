package vault

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Collection is a named set of records of type T in a vault, encoded as JSON
// and sealed before they reach the store. It is safe for concurrent use.
type Collection[T any] struct {
	v    *Vault
	name string
	err  error // a bad name, reported by every call
	// denied: err is the refusal of a collection the person was not given
	// when the Collection was made, which each call asks again (see check).
	denied bool
}

// Record is one decrypted record of a collection with what the vault knows
// about it, as GetRecord, GetMany and List return it.
type Record[T any] struct {
	// ID is the record's id.
	ID string
	// Revision counts the writes of the record: 1 for its first, one more
	// for each write since. PutIf and DeleteIf take it as the revision the
	// caller read. It is sealed with the record, so the store cannot change
	// it, but it can serve an older revision in place of the current one,
	// or none (a replay or a deletion, which a read cannot tell from the
	// truth: the ledger then shows the revision written next twice), and a
	// record deleted and created again counts from 1 again.
	Revision uint64
	// Value is the decrypted record.
	Value T
	// Modified is when the revision was written, by the writer's clock,
	// in UTC. It is zero for a record written by a release that did not
	// record it.
	Modified time.Time
	// Author is the vault user that wrote the revision, empty for a record
	// written by a release that did not record it.
	Author string
}

// CollectionOf returns the collection name of v, holding records of type T.
// An invalid or reserved name is reported by every call on the collection,
// and so is a collection the vault's person may not use (ErrNotPermitted,
// see Grant). CollectionOf does no I/O.
//
// A person limited to other collections is refused by every call with
// ErrNotPermitted, before the store is written. A call (outside a Tx) on a
// collection the handle does not know as theirs first reads their keyring
// entry again, so that a collection an owner gave them since the handle
// opened (Grant, SetCollections) is usable at once, without reopening, as
// a narrowing is seen at the handle's next key load.
func CollectionOf[T any](v *Vault, name string) *Collection[T] {
	err := CheckCollectionName(name)
	denied := false
	if err == nil {
		err = v.keys.permits(name)
		denied = err != nil
	}
	return &Collection[T]{v: v, name: name, err: err, denied: denied}
}

// check returns c's error for a call that may read the store: its bad
// name, or, for a collection the person was not given when c was made,
// the refusal as it stands now (genKeys.permitsNow).
func (c *Collection[T]) check(ctx context.Context) error {
	if c.denied {
		return c.v.keys.permitsNow(ctx, c.name)
	}
	return c.err
}

// Name returns the collection's name.
func (c *Collection[T]) Name() string { return c.name }

// begin checks the call's name and id, then enters the vault (see
// Vault.enter): a call begun must call c.v.exit when it ends.
func (c *Collection[T]) begin(ctx context.Context, op, id string) error {
	if err := c.check(ctx); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if op != "list" && op != "count" {
		if err := checkIDFor(op, id); err != nil {
			return fmt.Errorf("%s %s: %w", op, c.name, err)
		}
	}
	if err := c.v.enter(ctx); err != nil {
		return fmt.Errorf("%s %s/%s: %w", op, c.name, id, err)
	}
	return nil
}

// Put stores value under id, replacing any earlier revision, and records the
// change in the ledger (atomically with the record on stores with transactions).
func (c *Collection[T]) Put(ctx context.Context, id string, value T) error {
	if err := c.begin(ctx, "put", id); err != nil {
		return err
	}
	defer c.v.exit()
	plain, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("put %s/%s: encode: %w", c.name, id, err)
	}
	if err := c.v.write(ctx, c.name, id, plain, ledger.Entry{Kind: ledger.RecordPut}); err != nil {
		return fmt.Errorf("put %s/%s: %w", c.name, id, err)
	}
	return nil
}

// Get returns the record at id, or an error wrapping ErrNotFound. A record the
// store changed or moved gives ErrTampered.
func (c *Collection[T]) Get(ctx context.Context, id string) (T, error) {
	var zero T
	if err := c.begin(ctx, "get", id); err != nil {
		return zero, err
	}
	defer c.v.exit()
	it, err := c.v.store.Get(ctx, c.v.recordKey(c.name, id))
	if err != nil {
		return zero, fmt.Errorf("get %s/%s: %w", c.name, id, err)
	}
	r, err := c.decode(id, it.Value)
	if err != nil {
		return zero, fmt.Errorf("get %s/%s: %w", c.name, id, err)
	}
	return r.Value, nil
}

func (c *Collection[T]) decode(id string, sealed []byte) (Record[T], error) {
	return c.decodeTx(nil, id, sealed)
}

// decodeTx is decode in tx, a transaction on the device's store (or nil),
// through which a key not held yet loads (see genKeys.get).
func (c *Collection[T]) decodeTx(tx stores.Tx, id string, sealed []byte) (Record[T], error) {
	rec, err := c.v.openStoredTx(tx, c.name, id, stores.Item{Value: sealed}, true)
	if err != nil {
		return Record[T]{}, err
	}
	r := Record[T]{ID: id, Revision: rec.rev, Modified: rec.meta.modified, Author: rec.meta.author}
	if err := json.Unmarshal(rec.body, &r.Value); err != nil {
		return Record[T]{}, fmt.Errorf("decode: %w", err)
	}
	return r, nil
}

// Delete removes the record at id and records it in the ledger. Deleting a
// missing record returns an error wrapping ErrNotFound.
func (c *Collection[T]) Delete(ctx context.Context, id string) error {
	if err := c.begin(ctx, "delete", id); err != nil {
		return err
	}
	defer c.v.exit()
	if err := c.v.write(ctx, c.name, id, nil, ledger.Entry{Kind: ledger.RecordDelete}); err != nil {
		return fmt.Errorf("delete %s/%s: %w", c.name, id, err)
	}
	return nil
}

// List yields every record of the collection in id order. An error (a
// tampered record, a store failure, a store that lists a key outside the
// collection: stores.ErrMisbehaving) is yielded once and ends the sequence.
func (c *Collection[T]) List(ctx context.Context) iter.Seq2[Record[T], error] {
	return func(yield func(Record[T], error) bool) {
		if err := c.begin(ctx, "list", ""); err != nil {
			yield(Record[T]{}, err)
			return
		}
		defer c.v.exit()
		prefix := c.v.recordKey(c.name, "")
		for it, err := range c.v.store.List(ctx, prefix) {
			if err != nil {
				yield(Record[T]{}, fmt.Errorf("list %s: %w", c.name, err))
				return
			}
			id := it.Key[len(prefix):]
			r, err := c.decode(id, it.Value)
			if err != nil {
				yield(Record[T]{}, fmt.Errorf("list %s: %s: %w", c.name, id, err))
				return
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}

// Count returns the number of records in the collection, without decrypting
// them. A store that lists a key outside the collection gives an error
// wrapping stores.ErrMisbehaving, not a count.
func (c *Collection[T]) Count(ctx context.Context) (int, error) {
	if err := c.begin(ctx, "count", ""); err != nil {
		return 0, err
	}
	defer c.v.exit()
	n := 0
	prefix := c.v.recordKey(c.name, "")
	for _, err := range c.v.store.List(ctx, prefix) {
		if err != nil {
			return 0, fmt.Errorf("count %s: %w", c.name, err)
		}
		n++
	}
	return n, nil
}

// PutNumbered takes the next number of seq and stores the record that build
// makes from it under id, in one atomic commit together with the counter and
// their ledger entries: if build or the write fails, no number is taken, so
// there is no gap in usage. build may run more than once when another writer
// wins a race; it should only compute. It needs a store with transactions
// (else stores.ErrNotSupported) and atomic compare-and-swap (else
// sequence.ErrOffline); seq must come from this collection's vault handle
// (Vault.Sequence of the same *Vault, not of a handle on the same vault
// opened by another DB), and a nil seq or build gives ErrInvalidArgument.
//
// On a series with periods (sequence.Options.Period) the number is taken
// in the period of the current date, or of the document's date when seq
// is a handle of Sequence.At: PutNumbered(ctx, id, seq.At(date), build).
//
// The record carries its number inside its sealed value, so PutNumbered is
// idempotent per record id and series: when the record at id already carries
// a number of seq (an earlier call committed, even if it reported an error,
// such as a timeout after the commit), PutNumbered takes no number, does not
// call build, and returns the stored record with a nil error. A record thus
// keeps the first number a series gave it: to change its content, use Put
// (which keeps the number); to give the id a new number, Delete the record
// first (its old number then shows as orphaned in seq.Audit).
//
// On a device of a hub the record and its number commit on the hub, then
// the record is copied to the device (see ErrNotOnDevice); an unreachable
// hub gives sequence.ErrOffline, taking nothing.
func (c *Collection[T]) PutNumbered(ctx context.Context, id string, seq *sequence.Sequence, build func(sequence.Serial) (T, error)) (T, error) {
	var out T
	if err := c.begin(ctx, "put numbered", id); err != nil {
		return out, err
	}
	defer c.v.exit()
	if c.v.hub != nil {
		return putNumberedOnHub(ctx, c, id, seq, build) // hub_numbered.go
	}
	switch {
	case seq == nil:
		return out, fmt.Errorf("put numbered %s/%s: nil sequence: %w", c.name, id, ErrInvalidArgument)
	case build == nil:
		return out, fmt.Errorf("put numbered %s/%s: nil build function: %w", c.name, id, ErrInvalidArgument)
	case !c.v.owns(seq):
		return out, fmt.Errorf("put numbered %s/%s: series %q belongs to another vault or vault handle: %w", c.name, id, seq.Series(), ErrInvalidArgument)
	}
	// An owner's first numbered record of the series here binds it, in
	// this commit: the definition is locked with the others (withBindKey).
	keys := c.v.withBindKey(c.v.recordKeys(c.name, id), c.name, seq.Series())
	_, err := seq.BindKeys(ctx, keys, func(tx stores.Tx, s sequence.Serial) error {
		prev, err := c.v.readTx(tx, c.name, id, true)
		if err != nil {
			return err
		}
		// The counter's partition: a series with periods counts each
		// period under the partition followed by its label.
		partition := seq.Partition()
		if s.Period != "" {
			partition = append(partition, s.Period)
		}
		if n, ok := findMark(prev.marks, markSequence, seq.Series(), partition); ok {
			return &carriesError{n: n, body: prev.body}
		}
		val, err := build(s)
		if err != nil {
			return err
		}
		plain, err := json.Marshal(val)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		marks := withMark(prev.marks, mark{kind: markSequence, series: seq.Series(), partition: partition, n: s.N})
		e := ledger.Entry{Kind: ledger.RecordPut, Series: seq.Series(), Partition: partition, Number: s.N}
		if err := c.v.applyTx(ctx, tx, c.name, id, prev, joinRecord(marks, plain), e); err != nil {
			return err
		}
		out = val
		return nil
	})
	var carries *carriesError
	if errors.As(err, &carries) {
		// An earlier call numbered this record: return it as stored.
		if err := json.Unmarshal(carries.body, &out); err != nil {
			var zero T
			return zero, fmt.Errorf("put numbered %s/%s: decode: %w", c.name, id, err)
		}
		return out, nil
	}
	if errors.Is(err, ledger.ErrUnpinned) {
		// Committed, with its number, but the rollback pin covering it was
		// not saved: the record comes back with the error.
		return out, fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
	}
	return out, nil
}

// carriesError aborts a PutNumbered whose record already carries a number
// of the series; body is the stored record's JSON.
type carriesError struct {
	n    uint64
	body []byte
}

func (e *carriesError) Error() string {
	return fmt.Sprintf("record already carries number %d of the series", e.n)
}

func (v *Vault) recordKey(collection, id string) string {
	return v.prefix + collection + "/" + id
}

// write puts (plain != nil) or deletes (plain == nil) a record and appends its
// ledger entry: in one transaction where the store has them, otherwise record
// first and entry second (a crash between leaves a record change the ledger
// does not show; Verify still passes, and the next write is recorded).
//
// The record it replaces must open (else ErrTampered, and nothing is
// written): its revision, which the next one follows, and the numbers it
// carries, which the next one keeps, are taken from its authenticated
// content only.
func (v *Vault) write(ctx context.Context, collection, id string, plain []byte, e ledger.Entry) error {
	if _, ok := v.store.(stores.Transactor); ok {
		// Batched by the ledger: concurrent writers of this process share
		// commits instead of failing one another on the ledger head.
		// The first revision of a new record is sealed here, by the caller,
		// while other callers' writes commit: the batch then only stores it
		// (most writes of many callers at once are of new records). A record
		// that exists is sealed in the batch, after the one it follows.
		var first *sealedRecord
		if plain != nil {
			sealed, _, err := v.sealNext(collection, id, joinRecord(nil, plain), 0)
			if err != nil {
				return err
			}
			first = &sealedRecord{sealed: sealed, hash: cipherHash(sealed)}
		}
		return v.ledger.UpdateKeys(ctx, v.recordKeys(collection, id), func(tx stores.Tx) error {
			return v.writeTx(ctx, tx, collection, id, plain, first, e)
		})
	}
	if err := v.mayWrite(ctx); err != nil {
		return err
	}
	key := v.recordKey(collection, id)
	defer v.syncs.writing.begin(recKey{collection, id})() // sync_inflight.go
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		it, err := v.store.Get(ctx, key)
		found := err == nil
		if err != nil && !(errors.Is(err, stores.ErrNotFound) && plain != nil) {
			return err
		}
		e := e
		prev, err := v.openPrevious(nil, collection, id, it, found) // people_ledger.go
		if err != nil {
			return err
		}
		if plain == nil {
			if err := v.store.Delete(ctx, key); err != nil {
				return err
			}
			e.Revision = prev.rev
		} else {
			sealed, rev, err := v.sealNext(collection, id, joinRecord(prev.marks, plain), prev.rev)
			if err != nil {
				return err
			}
			if _, err := v.store.CompareAndSwap(ctx, key, it.Version, sealed); err != nil {
				return err
			}
			e.Revision, e.CipherHash = rev, cipherHash(sealed)
		}
		e.Collection, e.ID = collection, id
		_, err = v.ledger.Append(ctx, e)
		return err
	})
	return err
}

// sealedRecord is a record sealed ahead of its transaction: its first
// revision, and the hash of the ciphertext for its ledger entry.
type sealedRecord struct {
	sealed []byte
	hash   []byte
}

// writeTx is write inside the caller's transaction. first, if not nil, is
// plain sealed as the first revision, used when the record does not exist.
func (v *Vault) writeTx(ctx context.Context, tx stores.Tx, collection, id string, plain []byte, first *sealedRecord, e ledger.Entry) error {
	prev, err := v.readPreviousTx(tx, collection, id, plain != nil)
	if err != nil {
		return err
	}
	if plain == nil {
		return v.applyTx(ctx, tx, collection, id, prev, nil, e)
	}
	if prev.rev == 0 && first != nil {
		return v.putSealedTx(ctx, tx, collection, id, first.sealed, 1, first.hash, e)
	}
	return v.applyTx(ctx, tx, collection, id, prev, joinRecord(prev.marks, plain), e)
}

// readTx reads and opens the stored record in tx. A missing record is the
// zero stored when missingOK, else an error wrapping ErrNotFound.
func (v *Vault) readTx(tx stores.Tx, collection, id string, missingOK bool) (stored, error) {
	return v.readWithTx(tx, collection, id, missingOK, v.openStoredTx)
}

// readWithTx is readTx opening the stored record with open.
func (v *Vault) readWithTx(tx stores.Tx, collection, id string, missingOK bool,
	open func(stores.Tx, string, string, stores.Item, bool) (stored, error)) (stored, error) {
	it, err := tx.Get(v.recordKey(collection, id))
	if errors.Is(err, stores.ErrNotFound) && missingOK {
		return stored{}, nil
	}
	if err != nil {
		return stored{}, err
	}
	return open(v.keyTx(tx), collection, id, it, true)
}

// readPreviousTx is readTx for the record a Put or a Delete replaces (see
// openPrevious).
func (v *Vault) readPreviousTx(tx stores.Tx, collection, id string, missingOK bool) (stored, error) {
	return v.readWithTx(tx, collection, id, missingOK, v.openPrevious)
}

// applyTx writes, in tx, the record after prev with the full plaintext plain
// (marks included), or deletes it when plain is nil, and appends e.
func (v *Vault) applyTx(ctx context.Context, tx stores.Tx, collection, id string, prev stored, plain []byte, e ledger.Entry) error {
	key := v.recordKey(collection, id)
	if plain == nil {
		if err := tx.Delete(key); err != nil {
			return err
		}
		e.Revision = prev.rev
		e.Collection, e.ID = collection, id
		_, err := v.ledger.AppendTx(ctx, tx, e)
		return err
	}
	sealed, rev, err := v.sealNextTx(tx, collection, id, plain, prev.rev)
	if err != nil {
		return err
	}
	return v.putSealedTx(ctx, tx, collection, id, sealed, rev, cipherHash(sealed), e)
}

// putSealedTx writes, in tx, a sealed record at revision rev, whose
// ciphertext hashes to hash, and appends e for it.
func (v *Vault) putSealedTx(ctx context.Context, tx stores.Tx, collection, id string, sealed []byte, rev uint64, hash []byte, e ledger.Entry) error {
	sealed, hash, err := v.freshSealTx(tx, collection, id, sealed, rev, hash) // rotate_current.go
	if err != nil {
		return err
	}
	return v.putSealedAsIsTx(ctx, tx, collection, id, sealed, rev, hash, e)
}

// putSealedAsIsTx is putSealedTx for a record this handle did not seal
// (copied from the hub), written as it is.
func (v *Vault) putSealedAsIsTx(ctx context.Context, tx stores.Tx, collection, id string, sealed []byte, rev uint64, hash []byte, e ledger.Entry) error {
	if err := tx.Put(v.recordKey(collection, id), sealed); err != nil {
		return err
	}
	e.Revision, e.CipherHash = rev, hash
	e.Collection, e.ID = collection, id
	return v.appendTx(ctx, tx, e) // a sync's staged commit keeps it (sync_staged.go)
}

// stored is an authenticated stored record: its revision (0 when there is
// none), who wrote it when, the numbers it carries and its JSON body.
type stored struct {
	rev   uint64
	meta  meta
	marks []mark
	body  []byte
}

// openStored authenticates the stored record it (when found) and splits it.
// A record that fails to open, or whose marks do not decode, is ErrTampered
// (ErrClosed when the vault's key was wiped by Close meanwhile).
func (v *Vault) openStored(collection, id string, it stores.Item, found bool) (stored, error) {
	return v.openStoredTx(nil, collection, id, it, found)
}

// openStoredTx is openStored in tx, a transaction on the device's store
// (or nil), through which a data key generation is loaded (see genKeys.get).
func (v *Vault) openStoredTx(tx stores.Tx, collection, id string, it stores.Item, found bool) (stored, error) {
	if !found {
		return stored{}, nil
	}
	plain, rev, err := v.openRecordTx(tx, collection, id, it.Value)
	if err != nil {
		return stored{}, err
	}
	m, rest, err := splitMeta(plain, v.user)
	if err != nil {
		return stored{}, ErrTampered
	}
	marks, body, err := splitRecord(rest)
	if err != nil {
		return stored{}, ErrTampered
	}
	return stored{rev: rev, meta: m, marks: marks, body: body}, nil
}

// sealNext seals plain (marks and body) as the revision after rev (0: a new
// record), written now by the vault's user (see meta.go). A record at the
// largest revision cannot take another: ErrRevisionOverflow.
func (v *Vault) sealNext(collection, id string, plain []byte, rev uint64) ([]byte, uint64, error) {
	return v.sealMetaTx(nil, collection, id, plain, rev, v.meta())
}

// sealNextTx is sealNext inside tx, a transaction on v's store: a key not
// held yet loads through it where keys load from that store (keyTx), not
// by a read of the store that would wait for the transaction's own lock.
func (v *Vault) sealNextTx(tx stores.Tx, collection, id string, plain []byte, rev uint64) ([]byte, uint64, error) {
	return v.sealMetaTx(v.keyTx(tx), collection, id, plain, rev, v.meta())
}

// meta is the metadata of a revision the vault's user writes now.
func (v *Vault) meta() meta { return meta{modified: time.Now().UTC(), author: v.user} }

// sealMeta is sealNext with the revision's metadata m.
func (v *Vault) sealMeta(collection, id string, plain []byte, rev uint64, m meta) ([]byte, uint64, error) {
	return v.sealMetaTx(nil, collection, id, plain, rev, m)
}

// sealMetaTx is sealMeta in tx, a transaction on the store keys load from
// (see genKeys.get), or nil.
func (v *Vault) sealMetaTx(tx stores.Tx, collection, id string, plain []byte, rev uint64, m meta) ([]byte, uint64, error) {
	if rev == math.MaxUint64 {
		return nil, 0, ErrRevisionOverflow
	}
	rev++
	bp := plainBufs.Get().(*[]byte)
	buf := appendMeta((*bp)[:0], m, plain)
	sealed, err := v.sealRecordTx(tx, collection, id, buf, rev)
	if cap(buf) <= maxPooledPlain {
		clear(buf) // plaintext: not left behind in a pooled buffer
		*bp = buf
		plainBufs.Put(bp)
	}
	return sealed, rev, err
}

// sealRecord seals a record's whole plaintext as revision rev with the
// key records are written with now (genKeys.sealKey): the data key of
// generation 1, else the collection's key of the current generation.
func (v *Vault) sealRecord(collection, id string, plain []byte, rev uint64) ([]byte, error) {
	return v.sealRecordTx(nil, collection, id, plain, rev)
}

// sealRecordTx is sealRecord inside tx, a transaction on the device's
// store (or nil), through which a key not held yet loads.
func (v *Vault) sealRecordTx(tx stores.Tx, collection, id string, plain []byte, rev uint64) ([]byte, error) {
	gen, k, perCol, err := v.keys.sealKey(collection, tx)
	if err != nil {
		return nil, err
	}
	return crypto.SealRecord(k, plain, crypto.RecordRef{Vault: v.name, Collection: collection, ID: id, Revision: rev,
		Generation: gen, PerCollection: perCol})
}

// openRecord authenticates and decrypts a stored record envelope with the
// data key of the generation it names (a version 1 envelope: the first).
// It returns the whole plaintext (metadata, marks and body) and the
// revision. A record that fails to open is ErrTampered (ErrClosed when the
// key was wiped by Close meanwhile); one naming a generation its person
// does not hold is ErrTampered too, wrapping the reason, unless the person
// was revoked since the handle opened (ErrNoAccess only). tx is nil, or a
// transaction on the device's store, through which an unknown generation
// is loaded (see genKeys.get).
//
// A record read from the store sealed below the generation floor
// (people_ledger.go) is ErrTampered too.
func (v *Vault) openRecordTx(tx stores.Tx, collection, id string, sealed []byte) ([]byte, uint64, error) {
	if err := v.aboveFloor(collection, id, sealed); err != nil { // people_ledger.go
		return nil, 0, err
	}
	return v.openSealedTx(tx, collection, id, sealed)
}

// openSealedTx is openRecordTx without the generation floor, for a record
// this handle sealed itself (freshSealAt re-seals it), not read from the
// store.
func (v *Vault) openSealedTx(tx stores.Tx, collection, id string, sealed []byte) ([]byte, uint64, error) {
	if err := v.keys.permits(collection); err != nil {
		return nil, 0, err
	}
	k, err := v.keys.openKey(collection, sealed, tx)
	if errors.Is(err, crypto.ErrMalformed) {
		return nil, 0, ErrTampered
	}
	if errors.Is(err, errRevokedSince) {
		// The person was revoked (their keyring entry says so, under its
		// MAC) and does not hold the record's generation: not a record
		// the store altered.
		return nil, 0, err
	}
	if errors.Is(err, errNarrowedSince) {
		// The person was narrowed out of the collection since the handle
		// opened (their keyring entry says so, under its MAC): a record
		// sealed since is out of their reach, not altered by the store.
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrTampered, closedIfWiped(err))
	}
	plain, rev, err := crypto.OpenRecord(k, sealed, crypto.RecordRef{Vault: v.name, Collection: collection, ID: id})
	if err != nil {
		return nil, 0, v.openFailed(err)
	}
	return plain, rev, nil
}

func cipherHash(sealed []byte) []byte {
	h := sha256.Sum256(sealed)
	return h[:]
}
