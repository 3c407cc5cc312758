// Package sim is a randomized fault simulation of noydb: seeded schedules
// of devices (memstore, badger, a file folder), a hub (a memstore, or
// PostgreSQL in the slow mode), people, series with periods, partitions and
// corrections, NumberingOf collections and records, run by many goroutines
// at once while faults strike between and inside the operations: crashes,
// ambiguous commits, conflict storms, an unreachable or slow hub, and, in
// hostile schedules, a store or hub that rolls back, drops, replays or
// injects keys, or a hub that forks: it serves one device a copy of
// itself (FFork) while the others see the real one, until the fault's
// span or the final sync ends it.
//
// Each run records a history (every call with its logical call and return
// times and what it returned) and checks it: the numbers of each counter
// (series, partition, period) form the history of one counter under
// Porcupine's linearizability check, with no number twice and, once
// everything settled, no gap but voids and calls whose outcome was unknown;
// every acknowledged write is present; Verify and Audit are clean on honest
// schedules and report a detection error (never a number twice, except
// where the README's threat table documents it) on hostile ones; devices
// converge after a final sync. After a fork, a number given twice is
// documented only when the two views gave it (the forked device on the
// copy, another on the real hub after the copy was taken), and a forked
// device that took a number on the copy must get ErrRollback once it is
// served the real hub again, before it takes a number there (the
// README's split-view row); when the fork is the run's only lie, no
// other device may report a detection error.
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
//   - none gated today. A 48-minute run on main e354e51 found, in honest
//     schedules, a note a device overwrote after an ambiguous push end
//     with the older value on every device (seeds 3731 and 3891; fixed
//     since, see below). That run's test binary also grew to 24 GB and
//     was stopped by the OOM killer: numbering's pass locks and vault's
//     people replays kept every store of every schedule (fixed:
//     TestPassLockOnAStoreWithoutLocksKeepsNoStore,
//     TestClosedVaultKeepsNoStore, TestRunLeavesNoStoreBehind; a long run
//     prints its memory every minute and its peaks in the summary).
//
// Not a defect, classified since: a hub that deletes its whole ledger
// (and counters) makes a device that never saw the lost numbers give
// them again, or answer a forgotten claim id anew (seeds 1180, 2370,
// 2642, 5022 of that run): the README's "a device that never saw the
// lost changes cannot tell", for a deleted ledger as for a rolled back
// one. The checker documents it only for numbers, claims, voids and
// closes the lost ledger held, on a device that had not seen them before
// the drop, and only when a device that had seen them detects the drop
// (TestCheckerFailsADropNotDetected; testdata/hub-drops-ledger-*.json).
//
// Fixed since, their gates removed, each with a regression test beside the
// sync code (the root package):
//
//   - a device's push the hub committed but reported as failed, then a
//     change of the record on that device, lost to a rotation's re-seal
//     of the pushed value: a re-seal two or more revisions above the
//     push (two rotations before a sync), or one written during a push
//     and not marked as a re-seal, was taken for a change and won by
//     revision (seeds 3731, 3891: a push now marks an entry a re-seal when
//     the record's content equals its sync base, and a device accepts
//     re-seals at any revision above its recognised push;
//     TestSyncKeepsAChangeAfterAnAmbiguousPushResealedTwice,
//     TestSyncKeepsAChangeAfterAnAmbiguousPushResealedBeforeAPush;
//     testdata/lost-overwrite-3731.json, lost-update-3891.json);
//
//   - the hub's counters, or the late device's before it joins, rolled
//     back or dropped under a ledger that keeps their numbers, down to a
//     counter put back exactly as this process last wrote or read it
//     (or to bytes of a write of its own whose outcome it never learned),
//     after another writer moved it on: each commit notes whether another
//     writer moved the ledger, and a counter is checked against the
//     ledger again before its cache is trusted
//     (TestCounterPutBackAsThisProcessLeftItIsRollback,
//     TestCounterPutBackToBytesThisProcessNeverHeldIsRollback; seeds 112,
//     268, 300, 316, 347 and 485 with -sim.known -sim.hostile=1).
//
//   - a numbering pass on the hub that stamped a record with a generation
//     a rotation (a Revoke) had just made, before it appended the stamp's
//     feed entry: another device's pull, whose keyring step came before
//     the rotation, could not open the record, so could not see it ahead
//     of its entry, and raised ErrHubTampered on an honest hub (seed 1209
//     of a 10-minute run, "receipts/r2-23 is not the revision 1 its feed
//     entry 129 names"; testdata/stamp-newer-generation-1209.json failed
//     2 of about 10 replays before). The pull now takes the keyring step
//     again for any record sealed with a newer generation
//     (TestSyncPullWaitsForAStampSealedWithANewerGeneration,
//     TestSyncPullStillDetectsARecordUnderANewerGenerationBehindItsEntry);
//
//   - a record deleted on one device while another, whose push of a
//     rotation's re-seal of it the hub committed but reported as failed,
//     rotated again before it synced: that device recognised its push but
//     took its second re-seal for a change, which tied the deletion on
//     revision and won; the deleted record came back on both devices
//     (seed 481 of a 200-operation sweep; its shrunk schedule,
//     testdata/lost-delete-481.json, failed 21 replays of 40)
//     (TestSyncKeepsADeletionOverAnAmbiguouslyPushedReseal);
//
//   - grants of one person from two devices, one device's Sync recording
//     its grant on the hub's ledger while the other's grant reached the
//     hub another way (a handle of the person put it there and wrote with
//     it; a revocation): pulls failed with "bad signature", Verify with
//     "keyring signing key differs from the ledger's" (seeds 19 and 327 of
//     a 200-operation sweep with grants on any device). The hub's keyring
//     now holds the grant its ledger records from the commit recording it
//     (TestGrantRecordedOnTheHubWhileTheOtherGrantActs); and a revocation
//     made elsewhere of a grant made on a device reaches that device
//     (TestDeviceLearnsARevocationOfItsGrantMadeElsewhere);
//
//   - grants of one person from two devices before they sync (each with a
//     key of its own): the device's Verify failed with "keyring signing
//     key differs from the ledger's", a pull with "bad signature" when the
//     person wrote through the hub with one of them. The grant the hub's
//     ledger records, or else the hub holds, wins on every device; the
//     other device records its own as revoked, and a handle holding it
//     gets ErrNoAccess (TestTwoDevicesGrantOnePersonBeforeTheySync,
//     TestTwoDevicesGrantAPersonAgainBeforeTheySync,
//     TestDeviceVerifiesAPersonRevokedGrantedAndRevokedElsewhere; seeds 173
//     and 251 of a 200-operation sweep once ungated);
//
//   - a claim's request id used before and after a late join got two
//     numbers: the join now brings the ids of the device's claims
//     (TestHubJoinKeepsTheNumbersOfClaims,
//     TestHubJoinRefusesACopyWhoseClaimTheHubAnswered);
//
//   - a revocation committed on the hub (with its rotation) while another
//     device's Sync was copying keyrings: the Sync had read the hub's
//     ledger before, took the revoked entry for one the ledgers disagree
//     with, and copied the person's older entry back over it; their handle
//     then took numbers on the hub after the revocation, and every
//     device's pull failed with ErrHubTampered, "entry N by "bob": author
//     revoked" (seeds 207 and 751 of a 200-operation sweep)
//     (TestSyncKeepsARevocationCommittedDuringItsKeyringStep);
//
//   - a handle opened before a late join and kept across it took numbers
//     from the device's own counters, which the hub's continue: it now
//     takes none (vault.ErrHubJoined, a refusal; a join made by another
//     process is learnt at the next open)
//     (TestHandleOpenedBeforeAJoinTakesNoNumber);
//
//   - a person granted again after a revocation, whose handle on the
//     granting device wrote through the hub before that device's Sync:
//     a device's pull failed with ErrHubTampered ("author revoked", or
//     "bad signature") at the person's later entries on an honest hub
//     (seeds 113, 175, 277, 477, 579, 651 of a 200-operation sweep with
//     -sim.known; 492 and 2097 with the gate on). The hub's ledger never
//     recorded the new grant (the owner's Sync compared with the hub's
//     keyring, which the person's handle had brought up to date), the
//     feed check and Verify refused a key the ledger had not named yet,
//     and another device's Sync put the older entry back on the hub
//     (TestSyncPullsTheWritesOfAPersonGrantedAgainBeforeTheHubLearnsIt;
//     ledger: TestAGrantAgainRecordedLater);
//
//   - a person who wrote through the hub before their grant reached the
//     hub's ledger (the hub took their key from the keyring), then revoked
//     and granted again: the keyring named the new key only, so their
//     first entries failed with "bad signature" (seed 163); the feed check
//     and Verify now also try the keys the ledger names for them later
//     (TestSyncPullsTheWritesOfAPersonWhoWroteBeforeTheirGrantSynced);
//
//   - a keyring copy that lost a race on the device skipped the new
//     generation, and a pull then failed with ErrHubTampered on an honest
//     hub (TestSyncBringsARotationPastAKeyringRace);
//
//   - a rotation's re-seal won a sync conflict over a change made on
//     another device (TestSyncRotationKeepsConcurrentChanges);
//
//   - a change made after a push the hub committed but reported as failed
//     lost to the pushed revision at the next sync
//     (TestSyncKeepsAChangeAfterAnAmbiguousPush), and a base that named
//     such a push already lost its content sum to it, so a rotation's
//     re-seal then won a conflict (seeds 167 and 895 of a sweep);
//
//   - the same after a rotation on another device re-sealed the pushed
//     revision before the device synced again: the device recognised its
//     push but no longer held its content, so the re-seal counted as a
//     change and the conflict went by the policy
//     (TestSyncKeepsAChangeAfterAnAmbiguousPushResealed);
//
//   - a Void of a number the ledger records, on a counter the store rolled
//     back or dropped, said ErrNotIssued instead of ErrRollback
//     (TestVoidBehindTheLedgerIsRollback);
//
//   - a person granted again after a revocation made on another device:
//     the device's Verify failed with "keyring signing key differs from
//     the ledger's" (KGrant; TestDeviceVerifiesAPersonGrantedAgainElsewhere);
//
//   - a series definition dropped: a correction of one of its numbers
//     said ErrInvalid instead of ErrRollback
//     (TestCorrectionOfASeriesWhoseDefinitionWasDeleted);
//
//   - a rotation made on another device during a pull: records sealed
//     with a generation the Sync's keyring step had not brought were
//     taken for hub tampering (TestSyncPullsARotationMadeDuringIt; seed
//     505 of a sweep);
//
//   - a numbering pass on the hub stopped between stamping its records
//     and recording their numbers: a push of a change of one of them said
//     ErrHubTampered (TestSyncWaitsForAPassStampNotInTheFeed; seed 505);
//
//   - a Sync of a file-folder device between a local write's record and
//     its ledger entry replaced the write with the hub's revision
//     (TestSyncFileFolderSyncDuringALocalWrite; seed 1043).
//
// The first and the last three are not gated defects but failures of a
// long sweep. The shrunk schedules kept in testdata are replayed by
// TestSavedSchedules.
//
// # Determinism
//
// A seed fixes the schedule: devices, steps, operations, faults and when
// each fault strikes. The interleaving of the goroutines within a step is
// the Go scheduler's, so a replay runs the same schedule but may interleave
// it differently; the shrinker tries each candidate several times.
package sim
