package pgstore

import "context"

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
