// Package ledger defines what a vault's audit ledger holds and how it is
// checked: its entries, their kinds, its head, the report of a
// verification and the errors a damaged ledger yields.
//
// Every vault keeps one ledger, a hash chain of every record write and
// delete, every number allocated, seeded, voided or assigned, and every
// event the application recorded. The vault writes it; applications read
// it through the vault's read-only view and add their own events with
// vault.Vault.Record. No writable ledger is handed to callers, so nobody can
// append an entry the SDK would take for one of its own.
//
// Every entry gets the next position (Seq 1, 2, 3 …) when its write commits,
// never before, so a reader that has seen position n has seen everything
// below it. Each entry stores MAC(previous MAC, Seq, entry encoding) under a
// key the store does not have, so a store cannot drop, reorder, duplicate or
// re-chain entries unnoticed. Entries and the head record are sealed with
// the vault's data key, each value bound to the store key it lives at.
//
// # Signatures
//
// The MAC key is the data key's, which every person of the vault holds, so
// the chain alone does not say who wrote an entry. Every commit of a vault
// of several people is therefore also signed by its author, once: the
// vault's person signs the last entry of the commit with the Ed25519 signing key of their keyring entry, over
// the entry's encoding (which holds its position), the MAC of the entry
// before it (which commits every entry before it) and the number of the
// commit's other entries, which are marked Covered and carry no signature
// of their own. Verify checks each signature against the author's key,
// that the covered entries before it are the same author's, and that the
// author's role, as
// the ledger's own PersonGranted and PersonRevoked entries replay it,
// allowed the entry at its position: a reader signs nothing but the change
// of their own secret and recovery codes and the pulls of a sync on their
// own device, a writer no change of people, and a revoked person nothing
// after the revocation. A forgery by someone who holds the data
// key but not the author's signing key fails with a *SignatureError
// (ErrBadSignature, also ErrTampered). sign.go has the rules: where the
// first owner's key comes from (the genesis entry, entry 1, carries its
// author's key; the vault's keyring vouches for authors the ledger does not
// introduce), and how a ledger of a vault of layout version 1 verifies
// (unsigned entries are accepted up to the first signed one; after it an
// unsigned entry fails). Signatures are checked by Verify, not by Read.
//
// A vault that only one person has ever held has no one to tell apart:
// its entries are written Chained, without a signature, the chain MAC
// vouching for their author, until a second person is granted; that
// grant is signed, and its signature covers the chain before it, and
// every commit after it is signed. Verify accepts Chained entries only in
// that window (sign.go, "One person").
//
// # Usage
//
//	head, err := v.Record(ctx, "exported", []byte("invoices.csv")) // an AppEvent entry
//	for e, err := range v.Audit().Read(ctx, 1) {
//		if err != nil {
//			return err // a *GapError, *ChainError or *TamperError: errors.Is(err, ErrTampered)
//		}
//		if name, data, ok := e.Event(); ok {
//			fmt.Println(e.Seq, e.Actor, name, string(data))
//		}
//	}
//	report, err := v.Audit().Verify(ctx) // report.OK(), report.FirstBad
//
// Entries of the SDK's own kinds (RecordPut, NumberAllocated, …) say which
// record or number they concern in the fields their Kind documents; an
// application's events are entries of kind AppEvent, read with Entry.Event,
// which the SDK never takes for one of its own whatever they hold.
//
// # Storage
//
// Entries live at the vault's prefix+"_ledger/"+ the position as 20
// zero-padded digits, the head (last position and its MAC) at
// prefix+"_ledger/head", which sorts after every entry, and a checkpoint
// of the ledger's summary of facts (see FactKind) at
// prefix+"_ledger/checkpoint", between them. On a store with
// transactions a write commits its entries and the head in one transaction,
// together with the records or counters they describe. On a store with only
// compare-and-swap, the head is the commit point: the new head, carrying the
// batch, is written by compare-and-swap, and the entries are then copied to
// their own keys and dropped from the head. Nothing is written at a position
// before it is committed, so a crash leaves either no trace of the batch or
// the whole batch in the head, where readers find it and the next write
// finishes the copy.
//
// # Facts
//
// Some checks need what only the whole ledger says: the highest number it
// records for a counter (a counter below it was rolled back), whether a
// period was closed. The ledger keeps those facts in a summary bound to a
// position and its chain MAC, folded from its own commits as it makes
// them, and stored sealed as a checkpoint every so many entries, so a
// check reads the checkpoint and the entries after it instead of the
// whole ledger (Facts; NumberFacts). FactKind documents how it is trusted
// and how a new kind of fact is added.
//
// # Concurrency
//
// Within one vault, the writes that arrive while a commit is in flight share
// the next one (a single store transaction on a store with transactions,
// each write still all or none), so writers in one process never conflict
// with each other on the head. Processes sharing a store contend through
// its transactions or compare-and-swap, retried within one budget of 16
// commits, after which the write fails with ErrContention. That needs a
// store whose compare-and-swap is atomic (stores.Capabilities.CASAtomic): on
// a store without it, such as the file store, writes assume a single writing
// process, and two processes writing at once could both commit the same
// positions, which Verify then reports.
//
// The values of this package (Entry, Head, Report, the errors) are plain
// data, safe to share once read.
//
// # Caveats
//
// The chain proves that the entries up to the head are complete and in
// order, not that the head is the latest: a store that replays an older head
// together with the entries below it (a rollback) passes the chain. The vault
// catches that with its rollback pins (vault.Config.StateDir remembers the
// furthest head this device has seen; without a StateDir only while the
// process lives), and reports it as vault.ErrRollback.
package ledger
