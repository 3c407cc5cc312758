package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noydb-go/noydb/stores"
)

// DefaultSchema is the PostgreSQL schema used when Options.Schema is empty.
const DefaultSchema = "noydb"

// Options configures Open. The zero value, like a nil *Options, means the
// documented defaults.
type Options struct {
	// Schema is the PostgreSQL schema holding the store's tables; it is
	// created if missing. Empty means DefaultSchema. It must be 1 to 63
	// lower-case ASCII letters, digits or underscores, not starting with a digit.
	Schema string
	// MaxConns caps the connection pool. Zero keeps pool_max_conns from the
	// connection string, or else pgx's default (the larger of 4 and the number
	// of CPUs).
	MaxConns int32
}

// listPageRows and listPageBytes bound one page of List: at most that many
// rows, and no further row once the values read add up to that many bytes.
const (
	listPageRows  = 256
	listPageBytes = 4 << 20
)

// seqScanSetting is the server setting that lets the planner scan a table
// whole. Open turns it off unless the connection string sets it. Every
// statement of the store looks keys up, or reads a range of keys, through
// the items table's primary key; a whole-table scan is only ever chosen for
// them while the table is tiny. pgx prepares each statement once per
// connection and the server soon keeps one generic plan for it, chosen from
// the table's size at that moment: chosen on a new vault, a scan would stay
// in use while the table grew (until autovacuum analyzed it), and every
// write would make the next slower. With scans off the kept plan uses the
// index whatever the table's size, and no statement is planned twice.
const seqScanSetting = "enable_seqscan"

// setsSeqScan reports whether the startup parameters of a connection
// string set seqScanSetting: as a parameter of its own, in any case (the
// server's names are), or in options ("-c enable_seqscan=on", or
// "--enable-seqscan=on", whose dashes the server reads as underscores),
// which the server applies before the other startup parameters. A second
// parameter of the same name would leave the value to the order the
// parameters are sent in.
func setsSeqScan(params map[string]string) bool {
	for k := range params {
		if strings.EqualFold(k, seqScanSetting) {
			return true
		}
	}
	opts := strings.ReplaceAll(strings.ToLower(params["options"]), "-", "_")
	return strings.Contains(opts, seqScanSetting)
}

// validSchema reports whether name is a schema name pgstore accepts:
// ^[a-z_][a-z0-9_]{0,62}$ (checked by hand: compiling that pattern at
// start-up cost every process linking pgstore a quarter of a millisecond).
func validSchema(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z':
		case i > 0 && '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return true
}

// Store is a stores.Store, stores.Transactor, stores.Locker,
// stores.RangeLister and stores.MultiGetter on PostgreSQL. Create it with
// Open. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	secret string // the connection's password, redacted from every error
	closed atomic.Bool
	q      queries

	// counters, when set (by tests, before any use), add up what Update's
	// transactions sent.
	counters *txCounters
}

// txCounters add up the statements and round trips of transactions.
type txCounters struct {
	statements, roundTrips atomic.Int64
}

var (
	_ stores.Store       = (*Store)(nil)
	_ stores.Transactor  = (*Store)(nil)
	_ stores.RangeLister = (*Store)(nil)
	_ stores.MultiGetter = (*Store)(nil)
)

// queries holds the statements, with the schema name filled in.
type queries struct {
	get, put, insert, update, delete string
	putMany, deleteMany              string
	getOrClaim, unclaim              string
	lockOrClaim, readMany            string
	list, listAll                    string
}

