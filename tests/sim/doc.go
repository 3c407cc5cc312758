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
// # Known defects
//
// Some defects the simulation found are not fixed yet (their areas are
// being changed). By default the generator avoids their triggers, or the
// checker reports their outcome as documented; -sim.known turns them back
// on, and each then fails a check. When one is fixed, remove its gate:
//
//   - a rotation (RotateKeys, or a Revoke that rotates) on one device
//     racing writes on another loses them to its re-seal at the next sync
//     (KRotate, and Revoke without RevokeWithoutRotation);
//   - two rotations at once and a sync: a pull on another device fails
//     with ErrHubTampered on an honest hub;
//   - a change made after a push the hub committed but reported as failed
//     loses to the pushed revision at the next sync (excused);
//   - a person granted again after a revocation: the device's Verify fails
//     with "keyring signing key differs from the ledger's" (KGrant);
//   - grants of one person from two devices before they sync: the same;
//   - the hub's counters rolled back or dropped under a ledger that keeps
//     their numbers: a process whose first allocation passed before gives
//     numbers again (the generator restarts every device after it);
//   - a Void on such a counter says ErrNotIssued instead of ErrRollback;
//   - a series definition dropped: corrections fail with ErrInvalid;
//   - the late device's counters dropped before it joins a hub: the join
//     seeds the hub from them and the hub gives their numbers again;
//   - a claim's request id used before and after a late join gets two
//     numbers;
//   - a handle opened before a late join and kept across it takes numbers
//     from the device's own counters.
//
// # Determinism
//
// A seed fixes the schedule: devices, steps, operations, faults and when
// each fault strikes. The interleaving of the goroutines within a step is
// the Go scheduler's, so a replay runs the same schedule but may interleave
// it differently; the shrinker tries each candidate several times.
package sim
