package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// Read-modify-write of one record.
//
// GetRecord returns the revision with the value; PutIf and DeleteIf write
// only when the record is still at the revision the caller read; Update
// reads, changes and writes in one step and retries by itself.
//
// On a store with transactions the check and the write are one store
// transaction, run through the ledger's batches like Put: Update calls fn
// inside it, on the record as the batch's earlier writes leave it, so
// concurrent Updates of one record in this process never conflict (they are
// applied one after the other); only a writer in another process can make a
// transaction conflict, and the ledger then runs it again within its retry
// budget (16 commits, then ledger.ErrContention). On a store without
// transactions the write is a compare-and-swap on the record's version,
// retried within cas.DefaultMaxAttempts (16), and the ledger entry follows
// the record, as for Put.

// GetRecord returns the record at id with its revision, modification time
// and author, or an error wrapping ErrNotFound. A record the store changed
// or moved gives ErrTampered.
func (c *Collection[T]) GetRecord(ctx context.Context, id string) (Record[T], error) {
	if err := c.begin(ctx, "get", id); err != nil {
		return Record[T]{}, err
	}
	defer c.v.exit()
	it, err := c.v.store.Get(ctx, c.v.recordKey(c.name, id))
	if err != nil {
		return Record[T]{}, fmt.Errorf("get %s/%s: %w", c.name, id, err)
	}
	r, err := c.decode(id, it.Value)
	if err != nil {
		return Record[T]{}, fmt.Errorf("get %s/%s: %w", c.name, id, err)
	}
	return r, nil
}

// PutIf stores value under id only if the record is at revision rev (the
// Revision of a Record read before), or, with rev 0, only if there is no
// record at id. Otherwise it writes nothing and returns a *ConflictError
// (errors.Is ErrConflict) carrying the revision found. Like Put, it records
// the write in the ledger and keeps the numbers the record carries.
//
// A revision names a write only while the record lives: a record deleted
// and created again counts from 1 again, so a revision read before the
// delete can match the new record (the conditional write then succeeds on
// it); give records that are deleted and re-created ids of their own, or a
// version field of their own in the value.
func (c *Collection[T]) PutIf(ctx context.Context, id string, value T, rev uint64) error {
	if err := c.begin(ctx, "put", id); err != nil {
		return err
	}
	defer c.v.exit()
	plain, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("put %s/%s: encode: %w", c.name, id, err)
	}
	_, err = c.v.modify(ctx, c.name, id, func(prev stored) (change, error) {
		if prev.rev != rev {
			return change{}, &ConflictError{Collection: c.name, ID: id, Want: rev, Got: prev.rev}
		}
		return change{body: plain}, nil
	})
	if err != nil {
		return fmt.Errorf("put %s/%s: %w", c.name, id, err)
	}
	return nil
}

// DeleteIf removes the record at id only if it is at revision rev, and
// records it in the ledger. A record at another revision, or none, gives a
// *ConflictError (errors.Is ErrConflict; also ErrNotFound when there is no
// record) and nothing is deleted. rev 0 gives ErrInvalidArgument. It needs
// a store with transactions (a store without them cannot delete on a
// condition): elsewhere stores.ErrNotSupported.
func (c *Collection[T]) DeleteIf(ctx context.Context, id string, rev uint64) error {
	if err := c.begin(ctx, "delete", id); err != nil {
		return err
	}
	defer c.v.exit()
	if rev == 0 {
		return fmt.Errorf("delete %s/%s: revision 0: %w", c.name, id, ErrInvalidArgument)
	}
	if _, ok := c.v.store.(stores.Transactor); !ok {
		return fmt.Errorf("delete %s/%s: conditional delete: %w", c.name, id, stores.ErrNotSupported)
	}
	_, err := c.v.modify(ctx, c.name, id, func(prev stored) (change, error) {
		if prev.rev != rev {
			return change{}, &ConflictError{Collection: c.name, ID: id, Want: rev, Got: prev.rev}
		}
		return change{del: true}, nil
	})
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", c.name, id, err)
	}
	return nil
}

