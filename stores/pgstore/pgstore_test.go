package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// guard bounds calls that would hang forever if the store leaked a pool
// connection or a lock; it is never used to assert how long anything takes.
const guard = 60 * time.Second

func guardCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	t.Cleanup(cancel)
	return ctx
}

// exec runs one statement on the test server outside any store.
func exec(t testing.TB, dbURL, sql string, args ...any) {
	t.Helper()
	ctx := guardCtx(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err, sql)
}

func queryInt(t testing.TB, dbURL, sql string, args ...any) int64 {
	t.Helper()
	ctx := guardCtx(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	var n int64
	require.NoError(t, conn.QueryRow(ctx, sql, args...).Scan(&n), sql)
	return n
}

// increment is the read-modify-write of a decimal counter in a transaction;
// a missing counter counts as 0. It returns the value it read.
func increment(ctx context.Context, tr stores.Transactor, key string) (int, error) {
	seen := -1
	err := tr.Update(ctx, func(tx stores.Tx) error {
		it, err := tx.Get(key)
		switch {
		case errors.Is(err, stores.ErrNotFound):
			seen = 0
		case err != nil:
			return err
		default:
			if seen, err = strconv.Atoi(string(it.Value)); err != nil {
				return err
			}
		}
		return tx.Put(key, []byte(strconv.Itoa(seen+1)))
	})
	return seen, err
}

func TestOpenConcurrentMigration(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := guardCtx(t)

	const openers = 8
	opened := make([]*pgstore.Store, openers)
	errs := make([]error, openers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range openers {
		wg.Go(func() {
			<-start
			opened[i], errs[i] = pgstore.Open(ctx, dbURL, &pgstore.Options{Schema: schema, MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "opener %d", i)
		t.Cleanup(func() { _ = opened[i].Close() })
	}

	// They all share one table.
	v, err := opened[0].Put(ctx, "shared", []byte("hello"))
	require.NoError(t, err)
	for i, s := range opened {
		it, err := s.Get(ctx, "shared")
		if assert.NoError(t, err, "store %d", i) {
			assert.Equal(t, v, it.Version, "store %d", i)
		}
	}
	assert.Equal(t, int64(1), queryInt(t, dbURL,
		`SELECT count(*) FROM "`+schema+`".meta WHERE name = 'schema_version'`), "one recorded schema version")
	assert.Equal(t, int64(1), queryInt(t, dbURL,
		`SELECT value FROM "`+schema+`".meta WHERE name = 'schema_version'`), "schema version")

	// Opening a current schema again changes nothing.
	again, err := pgstore.Open(ctx, dbURL, &pgstore.Options{Schema: schema})
	require.NoError(t, err)
	defer again.Close()
	it, err := again.Get(ctx, "shared")
	require.NoError(t, err)
	assert.Equal(t, v, it.Version)
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := guardCtx(t)
	s, err := pgstore.Open(ctx, dbURL, &pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	exec(t, dbURL, `UPDATE "`+schema+`".meta SET value = 999 WHERE name = 'schema_version'`)
	_, err = pgstore.Open(ctx, dbURL, &pgstore.Options{Schema: schema})
	assert.ErrorIs(t, err, pgstore.ErrSchemaTooNew)
}

func TestOpenBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, schema := range []string{"Upper", "1digit", "has-dash", `q"uote`, strings.Repeat("s", 64), "a b"} {
		_, err := pgstore.Open(ctx, "postgres://u:p@127.0.0.1:1/db", &pgstore.Options{Schema: schema})
		assert.ErrorIs(t, err, pgstore.ErrInvalidSchema, "schema %q", schema)
	}
	_, err := pgstore.Open(ctx, "postgres://u:p@127.0.0.1:1/db", &pgstore.Options{MaxConns: -1})
	assert.Error(t, err, "negative MaxConns")
}

// errorTexts returns the text of err and of every error it wraps.
func errorTexts(err error) []string {
	var texts []string
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		texts = append(texts, e.Error(), fmt.Sprintf("%+v", e))
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				walk(inner)
			}
		}
	}
	walk(err)
	return texts
}

func assertNoPassword(t *testing.T, err error, password string) {
	t.Helper()
	require.Error(t, err)
	t.Logf("error: %v", err)
	for _, text := range errorTexts(err) {
		assert.NotContains(t, text, password, "an error of the chain shows the password")
	}
}

func TestOpenErrorsHidePassword(t *testing.T) {
	const password = "S3cretPassw0rd-do-not-print"
	ctx := guardCtx(t)
	open := func(connString string) error {
		s, err := pgstore.Open(ctx, connString, &pgstore.Options{Schema: "never_created"})
		if err == nil {
			_ = s.Close()
			return errors.New("Open succeeded")
		}
		return err
	}

	t.Run("Unreachable", func(t *testing.T) {
		err := open("postgres://noydb:" + password + "@127.0.0.1:1/noydb?connect_timeout=10")
		assertNoPassword(t, err, password)
		err = open("host=127.0.0.1 port=1 user=noydb dbname=noydb connect_timeout=10 password=" + password)
		assertNoPassword(t, err, password)
	})
	t.Run("Unparsable", func(t *testing.T) {
		for _, cs := range []string{
			"postgres://noydb:" + password + "@127.0.0.1:notaport/noydb",
			"postgres://noydb:" + password + "@[::1/noydb",
			"host=127.0.0.1 password='" + password,
			"host=127.0.0.1 port=x password=" + password,
		} {
			err := open(cs)
			assert.ErrorIs(t, err, pgstore.ErrInvalidConnString)
			assertNoPassword(t, err, password)
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		u, err := url.Parse(pgtest.URL(t))
		require.NoError(t, err)
		u.User = url.UserPassword(u.User.Username(), password)
		err = open(u.String())
		assertNoPassword(t, err, password)
		assert.Contains(t, err.Error(), "password authentication failed", "the error says what went wrong")
	})
}

// TestTxRowLockSerializes is the counter-row pattern: transactions that
// increment one existing row queue on its row lock, so none of them conflicts.
func TestTxRowLockSerializes(t *testing.T) {
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 32})
	ctx := guardCtx(t)
	_, err := s.Put(ctx, "counter", []byte("0"))
	require.NoError(t, err)
	testIncrements(t, ctx, s, "counter")
}

// TestTxCreateQueues is the same race on a counter that does not exist yet:
// the first transaction's claim on the missing key makes the others wait for
// it, so they queue instead of conflicting.
func TestTxCreateQueues(t *testing.T) {
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 32})
	testIncrements(t, guardCtx(t), s, "fresh-counter")
}

