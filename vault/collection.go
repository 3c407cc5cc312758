package vault

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

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
}

// Record is one decrypted record of a collection, as List yields it.
type Record[T any] struct {
	ID       string
	Revision uint64
	Value    T
}

// CollectionOf returns the collection name of v, holding records of type T.
// An invalid or reserved name is reported by every call on the collection.
func CollectionOf[T any](v *Vault, name string) *Collection[T] {
	return &Collection[T]{v: v, name: name, err: CheckCollectionName(name)}
}

// Name returns the collection's name.
func (c *Collection[T]) Name() string { return c.name }

func (c *Collection[T]) begin(ctx context.Context, op, id string) error {
	if c.err != nil {
		return fmt.Errorf("%s: %w", op, c.err)
	}
	if err := c.v.check(ctx); err != nil {
		return fmt.Errorf("%s %s/%s: %w", op, c.name, id, err)
	}
	if op != "list" && op != "count" {
		if err := CheckID(id); err != nil {
			return fmt.Errorf("%s %s: %w", op, c.name, err)
		}
	}
	return nil
}

// Put stores value under id, replacing any earlier revision, and records the
// change in the ledger (atomically with the record on stores with transactions).
func (c *Collection[T]) Put(ctx context.Context, id string, value T) error {
	if err := c.begin(ctx, "put", id); err != nil {
		return err
	}
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
	plain, rev, err := crypto.OpenRecord(c.v.dk, sealed, crypto.RecordRef{Vault: c.v.name, Collection: c.name, ID: id})
	if err != nil {
		return Record[T]{}, c.v.openFailed(err)
	}
	r := Record[T]{ID: id, Revision: rev}
	if err := json.Unmarshal(plain, &r.Value); err != nil {
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
	if err := c.v.write(ctx, c.name, id, nil, ledger.Entry{Kind: ledger.RecordDelete}); err != nil {
		return fmt.Errorf("delete %s/%s: %w", c.name, id, err)
	}
	return nil
}

// List yields every record of the collection in id order. An error (a
// tampered record, a store failure) is yielded once and ends the sequence.
func (c *Collection[T]) List(ctx context.Context) iter.Seq2[Record[T], error] {
	return func(yield func(Record[T], error) bool) {
		if err := c.begin(ctx, "list", ""); err != nil {
			yield(Record[T]{}, err)
			return
		}
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

// Count returns the number of records in the collection, without decrypting them.
func (c *Collection[T]) Count(ctx context.Context) (int, error) {
	if err := c.begin(ctx, "count", ""); err != nil {
		return 0, err
	}
	n := 0
	for _, err := range c.v.store.List(ctx, c.v.recordKey(c.name, "")) {
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
// sequence.ErrOffline); seq must belong to this collection's vault.
func (c *Collection[T]) PutNumbered(ctx context.Context, id string, seq *sequence.Sequence, build func(sequence.Serial) (T, error)) (T, error) {
	var out T
	if err := c.begin(ctx, "put numbered", id); err != nil {
		return out, err
	}
	if !strings.HasPrefix(seq.Key(), c.v.prefix) {
		return out, fmt.Errorf("put numbered %s/%s: series %q belongs to another vault", c.name, id, seq.Series())
	}
	_, err := seq.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
		val, err := build(s)
		if err != nil {
			return err
		}
		plain, err := json.Marshal(val)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		e := ledger.Entry{Kind: ledger.RecordPut, Series: seq.Series(), Partition: seq.Partition(), Number: s.N}
		if err := c.v.writeTx(ctx, tx, c.name, id, plain, e); err != nil {
			return err
		}
		out = val
		return nil
	})
	if err != nil {
		var zero T
		return zero, fmt.Errorf("put numbered %s/%s: %w", c.name, id, err)
	}
	return out, nil
}

func (v *Vault) recordKey(collection, id string) string {
	return v.prefix + collection + "/" + id
}

// write puts (plain != nil) or deletes (plain == nil) a record and appends its
// ledger entry: in one transaction where the store has them, otherwise record
// first and entry second (a crash between leaves a record change the ledger
// does not show; Verify still passes, and the next write is recorded).
func (v *Vault) write(ctx context.Context, collection, id string, plain []byte, e ledger.Entry) error {
	if _, ok := v.store.(stores.Transactor); ok {
		// In the ledger's turn, so that concurrent writers of this process
		// do not fail one another on the ledger head.
		return v.ledger.Update(ctx, func(tx stores.Tx) error {
			return v.writeTx(ctx, tx, collection, id, plain, e)
		})
	}
	key := v.recordKey(collection, id)
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		it, err := v.store.Get(ctx, key)
		if err != nil && !(errors.Is(err, stores.ErrNotFound) && plain != nil) {
			return err
		}
		e := e
		if plain == nil {
			if err := v.store.Delete(ctx, key); err != nil {
				return err
			}
			e.Revision, _ = crypto.RecordRevision(it.Value)
		} else {
			sealed, rev, err := v.sealRecord(collection, id, plain, it)
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

// writeTx is write inside the caller's transaction.
func (v *Vault) writeTx(ctx context.Context, tx stores.Tx, collection, id string, plain []byte, e ledger.Entry) error {
	key := v.recordKey(collection, id)
	it, err := tx.Get(key)
	if err != nil && !(errors.Is(err, stores.ErrNotFound) && plain != nil) {
		return err
	}
	if plain == nil {
		if err := tx.Delete(key); err != nil {
			return err
		}
		e.Revision, _ = crypto.RecordRevision(it.Value)
	} else {
		sealed, rev, err := v.sealRecord(collection, id, plain, it)
		if err != nil {
			return err
		}
		if err := tx.Put(key, sealed); err != nil {
			return err
		}
		e.Revision, e.CipherHash = rev, cipherHash(sealed)
	}
	e.Collection, e.ID = collection, id
	_, err = v.ledger.AppendTx(ctx, tx, e)
	return err
}

// sealRecord seals plain as the revision after the stored item prev (a zero
// Item when the record is new).
func (v *Vault) sealRecord(collection, id string, plain []byte, prev stores.Item) ([]byte, uint64, error) {
	rev := uint64(1)
	if prev.Value != nil {
		r, err := crypto.RecordRevision(prev.Value)
		if err != nil {
			return nil, 0, ErrTampered
		}
		rev = r + 1
	}
	sealed, err := crypto.SealRecord(v.dk, plain, crypto.RecordRef{Vault: v.name, Collection: collection, ID: id, Revision: rev})
	return sealed, rev, err
}

func cipherHash(sealed []byte) []byte {
	h := sha256.Sum256(sealed)
	return h[:]
}