// Update reads the record at id, calls fn on its value, and writes the
// result as the next revision, on the condition that nobody wrote the
// record in between; it returns the record written. A missing record gives
// an error wrapping ErrNotFound (create records with Put, or PutIf with
// revision 0). An error from fn is returned as it is, and nothing is
// written; a panic in fn writes nothing and goes on in the caller.
//
// fn may run more than once (after a lost race, on a fresh copy of the
// record) and only its last run counts: it should only compute from the
// value it is given. On a store with transactions it runs inside the
// store's transaction, possibly on another goroutine (the one committing
// the batch), while other writers of the vault wait: keep it short, and do
// not call the vault from it, not even to read: on a store whose
// transactions lock it (memstore) a Get of another record would wait for
// fn forever. Read what fn needs before, or use Vault.Update, whose
// transaction reads through Collection.In. When every attempt of the
// retry budget (16) lost to another writer, Update fails with a
// *ConflictError (errors.Is ErrConflict) and writes nothing. The ledger
// entry is the one Put writes, and the record keeps the numbers it carries.
//
// An Update whose commit reports an error may still have committed (a
// connection lost at COMMIT): calling it again applies fn a second time.
// Where that matters (an increment), read the record with GetRecord and
// write with PutIf on its revision instead: a retry of a write that did
// commit then fails with a *ConflictError, and the record read again shows
// it.
func (c *Collection[T]) Update(ctx context.Context, id string, fn func(*T) error) (Record[T], error) {
	if err := c.begin(ctx, "update", id); err != nil {
		return Record[T]{}, err
	}
	defer c.v.exit()
	if fn == nil {
		return Record[T]{}, fmt.Errorf("update %s/%s: nil function: %w", c.name, id, ErrInvalidArgument)
	}
	var out Record[T]
	w, err := c.v.modify(ctx, c.name, id, func(prev stored) (change, error) {
		if prev.rev == 0 {
			return change{}, ErrNotFound
		}
		var val T
		if err := json.Unmarshal(prev.body, &val); err != nil {
			return change{}, fmt.Errorf("decode: %w", err)
		}
		if err := fn(&val); err != nil {
			return change{}, &fnError{err}
		}
		plain, err := json.Marshal(val)
		if err != nil {
			return change{}, fmt.Errorf("encode: %w", err)
		}
		out = Record[T]{ID: id, Value: val}
		return change{body: plain}, nil
	})
	out.Revision, out.Modified, out.Author = w.rev, w.meta.modified, w.meta.author
	var fe *fnError
	if errors.As(err, &fe) {
		return Record[T]{}, fe.err
	}
	if errors.Is(err, ErrUnpinned) {
		// Committed, but the rollback pin covering it was not saved.
		return out, fmt.Errorf("update %s/%s: %w", c.name, id, err)
	}
	if err != nil {
		return Record[T]{}, fmt.Errorf("update %s/%s: %w", c.name, id, err)
	}
	return out, nil
}

// fnError carries the error of a caller's function through the write
// machinery, so that it comes back unwrapped.
type fnError struct{ err error }

func (e *fnError) Error() string { return e.err.Error() }

// change is what a decideFunc wants written: the JSON body of the next
// revision, or the record deleted.
type change struct {
	del  bool
	body []byte
}

// decideFunc decides, from the stored record (prev.rev == 0: none), what to
// write. Its error ends the write, and nothing is written.
type decideFunc func(prev stored) (change, error)