func testIncrements(t *testing.T, ctx context.Context, s *pgstore.Store, key string) {
	const callers = 64
	seen := make([]int, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			seen[i], errs[i] = increment(ctx, s, key)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "caller %d", i) // ErrConflict included: no retries here
	}
	it, err := s.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(callers), string(it.Value), "final counter")
	slices.Sort(seen)
	want := make([]int, callers)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, seen, "each transaction read a different value")
}

// TestTxClaimIsInvisible: reading a missing key in a transaction leaves no
// trace, and a writer that races with the claim waits for the transaction.
func TestTxClaimIsInvisible(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)

	for _, write := range []bool{false, true} {
		key := fmt.Sprintf("claimed-%v", write)
		casDone := make(chan error, 1)
		err := s.Update(ctx, func(tx stores.Tx) error {
			_, err := tx.Get(key)
			require.ErrorIs(t, err, stores.ErrNotFound)
			go func() {
				// Whether it runs during the transaction (and waits for it)
				// or after, the outcome depends only on what was committed.
				_, err := s.CompareAndSwap(ctx, key, 0, []byte("from outside"))
				casDone <- err
			}()
			if write {
				return tx.Put(key, []byte("from tx"))
			}
			return nil
		})
		require.NoError(t, err)
		err = <-casDone
		it, gerr := s.Get(ctx, key)
		require.NoError(t, gerr)
		if write {
			assert.ErrorIs(t, err, stores.ErrConflict, "the transaction created %q first", key)
			assert.Equal(t, "from tx", string(it.Value))
		} else {
			assert.NoError(t, err, "the transaction only read %q", key)
			assert.Equal(t, "from outside", string(it.Value))
		}
		assert.NotZero(t, it.Version)
	}

	// A read-only transaction on missing keys leaves no rows behind.
	require.NoError(t, s.Update(ctx, func(tx stores.Tx) error {
		for _, k := range []string{"m1", "m2", "m1"} {
			if _, err := tx.Get(k); !errors.Is(err, stores.ErrNotFound) {
				return fmt.Errorf("Get %q: %v, want ErrNotFound", k, err)
			}
		}
		return nil
	}))
	var keys []string
	for it, err := range s.List(ctx, "") {
		require.NoError(t, err)
		keys = append(keys, it.Key)
	}
	assert.Equal(t, []string{"claimed-false", "claimed-true"}, keys)
}

