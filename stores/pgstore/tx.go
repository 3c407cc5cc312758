package pgstore

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noydb-go/noydb/stores"
)

// maxClaimAttempts bounds Tx.Get's loop between "the row is missing" and
// "someone else just created it"; each turn means another writer committed.
const maxClaimAttempts = 8

// The statements that open and close Update's transaction block. They travel
// in the same batch as the transaction's first and last statements.
const (
	beginSQL  = `BEGIN ISOLATION LEVEL READ COMMITTED`
	commitSQL = `COMMIT`
)

// Update runs fn in a READ COMMITTED transaction. If fn returns nil the
// transaction commits; otherwise it is rolled back and fn's error returned
// unchanged. Tx.Get locks the rows it reads until the transaction ends, so
// transactions on the same keys queue rather than conflict; a deadlock between
// them returns stores.ErrConflict, and nothing is written.
//
// Statements are pipelined: Tx.Put and Tx.Delete only record the write, and
// the writes recorded since the last round trip are sent at the head of the
// next one (a Tx.Get or Prefetch that needs the server, or the commit) as
// two statements, one upsert of every key put and one delete of every key
// deleted (after a third that locks or claims them all in key order when
// there are both, and more when they carry over 64 MiB), the last write of
// each key winning. So a transaction costs one
// round trip per such Get plus one for the commit, BEGIN included, and a few
// statements per round trip however many keys it writes. A Get of a key the
// transaction has already read, claimed or written is answered without a
// round trip: the transaction holds that key's lock or has written it, so the
// answer cannot have changed. No connection is taken from the pool until the
// first round trip; a transaction that sends nothing commits without one.
//
// The Tx is also a stores.Prefetcher: Prefetch reads, locks or claims any
// number of keys in one round trip, in ascending key order, so that their
// Gets then cost none (see the package documentation).
//
// A statement that fails inside the transaction spoils it: the Tx's later
// calls return the same error, and if fn returns nil anyway Update rolls back
// and returns that error. A recorded write that fails is reported by the Get
// or Prefetch whose round trip carried it, or else by Update.
func (s *Store) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	t := &txn{ctx: ctx, s: s}
	defer t.end() // also when fn panics
	err := fn(t)
	t.done = true
	switch {
	case err != nil:
		return err
	case t.err != nil:
		return t.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return t.commit()
}

// txn is the stores.Tx of Update. It keeps Update's context because the Tx
// methods take none; it lives only as long as the closure.
type txn struct {
	ctx  context.Context
	s    *Store
	conn *pgxpool.Conn // nil until the first round trip

	began bool      // BEGIN is queued or sent
	batch pgx.Batch // statements not sent yet
	ops   []string  // the operation of each statement in batch, for errors

	// known holds what the transaction knows of the keys it holds: read and
	// locked, claimed while missing, or written. Nobody else can change them
	// until it ends, so Get answers them without a round trip.
	known  map[string]knownKey
	claims [][]byte // keys claimed while missing, whose claim rows go before commit

	// writes holds the writes not sent yet, the last one of each key: they
	// go at the head of the next batch (see queueWrites).
	writes map[string]pendingWrite

	err  error // the first failed statement; the transaction is spoiled
	done bool

	statements, roundTrips int64 // what was sent, for the counters of tests
}

// knownKey is a key the transaction holds. value is shared with the pending
// write, if any: it is never modified, and Get hands out copies.
type knownKey struct {
	found   bool
	value   []byte
	version int64 // its committed version when read; unspecified once written
}

// pendingWrite is the last write of a key that is not sent yet: a put of
// value, or a delete.
type pendingWrite struct {
	value   []byte // shared with known; never modified
	deleted bool
}

var _ stores.Prefetcher = (*txn)(nil)

var errTxDone = errors.New("pgstore: transaction used after its Update returned")

func (t *txn) usable(key string) error {
	if err := t.ready(); err != nil {
		return err
	}
	return stores.CheckKey(key)
}

