// Package sim is a randomized fault simulation of noydb: seeded schedules
// of devices (memstore, badger, a file folder), a hub (a memstore, or
// PostgreSQL in the slow mode), people, series with periods, partitions and
// corrections, NumberingOf collections and records, run by many goroutines
// at once while faults strike between and inside the operations: crashes,
// ambiguous commits, conflict storms, an unreachable or slow hub, and, in
// hostile schedules, a store or hub that rolls back, drops, replays or
// injects keys.
//
// Each run records a history (every call with its logical call and return
// times and what it returned) and checks it: the numbers of each counter
// (series, partition, period) form the history of one counter under
// Porcupine's linearizability check, with no number twice and, once
// everything settled, no gap but voids and calls whose outcome was unknown;
// every acknowledged write is present; Verify and Audit are clean on honest
// schedules and report a detection error (never a number twice, except
// where the README's threat table documents it) on hostile ones; devices
// converge after a final sync.
//
// The harness drives the SDK through its public API (vault, sequence) and
// the fault wrappers of internal/faultstore only.
//
// # Usage
//
//	go test ./tests/sim                                  # the CI budget
//	go test ./tests/sim -run TestSimulation -sim.seed=42 # replay one schedule
//	scripts/sim --minutes 60                             # a long run
//
// A failing schedule prints its seed, the failures with the operations
// involved and its history, then a shrunk schedule saved as JSON
// (-sim.replay=FILE replays it).
//
// # Determinism
//
// A seed fixes the schedule: devices, steps, operations, faults and when
// each fault strikes. The interleaving of the goroutines within a step is
// the Go scheduler's, so a replay runs the same schedule but may interleave
// it differently; the shrinker tries each candidate several times.
package sim
