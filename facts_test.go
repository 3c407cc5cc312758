package noydb_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file check what the vault's ledger tells a sequence:
// audits in proportion to the facts, counters and claims the store lost,
// numbers a seed skipped.

// openSession opens the vault "books" on st in a fresh DB (a process
// restart), with its rollback pins in dir, or in memory when dir is "".
func openSession(t testing.TB, st stores.Store, dir string) (*noydb.DB, *vault.Vault) {
	t.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{
		User: "firm", Secret: []byte("s"), Store: st, StateDir: dir,
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db, openVault(t, db, "books")
}

func mustSeq(t testing.TB, v *vault.Vault, series string) *sequence.Sequence {
	t.Helper()
	q, err := v.Sequence(series, sequence.Options{})
	require.NoError(t, err)
	return q
}

func nextN(t testing.TB, q *sequence.Sequence, n int) {
	t.Helper()
	for range n {
		_, err := q.Next(context.Background())
		require.NoError(t, err)
	}
}

// Item 4: a series seeded to 2,026,000,001 (a year-prefixed invoice number)
// and then given 10,000 numbers audits as two runs, without one entry per
// number.
func TestAuditOfAHugeSeed(t *testing.T) {
	ctx := context.Background()
	const seed, issued = 2_026_000_001, 10_000
	_, v := openSession(t, memstore.New(), "")
	q := mustSeq(t, v, "invoice")
	require.NoError(t, q.SeedTo(ctx, seed))
	nextN(t, q, issued)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	rep, err := q.Audit(ctx)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("audit of a series seeded to %d plus %d numbers: %v, %.1f MB allocated in all", seed, issued, took, float64(allocated)/(1<<20))

	assert.Equal(t, sequence.AuditReport{
		Series: "invoice",
		Head:   seed + issued,
		Runs: []sequence.Run{
			{From: 1, To: seed, State: sequence.StateSeeded},
			{From: seed + 1, To: seed + issued, State: sequence.StateUnbound},
		},
		Seeded:  seed,
		Unbound: issued,
	}, rep)
	// Every byte the audit allocated, garbage included, stays far below
	// what one entry per number would take (tens of gigabytes).
	assert.Less(t, allocated, uint64(50<<20), "bytes allocated by the audit")

	// The iterator generates numbers from the runs, on demand.
	var first []sequence.NumberAudit
	for a := range rep.Numbers() {
		first = append(first, a)
		if len(first) == 2 {
			break
		}
	}
	assert.Equal(t, []sequence.NumberAudit{{N: 1, State: sequence.StateSeeded}, {N: 2, State: sequence.StateSeeded}}, first)
}

// A counter at the top of the uint64 range audits too: the seeded run is
// longer than an int counts.
func TestAuditAtTheTop(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, memstore.New(), "")
	q := mustSeq(t, v, "invoice")
	require.NoError(t, q.SeedTo(ctx, math.MaxUint64-1))
	nextN(t, q, 1)
	rep, err := q.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, sequence.AuditReport{
		Series: "invoice",
		Head:   math.MaxUint64,
		Runs: []sequence.Run{
			{From: 1, To: math.MaxUint64 - 1, State: sequence.StateSeeded},
			{From: math.MaxUint64, To: math.MaxUint64, State: sequence.StateUnbound},
		},
		Seeded:  math.MaxInt,
		Unbound: 1,
	}, rep)
	var last sequence.NumberAudit
	for a := range rep.Numbers() {
		if a.N > 2 {
			break
		}
		last = a
	}
	assert.Equal(t, sequence.NumberAudit{N: 2, State: sequence.StateSeeded}, last)
	tail := sequence.AuditReport{Runs: rep.Runs[1:]}
	assert.Equal(t, []sequence.NumberAudit{{N: math.MaxUint64, State: sequence.StateUnbound}}, slices.Collect(tail.Numbers()))
}

// The iterator yields exactly 1..Head with the state of each run.
func TestAuditNumbersIterator(t *testing.T) {
	rep := sequence.AuditReport{Head: 6, Runs: []sequence.Run{
		{From: 1, To: 2, State: sequence.StateSeeded},
		{From: 3, To: 3, State: sequence.StateBound, Collection: "c", ID: "x", Orphaned: true},
		{From: 4, To: 5, State: sequence.StateMissing},
		{From: 6, To: 6, State: sequence.StateVoided, Reason: "r"},
	}}
	assert.Equal(t, []sequence.NumberAudit{
		{N: 1, State: sequence.StateSeeded},
		{N: 2, State: sequence.StateSeeded},
		{N: 3, State: sequence.StateBound, Collection: "c", ID: "x", Orphaned: true},
		{N: 4, State: sequence.StateMissing},
		{N: 5, State: sequence.StateMissing},
		{N: 6, State: sequence.StateVoided, Reason: "r"},
	}, slices.Collect(rep.Numbers()))
	assert.Empty(t, slices.Collect(sequence.AuditReport{}.Numbers()))
}

