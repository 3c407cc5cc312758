package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// BenchmarkFleet compares noydb's numbering on PostgreSQL with the raw
// counter-row pattern of seed 000, on the same server in the same run, with
// durable commits. Each sub-benchmark reports numbers/s, and its ratio to the
// baselines it is compared with, which run before it: x-seed (to
// seed-pattern-64), x-seed-series (to seed-pattern-64-series) and x-hot (to
// next-64). The vault benchmarks also report how their transactions look:
// numbers/tx (how many numbers one transaction carried), stmts/number
// (statements sent to the server per number, begin and commit included) and
// trips/number (round trips per number). A vault's writes that queue while a
// commit is in flight share the next transaction, whatever their series;
// pgstore reads the keys such a transaction names in one round trip and
// sends its writes as one multi-row statement each for puts and deletes, so
// a transaction of many numbers costs two round trips and a few statements.
//
//	seed-pattern-64         64 callers, one pgx transaction per number (update-returning, insert, commit) on one stream row
//	next-64                 64 callers of Sequence.Next on one series of a vault (x-seed)
//	putnumbered-64          64 callers of Collection.PutNumbered on one series (x-seed)
//	next-1                  one caller of Next: ns/op is the latency of one Next
//	seed-pattern-64-series  the seed pattern with 64 callers, each on a stream row of its own
//	next-64-series          64 callers of Next, each on a series of its own (x-seed-series, x-hot)
//
// After each run the heads are checked: every series (and stream row) is at
// exactly the count of numbers taken from it.
//
// Run it with:
//
//	scripts/with-postgres go test -run '^$' -bench BenchmarkFleet -benchtime 5s ./stores/pgstore/
//
// scripts/bench-writepath runs it with the root package's write-path
// benchmarks and prints the table of issue 11.
func BenchmarkFleet(b *testing.B) {
	rates := map[string]float64{} // numbers/s of each sub-benchmark that has run
	// ratio names a baseline of a sub-benchmark and the unit its ratio is
	// reported in.
	type ratio struct{ base, unit string }
	bench := func(name string, callers int, setup func(b *testing.B) func(ctx context.Context, caller int) error, ratios ...ratio) {
		b.Run(name, func(b *testing.B) {
			take := setup(b)
			rate := benchCallersRate(b, callers, take)
			rates[name] = rate
			for _, r := range ratios {
				if base := rates[r.base]; base > 0 {
					b.ReportMetric(rate/base, r.unit)
				}
			}
		})
	}
	toSeed := ratio{"seed-pattern-64", "x-seed"}

	bench("seed-pattern-64", benchCallers, func(b *testing.B) func(context.Context, int) error {
		return seedPatternStreams(b, 1)
	})
	bench("next-64", benchCallers, func(b *testing.B) func(context.Context, int) error {
		_, seq := benchVault(b, 1)
		return nextOn(b, seq)
	}, toSeed)
	bench("putnumbered-64", benchCallers, func(b *testing.B) func(context.Context, int) error {
		v, seq := benchVault(b, 1)
		b.Cleanup(func() { checkHead(b, seq[0], uint64(b.N)) })
		invoices := vault.CollectionOf[fleetRecord](v, fleetCollection)
		var ids atomic.Int64
		return func(ctx context.Context, _ int) error {
			id := "inv-" + strconv.FormatInt(ids.Add(1), 10)
			_, err := invoices.PutNumbered(ctx, id, seq[0], func(s sequence.Serial) (fleetRecord, error) {
				return fleetRecord{Number: s.N, Serial: s.Formatted, By: id}, nil
			})
			return err
		}
	}, toSeed)
	bench("next-1", 1, func(b *testing.B) func(context.Context, int) error {
		_, seq := benchVault(b, 1)
		return nextOn(b, seq)
	})
	bench("seed-pattern-64-series", benchCallers, func(b *testing.B) func(context.Context, int) error {
		return seedPatternStreams(b, benchCallers)
	})
	bench("next-64-series", benchCallers, func(b *testing.B) func(context.Context, int) error {
		_, seqs := benchVault(b, benchCallers)
		return nextOn(b, seqs)
	}, ratio{"seed-pattern-64-series", "x-seed-series"}, ratio{"next-64", "x-hot"})
}

// nextOn returns a take function calling Next, caller i on
// seqs[i % len(seqs)], and checks when b ends that each series is at exactly
// the count of numbers taken from it.
func nextOn(b *testing.B, seqs []*sequence.Sequence) func(context.Context, int) error {
	b.Helper()
	byCaller := make([]uint64, benchCallers) // each caller counts its own
	b.Cleanup(func() {
		taken := make([]uint64, len(seqs))
		for c, n := range byCaller {
			taken[c%len(seqs)] += n
		}
		for i, seq := range seqs {
			checkHead(b, seq, taken[i])
		}
	})
	return func(ctx context.Context, caller int) error {
		if _, err := seqs[caller%len(seqs)].Next(ctx); err != nil {
			return err
		}
		byCaller[caller]++
		return nil
	}
}

