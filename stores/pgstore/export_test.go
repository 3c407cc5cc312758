package pgstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
)

// CountTransactions makes s add up what its transactions send from now on,
// and returns a function that reports the statements and round trips so far.
// Call it before s is used concurrently.
func CountTransactions(s *Store) func() (statements, roundTrips int64) {
	s.counters = &txCounters{}
	return func() (int64, int64) {
		return s.counters.statements.Load(), s.counters.roundTrips.Load()
	}
}

// Setting returns the value of a server setting on one of s's connections.
func Setting(ctx context.Context, s *Store, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}

// ExplainListAfter runs the statement of the first page of
// s.ListAfter(prefix, after) under EXPLAIN ANALYZE, with the planner
// setting listPage turns off, and returns its plan in JSON, with the
// generic plan (the one the server keeps for a prepared statement once it
// has run a few times) if generic.
func ExplainListAfter(ctx context.Context, s *Store, prefix, after string, generic bool) ([]byte, error) {
	lower := nonNil([]byte(prefix))
	upper, bounded := prefixEnd(lower)
	if !bounded {
		return explain(ctx, s, s.q.listAll, "bytea, bytea", generic, []string{listOff}, lower, nonNil([]byte(after)))
	}
	return explain(ctx, s, s.q.list, "bytea, bytea, bytea", generic, []string{listOff}, lower, nonNil([]byte(after)), upper)
}

// ExplainGetMany is ExplainListAfter for the statement of s.GetMany(keys).
func ExplainGetMany(ctx context.Context, s *Store, keys []string, generic bool) ([]byte, error) {
	kbs := make([][]byte, len(keys))
	for i, k := range keys {
		kbs[i] = []byte(k)
	}
	return explain(ctx, s, s.q.readMany, "bytea[]", generic, nil, kbs)
}

// explain prepares stmt (whose parameters have the types given) and runs it
// under EXPLAIN ANALYZE with the planner settings off turned off, on a
// connection taken out of the pool and closed afterwards, so that its
// settings and prepared statement go with it.
func explain(ctx context.Context, s *Store, stmt, types string, generic bool, off []string, args ...any) ([]byte, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := c.Hijack()
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
		return nil, err
	}
	for _, name := range off {
		if _, err := conn.Exec(ctx, `SET `+name+` = off`); err != nil {
			return nil, err
		}
	}
	if _, err := conn.Exec(ctx, `PREPARE noydb_explain(`+types+`) AS `+stmt); err != nil {
		return nil, err
	}
	// EXECUTE under EXPLAIN takes no parameters: the values go as literals.
	params := make([]string, len(args))
	for i, arg := range args {
		switch a := arg.(type) {
		case []byte:
			params[i] = byteaLiteral(a)
		case [][]byte:
			elems := make([]string, len(a))
			for j, b := range a {
				elems[j] = byteaLiteral(b)
			}
			params[i] = `ARRAY[` + strings.Join(elems, ", ") + `]::bytea[]`
		default:
			return nil, fmt.Errorf("explain: argument of type %T", arg)
		}
	}
	var plan []byte
	err = conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE noydb_explain(`+strings.Join(params, ", ")+`)`).Scan(&plan)
	return plan, err
}

func byteaLiteral(b []byte) string { return `'\x` + hex.EncodeToString(b) + `'::bytea` }

// Analyze updates the planner's statistics of s's items table.
func Analyze(ctx context.Context, s *Store) error {
	_, err := s.pool.Exec(ctx, s.sql(`ANALYZE {s}.items`))
	return err
}

// IndexEntriesRead returns how many entries the reads of s's items table
// took from its primary key's index so far, as the server counts them. It
// makes the connection it runs on report its own counts first, so on a
// store opened with MaxConns 1 the count includes every read s made.
func IndexEntriesRead(ctx context.Context, s *Store) (int64, error) {
	// The server reports a connection's counts when it goes idle, at
	// most once a second unless asked to; the request takes effect at
	// the end of its own statement.
	if _, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		return 0, err
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT idx_tup_read FROM pg_stat_user_indexes
		WHERE schemaname = $1 AND relname = 'items' AND indexrelname = 'items_pkey'`, s.schema).Scan(&n)
	return n, err
}