// ready reports why the transaction can take no more calls, if it cannot.
func (t *txn) ready() error {
	switch {
	case t.done:
		return errTxDone
	case t.err != nil:
		return t.err
	}
	return t.ctx.Err()
}

// fail records the first failed statement and returns it translated.
func (t *txn) fail(op string, err error) error {
	err = t.s.wrap(t.ctx, op, err)
	if t.err == nil {
		t.err = err
	}
	return err
}

func (t *txn) know(key string, k knownKey) {
	if t.known == nil {
		t.known = make(map[string]knownKey)
	}
	t.known[key] = k
}

// queue adds a statement to the next batch, after BEGIN if the transaction
// has not begun yet and after the pending writes, so that the statement sees
// every write made before it.
func (t *txn) queue(op, sql string, args ...any) {
	if !t.began {
		t.began = true
		t.add("update", beginSQL)
	}
	t.queueWrites()
	t.add(op, sql, args...)
}

func (t *txn) add(op, sql string, args ...any) {
	t.batch.Queue(sql, args...)
	t.ops = append(t.ops, op)
}

// maxWriteBytes bounds the keys and values one upsert or delete of pending
// writes carries. A statement's parameters travel in one protocol message,
// which may hold at most 1 GiB, and a transaction may write any number of
// values of stores.MaxValueLen; above the bound the writes go as several
// statements, still in ascending key order.
const maxWriteBytes = 64 << 20

// queueWrites turns the pending writes into statements of the next batch:
// upserts of the keys put and deletes of the keys deleted, each with its
// keys in ascending byte order, one of each unless they carry more than
// maxWriteBytes. A key is in one of them at most. When there are both, the
// statement of Prefetch first locks or claims all of them, in ascending key
// order, missing keys included: the upserts and deletes would otherwise take
// the keys in two runs (b put before a deleted), and two transactions writing
// the same keys crosswise would deadlock. Each key claimed there is then put,
// which turns its claim into a row, or deleted, which removes it.
func (t *txn) queueWrites() {
	if len(t.writes) == 0 {
		return
	}
	keys := make([]string, 0, len(t.writes))
	for key := range t.writes {
		keys = append(keys, key)
	}
	slices.Sort(keys) // byte order, as bytea compares
	var all, putKeys, values, deleted [][]byte
	for _, key := range keys {
		kb := []byte(key)
		all = append(all, kb)
		if w := t.writes[key]; w.deleted {
			deleted = append(deleted, kb)
		} else {
			putKeys = append(putKeys, kb)
			values = append(values, w.value)
		}
	}
	clear(t.writes)
	if len(putKeys) > 0 && len(deleted) > 0 {
		t.add("put", t.s.q.lockOrClaim, all)
	}
	for len(putKeys) > 0 {
		n, size := 0, 0
		for n < len(putKeys) && (n == 0 || size+len(putKeys[n])+len(values[n]) <= maxWriteBytes) {
			size += len(putKeys[n]) + len(values[n])
			n++
		}
		t.add("put", t.s.q.putMany, putKeys[:n], values[:n])
		putKeys, values = putKeys[n:], values[n:]
	}
	for len(deleted) > 0 {
		n, size := 0, 0
		for n < len(deleted) && (n == 0 || size+len(deleted[n]) <= maxWriteBytes) {
			size += len(deleted[n])
			n++
		}
		t.add("delete", t.s.q.deleteMany, deleted[:n])
		deleted = deleted[n:]
	}
}

// write records the last write of key, to be sent with the next batch.
func (t *txn) write(key string, w pendingWrite) {
	if t.writes == nil {
		t.writes = make(map[string]pendingWrite)
	}
	t.writes[key] = w
}