// Item 15: without a state folder, a counter the store deletes or replays
// to an older value is caught on the first allocation after a restart, and
// by Audit, because the ledger records numbers above it.
func TestCounterBehindLedgerIsRollback(t *testing.T) {
	ctx := context.Background()
	const key = "v/books/_sequences/invoice"
	cases := map[string]func(t *testing.T, adv *faultstore.Adversary, snap faultstore.Snapshot){
		"deleted": func(t *testing.T, adv *faultstore.Adversary, _ faultstore.Snapshot) {
			require.NoError(t, adv.Drop(ctx, key))
		},
		"replayed": func(t *testing.T, adv *faultstore.Adversary, snap faultstore.Snapshot) {
			require.NoError(t, adv.Restore(ctx, snap, key))
		},
	}
	for storeName, newAdv := range adversaries() {
		for caseName, misbehave := range cases {
			for _, seeded := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/seeded=%v", storeName, caseName, seeded), func(t *testing.T) {
					adv := newAdv(t)
					db, v := openSession(t, adv.Store(), "")
					q := mustSeq(t, v, "invoice")
					nextN(t, q, 2)
					snap, err := adv.Snapshot(ctx) // the counter at 2
					require.NoError(t, err)
					nextN(t, q, 3)
					if seeded { // the ledger's highest number is a seed's target
						require.NoError(t, q.SeedTo(ctx, 100))
					}
					other := mustSeq(t, v, "receipt")
					nextN(t, other, 1)
					require.NoError(t, db.Close())
					misbehave(t, adv, snap)
					before, err := adv.Snapshot(ctx)
					require.NoError(t, err)

					_, v2 := openSession(t, adv.Store(), "")
					q2 := mustSeq(t, v2, "invoice")
					n, err := q2.Next(ctx)
					assert.ErrorIs(t, err, noydb.ErrRollback)
					assert.ErrorIs(t, err, sequence.ErrRollback)
					assert.Zero(t, n)
					_, err = q2.Claim(ctx, "order-1")
					assert.ErrorIs(t, err, noydb.ErrRollback)
					assert.ErrorIs(t, q2.SeedTo(ctx, 3), noydb.ErrRollback)
					_, err = q2.Audit(ctx)
					assert.ErrorIs(t, err, noydb.ErrRollback)
					after, err := adv.Snapshot(ctx)
					require.NoError(t, err)
					assert.Equal(t, before, after, "a refused allocation writes nothing")

					// Another series of the vault is not affected.
					n, err = mustSeq(t, v2, "receipt").Next(ctx)
					require.NoError(t, err)
					assert.Equal(t, uint64(2), n)
				})
			}
		}
	}
}

// The check of a counter against the ledger never raises a false alarm: a
// fresh DB's first allocations race writers of another DB on the same store.
func TestCounterCheckNoFalseAlarm(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	_, v := openSession(t, st, "")
	q := mustSeq(t, v, "invoice")
	nextN(t, q, 50)

	const writers, each = 4, 50
	var wg sync.WaitGroup
	got := make(chan uint64, 2*writers*each)
	errs := make(chan error, 2*writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				n, err := q.Next(ctx)
				got <- n
				errs <- err
			}
		})
	}
	for range writers {
		wg.Go(func() {
			// Each goroutine is a restart: a fresh DB whose first
			// allocation reads the ledger while the others write.
			_, v2 := openSession(t, st, "")
			q2 := mustSeq(t, v2, "invoice")
			for range each {
				n, err := q2.Next(ctx)
				got <- n
				errs <- err
			}
		})
	}
	wg.Wait()
	close(got)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	nums := slices.Sorted(func(yield func(uint64) bool) {
		for n := range got {
			if !yield(n) {
				return
			}
		}
	})
	want := make([]uint64, 2*writers*each)
	for i := range want {
		want[i] = uint64(51 + i)
	}
	assert.Equal(t, want, nums)
}

// Audit runs next to writers of every kind without a false alarm, and its
// reports only grow: from a DB of its own on the same store (as another
// process would), and from the writers' DB. The writers' Claims and Voids
// read nothing from the ledger once their counter's view is current.
func TestAuditNextToWriters(t *testing.T) {
	for storeName, newAdv := range adversaries() {
		for _, sameDB := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sameDB=%v", storeName, sameDB), func(t *testing.T) {
				testAuditNextToWriters(t, newAdv(t), sameDB)
			})
		}
	}
}

