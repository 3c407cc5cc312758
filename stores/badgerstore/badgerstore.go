// Package badgerstore is a store on BadgerDB v4: embedded, durable, with
// atomic compare-and-swap and multi-key transactions. It is the on-disk
// choice for one process; several processes or machines need a shared
// store such as PostgreSQL.
//
// # Usage
//
//	st, err := badgerstore.Open("/path/to/folder", nil) // durable: fsync on every commit
//	if err != nil { … }
//	defer st.Close()
//
// Options{InMemory: true} keeps everything in memory (for tests), and
// Options{NoSync: true} trades durability for speed.
//
// # Concurrency
//
// A Store is safe for concurrent use. Reads and writes run in badger
// transactions, and badger's serializable snapshot isolation makes
// CompareAndSwap and Update atomic: a transaction whose reads were changed
// by a concurrent commit fails with stores.ErrConflict and writes nothing.
//
// Put, CompareAndSwap and Delete calls that arrive while a commit is in
// progress are committed together in one badger transaction, with one sync
// (group commit; see commit.go), so many goroutines writing at once do not
// each wait for their own fsync. Each call still gets its own outcome and a
// version of its own. Update runs its own transaction; callers that want
// their Updates to share commits batch them above the store (the vault's
// ledger does).
//
// Lock gives named locks held against every user of the Store (the vault's
// ledger uses it, so that two DBs of one process over one Store take turns
// on a ledger rather than fail each other's transactions).
//
// Only one process may open a folder: badger locks it, and a second Open,
// from this process or another, fails with an error wrapping
// stores.ErrLocked.
//
// List does not hold a transaction while the loop body runs. It reads the
// items in pages of up to 256 items (or 4 MiB of values; the first page of
// one item, each next one twice as large), each page from a fresh
// read-only transaction, and yields a page once that transaction has
// ended. Each page is a consistent snapshot, keys come in ascending order
// and never twice, and a key that exists through the whole iteration is
// yielded exactly once; keys written while the iteration runs may or may
// not be seen. The loop body may use the store, including writes.
//
// ListAfter (stores.RangeLister) is List starting after a given key: its
// first page seeks straight there. GetMany (stores.MultiGetter) reads any
// number of keys in one read-only transaction, a snapshot. TxLimits
// (stores.TxSizer) reports badger's limits on one Update: about 9.6 MiB of
// keys and values, from badger's default 64 MiB memtable, so on disk some
// 9,000 writes of 1 KiB, and a fifth of that in memory. A larger Update is
// refused with an error wrapping stores.ErrTooLarge and writes nothing:
// callers writing large batches atomically size them by TxLimits.
//
// # Versions
//
// A key's version is the commit timestamp badger gave to the write, which
// grows with every commit of the database and survives restarts, so a
// version is never handed out twice, not even after a delete.
//
// # Caveats
//
// badger does not take contexts. The context is checked when a call starts
// and again just before its commit; a commit that has started is not
// interrupted.
//
// badger in memory cannot hold a value of 1 MiB or more in one entry, so in
// memory a larger value is kept in up to five pieces written in the same
// transaction. On disk values stay whole.
//
// A Tx reports version 0 for a key it has itself written: the version is
// only known at commit.
//
// A group commit is led by one of its callers, which returns as soon as it
// has handed the queue on, before the callers it woke have run. Goroutines
// of one process that loop on CompareAndSwap of one hot key can therefore
// lose many races in a row to the one that just won: combine such writers
// instead (the sequence package does), or retry without a small bound.
package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/noydb-go/noydb/internal/batch"
	"github.com/noydb-go/noydb/stores"
)

