package pgstore_test

// Injected serialization failures and deadlocks: a trigger in the test's own
// schema makes the first K writes of items fail with SQLSTATE 40001 or 40P01,
// either at the statement or at COMMIT (a deferred constraint trigger), the
// two places PostgreSQL reports them. The store must report each as
// stores.ErrConflict and write nothing, and the SDK above it must retry them
// until its calls succeed with exact, gap-free numbers.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// injectCodes are the SQLSTATEs injected: serialization_failure and
// deadlock_detected.
var injectCodes = []string{"40001", "40P01"}

// injector makes writes of a schema's items fail on purpose.
type injector struct {
	dbURL, q string // q: the quoted schema
}

// installInjector adds to schema a trigger that fails the first writes of
// items (Arm says how many) with SQLSTATE code; with atCommit the failure
// comes at COMMIT instead of at the write's statement. Claims (version 0) are
// not counted: they are reads. The count is kept by a sequence, because
// nextval survives the rollback of the transaction it fails; the code and
// the number to fail live in a side table.
func installInjector(t testing.TB, schema, code string, atCommit bool) *injector {
	t.Helper()
	in := &injector{dbURL: pgtest.URL(t), q: `"` + schema + `"`}
	in.exec(t, `CREATE SEQUENCE {s}.inject_count`)
	in.exec(t, `CREATE TABLE {s}.inject (code text NOT NULL, fail_first bigint NOT NULL)`)
	in.exec(t, `INSERT INTO {s}.inject VALUES ($1, 0)`, code)
	in.exec(t, `CREATE FUNCTION {s}.inject() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE
			c text;
			k bigint;
		BEGIN
			SELECT code, fail_first INTO c, k FROM {s}.inject;
			IF nextval('{s}.inject_count') <= k THEN
				RAISE EXCEPTION 'injected failure' USING ERRCODE = c;
			END IF;
			RETURN NEW;
		END $$`)
	if atCommit {
		in.exec(t, `CREATE CONSTRAINT TRIGGER inject AFTER INSERT OR UPDATE ON {s}.items
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.version <> 0)
			EXECUTE FUNCTION {s}.inject()`)
	} else {
		in.exec(t, `CREATE TRIGGER inject BEFORE INSERT OR UPDATE ON {s}.items
			FOR EACH ROW WHEN (NEW.version <> 0) EXECUTE FUNCTION {s}.inject()`)
	}
	return in
}

func (in *injector) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	exec(t, in.dbURL, strings.ReplaceAll(sql, "{s}", in.q), args...)
}

// arm makes the next k writes fail.
func (in *injector) arm(t testing.TB, k int) {
	t.Helper()
	in.exec(t, `UPDATE {s}.inject SET fail_first = $1`, k)
	in.exec(t, `SELECT setval('{s}.inject_count', 1, false)`)
}

// fired returns how many writes the trigger has looked at since arm (those it
// failed included).
func (in *injector) fired(t testing.TB) int64 {
	t.Helper()
	return queryInt(t, in.dbURL, strings.ReplaceAll(
		`SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {s}.inject_count`, "{s}", in.q))
}

// injectModes runs fn for each injected code, at the statement and at COMMIT.
func injectModes(t *testing.T, fn func(t *testing.T, code string, atCommit bool)) {
	for _, code := range injectCodes {
		for _, atCommit := range []bool{false, true} {
			name := code + "/statement"
			if atCommit {
				name = code + "/commit"
			}
			t.Run(name, func(t *testing.T) { fn(t, code, atCommit) })
		}
	}
}

// TestInjectedConflictUpdate: a transaction whose write fails with 40001 or
// 40P01, whether the write rode with a Get, with the commit, or failed at
// COMMIT, returns an error matching stores.ErrConflict (naming the SQLSTATE)
// and writes nothing; the store's plain Put and CompareAndSwap map it the
// same way; and once the failures are spent the same work commits.
func TestInjectedConflictUpdate(t *testing.T) {
	injectModes(t, func(t *testing.T, code string, atCommit bool) {
		s, schema := openIn(t, nil)
		ctx := guardCtx(t)
		_, err := s.Put(ctx, "x", []byte("0"))
		require.NoError(t, err)
		in := installInjector(t, schema, code, atCommit)

		work := func(carrier string) func(tx stores.Tx) error {
			return func(tx stores.Tx) error {
				it, err := tx.Get("x")
				if err != nil {
					return err
				}
				n, err := strconv.Atoi(string(it.Value))
				if err != nil {
					return err
				}
				if err := tx.Put("x", []byte(strconv.Itoa(n+1))); err != nil {
					return err
				}
				if err := tx.Put("y", []byte("y")); err != nil {
					return err
				}
				if carrier == "get" {
					_, err := tx.Get("z") // carries the Puts, or fails at COMMIT later
					if !atCommit {
						assert.ErrorIs(t, err, stores.ErrConflict, "the Get that carried the failed write")
					} else {
						assert.ErrorIs(t, err, stores.ErrNotFound)
					}
				}
				return nil // the Get's error is left for Update to report
			}
		}
		for _, carrier := range []string{"get", "commit"} {
			in.arm(t, 1)
			err := s.Update(ctx, work(carrier))
			require.ErrorIs(t, err, stores.ErrConflict, "carried by %s", carrier)
			assert.Contains(t, err.Error(), "SQLSTATE "+code)
			assert.Equal(t, []string{"x"}, keysIn(t, s), "nothing was written")
			it, err := s.Get(ctx, "x")
			require.NoError(t, err)
			assert.Equal(t, "0", string(it.Value), "nothing was written")
		}

		in.arm(t, 1)
		_, err = s.Put(ctx, "p", []byte("p"))
		assert.ErrorIs(t, err, stores.ErrConflict, "plain Put")
		in.arm(t, 1)
		_, err = s.CompareAndSwap(ctx, "p", 0, []byte("p"))
		assert.ErrorIs(t, err, stores.ErrConflict, "plain CompareAndSwap")
		assert.Equal(t, []string{"x"}, keysIn(t, s), "nothing was written")

		// Spent: the trigger fails its first write only.
		in.arm(t, 1)
		err = s.Update(ctx, work("get"))
		require.ErrorIs(t, err, stores.ErrConflict)
		require.NoError(t, s.Update(ctx, work("commit")), "the retry commits")
		it, err := s.Get(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "1", string(it.Value))
		assert.Equal(t, []string{"x", "y"}, keysIn(t, s))
	})
}

