// Package ledger is the append-only audit ledger of a vault: dense positions
// assigned at commit, a keyed hash chain, fenced and batched appends, and
// verification that fails loudly.
//
// Every entry gets the next position (Seq 1, 2, 3 …) when its append commits,
// never before, so a reader that has seen position n has seen everything
// below it. Each entry stores MAC(previous MAC, Seq, entry encoding) under a
// key the store does not have, so a store cannot drop, reorder, duplicate or
// re-chain entries unnoticed. Entries and the head record are sealed with
// the vault's data key, each value bound to the store key it lives at.
//
// # Usage
//
// A vault keeps its ledger and writes its entries itself: record writes and
// deletes, numbers allocated, seeded, voided and assigned. Applications
// read it through the vault's read-only view, and add their own events
// with Vault.Record, as entries of kind AppEvent that the SDK never takes
// for one of its own:
//
//	_, err := v.Record(ctx, "exported", []byte("invoices.csv"))
//	for e, err := range v.Audit().Read(ctx, 1) { … }
//	report, err := v.Audit().Verify(ctx)
//
// This package documents what is read: Entry and its Kind, Head, the
// Report of Verify and the errors a damaged ledger yields (GapError,
// ChainError, TamperError).
//
// Inside the vault, appends are fenced and batched: an append records
// facts wherever the head is at commit, or decisions derived from the
// ledger's state, fenced on the head they were derived from; and a record
// or a counter commits in the same store transaction as its entry.
//
// # Storage
//
// Entries live at prefix+"_ledger/"+ the position as 20 zero-padded digits,
// the head (last position and its MAC) at prefix+"_ledger/head", which sorts
// after every entry. On a store with transactions (stores.Transactor) an
// append writes its entries and the head in one transaction. On a store with
// only compare-and-swap, the head is the commit point: the new head, carrying
// the batch, is written by compare-and-swap, and the entries are then copied
// to their own keys and dropped from the head. Nothing is written at a
// position before it is committed, so a crash leaves either no trace of the
// batch or the whole batch in the head, where readers find it and the next
// append finishes the copy. Conflicts are retried by internal/cas within
// Options.MaxAttempts.
//
// # Concurrency
//
// A Ledger is safe for concurrent use. Its appends go through one batching
// queue: those that arrive while a commit is in flight share the next one, a single store transaction on a store with
// transactions (each call still all or none, each derive function seeing
// the head its entries follow, each Update function against its own view
// of the transaction, so one that fails drops only its own writes). So
// writers in one process share commits instead of conflicting with each
// other on the head. Keep one Ledger per ledger in a process: several
// Ledgers on the same store and prefix contend through the store like
// separate processes, whose retries are bounded by Options.MaxAttempts
// (then ErrContention). AppendTx called inside a transaction the caller
// runs itself bypasses the queue: on a store whose transactions are
// optimistic, concurrent ones that append fail each other and must be
// retried; Update avoids that.
//
// Processes sharing a store contend through its transactions or
// compare-and-swap, which must then be atomic
// (stores.Capabilities.CASAtomic). On a store without atomic
// compare-and-swap, such as the file store, appends work but assume a single
// writing process: two processes appending at once could both commit the
// same positions, which Verify would then report.
//
// # Caveats
//
// The chain proves that the entries up to the head are complete and in
// order, not that the head is the latest: a store that replays an older
// head together with the entries below it (a rollback) is not detected here.
// Callers that need that pin the head they last saw elsewhere.
package ledger