// Options configures Open. A nil *Options or the zero value means a durable
// store on disk that logs nothing.
type Options struct {
	// InMemory keeps the data in memory only; the folder is not used.
	InMemory bool
	// NoSync skips the fsync on commit: faster, but a machine or process
	// crash may lose acknowledged writes, so Capabilities reports Durable
	// false.
	NoSync bool
	// Logger receives badger's log messages. nil means silence.
	Logger badger.Logger
	// ReadOnly opens the folder for reading only: it works on a folder the
	// process may not write, shares the folder with other read-only opens
	// (not with a writer), and every write fails with stores.ErrReadOnly.
	// A folder left by a crash whose last writes a writer has not yet
	// recovered fails to open with ErrRecoveryNeeded. badger has no
	// read-only mode on Windows and Plan 9: there Open fails with
	// badger.ErrWindowsNotSupported or badger.ErrPlan9NotSupported.
	ReadOnly bool
	// ShortLived sizes badger for a process that opens the folder for a
	// few reads or writes and then closes it, as a command-line tool does:
	// its write buffer (memtable) is 8 MiB instead of badger's 64 MiB and
	// its block cache 8 MiB instead of 256, which makes opening and
	// closing cheaper. What is written to disk,
	// and its durability, are the same; one transaction holds less
	// (TxLimits: about 1.2 MiB). A folder whose last writer did not close
	// it is opened with the usual size, so that what that writer left is
	// recovered as always.
	ShortLived bool
}

// Sizes of a ShortLived store. The memtable is the smallest badger takes
// with its 1 MiB value threshold (a transaction may hold 15% of the
// memtable, and must hold one value just under the threshold).
const (
	shortMemTable   = 8 << 20
	shortBlockCache = 8 << 20
)

// ErrRecoveryNeeded: a read-only open found writes a crash left half done,
// which only a writer can recover; open the folder once without ReadOnly.
var ErrRecoveryNeeded = errors.New("badgerstore: the folder needs recovery by a writer (it was not closed cleanly)")

// Key layout inside badger. User keys live under dataPrefix, so List never
// meets the store's own keys.
const (
	dataPrefix  = 'd' // 'd' + key: the value, or its first piece
	piecePrefix = 'p' // 'p' + key + uint16 piece number: further pieces
	metaPrefix  = 'm' // 'm' + name: the store's own records
)

// formatKey records the key layout, so that a later release can tell it
// apart from its own.
var (
	formatKey     = []byte{metaPrefix, 'f', 'o', 'r', 'm', 'a', 't'}
	formatVersion = []byte("1")
)

// memPieceSize is the largest value badger handles in memory: values must
// stay below its 1 MiB value threshold (badger v4.9.6 accepts a value of
// exactly 1 MiB in memory, then crashes writing it).
const memPieceSize = 1<<20 - 1

// Listing pages: a page ends after this many items or value bytes. The
// first page of a listing holds one item and each next one twice as many,
// up to pageItems: a caller that stops at the first item (does anything
// exist under this prefix?) reads one value, not a page of them.
const (
	pageItems = 256
	pageBytes = 4 << 20
)

// Store is a stores.Store and stores.Transactor on BadgerDB. Create it with
// Open. It is safe for concurrent use.
type Store struct {
	db        *badger.DB
	caps      stores.Capabilities
	pieceSize int // values above it are split; MaxValueLen on disk
	maxPieces int // most pieces a value can have
	readOnly  bool

	q     batch.Queue[*writeOp] // single-key writes, committed in groups
	locks locks                 // named locks (Lock)

	mu     sync.RWMutex // held for reading by every call, for writing by Close
	closed bool
}

var (
	_ stores.Store       = (*Store)(nil)
	_ stores.Transactor  = (*Store)(nil)
	_ stores.RangeLister = (*Store)(nil)
	_ stores.MultiGetter = (*Store)(nil)
	_ stores.TxSizer     = (*Store)(nil)
)

