package pgstore_test

// A transaction's writes are kept until its next round trip and then sent as
// at most three statements, one upsert of the keys put and one delete of the
// keys deleted (after one that locks or claims them all in key order when
// there are both), the last write of each key winning. These tests check that
// the outcome is the same as writing one key at a time (against memstore, on
// random scripts), that the writes cost a fixed number of statements, that
// each key written gets a new version of its own, and that a refused write
// sends nothing.

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// errScriptAbort is what a script's closure returns to roll back.
var errScriptAbort = errors.New("script rolls back")

// scriptOp is one step of a random transaction script.
type scriptOp struct {
	kind  string // "put", "delete", "get" or "prefetch"
	keys  []string
	value string
}

// runScript runs ops in tx and returns what each Get saw: the value, or
// "<missing>". On a store whose Tx is not a Prefetcher, prefetch is skipped:
// it changes no outcome.
func runScript(tx stores.Tx, ops []scriptOp) ([]string, error) {
	var seen []string
	for i, op := range ops {
		var err error
		switch op.kind {
		case "put":
			err = tx.Put(op.keys[0], []byte(op.value))
		case "delete":
			err = tx.Delete(op.keys[0])
		case "get":
			var it stores.Item
			it, err = tx.Get(op.keys[0])
			switch {
			case errors.Is(err, stores.ErrNotFound):
				seen = append(seen, op.keys[0]+"=<missing>")
				err = nil
			case err == nil:
				seen = append(seen, op.keys[0]+"="+string(it.Value))
			}
		case "prefetch":
			if p, ok := tx.(stores.Prefetcher); ok {
				err = p.Prefetch(op.keys)
			}
		}
		if err != nil {
			return seen, fmt.Errorf("step %d (%s %q): %w", i, op.kind, op.keys, err)
		}
	}
	return seen, nil
}

// contents returns the keys and values of s under prefix.
func contents(t testing.TB, s stores.Store, prefix string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for it, err := range s.List(guardCtx(t), prefix) {
		require.NoError(t, err)
		got[it.Key] = string(it.Value)
	}
	return got
}