// benchCallersRate hands b.N numbers to callers goroutines, each calling take
// (with its index) once per number, reports numbers/s and returns it.
func benchCallersRate(b *testing.B, callers int, take func(ctx context.Context, caller int) error) float64 {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && !failed.Load() {
				if err := take(ctx, c); err != nil {
					failed.Store(true)
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	rate := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(rate, "numbers/s")
	return rate
}

// benchVault opens the fleet's vault in a fresh schema and returns it with
// handles on series of it: one "invoice-2026", or n named "s0", "s1", ….
//
// The store counts the statements and round trips the vault's transactions
// send, and numbers/tx, stmts/number and trips/number are reported when b ends.
func benchVault(b *testing.B, n int) (*vault.Vault, []*sequence.Sequence) {
	b.Helper()
	s := newCountingStore(pgtest.Open(b, &pgstore.Options{MaxConns: benchCallers}))
	v, seq := fleetVaultOn(b, s)
	s.reset()
	b.Cleanup(func() {
		if u := s.updates.Load(); u > 0 {
			stmts, trips := s.since()
			b.ReportMetric(float64(b.N)/float64(u), "numbers/tx")
			b.ReportMetric(float64(stmts)/float64(b.N), "stmts/number")
			b.ReportMetric(float64(trips)/float64(b.N), "trips/number")
		}
	})
	if n == 1 {
		return v, []*sequence.Sequence{seq}
	}
	seqs := make([]*sequence.Sequence, n)
	for i := range seqs {
		var err error
		if seqs[i], err = v.Sequence("s"+strconv.Itoa(i), sequence.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	return v, seqs
}

// checkHead fails b unless seq has handed out exactly want numbers.
func checkHead(b *testing.B, seq *sequence.Sequence, want uint64) {
	b.Helper()
	if b.Failed() {
		return
	}
	head, err := seq.Peek(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if head != want {
		b.Fatalf("series at %d after %d numbers", head, want)
	}
}

// seedPattern is the code of BenchmarkSeedPattern64 as a take function: the
// counter-row pattern of seed 000 on one stream row (see seedPatternStreams).
func seedPattern(b *testing.B) func(context.Context, int) error {
	return seedPatternStreams(b, 1)
}

// seedPatternStreams returns a take function running the counter-row pattern
// of seed 000 through pgx on streams stream rows, caller i on row i % streams:
// one durable transaction per number that increments the stream's head row
// and inserts the event carrying the number. When b ends it checks that every
// stream's head, event count and highest event number are the same, and that
// the streams' events add up to b.N.
func seedPatternStreams(b *testing.B, streams int) func(context.Context, int) error {
	dbURL := pgtest.URL(b)
	schema := `"` + pgtest.Schema(b) + `"`
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchCallers
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	for _, stmt := range []string{
		`CREATE SCHEMA ` + schema,
		`CREATE TABLE ` + schema + `.streams (id text PRIMARY KEY, head bigint NOT NULL DEFAULT 0)`,
		`CREATE TABLE ` + schema + `.stream_events (
			stream_id text NOT NULL REFERENCES ` + schema + `.streams (id),
			seq bigint NOT NULL, type text NOT NULL, data jsonb NOT NULL,
			PRIMARY KEY (stream_id, seq))`,
		`INSERT INTO ` + schema + `.streams (id) SELECT 's' || i FROM generate_series(0, ` + strconv.Itoa(streams-1) + `) AS i`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	next := `UPDATE ` + schema + `.streams SET head = head + 1 WHERE id = $1 RETURNING head`
	event := `INSERT INTO ` + schema + `.stream_events (stream_id, seq, type, data) VALUES ($1, $2, $3, $4)`
	ids := make([]string, streams)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}

	b.Cleanup(func() {
		if b.Failed() {
			return
		}
		rows, err := pool.Query(ctx, `SELECT s.id, s.head, count(e.seq), coalesce(max(e.seq), 0)
			FROM `+schema+`.streams s LEFT JOIN `+schema+`.stream_events e ON e.stream_id = s.id
			GROUP BY s.id, s.head`)
		if err != nil {
			b.Fatal(err)
		}
		var id string
		var head, count, maxSeq, total int64
		found := 0
		_, err = pgx.ForEachRow(rows, []any{&id, &head, &count, &maxSeq}, func() error {
			found++
			total += count
			if head != count || maxSeq != count {
				return fmt.Errorf("stream %s: head %d, %d events up to %d, want all three the same", id, head, count, maxSeq)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if found != streams || total != int64(b.N) {
			b.Fatalf("%d events on %d streams after %d numbers on %d", total, found, b.N, streams)
		}
	})
	return func(ctx context.Context, caller int) error {
		stream := ids[caller%streams]
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var head int64
			if err := tx.QueryRow(ctx, next, stream).Scan(&head); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, event, stream, head, "allocated", `{"by":"bench"}`)
			return err
		})
	}
}

// countingStore is a pgstore.Store that counts its transactions, and has the
// store count the statements and round trips they send.
type countingStore struct {
	*pgstore.Store
	sent    func() (statements, roundTrips int64)
	updates atomic.Int64
	// what had been sent at the last reset
	stmts0, trips0 int64
}

func newCountingStore(s *pgstore.Store) *countingStore {
	return &countingStore{Store: s, sent: pgstore.CountTransactions(s)}
}

func (s *countingStore) reset() {
	s.updates.Store(0)
	s.stmts0, s.trips0 = s.sent()
}

// since returns what was sent since the last reset.
func (s *countingStore) since() (statements, roundTrips int64) {
	stmts, trips := s.sent()
	return stmts - s.stmts0, trips - s.trips0
}

func (s *countingStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, fn)
}
