package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/noydb-go/noydb/stores"
)

// maxClaimAttempts bounds Tx.Get's loop between "the row is missing" and
// "someone else just created it"; each turn means another writer committed.
const maxClaimAttempts = 8

// Update runs fn in a READ COMMITTED transaction. If fn returns nil the
// transaction commits; otherwise it is rolled back and fn's error returned
// unchanged. Tx.Get locks the rows it reads until the transaction ends, so
// transactions on the same keys queue rather than conflict; a deadlock between
// them returns stores.ErrConflict, and nothing is written.
//
// A statement that fails inside the transaction spoils it: the Tx's later
// calls return the same error, and if fn returns nil anyway Update rolls back
// and returns that error.
func (s *Store) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	var failed error // fn's error, or the statement that spoiled the transaction
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(ptx pgx.Tx) error {
		t := &txn{ctx: ctx, s: s, tx: ptx}
		defer func() { t.done = true }()
		if failed = fn(t); failed != nil {
			return failed
		}
		if t.err != nil {
			failed = t.err
			return failed
		}
		if failed = ctx.Err(); failed != nil {
			return failed
		}
		if len(t.claims) > 0 {
			if _, err := ptx.Exec(ctx, s.q.unclaim, t.claims); err != nil {
				failed = t.fail("update", err)
				return failed
			}
		}
		return nil
	})
	if failed != nil {
		return failed
	}
	return s.wrap(ctx, "update", err) // begin or commit failed
}

// txn is the stores.Tx of Update. It keeps Update's context because the Tx
// methods take none; it lives only as long as the closure.
type txn struct {
	ctx    context.Context
	s      *Store
	tx     pgx.Tx
	claims [][]byte // keys claimed by Get while missing
	err    error    // the first failed statement; the transaction is spoiled
	done   bool
}

var errTxDone = errors.New("pgstore: transaction used after its Update returned")

func (t *txn) usable(key string) error {
	switch {
	case t.done:
		return errTxDone
	case t.err != nil:
		return t.err
	}
	if err := t.ctx.Err(); err != nil {
		return err
	}
	return stores.CheckKey(key)
}

// fail records the first failed statement and returns it translated.
func (t *txn) fail(op string, err error) error {
	err = t.s.wrap(t.ctx, op, err)
	if t.err == nil {
		t.err = err
	}
	return err
}

// Get returns the item at key and locks its row until the transaction ends.
// A missing key is claimed instead, so a concurrent transaction that reads or
// creates the same key waits for this one.
func (t *txn) Get(key string) (stores.Item, error) {
	if err := t.usable(key); err != nil {
		return stores.Item{}, err
	}
	k := []byte(key)
	for range maxClaimAttempts {
		var value []byte
		var version int64
		err := t.tx.QueryRow(t.ctx, t.s.q.getForUpdate, k).Scan(&value, &version)
		if err == nil {
			if version == 0 { // this transaction's own claim
				return stores.Item{}, stores.ErrNotFound
			}
			return stores.Item{Key: key, Value: value, Version: uint64(version)}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return stores.Item{}, t.fail("get", err)
		}
		// Missing. Claim it; if another transaction holds it, this waits for
		// that one to end, and if it created the key the claim does nothing
		// and the next turn reads and locks the new row.
		tag, err := t.tx.Exec(t.ctx, t.s.q.claim, k)
		if err != nil {
			return stores.Item{}, t.fail("get", err)
		}
		if tag.RowsAffected() == 1 {
			t.claims = append(t.claims, k)
			return stores.Item{}, stores.ErrNotFound
		}
	}
	return stores.Item{}, t.fail("get", stores.ErrConflict)
}

// Put writes value at key within the transaction.
func (t *txn) Put(key string, value []byte) error {
	if err := t.usable(key); err != nil {
		return err
	}
	if err := stores.CheckValue(value); err != nil {
		return err
	}
	var version int64
	if err := t.tx.QueryRow(t.ctx, t.s.q.put, []byte(key), nonNil(value)).Scan(&version); err != nil {
		return t.fail("put", err)
	}
	return nil
}

// Delete removes key within the transaction; a missing key is not an error.
func (t *txn) Delete(key string) error {
	if err := t.usable(key); err != nil {
		return err
	}
	if _, err := t.tx.Exec(t.ctx, t.s.q.delete, []byte(key)); err != nil {
		return t.fail("delete", err)
	}
	return nil
}