// Open connects to the PostgreSQL server of connString (a postgres:// URL or
// key=value string, as pgx accepts), creates or migrates the store's schema
// and returns the store. A nil opts means the defaults.
func Open(ctx context.Context, connString string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if !validSchema(o.Schema) {
		return nil, fmt.Errorf("pgstore: open: %w: %q", ErrInvalidSchema, o.Schema)
	}
	if o.MaxConns < 0 {
		return nil, fmt.Errorf("pgstore: open: negative MaxConns %d", o.MaxConns)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// The parser's error and its ConnString field may hold the password.
		return nil, fmt.Errorf("pgstore: open: %w", ErrInvalidConnString)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if !setsSeqScan(cfg.ConnConfig.RuntimeParams) {
		cfg.ConnConfig.RuntimeParams[seqScanSetting] = "off"
	}
	s := &Store{schema: o.Schema, secret: cfg.ConnConfig.Password}
	s.q = queries{
		get: s.sql(`SELECT value, version FROM {s}.items WHERE key = $1`),
		put: s.sql(`INSERT INTO {s}.items (key, value, version) VALUES ($1, $2, {next})
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version
			RETURNING version`),
		insert: s.sql(`INSERT INTO {s}.items (key, value, version) VALUES ($1, $2, {next})
			ON CONFLICT (key) DO NOTHING RETURNING version`),
		update: s.sql(`UPDATE {s}.items SET value = $3, version = {next}
			WHERE key = $1 AND version = $2 RETURNING version`),
		delete: s.sql(`DELETE FROM {s}.items WHERE key = $1`),
		// Tx.Put and Tx.Delete: a transaction's pending writes, at most one
		// of each per round trip. putMany upserts any number of distinct keys,
		// each with a new version of its own, in ascending key order, so the
		// row locks it takes (or waits for) come in that order; ORDER BY
		// keeps the inserts in it whatever the planner does. deleteMany
		// removes any number of keys, which Tx sends sorted too.
		putMany: s.sql(`INSERT INTO {s}.items (key, value, version)
			SELECT k, v, {next} FROM unnest($1::bytea[], $2::bytea[]) AS w(k, v) ORDER BY k
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version`),
		deleteMany: s.sql(`DELETE FROM {s}.items WHERE key = ANY($1::bytea[])`),
		// Tx.Get, in one statement: lock the key's row and return it, or,
		// if there is none, claim the key and return the claim (version 0).
		// A claim is a row that Update deletes before commit: no other
		// transaction ever sees it, but it holds the key's unique-index
		// entry until this one ends, so a concurrent Tx.Get or creator of
		// the key waits. No row at all means another transaction created the key
		// while the claim waited for it: the statement's snapshot predates
		// that row, and the next statement will see and lock it.
		getOrClaim: s.sql(`WITH cur AS (
				SELECT value, version FROM {s}.items WHERE key = $1 FOR UPDATE
			), claim AS (
				INSERT INTO {s}.items (key, value, version)
				SELECT $1::bytea, ''::bytea, 0 WHERE NOT EXISTS (SELECT FROM cur)
				ON CONFLICT (key) DO NOTHING
				RETURNING value, version
			)
			SELECT value, version FROM cur UNION ALL SELECT value, version FROM claim`),
		unclaim: s.sql(`DELETE FROM {s}.items WHERE key = ANY($1) AND version = 0`),
		// Tx.Prefetch, first statement: for each key in ascending byte
		// order, one at a time, either claim it (a claim row, as
		// getOrClaim's) or lock its row. ON CONFLICT DO UPDATE locks the
		// conflicting row even though WHERE false updates nothing, and it
		// settles a concurrent creator itself: it waits for the creator's
		// transaction and then locks the committed row, or inserts if
		// there is none. The keys come sorted and distinct; ORDER BY keeps
		// the inserts in that order whatever the planner does. Tx also
		// sends it before a putMany and a deleteMany that go together.
		lockOrClaim: s.sql(`INSERT INTO {s}.items AS i (key, value, version)
			SELECT k, ''::bytea, 0 FROM unnest($1::bytea[]) AS k ORDER BY k
			ON CONFLICT (key) DO UPDATE SET version = i.version WHERE false`),
		// Tx.Prefetch, second statement, in the same round trip: read what
		// the first one locked or claimed. It is a statement of its own so
		// that its snapshot includes whatever a creator waited for
		// committed; the rows cannot change any more.
		readMany: s.sql(`SELECT key, value, version FROM {s}.items WHERE key = ANY($1) ORDER BY key`),
		// Pages end after listPageRows rows or once the values before a row
		// add up to listPageBytes. octet_length of a TOASTed value reads only
		// its header.
		list:    s.sql(listSQL(`AND key < $3`)),
		listAll: s.sql(listSQL(``)),
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, s.wrap(ctx, "open", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, s.wrap(ctx, "open", err)
	}
	return s, nil
}

func listSQL(upper string) string {
	return fmt.Sprintf(`SELECT key, value, version FROM (
		SELECT key, value, version, sum(octet_length(value)) OVER (ORDER BY key ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
		FROM {s}.items WHERE key >= $1 AND key > $2 %s ORDER BY key LIMIT %d
	) page WHERE before IS NULL OR before < %d ORDER BY key`, upper, listPageRows, listPageBytes)
}

// sql fills in the schema: {s} is the quoted schema, {next} the next version.
func (s *Store) sql(stmt string) string {
	quoted := `"` + s.schema + `"` // the name is validated: no quotes inside
	return strings.NewReplacer(
		"{s}", quoted,
		"{next}", `nextval('`+quoted+`.versions')`,
	).Replace(stmt)
}

// Capabilities reports that the store has it all: atomic compare-and-swap,
// transactions, durable writes, and sharing between processes and machines.
func (s *Store) Capabilities() stores.Capabilities {
	return stores.Capabilities{CASAtomic: true, Transactions: true, Durable: true, Shared: true}
}

// check runs before every call.
func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return stores.ErrClosed
	}
	return ctx.Err()
}