// modify reads the record, calls decide and writes what it decided, with
// the ledger entry Put or Delete writes: in one transaction through the
// ledger's batches where the store has transactions, else by
// compare-and-swap on the record's version (a delete then needs a
// transaction: stores.ErrNotSupported). It returns what it wrote, also
// with an error matching ErrUnpinned (committed, pin not saved).
func (v *Vault) modify(ctx context.Context, collection, id string, decide decideFunc) (written, error) {
	if _, ok := v.store.(stores.Transactor); !ok {
		return v.modifyCAS(ctx, collection, id, decide)
	}
	var w written
	err := v.ledger.UpdateKeys(ctx, v.recordKeys(collection, id), func(tx stores.Tx) error {
		var err error
		w, err = v.modifyTx(ctx, tx, collection, id, decide)
		return err
	})
	if errors.Is(err, ledger.ErrContention) {
		return written{}, &ConflictError{Collection: collection, ID: id, Err: err}
	}
	if err != nil && !errors.Is(err, ErrUnpinned) {
		return written{}, err
	}
	return w, err
}

// written is what modify wrote: the revision, and the metadata sealed in it.
type written struct {
	rev  uint64
	meta meta
}

// modifyTx is modify inside tx.
func (v *Vault) modifyTx(ctx context.Context, tx stores.Tx, collection, id string, decide decideFunc) (written, error) {
	prev, err := v.readTx(tx, collection, id, true)
	if err != nil {
		return written{}, err
	}
	ch, err := decide(prev)
	if err != nil {
		return written{}, err
	}
	if ch.del {
		if prev.rev == 0 {
			return written{}, ErrNotFound
		}
		return written{}, v.applyTx(ctx, tx, collection, id, prev, nil, ledger.Entry{Kind: ledger.RecordDelete})
	}
	return v.putTx(ctx, tx, collection, id, prev, ch.body)
}

// putTx writes, in tx, body as the revision after prev, keeping prev's
// marks, with the ledger entry Put writes.
func (v *Vault) putTx(ctx context.Context, tx stores.Tx, collection, id string, prev stored, body []byte) (written, error) {
	m := v.meta()
	sealed, rev, err := v.sealMetaTx(v.keyTx(tx), collection, id, joinRecord(prev.marks, body), prev.rev, m)
	if err != nil {
		return written{}, err
	}
	if err := v.putSealedTx(ctx, tx, collection, id, sealed, rev, cipherHash(sealed), ledger.Entry{Kind: ledger.RecordPut}); err != nil {
		return written{}, err
	}
	return written{rev: rev, meta: m}, nil
}

// modifyCAS is modify on a store without transactions.
func (v *Vault) modifyCAS(ctx context.Context, collection, id string, decide decideFunc) (written, error) {
	if err := v.mayWrite(ctx); err != nil {
		return written{}, err
	}
	key := v.recordKey(collection, id)
	defer v.syncs.writing.begin(recKey{collection, id})() // sync_inflight.go
	var w written
	var e ledger.Entry
	attempts, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		it, err := v.store.Get(ctx, key)
		found := err == nil
		if err != nil && !errors.Is(err, stores.ErrNotFound) {
			return err
		}
		prev, err := v.openStored(collection, id, it, found)
		if err != nil {
			return err
		}
		ch, err := decide(prev)
		if err != nil {
			return err
		}
		if ch.del {
			return fmt.Errorf("conditional delete: %w", stores.ErrNotSupported)
		}
		m := v.meta()
		sealed, rev, err := v.sealMeta(collection, id, joinRecord(prev.marks, ch.body), prev.rev, m)
		if err != nil {
			return err
		}
		if _, err := v.store.CompareAndSwap(ctx, key, it.Version, sealed); err != nil {
			return err
		}
		w = written{rev: rev, meta: m}
		e = ledger.Entry{Kind: ledger.RecordPut, Collection: collection, ID: id, Revision: rev, CipherHash: cipherHash(sealed)}
		return nil
	})
	if errors.Is(err, cas.ErrExhausted) {
		return written{}, &ConflictError{Collection: collection, ID: id, Attempts: attempts, Err: err}
	}
	if err != nil {
		return written{}, err
	}
	if _, err := v.ledger.Append(ctx, e); err != nil {
		return w, err
	}
	return w, nil
}
