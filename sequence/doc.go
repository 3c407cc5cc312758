// Package sequence hands out gap-free numbers: named series that count 1, 2,
// 3 … with no number skipped or issued twice, even when many callers ask at
// once, a write's outcome is unknown, or the process crashes mid-write.
//
// # Usage
//
// Sequences belong to a vault, which keeps their counters sealed in its
// store and records every number in its audit ledger. A Sequence is a
// handle on one series, optionally scoped to a partition and rendered
// through a format:
//
//	invoices, err := v.Sequence("fatture", sequence.Options{
//		Partition: []any{2026, "EU"},
//		Format:    "{partition.0}/{partition.1}/{seq:04}",
//	})
//	s, err := invoices.NextSerial(ctx) // {N: 1, Formatted: "2026/EU/0001"}
//
// Next allocates, Peek reads, SeedTo fast-forwards after an import, Claim
// makes an allocation safe to retry, Bind takes a number in the same store
// transaction as the record that carries it, and Void marks an issued number
// as void.
//
// Each counter is a small sealed record at the vault's prefix+"_sequences/<series>" (with
// "\x00<partition>" appended for a partitioned series, the period's label
// being the partition's last component); claim records, void markers and
// the series' definition live next to it. Stores see only sealed bytes.
//
// # Definitions and periods
//
// A series' format, period, fiscal-year start, time zone and metadata are
// its definition (see Options and Definition), stored sealed with the
// series by the first call that takes a number with any of them: every
// process, device and the command line then number it alike, a handle
// opened without options uses it, and a handle opened with another one is
// refused (ErrDefinitionMismatch).
//
// A series with a Period counts each day, month, year or fiscal year of
// the document's date on its own counter, from 1:
//
//	invoices, err := v.Sequence("invoices", sequence.Options{
//		Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
//		Location: rome, Format: "{seq:04}",
//	})
//	s, err := invoices.NextSerialAt(ctx, invoiceDate) // {N: 1, Formatted: "0001", Period: "FY2026-27"}
//	err = invoices.ClosePeriod(ctx, "FY2025-26")      // no more numbers dated into it
//
// At gives a handle on the period of a date, for every method (and the
// vault's PutNumbered and Tx.Next); Next alone uses the current date.
// Back-dating into an earlier period works while it is open.
//
// # Credit notes
//
// A series defined with Corrects (credit notes correcting "invoices")
// takes numbers only through Correcting, which names the number corrected;
// that number must have been issued and not voided. The ledger entry of the
// credit note's number records the invoice it corrects, and Audit shows the
// pairs on both sides (AuditReport.Corrections and CorrectedBy):
//
//	credits, err := v.Sequence("credit-notes", sequence.Options{Corrects: "invoices"})
//	cn, err := credits.Correcting(sequence.Ref{N: 7}).NextSerial(ctx)
//
// # Concurrency
//
// A Sequence is safe for concurrent use. Calls on one counter in one vault
// never race each other: they are combined, so one store write serves every
// call that arrived while the previous write was in flight. Only writers
// elsewhere (another process) cause compare-and-swap retries, bounded, after
// which a call fails with an error matching ErrContention and takes nothing.
//
// # Caveats
//
//   - Allocation needs a store with atomic compare-and-swap; on any other,
//     every allocating method fails at once with ErrOffline. Deferred
//     numbering is the path there.
//   - Gap-free is about the counter. A number that Next returned and the
//     caller then dropped is a gap in usage; Bind avoids it on transactional
//     stores, Claim makes retries safe.
//   - A vault keeps a little state per counter it has seen, while it is open.
package sequence
