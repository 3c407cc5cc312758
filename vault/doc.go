// Package vault holds a vault's encrypted collections, its numbered series and
// its audit ledger.
//
// A vault lives under the key prefix "v/<name>/" of a store. Its header
// (format version, salt, key-derivation cost) is at "_header", each user's
// wrapped copy of the vault's data key at "_keyring/<user>", counters under
// "_sequences/", deferred-numbering series under "_numbering/", ledger
// entries (and the checkpoint of the ledger's summary of facts) under
// "_ledger/", and each record at "<collection>/<id>". The
// store sees these names, the sizes of the sealed values, and when they
// change; it sees no record content, no counter value and no key.
//
// # Usage
//
//	v, err := vault.Open(ctx, vault.Config{Store: st, Name: "books", User: "firm", Secret: secret})
//	invoices := vault.CollectionOf[Invoice](v, "invoices")
//	err = invoices.Put(ctx, "inv-1", Invoice{Total: 120})
//	inv, err := invoices.Get(ctx, "inv-1")
//
// Numbers: Sequence gives a handle on a gap-free series (package sequence);
// Collection.PutNumbered writes a record with its series' next number in one
// commit; NumberingOf numbers a collection's records on every store, at
// write time where the store allows and by a later pass where it does not
// (package numbering).
//
//	seq, err := v.Sequence("invoices", sequence.Options{Format: "INV-{seq:04}"})
//	inv, err = invoices.PutNumbered(ctx, "inv-2", seq, func(s sequence.Serial) (Invoice, error) {
//		return Invoice{Number: s.Formatted, Total: 80}, nil
//	})
//
// # People
//
// Each person who can open a vault has a keyring entry: their role
// (RoleOwner, RoleWriter, RoleReader), who granted it and when, an X25519
// key pair whose private key is wrapped by their secret (or held by them,
// for a grant to a public key), the data key wrapped for that key pair,
// an Ed25519 signing key, and the granter's signature of the grant, all
// under a MAC keyed by the data key (see Vault.Grant, Revoke, People,
// ChangeSecret). A reader's vault refuses every write with
// ErrNotPermitted. Revocation makes the vault refuse a person and, by
// default, rotates the keys.
//
// The MAC keeps a store from changing an entry, not a person: every person
// ever granted held the first generation's data key that keys it. An
// entry's authority comes from the ledger: its signed PersonGranted and
// PersonRevoked entries, replayed in order, must record the entry's grant
// (its signing key, role and collections, or wider ones) by an owner who
// held that role, not revoked, at that position, back to the vault's first
// owner, the one person granted by themselves (and, in a vault of layout
// version 1, the holders its first upgrade named, each upgraded by
// themselves). A person no ledger the check reads names (granted on
// another device of a hub, before its ledger heard of them) is taken from
// the keyring's chain of grants, each granter an owner not revoked. An
// entry that fails is ErrTampered on open and in People, gets no key from
// a rotation (Rotation.Skipped), is not copied by Sync, and vouches for
// no author in Verify; an owner clears it with Revoke.
//
// # Key rotation
//
// Data keys come in generations, numbered from 1. Vault.RotateKeys (and
// Revoke) makes the next one, wraps it for every person not revoked and
// commits it with a ledger.KeysRotated entry; new records are sealed with
// it at once, and a background pass (Rotation; ResumeRotation after a crash
// or Close) re-seals the older ones. A record envelope names the
// generation that sealed it (crypto.RecordGeneration; version 1 envelopes,
// written before generations, are generation 1), so reads work throughout.
//
// A re-sealed record is a new revision with the same content and
// metadata, written with a ledger.RecordPut entry whose Reason is
// ResealedReason, not the same revision with a new ciphertext: Sync pushes
// and pulls it as any write (a hub that saw two ciphertexts for one
// revision would take them for a conflict), the ledger keeps the hash of
// every ciphertext the store holds, and the conflict rules apply when
// another device changed the record meanwhile. The cost: a PutIf holding
// the revision read before gets a conflict, as after any write.
//
// What stays on generation 1: internal values (counters, ledger entries,
// sync state, rollback pins), the ledger's chain key, the claim key and the
// MAC of keyring entries. The ledger cannot be re-sealed (its hash chain
// covers the sealed entries), so it verifies with one key across
// rotations. A revoked person who kept generation 1 can therefore still
// read ledger entries (collections, ids, numbers, application events) and
// counters written later, though no record body sealed after the
// revocation.
//
// On a device of a hub a generation is made on the hub: the device brings
// its keyring and the hub's into agreement, makes the next generation from
// the hub's keyring and commits it there, in one transaction that checks
// every entry it replaces, before its own store. So two devices never make
// one generation number with two keys (the keyring merge of Sync could
// keep only one, and the records sealed by the other would be lost); a
// device out of reach of its hub does not rotate (sequence.ErrOffline).
// Each device seals with a new generation from the Sync that brings it on:
// until then it seals with the generation it knows, which a person revoked
// meanwhile held; ResumeRotation, after a Sync, re-seals those records.
//
// # Per-collection access
//
// From generation 2 on a record is sealed with its collection's own key
// of the generation (crypto.CollectionKey of the generation's data key;
// record envelope version 3), not with the data key itself. A person
// without limit holds every generation's data key and derives the
// collection keys; a person Grant limits to some collections holds the
// data key of generation 1 only (for the internal values above) and their
// collections' keys from the generation their grant made on, which later
// rotations add to their keyring entry. So they open no record of another
// collection, even with the raw store; they do read the ledger's metadata.
// Through the API, CollectionOf a collection outside their list fails
// every call with ErrNotPermitted, and their device's Sync pulls their
// collections only. SetCollections changes the list.
//
// The audit ledger records every write, number and application event in one
// hash chain (package ledger). The vault writes it; Audit is its read-only
// view, and Record adds an application's own event:
//
//	_, err = v.Record(ctx, "exported", []byte("invoices.csv"))
//	report, err := v.Audit().Verify(ctx) // report.OK()
//
// # Read-modify-write and transactions
//
// Get drops the revision; GetRecord returns it with the time and author of
// the write. PutIf and DeleteIf write only if the record is still at the
// revision read (else a *ConflictError, errors.Is ErrConflict). Update
// reads, changes and writes one record in one step, retrying by itself, so
// concurrent Updates never lose one another's changes:
//
//	r, err := accounts.Update(ctx, "acme", func(a *Account) error { a.Balance -= 30; return nil })
//
// Vault.Update runs a function over several collections and sequences in
// one commit, on a store with transactions: records written through
// Collection.In(tx), numbers taken with tx.Next, and their ledger entries
// commit together, or nothing does. PutMany, GetMany and DeleteMany act on
// several records of a collection in one commit.
//
// # Concurrency
//
// A Vault and its collections are safe for concurrent use. On a store with
// transactions, the writes of one Vault that arrive while a commit is in
// flight (record puts and deletes, PutNumbered, numbers of any series) share
// the next store transaction, each with its ledger entries, so many callers
// pay for one commit; one call that fails does not fail the others. Several
// Vault values (in this process or others) may share one vault on a store
// with atomic compare-and-swap; writes to one record are serialized by the
// store.
//
// # Compatibility
//
// Stored data carries format versions: the header has one, every sealed value
// starts with its envelope version. A later release reads every format an
// earlier release wrote; a format change adds a version rather than changing
// an existing one, and data written by a newer format is refused by older
// releases with a clear error rather than misread. Record revisions carry
// their write time and author inside the sealed value since they were added
// (a header before the record's numbers and JSON); records written before
// read with a zero time and an empty author, and releases before it refuse
// records that carry one.
package vault