// TestTxWritesModel runs a few hundred random transaction scripts (puts,
// deletes, gets and prefetches of a handful of keys, the same key written many
// times, some scripts rolled back) on pgstore and on memstore, which applies
// each write as it comes, and requires the same Get results inside the
// transaction and the same contents after it.
func TestTxWritesModel(t *testing.T) {
	const (
		scripts = 300
		keys    = 6
		maxOps  = 40
	)
	s := pgtest.OpenURL(t, pgtest.AsyncCommit(pgtest.URL(t)), nil)
	ctx := guardCtx(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	for n := range scripts {
		prefix := fmt.Sprintf("s%03d/", n)
		names := make([]string, keys)
		for i := range names {
			names[i] = prefix + string(rune('a'+i))
		}
		model := memstore.New()
		for _, key := range names {
			if rng.IntN(2) == 0 {
				value := []byte("initial " + key)
				_, err := s.Put(ctx, key, value)
				require.NoError(t, err)
				_, err = model.Put(ctx, key, value)
				require.NoError(t, err)
			}
		}

		ops := make([]scriptOp, 1+rng.IntN(maxOps))
		for i := range ops {
			key := names[rng.IntN(keys)]
			switch r := rng.IntN(20); {
			case r < 8:
				ops[i] = scriptOp{kind: "put", keys: []string{key}, value: fmt.Sprintf("v%d.%d", n, i)}
			case r < 13:
				ops[i] = scriptOp{kind: "delete", keys: []string{key}}
			case r < 19:
				ops[i] = scriptOp{kind: "get", keys: []string{key}}
			default:
				some := slices.Clone(names)
				rng.Shuffle(len(some), func(i, j int) { some[i], some[j] = some[j], some[i] })
				ops[i] = scriptOp{kind: "prefetch", keys: some[:1+rng.IntN(keys)]}
			}
		}
		abort := rng.IntN(8) == 0

		run := func(st stores.Transactor) ([]string, error) {
			var seen []string
			err := st.Update(ctx, func(tx stores.Tx) error {
				var err error
				seen, err = runScript(tx, ops)
				if err == nil && abort {
					err = errScriptAbort
				}
				return err
			})
			return seen, err
		}
		want, wantErr := run(model)
		got, gotErr := run(s)
		if abort {
			require.ErrorIs(t, wantErr, errScriptAbort, "script %d on memstore", n)
			require.ErrorIs(t, gotErr, errScriptAbort, "script %d", n)
		} else {
			require.NoError(t, wantErr, "script %d on memstore", n)
			require.NoError(t, gotErr, "script %d", n)
		}
		if !assert.Equal(t, want, got, "script %d: what the Gets saw (ops %v)", n, ops) ||
			!assert.Equal(t, contents(t, model, prefix), contents(t, s, prefix), "script %d: the contents after (ops %v)", n, ops) {
			return
		}
	}
}

// TestTxWritesStatements: 64 puts cost one statement, 64 puts and 16
// deletes two, whatever their order and however often each key is written;
// with BEGIN and COMMIT, the whole transaction is one round trip.
func TestTxWritesStatements(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	for i := range 16 {
		_, err := s.Put(ctx, fmt.Sprintf("d%02d", i), []byte("doomed"))
		require.NoError(t, err)
	}
	sent := pgstore.CountTransactions(s)
	check := func(name string, wantStatements int64, fn func(tx stores.Tx) error) {
		t.Helper()
		stmts0, trips0 := sent()
		require.NoError(t, s.Update(ctx, fn), name)
		stmts, trips := sent()
		assert.Equal(t, wantStatements, stmts-stmts0, "%s: statements", name)
		assert.LessOrEqual(t, stmts-stmts0, int64(5), "%s: statements", name)
		assert.Equal(t, int64(1), trips-trips0, "%s: round trips", name)
	}
	perm := rand.Perm(64)

	check("64 puts", 3, func(tx stores.Tx) error { // BEGIN, the upsert, COMMIT
		for _, i := range perm {
			if err := tx.Put(fmt.Sprintf("p%02d", i), []byte("first")); err != nil {
				return err
			}
		}
		for _, i := range perm {
			if err := tx.Put(fmt.Sprintf("p%02d", i), []byte("p"+strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	})
	check("64 puts and 16 deletes", 5, func(tx stores.Tx) error { // BEGIN, the lock or claim of all in key order, the upsert, the delete, COMMIT
		for _, i := range perm {
			if err := tx.Delete(fmt.Sprintf("d%02d", i%16)); err != nil {
				return err
			}
			if err := tx.Put(fmt.Sprintf("q%02d", i), []byte("q"+strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	})

	want := map[string]string{}
	for i := range 64 {
		want[fmt.Sprintf("p%02d", i)] = "p" + strconv.Itoa(i)
		want[fmt.Sprintf("q%02d", i)] = "q" + strconv.Itoa(i)
	}
	assert.Equal(t, want, contents(t, s, ""))
}

// TestTxWritesVersions: the keys written by one transaction, new ones,
// existing ones and claimed ones alike, each get a version of their own,
// newer than every version before the transaction.
func TestTxWritesVersions(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	var newest uint64
	for i := range 32 {
		v, err := s.Put(ctx, fmt.Sprintf("k%02d", i), []byte("old"))
		require.NoError(t, err)
		newest = max(newest, v)
	}
	require.NoError(t, s.Update(ctx, func(tx stores.Tx) error {
		_, err := tx.Get("k70") // claimed while missing
		require.ErrorIs(t, err, stores.ErrNotFound)
		for i := range 72 { // 32 existing, 40 new, one of them claimed
			if err := tx.Put(fmt.Sprintf("k%02d", i), []byte("new")); err != nil {
				return err
			}
		}
		return nil
	}))
	versions := map[uint64]string{}
	for i := range 72 {
		key := fmt.Sprintf("k%02d", i)
		it, err := s.Get(ctx, key)
		require.NoError(t, err, key)
		assert.Equal(t, "new", string(it.Value), key)
		assert.Greater(t, it.Version, newest, key)
		if other, ok := versions[it.Version]; ok {
			t.Errorf("%s and %s have the same version %d", key, other, it.Version)
		}
		versions[it.Version] = key
	}
	assert.Len(t, versions, 72)
}

// TestTxWritesRefused: an invalid key or a value too large is refused by Put
// or Delete before anything is sent, and the transaction stays usable.
func TestTxWritesRefused(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	sent := pgstore.CountTransactions(s)
	long := strings.Repeat("x", stores.MaxKeyLen+1)
	huge := make([]byte, stores.MaxValueLen+1)

	stmts0, trips0 := sent()
	require.NoError(t, s.Update(ctx, func(tx stores.Tx) error {
		assert.ErrorIs(t, tx.Put("", []byte("v")), stores.ErrInvalidKey)
		assert.ErrorIs(t, tx.Put(long, []byte("v")), stores.ErrInvalidKey)
		assert.ErrorIs(t, tx.Put("big", huge), stores.ErrTooLarge)
		assert.ErrorIs(t, tx.Delete(""), stores.ErrInvalidKey)
		assert.ErrorIs(t, tx.Delete(long), stores.ErrInvalidKey)
		_, err := tx.Get("big")
		assert.ErrorIs(t, err, stores.ErrNotFound, "the refused value was not recorded")
		return nil
	}))
	stmts, trips := sent()
	assert.Equal(t, int64(2), trips-trips0, "the Get's round trip and the commit's")
	assert.Equal(t, int64(4), stmts-stmts0, "BEGIN, the claim, its removal and COMMIT")

	stmts0, trips0 = sent()
	require.NoError(t, s.Update(ctx, func(tx stores.Tx) error {
		assert.ErrorIs(t, tx.Put("big", huge), stores.ErrTooLarge)
		stmts, trips := sent()
		assert.Equal(t, [2]int64{stmts0, trips0}, [2]int64{stmts, trips}, "nothing was sent")
		return tx.Put("ok", []byte("ok"))
	}), "the refused Put did not spoil the transaction")
	stmts, trips = sent()
	assert.Equal(t, int64(1), trips-trips0)
	assert.Equal(t, int64(3), stmts-stmts0, "BEGIN, the Put and COMMIT")
	assert.Equal(t, map[string]string{"ok": "ok"}, contents(t, s, ""))
}

// TestTxWritesFailedPut: a failed upsert is reported as a put by the Get that
// carried it, spoils the transaction and writes nothing.
func TestTxWritesFailedPut(t *testing.T) {
	s, schema := openIn(t, nil)
	ctx := guardCtx(t)
	in := installInjector(t, schema, "40001", false)
	in.arm(t, 1)
	err := s.Update(ctx, func(tx stores.Tx) error {
		for i := range 8 {
			require.NoError(t, tx.Put(fmt.Sprintf("k%d", i), []byte("v")))
		}
		require.NoError(t, tx.Delete("gone"))
		_, err := tx.Get("other")
		require.ErrorIs(t, err, stores.ErrConflict, "the Get that carried the writes")
		assert.Contains(t, err.Error(), "pgstore: put:")
		assert.ErrorIs(t, tx.Put("k9", []byte("v")), stores.ErrConflict, "the transaction is spoiled")
		return nil
	})
	require.ErrorIs(t, err, stores.ErrConflict)
	assert.Contains(t, err.Error(), "pgstore: put:")
	assert.Empty(t, contents(t, s, ""), "nothing was written")
}

// TestTxWritesLockOrder: transactions that write the same keys in opposite
// orders, without reading them first, never deadlock: each round trip takes
// its row locks in ascending key order.
func TestTxWritesLockOrder(t *testing.T) {
	const (
		writers = 8
		rounds  = 12
		keys    = 32
	)
	s := pgtest.OpenURL(t, pgtest.AsyncCommit(pgtest.URL(t)), &pgstore.Options{MaxConns: writers})
	ctx := guardCtx(t)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				order := make([]int, keys)
				for i := range order {
					order[i] = i
				}
				if w%2 == 1 {
					slices.Reverse(order)
				}
				err := s.Update(ctx, func(tx stores.Tx) error {
					for _, i := range order {
						if err := tx.Put(fmt.Sprintf("k%02d", i), []byte(fmt.Sprintf("%d.%d", w, r))); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		assert.NoError(t, err, "writer %d", w)
	}
	got := contents(t, s, "")
	require.Len(t, got, keys)
	values := slices.Collect(maps.Values(got))
	slices.Sort(values)
	assert.Equal(t, values[0], values[keys-1], "every key holds the last transaction's value: %v", got)
}

// TestSeqScanOff: the store's connections never plan a whole-table scan (a
// generic plan chosen while the items table is small would scan it whole ever
// after), unless the connection string says otherwise.
func TestSeqScanOff(t *testing.T) {
	ctx := guardCtx(t)
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 1})
	mode, err := pgstore.Setting(ctx, s, "enable_seqscan")
	require.NoError(t, err)
	assert.Equal(t, "off", mode)

	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("enable_seqscan", "on")
	u.RawQuery = q.Encode()
	s = pgtest.OpenURL(t, u.String(), &pgstore.Options{MaxConns: 1})
	mode, err = pgstore.Setting(ctx, s, "enable_seqscan")
	require.NoError(t, err)
	assert.Equal(t, "on", mode, "the connection string's setting is kept")
}