// Open opens (creating if needed) the badger database in folder dir. If the
// folder is held by another Store or process, the error wraps
// stores.ErrLocked.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	var bo badger.Options
	if o.InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	} else {
		if dir == "" {
			return nil, errors.New("badgerstore: open: no folder given")
		}
		bo = badger.DefaultOptions(dir)
	}
	// A nil Logger makes badger silent.
	bo = bo.WithSyncWrites(!o.NoSync).WithLogger(o.Logger).WithReadOnly(o.ReadOnly && !o.InMemory)
	if o.ShortLived && !o.InMemory {
		bo = bo.WithBlockCacheSize(shortBlockCache)
		if !leftMemtable(dir) {
			bo = bo.WithMemTableSize(shortMemTable)
		}
	}
	db, err := badger.Open(bo)
	if err != nil {
		// badger flattens the cause into text, as for the lock error.
		if errors.Is(err, badger.ErrTruncateNeeded) || strings.Contains(err.Error(), badger.ErrTruncateNeeded.Error()) {
			return nil, fmt.Errorf("badgerstore: open %s: %w", dir, ErrRecoveryNeeded)
		}
		if isLockError(err) {
			return nil, fmt.Errorf("badgerstore: open: badger folder %s is in use by another process: %w", dir, stores.ErrLocked)
		}
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	s := &Store{
		db:        db,
		caps:      stores.Capabilities{CASAtomic: true, Transactions: true, Durable: !o.InMemory && !o.NoSync},
		pieceSize: stores.MaxValueLen,
		readOnly:  o.ReadOnly && !o.InMemory,
	}
	if o.InMemory {
		s.pieceSize = memPieceSize
	}
	s.maxPieces = (stores.MaxValueLen + s.pieceSize - 1) / s.pieceSize
	if err := s.checkFormat(); err != nil {
		db.Close()
		return nil, fmt.Errorf("badgerstore: open %s: %w", dir, err)
	}
	s.q.Run, s.q.Cut = s.commitBatch, nextBatch
	return s, nil
}

// leftMemtable reports whether dir holds a memtable log (a .mem file), which
// badger leaves when its process ends without closing it, and replays into
// a memtable at the next open: into one of the size the writer had, which
// may be the usual 64 MiB. A folder that cannot be read counts as holding
// one, and badger's open says what is wrong with it. The folder is read
// before badger locks it: a writer that opened it in between, filled more
// than a short memtable and died before this open took the lock would make
// badger end this process (nothing is lost: the next open replays the log);
// a writer that comes once this open holds the lock is refused (ErrLocked).
func leftMemtable(dir string) bool {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".mem") {
			return true
		}
	}
	return false
}

// isLockError reports whether badger failed to lock its folder. badger
// flattens the system error into text, so the text is all there is.
func isLockError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot acquire directory lock") ||
		strings.Contains(msg, "Another process is using this Badger database")
}

// checkFormat records the key layout in a new database and refuses a
// database written with another one.
func (s *Store) checkFormat() error {
	check := s.db.Update
	if s.readOnly {
		check = s.db.View
	}
	return check(func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			if s.readOnly {
				return nil // an empty folder: nothing to check
			}
			return txn.Set(formatKey, formatVersion)
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if !bytes.Equal(v, formatVersion) {
				return fmt.Errorf("unknown data format %q", v)
			}
			return nil
		})
	})
}

// Capabilities reports CASAtomic and Transactions, Durable unless the store
// is in memory or NoSync is set, and not Shared.
func (s *Store) Capabilities() stores.Capabilities { return s.caps }

// begin checks the context and holds off Close until the returned function
// is called.
func (s *Store) begin(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, stores.ErrClosed
	}
	return s.mu.RUnlock, nil
}

// beginWrite is begin for a call that writes: a read-only store refuses it.
func (s *Store) beginWrite(ctx context.Context) (func(), error) {
	if s.readOnly {
		return nil, fmt.Errorf("badgerstore: %w", stores.ErrReadOnly)
	}
	return s.begin(ctx)
}

func dataKey(key string) []byte {
	b := make([]byte, 0, 1+len(key))
	return append(append(b, dataPrefix), key...)
}

func pieceKey(key string, n int) []byte {
	b := make([]byte, 0, 3+len(key))
	b = append(append(b, piecePrefix), key...)
	return binary.BigEndian.AppendUint16(b, uint16(n))
}