func testAuditNextToWriters(t *testing.T, adv *faultstore.Adversary, sameDB bool) {
	ctx := context.Background()
	_, v := openSession(t, adv.Store(), "")
	q := mustSeq(t, v, "invoice")
	auditor := q
	if !sameDB {
		_, va := openSession(t, adv.Store(), "")
		auditor = mustSeq(t, va, "invoice")
	}
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	const writers, each = 4, 40
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				var err error
				switch i % 4 {
				case 0:
					_, err = q.Next(ctx)
				case 1:
					_, err = q.Claim(ctx, fmt.Sprintf("req-%d-%d", w, i))
				case 2:
					_, err = invoices.PutNumbered(ctx, fmt.Sprintf("inv-%d-%d", w, i), q, func(s sequence.Serial) (Invoice, error) {
						return Invoice{Number: s.Formatted}, nil
					})
				case 3:
					var n uint64
					if n, err = q.Next(ctx); err == nil {
						err = q.Void(ctx, n, "spoiled")
					}
				}
				assert.NoError(t, err)
			}
		})
	}
	audits := 0
	auditing := make(chan struct{})
	go func() {
		defer close(auditing)
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			rep, err := auditor.Audit(ctx)
			if !assert.NoError(t, err) {
				return
			}
			assert.GreaterOrEqual(t, rep.Head, last)
			assert.Zero(t, rep.Missing+rep.Seeded, "head %d", rep.Head)
			last = rep.Head
			audits++
		}
	}()
	wg.Wait()
	close(stop)
	<-auditing

	rep, err := q.Audit(ctx)
	require.NoError(t, err)
	const total = writers * each // one number per call
	assert.Equal(t, uint64(total), rep.Head)
	assert.Equal(t, total/4, rep.Bound)
	assert.Equal(t, total/4, rep.Voided)
	assert.Equal(t, total/2, rep.Unbound) // Next and Claim
	assert.Zero(t, rep.Missing+rep.Seeded+rep.Orphaned)
	t.Logf("%d audits ran next to the writers", audits)
}

// claimKeys lists the claim records of the counter at counter.
func claimKeys(t testing.TB, adv *faultstore.Adversary, counter string) []string {
	t.Helper()
	keys, err := adv.Keys(context.Background(), counter+"\x01")
	require.NoError(t, err)
	var out []string
	for _, k := range keys {
		if !strings.Contains(k, "\x01v\x00") {
			out = append(out, k)
		}
	}
	return out
}

// Item 8: a claim record the store deletes does not make the request get a
// second number: the ledger still knows the request id, the claim gets its
// first number back, and the record is written again. With and without a
// state folder, in the same process and after a restart.
func TestClaimRecordDeleted(t *testing.T) {
	ctx := context.Background()
	const counter = "v/books/_sequences/orders"
	for storeName, newAdv := range adversaries() {
		for _, withState := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/statedir=%v", storeName, withState), func(t *testing.T) {
				adv := newAdv(t)
				dir := ""
				if withState {
					dir = t.TempDir()
				}
				db, v := openSession(t, adv.Store(), dir)
				q := mustSeq(t, v, "orders")
				n, err := q.Claim(ctx, "order-77")
				require.NoError(t, err)
				require.Equal(t, uint64(1), n)
				nextN(t, q, 1) // 2
				records := claimKeys(t, adv, counter)
				require.Len(t, records, 1)

				require.NoError(t, adv.Drop(ctx, records[0]))
				n, err = q.Claim(ctx, "order-77")
				require.NoError(t, err)
				assert.Equal(t, uint64(1), n, "same process")
				assert.Equal(t, records, claimKeys(t, adv, counter), "the record is written again")

				require.NoError(t, db.Close())
				require.NoError(t, adv.Drop(ctx, records[0]))
				_, v2 := openSession(t, adv.Store(), dir)
				q2 := mustSeq(t, v2, "orders")
				n, err = q2.Claim(ctx, "order-77")
				require.NoError(t, err)
				assert.Equal(t, uint64(1), n, "after a restart")
				n, err = q2.Claim(ctx, "order-78")
				require.NoError(t, err)
				assert.Equal(t, uint64(3), n, "a new request gets the next number")
				n, err = q2.Next(ctx)
				require.NoError(t, err)
				assert.Equal(t, uint64(4), n)

				rep, err := q2.Audit(ctx)
				require.NoError(t, err)
				assert.Equal(t, sequence.AuditReport{Series: "orders", Head: 4, Runs: []sequence.Run{
					{From: 1, To: 4, State: sequence.StateUnbound},
				}, Unbound: 4}, rep)
			})
		}
	}
}

