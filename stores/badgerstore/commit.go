package badgerstore

import (
	"context"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/noydb-go/noydb/internal/batch"

	"github.com/noydb-go/noydb/stores"
)

// Group commit.
//
// With SyncWrites on, badger syncs its write-ahead log once for every
// transaction it commits, even when it writes several transactions in one
// go, so concurrent one-key writes would each pay for a sync. Put,
// CompareAndSwap and Delete therefore go through one queue (internal/batch,
// the SDK's batching primitive): a write that finds no commit running
// commits at once, alone; the writes that queue meanwhile, on distinct
// keys, commit together in the next badger transaction: one commit, one
// sync, one commit timestamp (hence distinct versions, as the keys differ).
//
// A compare-and-swap in a batch reads its key in the batch's transaction,
// so badger's conflict detection still covers it. If the batch as a whole
// fails (a conflict with an Update, or badger refusing the size), each of
// its writes is retried in a transaction of its own, so one write never
// fails because of another. Update keeps its own transaction.

// Batch limits. A batch never holds more than maxBatchOps writes, nor more
// than maxBatchBytes of values unless it is a single write.
const (
	maxBatchOps   = 256
	maxBatchBytes = 4 << 20
)

// writeOp is one Put, CompareAndSwap or Delete in the queue.
type writeOp struct {
	batch.Slot[*writeOp]

	name     string // operation, for error messages
	key      string
	value    []byte
	del      bool
	cas      bool
	expected uint64

	entry   *badger.Entry // the first piece written, stamped at commit
	version uint64
	err     error
	settled bool
}

// submit runs w through the queue and returns its outcome. The caller
// holds the store's read lock, so Close waits for it.
func (s *Store) submit(ctx context.Context, w *writeOp) (uint64, error) {
	if err := s.q.Do(ctx, w); err != nil {
		// ctx ended while w waited, and nothing was written; or the
		// batch's leader panicked (batch.ErrAbandoned), and w may or may
		// not have been committed.
		return 0, err
	}
	return w.version, w.err
}

// settle records the outcome of w.
func (w *writeOp) settle(version uint64, err error) {
	w.version, w.err, w.settled = version, err, true
}

// nextBatch takes from queue the writes of the next batch: in arrival order,
// at most one per key (a later write of the same key, and every write of
// that key after it, waits for a later batch), within the batch limits.
func nextBatch(queue []*writeOp) (next, rest []*writeOp) {
	keys := make(map[string]bool, len(queue))
	size := 0
	for _, w := range queue {
		fits := len(next) == 0 || (len(next) < maxBatchOps && size+len(w.value) <= maxBatchBytes)
		if keys[w.key] || !fits {
			keys[w.key] = true // keep the order of writes to one key
			rest = append(rest, w)
			continue
		}
		keys[w.key] = true
		next = append(next, w)
		size += len(w.value)
	}
	return next, rest
}

// commitBatch is the queue's Run: it commits batch and settles each write.
func (s *Store) commitBatch(_ context.Context, b []*writeOp) {
	if !s.commitOps(b) {
		for _, w := range b {
			w.settled = false
			s.commitOps([]*writeOp{w})
		}
	}
}

// commitOps runs ops in one transaction and settles each of them. With more
// than one op, a failure of the whole transaction settles none and returns
// false, so that the caller retries them one by one.
func (s *Store) commitOps(ops []*writeOp) bool {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	writes := 0
	for _, w := range ops {
		w.entry = nil
		if w.cas {
			current, err := versionIn(txn, w.key)
			if err != nil {
				w.settle(0, s.wrap(w.name, err))
				continue
			}
			if current != w.expected {
				w.settle(0, stores.ErrConflict)
				continue
			}
		}
		var err error
		if w.del {
			err = s.remove(txn, w.key)
		} else {
			w.entry, err = s.write(txn, w.key, w.value)
		}
		if err != nil {
			if len(ops) > 1 && errors.Is(err, badger.ErrTxnTooBig) {
				return false
			}
			w.settle(0, s.wrap(w.name, err))
			continue
		}
		writes++
	}
	if writes == 0 {
		return true
	}
	err := txn.Commit()
	if err != nil && len(ops) > 1 {
		return false
	}
	for _, w := range ops {
		switch {
		case w.settled:
		case err != nil:
			w.settle(0, s.wrap(w.name, err))
		case w.del:
			w.settle(0, nil)
		default:
			v, verr := commitVersion(w.entry, w.key)
			if verr != nil {
				verr = s.wrap(w.name, verr)
			}
			w.settle(v, verr)
		}
	}
	return true
}