// Get returns the item at key.
func (s *Store) Get(ctx context.Context, key string) (stores.Item, error) {
	if err := stores.CheckKey(key); err != nil {
		return stores.Item{}, err
	}
	done, err := s.begin(ctx)
	if err != nil {
		return stores.Item{}, err
	}
	defer done()
	var it stores.Item
	err = s.db.View(func(txn *badger.Txn) error {
		it, err = s.read(txn, key)
		return err
	})
	if err != nil {
		return stores.Item{}, s.wrap("get", err)
	}
	return it, nil
}

// read returns the item at key as txn sees it.
func (s *Store) read(txn *badger.Txn, key string) (stores.Item, error) {
	item, err := txn.Get(dataKey(key))
	if err != nil {
		return stores.Item{}, err
	}
	return s.readItem(txn, key, item)
}

// readItem assembles the value of item, the first piece of key.
func (s *Store) readItem(txn *badger.Txn, key string, item *badger.Item) (stores.Item, error) {
	pieces := int(item.UserMeta())
	if pieces == 0 {
		v, err := item.ValueCopy(nil)
		if err != nil {
			return stores.Item{}, err
		}
		return stores.Item{Key: key, Value: v, Version: item.Version()}, nil
	}
	if pieces > s.maxPieces {
		return stores.Item{}, fmt.Errorf("key has %d pieces", pieces)
	}
	value := make([]byte, 0, pieces*s.pieceSize)
	value, err := item.ValueCopy(value)
	if err != nil {
		return stores.Item{}, err
	}
	for n := 1; n < pieces; n++ {
		p, err := txn.Get(pieceKey(key, n))
		if err != nil {
			return stores.Item{}, fmt.Errorf("piece %d of %d: %w", n, pieces, err)
		}
		if err := p.Value(func(v []byte) error { value = append(value, v...); return nil }); err != nil {
			return stores.Item{}, err
		}
	}
	return stores.Item{Key: key, Value: value, Version: item.Version()}, nil
}

// versionIn returns the version of key as txn sees it (0 if missing) and
// records the read for conflict detection.
func versionIn(txn *badger.Txn, key string) (uint64, error) {
	item, err := txn.Get(dataKey(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return item.Version(), nil
}

// write sets key to value in txn and returns the entry of its first piece,
// whose key badger stamps with the commit timestamp. value must not change
// until txn ends.
func (s *Store) write(txn *badger.Txn, key string, value []byte) (*badger.Entry, error) {
	pieces := 1
	if len(value) > s.pieceSize {
		pieces = (len(value) + s.pieceSize - 1) / s.pieceSize
	}
	first := value[:min(len(value), s.pieceSize)]
	meta := byte(0)
	if pieces > 1 {
		meta = byte(pieces)
	}
	e := badger.NewEntry(dataKey(key), first).WithMeta(meta)
	if err := txn.SetEntry(e); err != nil {
		return nil, err
	}
	for n := 1; n < pieces; n++ {
		piece := value[n*s.pieceSize : min(len(value), (n+1)*s.pieceSize)]
		if err := txn.Set(pieceKey(key, n), piece); err != nil {
			return nil, err
		}
	}
	if err := s.deletePieces(txn, key, pieces); err != nil {
		return nil, err
	}
	return e, nil
}

// deletePieces removes the pieces of key from number from on. Only stores
// that split values have pieces; the deletes are blind, so a write never
// needs to read what it replaces.
func (s *Store) deletePieces(txn *badger.Txn, key string, from int) error {
	for n := max(from, 1); n < s.maxPieces; n++ {
		if err := txn.Delete(pieceKey(key, n)); err != nil {
			return err
		}
	}
	return nil
}

// commitVersion returns the version badger gave to the entry e of key.
//
// badger does not return the commit timestamp, but at commit it rewrites the
// key of every entry it was handed to key+timestamp (the internal key, whose
// last 8 bytes are math.MaxUint64-ts, big endian). This is read here and
// checked, so that a badger release that stops doing it fails loudly in the
// conformance suite instead of handing out wrong versions.
func commitVersion(e *badger.Entry, key string) (uint64, error) {
	k := e.Key
	if len(k) != 1+len(key)+8 || k[0] != dataPrefix || string(k[1:1+len(key)]) != key {
		return 0, errors.New("cannot learn the commit version from this badger release")
	}
	return math.MaxUint64 - binary.BigEndian.Uint64(k[len(k)-8:]), nil
}

// Put writes value at key.
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return s.put(ctx, "put", key, value, false, 0)
}

// CompareAndSwap writes value at key if its version is expected, atomically
// against every other writer of the database.
func (s *Store) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	return s.put(ctx, "compare and swap", key, value, true, expected)
}