// TestTxDeadlockIsConflict makes two transactions lock two rows in opposite
// orders. PostgreSQL aborts one of them; it must see stores.ErrConflict and
// write nothing, even though its closure ignores the error and returns nil.
func TestTxDeadlockIsConflict(t *testing.T) {
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 4})
	ctx := guardCtx(t)
	for _, k := range []string{"a", "b"} {
		_, err := s.Put(ctx, k, []byte("0"))
		require.NoError(t, err)
	}

	var locked sync.WaitGroup
	locked.Add(2)
	getErrs := make([]error, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, order := range [][2]string{{"a", "b"}, {"b", "a"}} {
		wg.Go(func() {
			errs[i] = s.Update(ctx, func(tx stores.Tx) error {
				_, err := tx.Get(order[0])
				locked.Done()
				if err != nil {
					return err
				}
				locked.Wait() // both hold their first row: the next Get deadlocks
				if err := tx.Put("wrote-"+strconv.Itoa(i), []byte("x")); err != nil {
					return err
				}
				_, getErrs[i] = tx.Get(order[1])
				return nil // ignores getErrs[i] on purpose
			})
		})
	}
	wg.Wait()

	conflicts := 0
	for i := range 2 {
		if errors.Is(errs[i], stores.ErrConflict) {
			conflicts++
			assert.ErrorIs(t, getErrs[i], stores.ErrConflict, "the deadlocked Get reports a conflict")
			_, err := s.Get(ctx, "wrote-"+strconv.Itoa(i))
			assert.ErrorIs(t, err, stores.ErrNotFound, "the aborted transaction wrote nothing")
		} else {
			assert.NoError(t, errs[i])
			assert.NoError(t, getErrs[i])
		}
	}
	assert.Equal(t, 1, conflicts, "exactly one transaction is the deadlock victim")
}

// TestTxQueuedWriteDeadlock: Tx.Put is queued, so a Put that deadlocks fails
// only once it is sent, with the next Get or with the commit. Either way the
// victim's Update returns stores.ErrConflict and writes nothing, even though
// its closure ignores the Get's error and returns nil.
func TestTxQueuedWriteDeadlock(t *testing.T) {
	for _, carrier := range []string{"get", "commit"} {
		t.Run(carrier, func(t *testing.T) {
			s := pgtest.Open(t, &pgstore.Options{MaxConns: 4})
			ctx := guardCtx(t)
			for _, k := range []string{"a", "b"} {
				_, err := s.Put(ctx, k, []byte("0"))
				require.NoError(t, err)
			}

			var locked sync.WaitGroup
			locked.Add(2)
			getErrs := make([]error, 2)
			errs := make([]error, 2)
			orders := [][2]string{{"a", "b"}, {"b", "a"}}
			var wg sync.WaitGroup
			for i, order := range orders {
				wg.Go(func() {
					errs[i] = s.Update(ctx, func(tx stores.Tx) error {
						_, err := tx.Get(order[0])
						locked.Done()
						if err != nil {
							return err
						}
						locked.Wait() // both hold their first row: sending the Put deadlocks
						if err := tx.Put(order[1], []byte("from "+strconv.Itoa(i))); err != nil {
							return err
						}
						if carrier == "get" {
							_, getErrs[i] = tx.Get("c" + strconv.Itoa(i))
						}
						return nil // ignores getErrs[i] on purpose
					})
				})
			}
			wg.Wait()

			victim := -1
			for i := range 2 {
				if errors.Is(errs[i], stores.ErrConflict) {
					victim = i
					if carrier == "get" {
						assert.ErrorIs(t, getErrs[i], stores.ErrConflict, "the Get that carried the Put reports it")
					}
				} else {
					assert.NoError(t, errs[i])
					if carrier == "get" {
						assert.ErrorIs(t, getErrs[i], stores.ErrNotFound)
					}
				}
			}
			require.NotEqual(t, -1, victim, "one transaction is the deadlock victim")
			winner := 1 - victim
			it, err := s.Get(ctx, orders[winner][1])
			require.NoError(t, err)
			assert.Equal(t, "from "+strconv.Itoa(winner), string(it.Value), "the survivor's write")
			it, err = s.Get(ctx, orders[victim][1])
			require.NoError(t, err)
			assert.Equal(t, "0", string(it.Value), "the victim wrote nothing")
			var keys []string
			for it, err := range s.List(ctx, "") {
				require.NoError(t, err)
				keys = append(keys, it.Key)
			}
			assert.Equal(t, []string{"a", "b"}, keys, "no claim row is left")
		})
	}
}

