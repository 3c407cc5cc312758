// Package pgstore is a stores.Store on PostgreSQL, through pgx v5: the shared,
// durable authority for vaults used by many processes or machines at once.
//
// # Usage
//
//	s, err := pgstore.Open(ctx, "postgres://app:secret@db.example/noydb", nil)
//	if err != nil { … }
//	defer s.Close()
//
// Open creates or migrates its tables in a PostgreSQL schema (Options.Schema,
// "noydb" by default), so several stores can share a database and tests can
// isolate themselves with a schema each. Migration runs under a transaction-
// scoped advisory lock, so any number of processes may open the same schema at
// once; the schema version is recorded in the schema's meta table and Open
// refuses a schema written by a newer pgstore with ErrSchemaTooNew.
//
// # Storage
//
// Items live in one table, keyed by the key's bytes (bytea, so keys may hold
// NUL and List's order is byte order). Versions come from one sequence per
// schema, so a version is never handed out twice, even to a key that was
// deleted and created again.
//
// CompareAndSwap is one conditional statement (an UPDATE guarded by the
// expected version, or an INSERT … ON CONFLICT DO NOTHING for version 0), so
// it is atomic against every other writer. Update runs its closure in a READ
// COMMITTED transaction; Tx.Get locks the row it reads (SELECT … FOR UPDATE), so
// concurrent transactions on a counter row queue on the row lock instead of
// failing, the counter-row pattern that makes gap-free numbering cheap on
// PostgreSQL. Tx.Get of a missing key claims the key with a row that no other
// transaction ever sees, so two transactions creating the same key queue too;
// the locking read and the claim are one statement. A deadlock or
// serialization failure ends the transaction with stores.ErrConflict.
//
// The Tx also implements stores.Prefetcher: Prefetch(keys) locks or claims
// all the keys it does not hold yet in one round trip, taking them one at a
// time in ascending byte order whatever order they are given in (an INSERT of
// claims, in key order, whose ON CONFLICT clause locks the row it finds
// instead), and then reads them with a second statement in the same round
// trip. Transactions that prefetch overlapping sets of keys therefore queue
// on the first key they share instead of deadlocking, and a later Get of a
// prefetched key costs no round trip.
//
// A transaction's statements are pipelined, because each round trip is made
// while the rows it locked stay locked. Tx.Put and Tx.Delete send nothing:
// they record the write, the last write of a key replacing any earlier one.
// The next round trip, that of a Tx.Get that needs the server, of a Prefetch
// or of the commit, carries the recorded writes first, as two statements
// whatever their number: one upsert of every key put (each row with a new
// version of its own, the rows locked in ascending key order) and one delete
// of every key deleted, after a statement that locks or claims them all in
// ascending key order, as Prefetch does, when there are both; writes carrying over 64 MiB are
// cut into several such statements, in key order, as one protocol message
// holds 1 GiB at most. BEGIN travels with the first round trip
// and COMMIT with the last, after the removal of the transaction's claims. A
// Get of a key the transaction already holds (read, claimed or written) is
// answered without a round trip. So a transaction costs one round trip per Get
// of a new key, or one per Prefetch however many keys it names, plus one to
// commit, and a few statements per round trip rather than one per key
// written. A write that fails is reported by the Get or Prefetch whose round
// trip carried it, or by Update, and spoils the transaction.
//
// Every statement is prepared once per connection, and the server soon keeps
// one generic plan for it. Open turns the server's enable_seqscan off unless
// the connection string sets it: every statement finds its rows through the
// items table's primary key, and a plan chosen while the table is tiny would
// otherwise scan it whole ever after (until autovacuum analyzed it), so that
// a fresh vault under load lost four fifths of its throughput as it grew.
//
// # Bulk reads
//
// List reads pages of up to 256 rows (or 4 MiB of values) by keyset: each
// page is one range read of the primary key's index, starting after the
// last key of the page before, with sorts turned off for its statement
// (a bitmap read and a sort of the whole rest of the range is what the
// planner picks when it believes the range small, as on a table that grew
// since its last analyze, and each page would read it all). ListAfter (stores.RangeLister) starts the
// first page after a given key, so a change feed whose keys sort by
// position is read from a device's cursor at the cost of what it yields,
// however long the feed. GetMany (stores.MultiGetter) reads any number of
// keys in one statement and one round trip (per 64 MiB of keys), without
// locks or claims: the read for a batch of records named by a feed. Both
// statements are checked, plan and pages read, by the tests in feed_test.go;
// the BenchmarkHub benchmarks measure them.
//
// # Concurrency
//
// A Store is safe for concurrent use; it holds a pgxpool.Pool
// (Options.MaxConns). A Tx is not. List reads a page at a time and holds no
// connection while the loop body runs, so the body may use the store, and
// stopping early leaks nothing; it is not a snapshot across pages.
//
// The Store is a stores.Locker: Lock and TryLock take a named exclusive
// lock shared by every process on every machine using the schema, a
// session-level advisory lock on a 64-bit hash of the schema and the name,
// held by a pooled connection until it is released or its holder dies.
// A deferred-numbering pass try-locks its series with it, so one pass runs
// at a time across a fleet. Two names whose hashes collide share one lock,
// which can only over-serialize, never let two holders of one name in. A
// waiter polls (pg_try_advisory_lock, backing off up to 50 ms) and holds
// no connection while it waits. The vault's ledger does not take these
// locks: its transactions already queue on row locks.
//
// # Caveats
//
// Errors never contain the connection string's password: Open reports an
// unparsable connection string as ErrInvalidConnString without details, and
// any driver message that quotes the password is redacted.
package pgstore
