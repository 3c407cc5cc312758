// Package numbering gives gap-free numbers to records written where no
// number can be taken safely at write time: on a device that is offline, or
// on a store without atomic compare-and-swap (the file store, a synced
// folder), where sequence.Sequence.Next refuses with sequence.ErrOffline.
// Records are written first, pending, with a provisional id; later a pass
// on one authority numbers them 1, 2, 3 … in provisional order.
//
// Applications write numbered records through vault.NumberingOf, one handle
// on every store: it numbers a record in the commit that writes it where the
// store allows, and hands it off to a Series (this package) where it does
// not. The Series is what the handle's Series method returns: its passes,
// Lookup, Last, Pending, Assignments and Audit.
//
// The older vault.Vault.Numbering, configured with Options{Collection,
// Field}, opens the same kind of Series but numbers records by the name of a
// JSON member, and leaves handing records off to Series.Enqueue. It is
// deprecated: use it only for records without a Go type to write a setter
// for (see Options).
//
// # Usage
//
//	receipts, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipts",
//		sequence.Options{Format: "R-{seq:05}"},
//		func(r *Receipt, s sequence.Serial) { r.Number = s.Formatted })
//	r, err := receipts.Put(ctx, "r-7", Receipt{Total: 120}) // on any device, offline: r.Pending
//	…
//	report, err := receipts.Settle(ctx)                   // on the authority: a pass
//	a, ok, err := receipts.Lookup(ctx, r.Provisional)     // a.Formatted == "R-00001"
//
// # One head per series
//
// A series is numbered at write time, by the sequence counter of its name
// (sequence.Sequence, vault.Numbered's Put on a store with transactions,
// 'noydb put --seq'), and by this package's passes, from one head: the
// counter. A pass numbers its batch above the counter and above its own
// last number, and raises the counter past the batch in the transaction
// that commits the batch; a number taken at write time meanwhile makes the
// pass number its batch again, after it. On a store without transactions
// the head is the commit point and the counter is raised right after it
// (again by the pass that finishes an interrupted batch): no number is
// taken at write time there (the file store has no atomic
// compare-and-swap), and a counter found below the passes' head is raised
// to it at its first use.
// So a number taken at write time follows the passes' numbers without
// reading anything of them, a vault numbered online before it joined a hub
// goes on through its devices' handoffs, and the audits of either path
// (vault.Numbered.Audit, sequence.Sequence.Audit) account for the numbers
// of both.
//
// # The series' format
//
// The first handoff or pass stores the series' collection and format at
// "_numbering/<series>/config", so every process, device and the command
// line number the same way; a handle asking for another format gets
// ErrMismatch, and one asking for none uses the stored one.
//
// # Handing a record off
//
// On a store without atomic compare-and-swap, vault.Numbered.Put writes two
// keys: first a sealed handoff entry at
// "_numbering/<series>/pending/<provisional>/<id>", a key nobody else
// writes, so it needs no lock and no compare-and-swap; then the record,
// carrying in its sealed metadata a pending mark with the same provisional
// id (in one transaction where the store has them). The provisional id is a
// UUIDv7: pending keys sort by provisional time, then record id.
//
// A Put killed between the two writes leaves an entry whose record is not
// in the store: no pass numbers it or drops it (PassReport.Waiting counts
// it), since the pass cannot tell it from a writer still between its writes
// or a record still on its way through a synced folder; a record that does
// arrive later is numbered by a later pass. The record is clearly not
// numbered (it does not exist), and a later Put of the same id hands it off
// afresh, which makes the pass drop the old entry (the record carries
// another provisional id). A Put killed after both writes is pending and
// numbered by the next pass. A record never reaches the store without its
// entry, so no record is left pending by a crash.
//
// Enqueue is the older way in, for records written otherwise: it writes an
// entry after the record, and a pass drops an Enqueue entry whose record is
// gone (deleted before its number).
//
// RunPass takes the series' exclusive lock, finishes any batch an earlier
// pass left unfinished, then lists the pending entries once in key order
// (a store that lists a key outside the asked prefix fails the pass with
// stores.ErrMisbehaving; nothing is deleted on its word).
// It drops entries whose record was deleted (those take no number) or
// already has its number (by the series' index or by the record itself, see
// below), keeps the handoff entries whose record is not there yet, and
// records the rest as one batch: their ids, in
// chunks of at most 10,000 under "_numbering/<series>/batch/", then the
// series head at "_numbering/<series>/head", advanced past the batch's
// numbers. Writing the head is the commit point. Only then are the records
// stamped (the handle's setter applied, the pending mark replaced by the
// number's mark, as a new revision), the numbers
// recorded in the vault's ledger (one ledger.NumberAssigned entry each,
// carrying the stamped revision and ciphertext hash, or ledger.NumberVoided
// when the record was deleted after the batch was recorded; should the
// record come back pending under the same provisional id, a sync of a
// device whose edit won over the deletion, the next pass gives it a new
// number), indexed under
// "_numbering/<series>/assigned/<id>" for Lookup (and by provisional id
// under "_numbering/<series>/provisional/<provisional>" for LookupProvisional),
// and their pending entries removed; progress is saved in the head every
// 1,000 numbers.
//
// A stamped record carries its number twice: in its content, put there by
// the setter, for the application, and in a mark inside its sealed value,
// which the store can neither remove nor forge. vault.Numbered.Put of a copy
// read before the stamp applies the setter again from the mark, and
// vault.Numbered.Get always shows the number from it. Enqueue and the pass read the mark, so a record
// whose index entry the store deleted is still refused a second number; a
// pass that finds, when stamping, that the record already carries another
// number of the series leaves it as it is and voids the number it meant to
// give (ledger.NumberVoided, reason "record already carries number N").
// Audit reads the ledger and reports, with ErrDuplicate, any record given
// two numbers or number given to two records: what a store that also
// replays the record as it was before its stamp can still cause.
//
// A pass killed anywhere is finished by the next one from the recorded
// batch, never recomputed: a record never gets two numbers and a number
// never goes to two records. The ledger after the last saved progress tells
// the next pass which numbers already have their entry, so each number gets
// exactly one. Every stored value is sealed and bound to its key; the store
// sees key names (series, provisional ids, record ids) and sizes only.
//
// # Concurrency
//
// A Series is safe for concurrent use. Enqueue, Lookup and Assignments may
// run anywhere at any time, on any number of devices (DB instances or
// processes sharing one folder). Only one pass runs at a time per series: a
// second RunPass fails at once with ErrPassRunning and numbers nothing. The
// lock is the store's, when the store implements stores.Locker, try-locked
// under the series' name, so it holds for whoever the store's locks hold
// for and is released when its holder dies: on the file store, every
// process on this machine using the folder (a file lock in the folder);
// on PostgreSQL (pgstore), every process on every machine using the
// database (an advisory lock), so one pass runs at a time across a fleet;
// on Badger, every user of the one process that opens it. On a store
// without a Locker (the memory store, a wrapper that hides it) passes are
// locked within the process only: run the passes of a series from one
// process there. The head is always written by compare-and-swap on the
// version the pass read, so on a store with atomic compare-and-swap a pass
// from another process that slips past the lock fails with ErrPassRunning
// at its next head write, or before it appends the ledger entries of its
// next step (it checks the head first), and never commits a second batch
// over the first; only when the other pass finishes the batch in the short
// window between that check and the append are some numbers recorded in
// the ledger a second time (for the same record). On a store with transactions a pass commits a
// batch with its chunks, and clears it with them, in one transaction that
// holds the head at the version it read, so a pass that lost its lock (a
// pgstore session that broke) cannot delete or overwrite the chunks of a
// batch another committed.
//
// The head is pinned like a sequence counter (noydb.Config.StateDir), and
// checked, with the counter, against what the vault's ledger records (its
// summary of facts, read in time that does not grow with the ledger): a
// store that serves an older head, which would hand out numbers again,
// makes RunPass, Last and Audit fail with ErrRollback (noydb.ErrRollback)
// before any number is given, with or without a state folder. So does a
// record a pass reads that carries a number above the head (its stamp
// outlived the head).
//
// # Caveats
//
//   - Numbers follow provisional order within a pass. A record that reaches
//     the store after a pass (a device that was offline longer) is numbered
//     by a later pass, after the numbers already given: numbers never move.
//   - A pending entry whose record is not in the store when the pass reads
//     it is dropped as deleted. On a synced folder, let the records arrive
//     before the pending entries (or run the pass once syncing is done).
//   - A numbered record overwritten around the handle (a plain collection
//     Put of a copy read before its stamp) loses the number from its
//     content only: its mark, Get through the handle, Lookup and the ledger
//     still have it, the next Put through the handle restores it, and the
//     record is never numbered again.
//   - A record is stamped before its ledger entry is appended; a crash in
//     between leaves a stamped record whose entry the next pass appends.
//   - The vault ledger takes one writer at a time on a store without atomic
//     compare-and-swap, and a pass appends to it: on a shared folder, do not
//     write records from other DBs while a pass runs (enqueuing is fine).
//   - A pass fails loudly, and stays stuck until the cause is fixed, on a
//     tampered pending entry or record, a record its setter cannot decode
//     (for the deprecated vault.Vault.Numbering: one that is not a JSON
//     object), or (when resuming) a ledger that does not verify.
//   - Partitions are not supported on this path yet (vault.NumberingOf
//     refuses them). Periods are: vault.NumberingOfDated hands each record
//     off to the series of its date's period (deferred.Backend.Partition,
//     see periods.go), each with its own head, shared with the period's
//     counter, and Settle runs a pass of each. A pass of a closed period
//     numbers nothing and fails with an error matching
//     sequence.ErrPeriodClosed; its records stay pending.
package numbering