// injectNote is what the Put phase writes.
type injectNote struct{ By string }

// TestInjectedConflictSDK: through a whole vault on pgstore, creating the
// vault, then Next, Put and PutNumbered calls from concurrent goroutines all succeed while the first
// writes of each phase fail with 40001 or 40P01 (at the statement or at
// COMMIT): the SDK retries them as conflicts. The numbers are exactly 1..N,
// each PutNumbered record carries its own, and the ledger verifies.
func TestInjectedConflictSDK(t *testing.T) {
	const (
		goroutines = 4
		per        = 6 // calls per goroutine per phase
		failures   = 6 // injected per phase; the retry budget of one call is larger
	)
	injectModes(t, func(t *testing.T, code string, atCommit bool) {
		s, schema := openIn(t, &pgstore.Options{MaxConns: 8})
		ctx := guardCtx(t)
		in := installInjector(t, schema, code, atCommit)
		in.arm(t, 3) // creating the vault: fewer than its 8 rounds
		v, seq := fleetVaultOn(t, s)
		assert.Greater(t, in.fired(t), int64(3), "creating the vault hit every injected failure")
		invoices := vault.CollectionOf[fleetRecord](v, fleetCollection)
		notes := vault.CollectionOf[injectNote](v, "notes")

		var (
			mu      sync.Mutex
			numbers []uint64              // every number a call returned
			byID    = map[string]uint64{} // PutNumbered: record id → its number
		)
		phases := []struct {
			name string
			call func(g, i int) error
		}{
			{"Next", func(int, int) error {
				n, err := seq.Next(ctx)
				if err == nil {
					mu.Lock()
					numbers = append(numbers, n)
					mu.Unlock()
				}
				return err
			}},
			{"Put", func(g, i int) error {
				id := fmt.Sprintf("g%d-i%d", g, i)
				return notes.Put(ctx, id, injectNote{By: id})
			}},
			{"PutNumbered", func(g, i int) error {
				id := fmt.Sprintf("g%d-i%d", g, i)
				r, err := invoices.PutNumbered(ctx, id, seq, func(s sequence.Serial) (fleetRecord, error) {
					return fleetRecord{Number: s.N, Serial: s.Formatted, By: id}, nil
				})
				if err == nil {
					mu.Lock()
					numbers = append(numbers, r.Number)
					byID[id] = r.Number
					mu.Unlock()
				}
				return err
			}},
		}
		for _, ph := range phases {
			in.arm(t, failures)
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range per {
						assert.NoError(t, ph.call(g, i), "%s: goroutine %d, call %d", ph.name, g, i)
					}
				})
			}
			wg.Wait()
			assert.Greater(t, in.fired(t), int64(failures), "%s: every injected failure was hit", ph.name)
		}
		in.arm(t, 0)

		const total = 2 * goroutines * per // Next and PutNumbered numbers
		assertDense(t, numbers, total, "numbers the calls returned")
		for r, err := range invoices.List(ctx) {
			require.NoError(t, err)
			assert.Equal(t, byID[r.ID], r.Value.Number, "record %s", r.ID)
			assert.Equal(t, r.ID, r.Value.By)
			assert.Equal(t, uint64(1), r.Revision, "record %s written once", r.ID)
		}
		var noteIDs []string
		for r, err := range notes.List(ctx) {
			require.NoError(t, err)
			assert.Equal(t, r.ID, r.Value.By)
			noteIDs = append(noteIDs, r.ID)
		}
		var wantIDs []string
		for g := range goroutines {
			for i := range per {
				wantIDs = append(wantIDs, fmt.Sprintf("g%d-i%d", g, i))
			}
		}
		slices.Sort(wantIDs)
		assert.Equal(t, wantIDs, noteIDs, "every Put's record, once")

		head, err := seq.Peek(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(total), head, "Peek")
		a := auditLedger(t, ctx, v, fleetSeries)
		assertDense(t, a.allocated, total, "ledger allocations")
		assert.Empty(t, a.putDups, "numbers put on more than one record")
		for id, n := range byID {
			assert.Equal(t, id, a.putBy[n], "the ledger binds number %d", n)
		}
		rep, err := seq.Audit(context.Background())
		require.NoError(t, err)
		assert.Equal(t, uint64(total), rep.Head, "audit head")
		assert.Equal(t, goroutines*per, rep.Bound, "audit: numbers bound by PutNumbered")
		assert.Zero(t, rep.Missing+rep.Voided+rep.Seeded, "audit: numbers missing, voided or seeded")
	})
}
