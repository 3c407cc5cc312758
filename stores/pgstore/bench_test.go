package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// benchCallers is how many goroutines allocate numbers at once.
const benchCallers = 64

// runCallers hands the numbers 1..b.N to benchCallers goroutines, each calling
// take once per number, and reports numbers/s.
func runCallers(b *testing.B, take func(ctx context.Context) error) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range benchCallers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && !failed.Load() {
				if err := take(ctx); err != nil {
					failed.Store(true)
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "numbers/s")
}

// BenchmarkSeedPattern64 is the raw counter-row pattern of seed 000 through
// pgx, the yardstick for the sequence package on PostgreSQL: 64 callers, each
// number in its own durable transaction that increments the stream's head
// row and inserts the event carrying the number.
func BenchmarkSeedPattern64(b *testing.B) {
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
		`INSERT INTO ` + schema + `.streams (id) VALUES ('bench')`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	next := `UPDATE ` + schema + `.streams SET head = head + 1 WHERE id = $1 RETURNING head`
	event := `INSERT INTO ` + schema + `.stream_events (stream_id, seq, type, data) VALUES ($1, $2, $3, $4)`

	runCallers(b, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var head int64
			if err := tx.QueryRow(ctx, next, "bench").Scan(&head); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, event, "bench", head, "allocated", `{"by":"bench"}`)
			return err
		})
	})

	// Gap-free: every number from 1 to b.N was taken exactly once.
	var head, count, maxSeq int64
	if err := pool.QueryRow(ctx, `SELECT head FROM `+schema+`.streams WHERE id = 'bench'`).Scan(&head); err != nil {
		b.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0) FROM `+schema+`.stream_events`).Scan(&count, &maxSeq); err != nil {
		b.Fatal(err)
	}
	if head != int64(b.N) || count != int64(b.N) || maxSeq != int64(b.N) {
		b.Fatalf("head %d, %d events up to %d, want all three %d", head, count, maxSeq, b.N)
	}
}

// BenchmarkUpdateCounter64 is the same workload through pgstore's
// transactions: 64 callers each increment a counter item with Update (Tx.Get
// locks the row) and write a record item in the same commit.
func BenchmarkUpdateCounter64(b *testing.B) {
	s := pgtest.Open(b, &pgstore.Options{MaxConns: benchCallers})
	runCallers(b, func(ctx context.Context) error {
		_, err := incrementAndRecord(ctx, s)
		return err
	})
}

// incrementAndRecord takes the next number of "counter" and writes the record
// that carries it, in one transaction.
func incrementAndRecord(ctx context.Context, s *pgstore.Store) (int, error) {
	n := 0
	err := s.Update(ctx, func(tx stores.Tx) error {
		n = 0
		it, err := tx.Get("counter")
		switch {
		case errors.Is(err, stores.ErrNotFound):
		case err != nil:
			return err
		default:
			if n, err = strconv.Atoi(string(it.Value)); err != nil {
				return err
			}
		}
		n++
		if err := tx.Put("counter", []byte(strconv.Itoa(n))); err != nil {
			return err
		}
		return tx.Put(fmt.Sprintf("record/%012d", n), []byte(`{"by":"bench"}`))
	})
	return n, err
}