// flush sends the queued statements in one batch, one round trip, and reads
// their results in order. The last statement's result is read by last, or
// like the others when last is nil. The first failure spoils the transaction
// (the server skips the rest of the batch) and is returned translated.
func (t *txn) flush(last func(br pgx.BatchResults) error) error {
	if t.batch.Len() == 0 {
		return nil
	}
	if t.conn == nil {
		conn, err := t.s.pool.Acquire(t.ctx)
		if err != nil {
			return t.fail("update", err)
		}
		t.conn = conn
	}
	b, ops := t.batch, t.ops
	t.batch, t.ops = pgx.Batch{}, ops[:0] // nothing is queued until flush returns
	t.statements += int64(len(ops))
	t.roundTrips++
	br := t.conn.SendBatch(t.ctx, &b)
	for i, op := range ops {
		var err error
		if i == len(ops)-1 && last != nil {
			err = last(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			_ = br.Close()
			return t.fail(op, err)
		}
	}
	if err := br.Close(); err != nil {
		return t.fail(ops[len(ops)-1], err)
	}
	return nil
}

// Get returns the item at key and locks its row until the transaction ends.
// A missing key is claimed instead, so a concurrent transaction that reads or
// creates the same key waits for this one. The pending writes travel in the
// same round trip, before the read.
func (t *txn) Get(key string) (stores.Item, error) {
	if err := t.usable(key); err != nil {
		return stores.Item{}, err
	}
	if k, ok := t.known[key]; ok {
		if !k.found {
			return stores.Item{}, stores.ErrNotFound
		}
		return stores.Item{Key: key, Value: bytes.Clone(k.value), Version: uint64(k.version)}, nil
	}
	kb := []byte(key)
	for range maxClaimAttempts {
		var (
			rows    int
			value   []byte
			version int64
		)
		t.queue("get", t.s.q.getOrClaim, kb)
		err := t.flush(func(br pgx.BatchResults) error {
			rs, err := br.Query()
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				rows++
				if err := rs.Scan(&value, &version); err != nil {
					return err
				}
			}
			return rs.Err()
		})
		switch {
		case err != nil:
			return stores.Item{}, err
		case rows == 0:
			// Another transaction created the key while this statement
			// waited for it; the next turn reads and locks the new row.
			continue
		case version == 0: // claimed
			t.claims = append(t.claims, kb)
			t.know(key, knownKey{})
			return stores.Item{}, stores.ErrNotFound
		}
		t.know(key, knownKey{found: true, value: value, version: version})
		return stores.Item{Key: key, Value: bytes.Clone(value), Version: uint64(version)}, nil
	}
	return stores.Item{}, t.fail("get", stores.ErrConflict)
}

// Prefetch reads, locks or claims in one round trip every key of keys that
// the transaction does not hold yet, so that their later Gets need none. The
// pending writes travel in the same round trip, before the reads, as with Get.
//
// The keys are taken in ascending byte order, one at a time, whatever order
// they are given in: each existing row is locked, each missing key claimed as
// Get claims it, by one statement that inserts a claim for each key in turn
// and, on finding the key's row, locks that row instead. So two transactions
// that prefetch overlapping sets queue on the first key they share rather
// than deadlock, and a key created by another transaction while the claim
// waited for it is locked, not missed. A second statement, in the same
// round trip, reads what the first one locked or claimed.
//
// Duplicates are allowed. An invalid key returns stores.ErrInvalidKey before
// anything is sent and does not spoil the transaction; a failed round trip
// spoils it, as a failed Get does.
func (t *txn) Prefetch(keys []string) error {
	if err := t.ready(); err != nil {
		return err
	}
	var todo []string
	for _, key := range keys {
		if err := stores.CheckKey(key); err != nil {
			return err
		}
		if _, ok := t.known[key]; !ok {
			todo = append(todo, key)
		}
	}
	slices.Sort(todo) // byte order, as bytea compares
	todo = slices.Compact(todo)
	for range maxClaimAttempts {
		if len(todo) == 0 {
			return nil
		}
		kbs := make([][]byte, len(todo))
		for i, key := range todo {
			kbs[i] = []byte(key)
		}
		var rows []prefetched
		t.queue("prefetch", t.s.q.lockOrClaim, kbs)
		t.queue("prefetch", t.s.q.readMany, kbs)
		err := t.flush(func(br pgx.BatchResults) error {
			rs, err := br.Query()
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				var r prefetched
				if err := rs.Scan(&r.key, &r.value, &r.version); err != nil {
					return err
				}
				rows = append(rows, r)
			}
			return rs.Err()
		})
		if err != nil {
			return err
		}
		found := make(map[string]bool, len(rows))
		for _, r := range rows {
			key := string(r.key)
			found[key] = true
			if r.version == 0 { // claimed: only this transaction sees its claims
				t.claims = append(t.claims, r.key)
				t.know(key, knownKey{})
				continue
			}
			t.know(key, knownKey{found: true, value: r.value, version: r.version})
		}
		// Every key is locked or claimed by now; a key without a row is not
		// expected, but is asked again rather than trusted as missing.
		todo = slices.DeleteFunc(todo, func(key string) bool { return found[key] })
	}
	if len(todo) == 0 {
		return nil
	}
	return t.fail("prefetch", stores.ErrConflict)
}