// Claims racing on one id after its record was deleted all get its number.
func TestClaimRecordDeletedConcurrent(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	_, v := openSession(t, adv.Store(), "")
	q := mustSeq(t, v, "orders")
	want, err := q.Claim(ctx, "order-77")
	require.NoError(t, err)
	for _, k := range claimKeys(t, adv, "v/books/_sequences/orders") {
		require.NoError(t, adv.Drop(ctx, k))
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			id := "order-77"
			if i%2 == 1 {
				id = fmt.Sprint("fresh-", i)
			}
			n, err := q.Claim(ctx, id)
			assert.NoError(t, err)
			if id == "order-77" {
				assert.Equal(t, want, n)
			} else {
				assert.Greater(t, n, want)
			}
		})
	}
	wg.Wait()
	head, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(17), head, "one number for order-77, one per fresh id")
}

// Item 16a: the store never sees a request id: claim records are keyed by a
// MAC of it, and distinct ids get distinct records.
func TestClaimKeysHideRequestIDs(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	_, v := openSession(t, adv.Store(), "")
	q := mustSeq(t, v, "orders")
	for i := range 5 {
		n, err := q.Claim(ctx, fmt.Sprint("order-", i))
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), n)
	}
	keys, err := adv.Keys(ctx, "")
	require.NoError(t, err)
	for _, k := range keys {
		assert.NotContains(t, k, "order-")
	}
	assert.Len(t, claimKeys(t, adv, "v/books/_sequences/orders"), 5)
}

// Item 16b: Void refuses a number SeedTo skipped (never issued here) and
// writes nothing; numbers issued before or after the seed can be voided.
func TestVoidRefusesSeededNumbers(t *testing.T) {
	for storeName, newAdv := range adversaries() {
		t.Run(storeName, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			db, v := openSession(t, adv.Store(), "")
			q := mustSeq(t, v, "invoice")
			nextN(t, q, 2)                       // 1, 2
			require.NoError(t, q.SeedTo(ctx, 9)) // 3..9 skipped
			nextN(t, q, 1)                       // 10
			require.NoError(t, q.SeedTo(ctx, 20))
			before, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			for _, n := range []uint64{3, 5, 9, 11, 20} {
				err := q.Void(ctx, n, "cancelled")
				assert.ErrorIs(t, err, sequence.ErrSkipped, "number %d", n)
				assert.ErrorIs(t, err, sequence.ErrNotIssued, "number %d", n)
			}
			after, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			assert.Equal(t, before, after, "a refused void writes nothing")

			// After a restart too.
			require.NoError(t, db.Close())
			_, v2 := openSession(t, adv.Store(), "")
			q2 := mustSeq(t, v2, "invoice")
			assert.ErrorIs(t, q2.Void(ctx, 4, "cancelled"), sequence.ErrSkipped)
			for _, n := range []uint64{2, 10} {
				assert.NoError(t, q2.Void(ctx, n, "cancelled"), "number %d", n)
			}
			rep, err := q2.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, []sequence.Run{
				{From: 1, To: 1, State: sequence.StateUnbound},
				{From: 2, To: 2, State: sequence.StateVoided, Reason: "cancelled"},
				{From: 3, To: 9, State: sequence.StateSeeded},
				{From: 10, To: 10, State: sequence.StateVoided, Reason: "cancelled"},
				{From: 11, To: 20, State: sequence.StateSeeded},
			}, rep.Runs)
		})
	}
}

// BenchmarkFirstNextAfterOpen measures the first allocation of a counter in
// a fresh DB over a ledger of 100,000 entries: it reads the ledger once to
// check the counter against it. Each iteration is a process restart.
func BenchmarkFirstNextAfterOpen(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	_, v := openSession(b, st, "")
	q := mustSeq(b, v, "invoice")
	const entries = 100_000
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { nextN(b, q, entries/8) })
	}
	wg.Wait()
	want := uint64(entries)
	for b.Loop() {
		b.StopTimer()
		db, v := openSession(b, st, "")
		q := mustSeq(b, v, "invoice")
		b.StartTimer()
		n, err := q.Next(ctx)
		b.StopTimer()
		want++
		if err != nil || n != want {
			b.Fatalf("Next = %d, %v; want %d", n, err, want)
		}
		_ = db.Close()
		b.StartTimer()
	}
}