func (s *Store) put(ctx context.Context, op, key string, value []byte, cas bool, expected uint64) (uint64, error) {
	if err := stores.CheckKey(key); err != nil {
		return 0, err
	}
	if err := stores.CheckValue(value); err != nil {
		return 0, err
	}
	done, err := s.beginWrite(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	w := &writeOp{name: op, key: key, value: value, cas: cas, expected: expected}
	return s.submit(ctx, w)
}

// Delete removes key.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	done, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer done()
	_, err = s.submit(ctx, &writeOp{name: "delete", key: key, del: true})
	return err
}

// remove deletes key and its pieces in txn.
func (s *Store) remove(txn *badger.Txn, key string) error {
	if err := txn.Delete(dataKey(key)); err != nil {
		return err
	}
	return s.deletePieces(txn, key, 1)
}

// List yields the items under prefix in key order, a page at a time; see
// the package documentation.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return s.ListAfter(ctx, prefix, "")
}

// ListAfter is List without the keys up to after: each page seeks straight
// to its first key (the first after after, for the first page), so the keys
// before after are never read.
func (s *Store) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		from := dataKey(prefix)
		if after != "" {
			// The smallest key after after: after followed by a zero byte.
			if next := append(dataKey(after), 0); bytes.Compare(next, from) > 0 {
				from = next
			}
		}
		for n := 1; from != nil; n = min(2*n, pageItems) {
			var page []stores.Item
			var err error
			page, from, err = s.page(ctx, prefix, from, n)
			if err != nil {
				yield(stores.Item{}, err)
				return
			}
			for _, it := range page {
				if !yield(it, nil) {
					return
				}
			}
		}
	}
}

// page reads up to n items under prefix from badger key from on, and
// returns the badger key to continue from, or nil at the end.
func (s *Store) page(ctx context.Context, prefix string, from []byte, n int) ([]stores.Item, []byte, error) {
	done, err := s.begin(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var (
		page []stores.Item
		next []byte
		size int
	)
	err = s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = dataKey(prefix)
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(from); it.Valid(); it.Next() {
			item := it.Item()
			if len(page) == n || size >= pageBytes {
				next = item.KeyCopy(nil)
				return nil
			}
			entry, err := s.readItem(txn, string(item.Key()[1:]), item)
			if err != nil {
				return err
			}
			page = append(page, entry)
			size += len(entry.Value)
		}
		return nil
	})
	if err != nil {
		return nil, nil, s.wrap("list", err)
	}
	return page, next, nil
}

// GetMany returns the items of the keys that exist, in ascending key order,
// each once, read in one read-only transaction: one snapshot.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	for _, key := range keys {
		if err := stores.CheckKey(key); err != nil {
			return nil, err
		}
	}
	done, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	items := make([]stores.Item, 0, len(sorted))
	err = s.db.View(func(txn *badger.Txn) error {
		for _, key := range sorted {
			it, err := s.read(txn, key)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		return nil
	})
	if err != nil {
		return nil, s.wrap("get many", err)
	}
	return items, nil
}