// Get returns the item at key, or stores.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) (stores.Item, error) {
	if err := s.check(ctx); err != nil {
		return stores.Item{}, err
	}
	if err := stores.CheckKey(key); err != nil {
		return stores.Item{}, err
	}
	var value []byte
	var version int64
	err := s.pool.QueryRow(ctx, s.q.get, []byte(key)).Scan(&value, &version)
	if err != nil {
		return stores.Item{}, s.wrap(ctx, "get", err)
	}
	return stores.Item{Key: key, Value: value, Version: uint64(version)}, nil
}

// Put writes value at key unconditionally and returns its new version.
func (s *Store) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := s.checkWrite(ctx, key, value); err != nil {
		return 0, err
	}
	var version int64
	if err := s.pool.QueryRow(ctx, s.q.put, []byte(key), nonNil(value)).Scan(&version); err != nil {
		return 0, s.wrap(ctx, "put", err)
	}
	return uint64(version), nil
}

// CompareAndSwap writes value at key if the key's version is expected (0: the
// key must not exist) and returns the new version; otherwise it returns
// stores.ErrConflict. It is one conditional statement, atomic against every
// other writer.
func (s *Store) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	if err := s.checkWrite(ctx, key, value); err != nil {
		return 0, err
	}
	if expected > math.MaxInt64 {
		return 0, stores.ErrConflict // no key ever has such a version
	}
	var version int64
	var err error
	if expected == 0 {
		err = s.pool.QueryRow(ctx, s.q.insert, []byte(key), nonNil(value)).Scan(&version)
	} else {
		err = s.pool.QueryRow(ctx, s.q.update, []byte(key), int64(expected), nonNil(value)).Scan(&version)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, stores.ErrConflict
	}
	if err != nil {
		return 0, s.wrap(ctx, "compare-and-swap", err)
	}
	return uint64(version), nil
}

// Delete removes key. Deleting a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.q.delete, []byte(key)); err != nil {
		return s.wrap(ctx, "delete", err)
	}
	return nil
}

// List yields the items whose keys start with prefix, in ascending byte order
// of their keys. It reads a page at a time and holds no connection between
// pages, so the loop body may use the store; items written or deleted during
// the loop may or may not be seen.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return s.ListAfter(ctx, prefix, "")
}

// ListAfter is List without the keys up to after: it yields the items whose
// keys start with prefix and sort after after, in ascending byte order. Each
// page is one read of the primary key's index from the last key yielded (from
// after, for the first), so the keys before after cost nothing: reading a
// feed's entries after a cursor costs what it yields, however long the feed.
func (s *Store) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		lower := nonNil([]byte(prefix)) // pgx would send nil as NULL
		upper, bounded := prefixEnd(lower)
		// The page starts after cursor: after, then the last key yielded.
		// Keys are never empty, so every key is after "".
		cursor := nonNil([]byte(after))
		for {
			if err := s.check(ctx); err != nil {
				yield(stores.Item{}, err)
				return
			}
			page, err := s.listPage(ctx, lower, cursor, upper, bounded)
			if err != nil {
				yield(stores.Item{}, s.wrap(ctx, "list", err))
				return
			}
			for _, it := range page {
				if !yield(it, nil) {
					return
				}
			}
			if len(page) == 0 {
				return
			}
			cursor = []byte(page[len(page)-1].Key)
		}
	}
}