// TestTxRoundTrips pins how Update pipelines: writes ride with the next Get
// that needs the server or with the commit, BEGIN with the first round trip,
// and a Get of a key the transaction holds costs nothing.
func TestTxRoundTrips(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	_, err := s.Put(ctx, "existing", []byte("e"))
	require.NoError(t, err)
	sent := pgstore.CountTransactions(s)

	check := func(name string, wantStatements, wantRoundTrips int64, fn func(tx stores.Tx) error) {
		t.Helper()
		stmts0, trips0 := sent()
		require.NoError(t, s.Update(ctx, fn), name)
		stmts, trips := sent()
		assert.Equal(t, wantRoundTrips, trips-trips0, "%s: round trips", name)
		assert.Equal(t, wantStatements, stmts-stmts0, "%s: statements", name)
	}
	get := func(tx stores.Tx, key, want string) {
		t.Helper()
		it, err := tx.Get(key)
		if want == "" {
			assert.ErrorIs(t, err, stores.ErrNotFound, "Get %q", key)
		} else if assert.NoError(t, err, "Get %q", key) {
			assert.Equal(t, want, string(it.Value), "Get %q", key)
		}
	}

	check("nothing sent", 0, 0, func(stores.Tx) error { return nil })
	check("writes only", 5, 1, func(tx stores.Tx) error { // BEGIN, the lock or claim of all in key order, the Puts, the Delete, COMMIT
		require.NoError(t, tx.Put("w1", []byte("1")))
		require.NoError(t, tx.Put("w2", []byte("2")))
		return tx.Delete("never-was")
	})
	check("reads", 6, 3, func(tx stores.Tx) error {
		get(tx, "existing", "e") // BEGIN and the read
		get(tx, "existing", "e")
		get(tx, "missing", "") // the claim
		get(tx, "missing", "")
		require.NoError(t, tx.Put("new", []byte("n")))
		get(tx, "new", "n")
		return nil // the Put, the claim's removal and COMMIT
	})
	check("writes ride with the next read", 4, 2, func(tx stores.Tx) error {
		require.NoError(t, tx.Put("w1", []byte("1 again")))
		require.NoError(t, tx.Put("w3", []byte("3")))
		get(tx, "existing", "e") // BEGIN, the Puts and the read
		return nil               // COMMIT
	})
	check("Delete of a key the transaction did not hold", 7, 3, func(tx stores.Tx) error {
		// The key may not have existed, and then the Delete locked nothing:
		// Get asks the server, and claims it.
		require.NoError(t, tx.Delete("w2"))
		get(tx, "w2", "") // BEGIN, the Delete and the claim
		require.NoError(t, tx.Delete("w3"))
		get(tx, "w3", "") // the Delete and the claim
		get(tx, "w3", "")
		return nil // the claims' removal and COMMIT
	})
	check("Delete of a key the transaction holds", 4, 2, func(tx stores.Tx) error {
		get(tx, "new", "n") // BEGIN and the read
		require.NoError(t, tx.Delete("new"))
		get(tx, "new", "")
		return nil // the Delete and COMMIT
	})

	var keys []string
	for it, err := range s.List(ctx, "") {
		require.NoError(t, err)
		keys = append(keys, it.Key)
	}
	assert.Equal(t, []string{"existing", "w1"}, keys)
	it, err := s.Get(ctx, "w1")
	require.NoError(t, err)
	assert.Equal(t, "1 again", string(it.Value))
}