// txWriteOverhead is what each write of a transaction counts for in
// TxLimits beyond its key and value: badger counts its own key prefix
// (1 byte), the commit timestamp (8, plus 2 spare), two meta bytes, and for a
// value it keeps in its value log a pointer of 12 bytes instead of the value.
const txWriteOverhead = 25

// txnReserve is the size badger counts for a transaction's end mark before
// any write: its key, "!badger!txn", and 10.
const txnReserve = int64(len("!badger!txn") + 10)

// TxLimits reports how much one Update may write: badger refuses a
// transaction whose entries reach 15% of its memtable (64 MiB), about
// 9.6 MiB, or its count limit. In memory each write is several badger
// entries (the pieces of a value, see the package documentation), and the
// limits are divided accordingly.
func (s *Store) TxLimits() stores.TxLimits {
	// A badger transaction starts with one entry of its own (its end mark,
	// txnReserve bytes), and fails when its count or size reaches the limit.
	per := int64(s.maxPieces)
	return stores.TxLimits{
		MaxWrites:     int((s.db.MaxBatchCount() - 2) / per),
		MaxBytes:      int((s.db.MaxBatchSize() - 1 - txnReserve) / per),
		WriteOverhead: txWriteOverhead,
	}
}

// Update runs fn in a badger read-write transaction and commits it if fn
// returns nil. Reads made through the Tx are checked at commit: if another
// writer changed one of them meanwhile, Update returns stores.ErrConflict
// and writes nothing. Keys only written, not read, are not checked; the
// later commit wins, which is a valid serial order.
func (s *Store) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	done, err := s.beginWrite(ctx)
	if err != nil {
		return err
	}
	defer done()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	t := &tx{s: s, txn: txn, written: map[string]bool{}}
	if err := fn(t); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return s.wrap("update", err)
	}
	return nil
}

// wrap translates badger's errors into the stores sentinels.
func (s *Store) wrap(op string, err error) error {
	switch {
	case errors.Is(err, stores.ErrConflict), errors.Is(err, badger.ErrConflict):
		return stores.ErrConflict
	case errors.Is(err, badger.ErrKeyNotFound), errors.Is(err, stores.ErrNotFound):
		return stores.ErrNotFound
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("badgerstore: %s: transaction too big: %w", op, stores.ErrTooLarge)
	case errors.Is(err, badger.ErrDBClosed):
		return stores.ErrClosed
	}
	return fmt.Errorf("badgerstore: %s: %w", op, err)
}

// Close closes the database, waiting for calls in progress. Later calls
// return stores.ErrClosed; closing twice is not an error. Close must not be
// called from inside an Update closure.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// No write is in flight: each holds the read lock until it is done.
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("badgerstore: close: %w", err)
	}
	return nil
}

// tx is the stores.Tx of Update.
type tx struct {
	s       *Store
	txn     *badger.Txn
	written map[string]bool // keys this transaction wrote
}

// Get returns the item at key as the transaction sees it and records the
// read, so that a concurrent change of key makes the commit fail.
func (t *tx) Get(key string) (stores.Item, error) {
	if err := stores.CheckKey(key); err != nil {
		return stores.Item{}, err
	}
	it, err := t.s.read(t.txn, key)
	if err != nil {
		return stores.Item{}, t.s.wrap("get", err)
	}
	if t.written[key] {
		it.Version = 0 // badger reports its read timestamp for pending writes
	}
	return it, nil
}

// Put writes value at key when the transaction commits.
func (t *tx) Put(key string, value []byte) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	if err := stores.CheckValue(value); err != nil {
		return err
	}
	if _, err := t.s.write(t.txn, key, slices.Clone(value)); err != nil {
		return t.s.wrap("put", err)
	}
	t.written[key] = true
	return nil
}

// Delete removes key when the transaction commits.
func (t *tx) Delete(key string) error {
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	if err := t.s.remove(t.txn, key); err != nil {
		return t.s.wrap("delete", err)
	}
	t.written[key] = true
	return nil
}
