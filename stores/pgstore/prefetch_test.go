package pgstore_test

import (
	"context"
	"errors"
	"fmt"
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

// openIn opens a store in a fresh schema and returns the schema's name too,
// for tests that look at the server from outside the store.
func openIn(t testing.TB, opts *pgstore.Options) (*pgstore.Store, string) {
	t.Helper()
	var o pgstore.Options
	if opts != nil {
		o = *opts
	}
	o.Schema = pgtest.Schema(t)
	s, err := pgstore.Open(context.Background(), pgtest.URL(t), &o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, o.Schema
}

// lockPoll is how often waitLockWaiters looks at pg_stat_activity.
const lockPoll = 2 * time.Millisecond

// waitLockWaiters returns once n sessions are waiting for a lock in a
// statement on schema: the moment a concurrent transaction is known to be
// queued behind another. It fails the test if that never happens.
func waitLockWaiters(t testing.TB, schema string, n int) {
	t.Helper()
	ctx := guardCtx(t)
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	for {
		var waiting int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0`, `"`+schema+`"`).Scan(&waiting)
		require.NoError(t, err, "waiting for %d lock waiters on %s", n, schema)
		if waiting >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d lock waiters on %s: %v", n, schema, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// keysIn lists the keys of s, in order.
func keysIn(t testing.TB, s *pgstore.Store) []string {
	t.Helper()
	var keys []string
	for it, err := range s.List(guardCtx(t), "") {
		require.NoError(t, err)
		keys = append(keys, it.Key)
	}
	return keys
}

func prefetcher(t testing.TB, tx stores.Tx) stores.Prefetcher {
	t.Helper()
	p, ok := tx.(stores.Prefetcher)
	require.True(t, ok, "pgstore's Tx implements stores.Prefetcher")
	return p
}

// TestPrefetchRoundTrips pins what Prefetch costs: one round trip for any
// number of keys, carrying BEGIN and the queued writes, and no round trip for
// the Gets that follow or for keys the transaction already holds.
func TestPrefetchRoundTrips(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	const keys = 16
	for i := range keys {
		if i%2 == 0 {
			_, err := s.Put(ctx, fmt.Sprintf("k%02d", i), []byte("v"+strconv.Itoa(i)))
			require.NoError(t, err)
		}
	}
	all := make([]string, keys)
	for i := range all {
		all[i] = fmt.Sprintf("k%02d", i)
	}
	sent := pgstore.CountTransactions(s)
	check := func(name string, wantStatements, wantRoundTrips int64, fn func(tx stores.Tx) error) {
		t.Helper()
		stmts0, trips0 := sent()
		require.NoError(t, s.Update(ctx, fn), name)
		stmts, trips := sent()
		assert.Equal(t, wantRoundTrips, trips-trips0, "%s: round trips", name)
		assert.Equal(t, wantStatements, stmts-stmts0, "%s: statements", name)
		t.Logf("%s: %d statements, %d round trips", name, stmts-stmts0, trips-trips0)
	}
	getAll := func(tx stores.Tx) {
		t.Helper()
		for i, key := range all {
			it, err := tx.Get(key)
			if i%2 == 0 {
				if assert.NoError(t, err, "Get %q", key) {
					assert.Equal(t, "v"+strconv.Itoa(i), string(it.Value))
					assert.NotZero(t, it.Version)
				}
			} else {
				assert.ErrorIs(t, err, stores.ErrNotFound, "Get %q", key)
			}
		}
	}

	check("Get alone, key by key", 16+3, 16+1, func(tx stores.Tx) error {
		getAll(tx) // BEGIN and a read per key, a round trip each
		return nil // the claims' removal and COMMIT
	})
	check("Prefetch then Get", 1+1+2+2, 2, func(tx stores.Tx) error {
		require.NoError(t, tx.Put("w", []byte("w")))
		reversed := slices.Clone(all)
		slices.Reverse(reversed)
		// BEGIN, the Put, the locks and claims, the read: one round trip.
		require.NoError(t, prefetcher(t, tx).Prefetch(append(reversed, all[3], all[0])))
		getAll(tx)
		require.NoError(t, prefetcher(t, tx).Prefetch(all), "every key is held already")
		require.NoError(t, prefetcher(t, tx).Prefetch(nil))
		getAll(tx)
		return nil // the claims' removal and COMMIT
	})
	check("Prefetch of held keys and new ones", 2+3+2, 3, func(tx stores.Tx) error {
		_, err := tx.Get(all[0]) // BEGIN and the read
		require.NoError(t, err)
		require.NoError(t, tx.Put("w", []byte("w2")))
		// The Put, and the locks, claims and reads of the other keys.
		require.NoError(t, prefetcher(t, tx).Prefetch(all))
		getAll(tx)
		it, err := tx.Get("w")
		require.NoError(t, err)
		assert.Equal(t, "w2", string(it.Value))
		return nil // the claims' removal and COMMIT
	})
	check("Prefetch of held keys sends nothing", 3, 1, func(tx stores.Tx) error {
		require.NoError(t, tx.Put("x", []byte("x")))
		require.NoError(t, tx.Delete("x"))
		require.NoError(t, prefetcher(t, tx).Prefetch([]string{"x", "x"}))
		_, err := tx.Get("x")
		assert.ErrorIs(t, err, stores.ErrNotFound)
		return nil // BEGIN, the Delete (the Put's last write) and COMMIT
	})
	want := []string{"k00", "k02", "k04", "k06", "k08", "k10", "k12", "k14", "w"}
	assert.Equal(t, want, keysIn(t, s), "no claim row is left")
}

// TestPrefetchClaims: Prefetch of missing keys claims them, so a writer that
// creates one of them while the transaction runs waits for it, and the
// outcome is what the transaction committed.
func TestPrefetchClaims(t *testing.T) {
	s, schema := openIn(t, &pgstore.Options{MaxConns: 4})
	ctx := guardCtx(t)

	keys := []string{"written", "only-read"}
	casErrs := map[string]chan error{}
	for _, key := range keys {
		casErrs[key] = make(chan error, 1)
	}
	err := s.Update(ctx, func(tx stores.Tx) error {
		require.NoError(t, prefetcher(t, tx).Prefetch(keys))
		for _, key := range keys {
			_, err := tx.Get(key)
			require.ErrorIs(t, err, stores.ErrNotFound, "Get %q", key)
			go func() {
				_, err := s.CompareAndSwap(ctx, key, 0, []byte("from outside"))
				casErrs[key] <- err
			}()
		}
		waitLockWaiters(t, schema, 2) // both creators wait for the claims
		return tx.Put("written", []byte("from tx"))
	})
	require.NoError(t, err)
	assert.ErrorIs(t, <-casErrs["written"], stores.ErrConflict, "the creator of the key the transaction wrote")
	assert.NoError(t, <-casErrs["only-read"], "the creator of the key the transaction only read")
	it, err := s.Get(ctx, "written")
	require.NoError(t, err)
	assert.Equal(t, "from tx", string(it.Value), "the transaction created the key first")
	it, err = s.Get(ctx, "only-read")
	require.NoError(t, err)
	assert.Equal(t, "from outside", string(it.Value), "the claim of a key only read leaves it to the creator")
	assert.Equal(t, []string{"only-read", "written"}, keysIn(t, s))
}

// TestPrefetchSameSetQueues: two transactions prefetch the same keys, given
// in opposite orders, at once. The second waits for the first and then reads
// what it committed, keys it created included.
func TestPrefetchSameSetQueues(t *testing.T) {
	s, schema := openIn(t, &pgstore.Options{MaxConns: 4})
	ctx := guardCtx(t)
	for _, key := range []string{"b", "d"} {
		_, err := s.Put(ctx, key, []byte("0"))
		require.NoError(t, err)
	}
	keys := []string{"a", "b", "c", "d", "e"}

	secondDone := make(chan error, 1)
	seen := map[string]string{}
	err := s.Update(ctx, func(tx stores.Tx) error {
		require.NoError(t, prefetcher(t, tx).Prefetch(keys))
		go func() {
			secondDone <- s.Update(ctx, func(tx stores.Tx) error {
				reversed := slices.Clone(keys)
				slices.Reverse(reversed)
				if err := tx.(stores.Prefetcher).Prefetch(reversed); err != nil {
					return err
				}
				for _, key := range keys {
					it, err := tx.Get(key)
					switch {
					case errors.Is(err, stores.ErrNotFound):
						seen[key] = "missing"
					case err != nil:
						return err
					default:
						seen[key] = string(it.Value)
					}
				}
				return nil
			})
		}()
		waitLockWaiters(t, schema, 1) // the second transaction queues
		for _, key := range []string{"a", "b", "c"} {
			if err := tx.Put(key, []byte("first")); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, <-secondDone, "the second transaction waited instead of deadlocking")
	assert.Equal(t, map[string]string{"a": "first", "b": "first", "c": "first", "d": "0", "e": "missing"}, seen,
		"the second transaction read what the first committed")
	assert.Equal(t, []string{"a", "b", "c", "d"}, keysIn(t, s))
}

// TestPrefetchOppositeOrdersNoDeadlock: transactions prefetch overlapping sets
// of keys, given in opposite orders, and increment every key. Each round's
// keys are new, so the race covers claims, creation by another transaction
// while a claim waits, and locks of existing rows (the shared hot keys). No
// transaction may fail: Prefetch locks in key order, so there is no deadlock.
func TestPrefetchOppositeOrdersNoDeadlock(t *testing.T) {
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 8})
	ctx := guardCtx(t)
	const (
		rounds = 60
		hot    = 4
	)
	want := map[string]int{} // the final value of every key
	// Each worker's keys: a window of the round's keys plus the hot keys,
	// in ascending order for even workers and descending for odd ones.
	windows := [][2]int{{0, 6}, {2, 8}, {1, 7}, {0, 8}}
	workerKeys := func(w, r int) []string {
		var keys []string
		for i := windows[w][0]; i < windows[w][1]; i++ {
			keys = append(keys, fmt.Sprintf("r%03d/k%d", r, i))
		}
		for h := range hot {
			keys = append(keys, fmt.Sprintf("hot/%d", h))
		}
		slices.Sort(keys)
		if w%2 == 1 {
			slices.Reverse(keys)
		}
		return keys
	}
	for h := range hot {
		_, err := s.Put(ctx, fmt.Sprintf("hot/%d", h), []byte("0"))
		require.NoError(t, err)
		want[fmt.Sprintf("hot/%d", h)] = 0
	}

	var failures []string
	var mu sync.Mutex
	for r := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range windows {
			keys := workerKeys(w, r)
			for _, key := range keys {
				want[key]++
			}
			wg.Go(func() {
				<-start
				err := s.Update(ctx, func(tx stores.Tx) error {
					if err := tx.(stores.Prefetcher).Prefetch(keys); err != nil {
						return err
					}
					for _, key := range keys {
						n := 0
						it, err := tx.Get(key)
						switch {
						case errors.Is(err, stores.ErrNotFound):
						case err != nil:
							return err
						default:
							if n, err = strconv.Atoi(string(it.Value)); err != nil {
								return err
							}
						}
						if err := tx.Put(key, []byte(strconv.Itoa(n+1))); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("round %d worker %d: %v", r, w, err))
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
	}
	assert.Empty(t, failures, "no transaction failed (ErrConflict would be a deadlock)")
	got := map[string]int{}
	for it, err := range s.List(ctx, "") {
		require.NoError(t, err)
		n, err := strconv.Atoi(string(it.Value))
		require.NoError(t, err)
		got[it.Key] = n
	}
	assert.Equal(t, want, got, "every increment counted once")
}

// TestPrefetchWriteReadBack: writes after Prefetch are read back by the
// transaction and committed; a key deleted before Prefetch (without being
// held) is claimed and reads as missing.
func TestPrefetchWriteReadBack(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	for _, key := range []string{"a", "gone"} {
		_, err := s.Put(ctx, key, []byte("old "+key))
		require.NoError(t, err)
	}
	err := s.Update(ctx, func(tx stores.Tx) error {
		require.NoError(t, tx.Delete("gone")) // queued; the key is not held
		require.NoError(t, prefetcher(t, tx).Prefetch([]string{"new", "gone", "a"}))
		_, err := tx.Get("gone")
		assert.ErrorIs(t, err, stores.ErrNotFound, "the queued Delete ran before the read")
		it, err := tx.Get("a")
		require.NoError(t, err)
		assert.Equal(t, "old a", string(it.Value))
		for _, key := range []string{"a", "new"} {
			require.NoError(t, tx.Put(key, []byte("new "+key)))
			it, err := tx.Get(key)
			require.NoError(t, err)
			assert.Equal(t, "new "+key, string(it.Value), "the transaction reads its own write")
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "new"}, keysIn(t, s))
	for _, key := range []string{"a", "new"} {
		it, err := s.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, "new "+key, string(it.Value))
	}
}

// TestPrefetchInvalidKey: an invalid key fails Prefetch with
// stores.ErrInvalidKey before anything is sent, and leaves the transaction
// usable: none of the valid keys was prefetched.
func TestPrefetchInvalidKey(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	_, err := s.Put(ctx, "a", []byte("a"))
	require.NoError(t, err)
	sent := pgstore.CountTransactions(s)
	for _, bad := range []string{"", strings.Repeat("x", stores.MaxKeyLen+1)} {
		stmts0, trips0 := sent()
		err := s.Update(ctx, func(tx stores.Tx) error {
			err := prefetcher(t, tx).Prefetch([]string{"a", bad, "b"})
			assert.ErrorIs(t, err, stores.ErrInvalidKey, "a %d-byte key", len(bad))
			stmts, trips := sent()
			assert.Equal(t, [2]int64{stmts0, trips0}, [2]int64{stmts, trips}, "nothing was sent")
			it, err := tx.Get("a") // not prefetched: BEGIN and the read
			require.NoError(t, err)
			assert.Equal(t, "a", string(it.Value))
			return tx.Put("b", []byte("b"))
		})
		require.NoError(t, err, "the rejected Prefetch did not spoil the transaction")
		stmts, trips := sent()
		assert.Equal(t, int64(2), trips-trips0, "the Get's round trip and the commit's")
		assert.Equal(t, int64(4), stmts-stmts0, "BEGIN, the read, the Put and COMMIT")
	}
	assert.Equal(t, []string{"a", "b"}, keysIn(t, s))
}

// TestPrefetchCancelled: a cancelled context fails Prefetch with its error,
// before it is sent or while it waits for a lock, and the transaction writes
// nothing.
func TestPrefetchCancelled(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		s := pgtest.Open(t, nil)
		ctx, cancel := context.WithCancel(guardCtx(t))
		err := s.Update(ctx, func(tx stores.Tx) error {
			require.NoError(t, tx.Put("w", []byte("w")))
			cancel()
			err := prefetcher(t, tx).Prefetch([]string{"a"})
			assert.ErrorIs(t, err, context.Canceled)
			return nil
		})
		assert.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, keysIn(t, s))
	})
	t.Run("waiting", func(t *testing.T) {
		s, schema := openIn(t, &pgstore.Options{MaxConns: 4})
		ctx := guardCtx(t)
		_, err := s.Put(ctx, "b", []byte("0"))
		require.NoError(t, err)
		err = s.Update(ctx, func(tx stores.Tx) error {
			require.NoError(t, prefetcher(t, tx).Prefetch([]string{"b"}))
			waiterCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			waiter := make(chan error, 1)
			var prefetchErr error
			go func() {
				waiter <- s.Update(waiterCtx, func(tx stores.Tx) error {
					if err := tx.Put("w", []byte("w")); err != nil {
						return err
					}
					prefetchErr = tx.(stores.Prefetcher).Prefetch([]string{"a", "b", "c"})
					return nil // ignores prefetchErr on purpose
				})
			}()
			waitLockWaiters(t, schema, 1)
			cancel()
			err := <-waiter
			assert.ErrorIs(t, err, context.Canceled, "Update of the cancelled transaction")
			assert.ErrorIs(t, prefetchErr, context.Canceled, "the waiting Prefetch")
			return tx.Put("b", []byte("1"))
		})
		require.NoError(t, err, "the lock holder is not disturbed")
		assert.Equal(t, []string{"b"}, keysIn(t, s), "the cancelled transaction wrote nothing, left no claim")
		it, err := s.Get(ctx, "b")
		require.NoError(t, err)
		assert.Equal(t, "1", string(it.Value))
	})
}

// TestPrefetchSpoils: a Prefetch whose statement fails spoils the
// transaction: every later call returns the same error, and Update returns
// it and writes nothing even though the closure returns nil.
func TestPrefetchSpoils(t *testing.T) {
	s, schema := openIn(t, nil)
	ctx := guardCtx(t)
	dbURL := pgtest.URL(t)
	q := `"` + schema + `"`
	exec(t, dbURL, `CREATE FUNCTION `+q+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused key %', NEW.key; END $$`)
	exec(t, dbURL, `CREATE TRIGGER refuse BEFORE INSERT ON `+q+`.items
		FOR EACH ROW WHEN (NEW.key = '\x626164'::bytea) EXECUTE FUNCTION `+q+`.refuse()`) // "bad"
	_, err := s.Put(ctx, "a", []byte("a"))
	require.NoError(t, err)

	var prefetchErr error
	err = s.Update(ctx, func(tx stores.Tx) error {
		require.NoError(t, tx.Put("w", []byte("w")))
		p := prefetcher(t, tx)
		prefetchErr = p.Prefetch([]string{"a", "bad", "c"})
		require.Error(t, prefetchErr)
		assert.NotErrorIs(t, prefetchErr, stores.ErrConflict)
		assert.Contains(t, prefetchErr.Error(), "refused key")
		_, err := tx.Get("a")
		assert.Equal(t, prefetchErr, err, "Get on a spoiled transaction")
		assert.Equal(t, prefetchErr, tx.Put("x", []byte("x")), "Put on a spoiled transaction")
		assert.Equal(t, prefetchErr, tx.Delete("a"), "Delete on a spoiled transaction")
		assert.Equal(t, prefetchErr, p.Prefetch([]string{"a"}), "Prefetch on a spoiled transaction")
		return nil
	})
	assert.Equal(t, prefetchErr, err, "Update returns the failure")
	assert.Equal(t, []string{"a"}, keysIn(t, s), "nothing was written")
}