// TestListPages lists more rows and bytes than fit in one page.
func TestListPages(t *testing.T) {
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 2})
	ctx := guardCtx(t)
	var want []string
	for i := range 700 {
		k := fmt.Sprintf("p/%04d", (i*263)%700)
		_, err := s.Put(ctx, k, []byte(k))
		require.NoError(t, err)
		want = append(want, k)
		_, err = s.Put(ctx, fmt.Sprintf("q/%04d", i), []byte("other prefix"))
		require.NoError(t, err)
	}
	slices.Sort(want)
	var got []string
	for it, err := range s.List(ctx, "p/") {
		require.NoError(t, err)
		assert.Equal(t, it.Key, string(it.Value))
		got = append(got, it.Key)
	}
	assert.Equal(t, want, got)

	big := make([]byte, 3<<19) // 1.5 MiB: a few per page
	var bigKeys []string
	for i := range 7 {
		k := fmt.Sprintf("big/%d", i)
		big[0] = byte(i)
		_, err := s.Put(ctx, k, big)
		require.NoError(t, err)
		bigKeys = append(bigKeys, k)
	}
	var gotBig []string
	for it, err := range s.List(ctx, "big/") {
		require.NoError(t, err)
		if assert.Len(t, it.Value, len(big)) {
			assert.Equal(t, byte(len(gotBig)), it.Value[0])
		}
		gotBig = append(gotBig, it.Key)
	}
	assert.Equal(t, bigKeys, gotBig)
}

// TestListStopEarlyReleasesConnection uses a pool of one connection: if List
// kept it after the loop stopped, the Put would wait forever.
func TestListStopEarlyReleasesConnection(t *testing.T) {
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 1})
	ctx := guardCtx(t)
	for i := range 300 {
		_, err := s.Put(ctx, fmt.Sprintf("k/%03d", i), []byte("v"))
		require.NoError(t, err)
	}
	for _, stopAfter := range []int{1, 255, 256, 257} {
		n := 0
		for _, err := range s.List(ctx, "k/") {
			require.NoError(t, err)
			n++
			if n == stopAfter {
				break
			}
		}
		assert.Equal(t, stopAfter, n)
		_, err := s.Put(ctx, "after", []byte("v"))
		require.NoError(t, err, "Put after stopping List at %d", stopAfter)
	}
}

// TestServerRestart crashes and restarts a private server under an open
// store: the writes acknowledged before the crash are there afterwards, and
// the store recovers once its broken connections are discarded.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and crashes a PostgreSQL cluster of its own; skipped with -short")
	}
	srv := pgtest.StartServer(t)
	const conns = 4
	s := pgtest.OpenURL(t, srv.URL, &pgstore.Options{MaxConns: conns})
	ctx := guardCtx(t)
	v, err := s.Put(ctx, "durable", []byte("acknowledged"))
	require.NoError(t, err)
	for range 20 {
		_, err := increment(ctx, s, "counter")
		require.NoError(t, err)
	}

	srv.Restart(t, true)

	// Each connection the pool held before the crash may fail once.
	var it stores.Item
	for attempt := 0; ; attempt++ {
		it, err = s.Get(ctx, "durable")
		if err == nil || attempt > conns {
			break
		}
		assert.NotErrorIs(t, err, stores.ErrNotFound)
	}
	require.NoError(t, err, "Get after the restart")
	assert.Equal(t, "acknowledged", string(it.Value))
	assert.Equal(t, v, it.Version)
	c, err := s.Get(ctx, "counter")
	require.NoError(t, err)
	assert.Equal(t, "20", string(c.Value), "every committed increment survived the crash")

	// Writes work again, with versions never used before.
	v2, err := s.CompareAndSwap(ctx, "durable", v, []byte("after"))
	require.NoError(t, err)
	assert.NotEqual(t, v, v2)
	seen, err := increment(ctx, s, "counter")
	require.NoError(t, err)
	assert.Equal(t, 20, seen)
}