// GetMany returns the items of the keys that exist, in ascending byte order
// of their keys, each once; missing keys are left out. It only reads (no
// lock, no claim): one statement, one round trip, for up to 64 MiB of keys,
// each statement a snapshot of its own.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	for _, key := range keys {
		if err := stores.CheckKey(key); err != nil {
			return nil, err
		}
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted) // byte order, as bytea compares
	sorted = slices.Compact(sorted)
	items := make([]stores.Item, 0, len(sorted))
	for len(sorted) > 0 {
		n, size := 0, 0
		for n < len(sorted) && (n == 0 || size+len(sorted[n]) <= maxWriteBytes) {
			size += len(sorted[n])
			n++
		}
		kbs := make([][]byte, n)
		for i, key := range sorted[:n] {
			kbs[i] = []byte(key)
		}
		sorted = sorted[n:]
		var err error
		if items, err = s.readMany(ctx, kbs, items); err != nil {
			return nil, s.wrap(ctx, "get many", err)
		}
	}
	return items, nil
}

// readMany appends to items the rows of keys, in key order.
func (s *Store) readMany(ctx context.Context, keys [][]byte, items []stores.Item) ([]stores.Item, error) {
	rows, err := s.pool.Query(ctx, s.q.readMany, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var key, value []byte
		var version int64
		if err := rows.Scan(&key, &value, &version); err != nil {
			return nil, err
		}
		items = append(items, stores.Item{Key: string(key), Value: value, Version: uint64(version)})
	}
	return items, rows.Err()
}

// listOff is the planner setting a page of List is read without (see listPage).
const listOff = "enable_sort"

// listPage reads the page of keys in [lower, upper) after the key after.
//
// The page is read with sorts disabled for its statement alone (in the
// same round trip, local to its implicit transaction), which leaves the
// planner one way to return the keys in order: a read of the primary
// key's index from after, which stops at the page's end. Left to its
// estimates, the planner picks a bitmap read and a sort of every row in
// the range whenever it believes the range holds a few rows: on a table
// that has grown since it was last analyzed (a hub's first push of many
// records, before autovacuum's next analyze), and, for good, in the plan
// it keeps for a prepared statement once it ran on the table when it was
// small. Each page then reads the whole rest of the range, and a read of
// a feed is quadratic in its length.
func (s *Store) listPage(ctx context.Context, lower, after, upper []byte, bounded bool) ([]stores.Item, error) {
	var b pgx.Batch
	b.Queue(`SELECT set_config('` + listOff + `', 'off', true)`)
	if bounded {
		b.Queue(s.q.list, lower, after, upper)
	} else {
		b.Queue(s.q.listAll, lower, after)
	}
	br := s.pool.SendBatch(ctx, &b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []stores.Item
	for rows.Next() {
		var key, value []byte
		var version int64
		if err := rows.Scan(&key, &value, &version); err != nil {
			return nil, err
		}
		page = append(page, stores.Item{Key: string(key), Value: value, Version: uint64(version)})
	}
	return page, rows.Err()
}

// prefixEnd returns the smallest byte string greater than every string that
// starts with prefix, or false when there is none (prefix is empty or all 0xFF).
func prefixEnd(prefix []byte) ([]byte, bool) {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1], true
		}
	}
	return nil, false
}

// Close closes the connection pool, waiting for connections in use to be
// returned. Later calls return stores.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	if !s.closed.Swap(true) {
		s.pool.Close()
	}
	return nil
}

func (s *Store) checkWrite(ctx context.Context, key string, value []byte) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	return stores.CheckValue(value)
}

// nonNil maps a nil value to an empty one: pgx sends a nil slice as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// wrap translates a driver error: closed store → stores.ErrClosed, done
// context → ctx.Err(), no rows → stores.ErrNotFound, deadlock, serialization
// failure or unique violation → stores.ErrConflict, a server not reached or
// a broken connection → stores.ErrUnavailable; anything else is wrapped
// with the operation, with the password redacted.
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case s.closed.Load():
		return stores.ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, pgx.ErrNoRows):
		return stores.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "23505": // serialization_failure, deadlock_detected, unique_violation
			return fmt.Errorf("pgstore: %s: %w (SQLSTATE %s)", op, stores.ErrConflict, pgErr.Code)
		}
	}
	var kind error // stores.ErrUnavailable when the server was not reached
	if unreachable(err) {
		kind = stores.ErrUnavailable
	}
	if s.secret != "" && strings.Contains(err.Error(), s.secret) {
		// Drop the chain too: an inner error would still print the password.
		msg := strings.ReplaceAll(err.Error(), s.secret, "xxxxx")
		if kind != nil {
			return fmt.Errorf("pgstore: %s: %w: %s", op, kind, msg)
		}
		return fmt.Errorf("pgstore: %s: %s", op, msg)
	}
	if kind != nil {
		return fmt.Errorf("pgstore: %s: %w: %w", op, kind, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}