// prefetched is one row read by Prefetch.
type prefetched struct {
	key, value []byte
	version    int64
}

// Put writes value at key within the transaction. The write is recorded and
// sent with the transaction's next round trip, unless a later write of the
// same key replaces it first; its failure is reported there.
func (t *txn) Put(key string, value []byte) error {
	if err := t.usable(key); err != nil {
		return err
	}
	if err := stores.CheckValue(value); err != nil {
		return err
	}
	v := append([]byte{}, value...) // the caller may reuse value; never nil
	t.write(key, pendingWrite{value: v})
	t.know(key, knownKey{found: true, value: v, version: t.known[key].version})
	return nil
}

// Delete removes key within the transaction; a missing key is not an error.
// Like Put, it is recorded and sent with the next round trip.
func (t *txn) Delete(key string) error {
	if err := t.usable(key); err != nil {
		return err
	}
	t.write(key, pendingWrite{deleted: true})
	if _, ok := t.known[key]; ok {
		// The key stays this transaction's. If it was read or claimed, its
		// deleted row keeps other writers waiting, as a claim would; if it
		// was only written, Get answers from the transaction's own writes,
		// which no other writer can change.
		t.know(key, knownKey{})
	}
	// Otherwise the key may not have existed, and then nothing holds it:
	// the next Get asks the server and claims it.
	return nil
}

// commit sends the pending writes, the removal of the claim rows and COMMIT
// in one batch. A transaction that never sent or wrote anything has nothing
// to commit.
func (t *txn) commit() error {
	if !t.began && len(t.writes) == 0 {
		return nil
	}
	if len(t.claims) > 0 {
		t.queue("update", t.s.q.unclaim, t.claims)
	}
	t.queue("update", commitSQL)
	return t.flush(func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
		return err
	})
}

// end rolls back a transaction block that is still open (fn failed, a
// statement failed, or commit was never reached) and returns the connection
// to the pool. If the rollback cannot be sent the pool discards the
// connection instead, which ends the transaction on the server.
func (t *txn) end() {
	conn := t.conn
	if conn == nil {
		return
	}
	t.conn = nil
	if pc := conn.Conn().PgConn(); t.ctx.Err() == nil && !pc.IsClosed() && !pc.IsBusy() && pc.TxStatus() != 'I' {
		t.statements++
		t.roundTrips++
		_, _ = conn.Exec(t.ctx, "ROLLBACK")
	}
	if c := t.s.counters; c != nil {
		c.statements.Add(t.statements)
		c.roundTrips.Add(t.roundTrips)
	}
	conn.Release() // a connection still inside a transaction is discarded
}
