package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/stores"
)

// The current generation, as the store says it.
//
// A handle seals new records with the highest generation it knows. A
// rotation made by another handle of the same store (or brought by Sync)
// is not known to it until it reads a record of the new generation or is
// opened again: without more, it would go on sealing with an older
// generation, after the rotation's re-seal has finished, so that nothing
// re-seals what it wrote. For a limited grant (people.go) that breaks the
// grant's promise: the limited person holds the first generation's data
// key, and would open those records with the raw store.
//
// So every commit that makes a generation (newGeneration, and on the hub
// commitOnHub) writes currentGenKey, the new generation sealed with the
// first generation's key like the vault's other internal values, and
// every commit of a record this handle sealed reads it in its own
// transaction (freshSealTx): a record sealed below it is re-sealed there,
// with the generation's key loaded through the transaction
// (genKeys.get/colKey with tx), before it is written. A record therefore
// never commits sealed below the generation the store holds at its
// commit; a write racing the rotation's commit either commits before it
// (and the re-seal's passes, which list after the rotation's commit, find
// it) or reads the new value (a conflict on the key read makes the store
// run the write again where its transactions are optimistic).
//
// The read is one key per record commit; its value is opened once per
// handle and generation (currentGen caches the sealed bytes it opened).
// On PostgreSQL the key is prefetched with the record's (recordKeys).
//
// A deferred-numbering pass's stamps are record commits too: Stamp and
// StampBatch (numbering.go) read the key in their transaction (once per
// batch) and seal through freshSealAt. Every call of a series first reads
// it outside any transaction and learns it (learnCurrentGen), so that a
// handle that cannot (its person revoked since it opened) is refused
// before its pass commits a batch; a device learns the hub's from the
// hub's keyring before its pass on the hub (learnHubGen).

// errHubAhead: a record a device writes on its hub (PutNumbered) is
// sealed below the generation the hub holds, which the device has not
// learnt: putNumberedOnHub brings the hub's keyring and tries again.
var errHubAhead = errors.New("the hub holds a key generation this device has not learnt")

// currentGenKey holds, sealed, the latest generation made on the store
// (absent until the first rotation).
const currentGenKey = "_generation"

// currentGen is the last generation value a handle opened.
type currentGen struct {
	sealed []byte
	gen    uint64
}

// sealCurrentGen seals gen as the value of currentGenKey.
func (v *Vault) sealCurrentGen(gen uint64) ([]byte, error) {
	return v.seal.Seal(v.prefix+currentGenKey, encodeRotationMark(gen))
}

// currentGenTx returns the generation currentGenKey holds in tx, 0 when
// none (no rotation ever).
func (v *Vault) currentGenTx(tx stores.Tx) (uint64, error) {
	return v.currentGenFrom(tx.Get)
}

// currentGenFrom is currentGenTx reading the value with get.
func (v *Vault) currentGenFrom(get func(key string) (stores.Item, error)) (uint64, error) {
	it, err := get(v.prefix + currentGenKey)
	if errors.Is(err, stores.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if c := v.curGen.Load(); c != nil && bytes.Equal(c.sealed, it.Value) {
		return c.gen, nil
	}
	plain, err := v.seal.Open(v.prefix+currentGenKey, it.Value)
	if err != nil {
		return 0, v.openFailed(err)
	}
	gen, err := decodeRotationMark(plain)
	if err != nil {
		return 0, fmt.Errorf("current generation: %w: %w", ErrTampered, err)
	}
	v.curGen.Store(&currentGen{sealed: bytes.Clone(it.Value), gen: gen})
	return gen, nil
}

// freshSealTx returns sealed (revision rev of collection/id, sealed by
// this handle, whose ciphertext hashes to hash), or, when it is sealed
// below the generation the store holds in tx, the same revision re-sealed
// with that generation (loaded through tx when this handle does not hold
// it yet) and its hash.
func (v *Vault) freshSealTx(tx stores.Tx, collection, id string, sealed []byte, rev uint64, hash []byte) ([]byte, []byte, error) {
	cur, err := v.currentGenTx(tx)
	if err != nil {
		return nil, nil, err
	}
	return v.freshSealAt(tx, cur, collection, id, sealed, rev, hash)
}

// freshSealAt is freshSealTx with cur, the generation the store holds in
// tx, read already (0: none): a caller writing many records in one
// transaction reads it once.
func (v *Vault) freshSealAt(tx stores.Tx, cur uint64, collection, id string, sealed []byte, rev uint64, hash []byte) ([]byte, []byte, error) {
	if cur == 0 {
		return sealed, hash, nil
	}
	gen, err := recordGeneration(sealed)
	if err != nil {
		return nil, nil, err
	}
	if gen >= cur {
		return sealed, hash, nil
	}
	if err := v.keys.learn(cur, collection, v.keyTx(tx)); err != nil {
		if v.me == nil {
			// A hub-side vault (PutNumbered of a device): its keys load
			// from the device, which has not heard of the generation.
			return nil, nil, fmt.Errorf("%w: %w", errHubAhead, closedIfWiped(err))
		}
		return nil, nil, closedIfWiped(err)
	}
	plain, _, err := v.openSealedTx(v.keyTx(tx), collection, id, sealed)
	if err != nil {
		return nil, nil, err
	}
	again, err := v.sealRecordTx(v.keyTx(tx), collection, id, plain, rev)
	clear(plain)
	if err != nil {
		return nil, nil, closedIfWiped(err)
	}
	if g, err := recordGeneration(again); err != nil || g < cur {
		return nil, nil, fmt.Errorf("%s/%s: sealed with generation %d below the vault's %d: %w", collection, id, g, cur, ErrNoAccess)
	}
	return again, cipherHash(again), nil
}

// recordKeys returns the keys a record write reads: the record's, and
// currentGenKey (prefetched together on stores that read in round trips).
// A commit that writes a record names both wherever it names the keys it
// reads (UpdateKeys, BindKeys), so that currentGenKey is locked with the
// others, in key order, and not after them by freshSealTx (see lockKeys).
func (v *Vault) recordKeys(collection, id string) []string {
	return []string{v.recordKey(collection, id), v.prefix + currentGenKey}
}

// lockKeys reads keys into tx in one step, before any of them is read with
// Get, when tx reads in round trips (a stores.Prefetcher: pgstore, whose
// reads lock rows until the transaction ends); elsewhere it does nothing.
//
// Every commit of the vault that reads or writes several keys that other
// commits lock too takes them in one global order, ascending key bytes:
// it names them all in one step (here, or in ledger.UpdateKeys and
// sequence.BindKeys, which prefetch the keys of their whole batch), and
// Prefetch takes them in that order. Two commits that share keys then
// queue on the first one they share; a commit that took one key and then
// waited for a lower one could wait, on PostgreSQL, for a commit waiting
// for it, a deadlock the server breaks by failing one of them. The
// entries a ledger or a numbering pass appends are the exception: new
// keys written only by the holder of their head, which nobody else waits
// for.
func lockKeys(tx stores.Tx, keys ...string) error {
	if p, ok := tx.(stores.Prefetcher); ok && len(keys) > 1 {
		return p.Prefetch(keys)
	}
	return nil
}

// learn makes gen current (as far as it is above the current one): it
// loads, through tx as get does, the generation's data key, or, for a
// person limited to some collections, their collections' keys of it
// (collection's among them, else an error).
func (g *genKeys) learn(gen uint64, collection string, tx stores.Tx) error {
	if cur, _ := g.current(); cur >= gen {
		return nil
	}
	if g.limitedTo() == nil {
		_, err := g.get(gen, tx)
		if err == nil || g.limitedTo() == nil {
			return err
		}
		// Loading the entry found the person narrowed to some collections
		// since the handle opened (genKeys.narrow): on as a limited handle.
	}
	_, err := g.colKey(gen, collection, tx)
	return err
}

// raiseCurrentGen writes the handle's current generation as the store's
// current generation when the store holds a lower one (or none, after a
// rotation): Sync calls it once its keyring step learnt a generation made
// elsewhere, so that the other handles of the device's store seal with it
// too. A store without transactions never rotates and keeps none.
func (v *Vault) raiseCurrentGen(ctx context.Context) error {
	gen, _ := v.keys.current()
	if gen < 2 || v.me == nil || !transactional(v.store) {
		return nil
	}
	if c := v.curGen.Load(); c != nil && c.gen >= gen {
		return nil // the store's value only rises
	}
	sealed, err := v.sealCurrentGen(gen)
	if err != nil {
		return closedIfWiped(err)
	}
	tr := v.store.(stores.Transactor)
	return closedIfWiped(tr.Update(ctx, func(tx stores.Tx) error {
		have, err := v.currentGenTx(tx)
		if err != nil || have >= gen {
			return err
		}
		return tx.Put(v.prefix+currentGenKey, sealed)
	}))
}

// learnCurrentGen reads, outside any transaction, the generation the store
// holds and learns it as a record write would (learn, for collection): a
// person who holds no key of it (revoked, or narrowed, since this handle
// opened) gets an error matching ErrNoAccess before anything is written.
// A deferred-numbering call makes it first (numberingSeries), so that a
// pass of such a handle commits no batch it could not stamp. Nothing to do
// on a store without transactions (it keeps no current generation) and for
// a hub-side vault, whose stamps find the hub ahead in their transaction
// (errHubAhead).
func (v *Vault) learnCurrentGen(ctx context.Context, collection string) error {
	if v.me == nil || !transactional(v.store) {
		return nil
	}
	cur, err := v.currentGenFrom(func(key string) (stores.Item, error) { return v.store.Get(ctx, key) })
	if err != nil || cur == 0 {
		return err
	}
	return closedIfWiped(v.keys.learn(cur, collection, nil))
}

// learnHubGen is learnCurrentGen for a device of a hub, before a pass it
// runs on the hub (Numbered.Settle): when the hub holds a generation this
// device has not learnt (a rotation made on another device), it brings
// the hub's keyring as putNumberedOnHub does, so that the pass stamps
// with it rather than fail at its first stamp (errHubAhead).
func (v *Vault) learnHubGen(ctx context.Context) error {
	h := v.hub
	if h == nil || !transactional(h.store) {
		return nil
	}
	cur, err := h.currentGenFrom(func(key string) (stores.Item, error) { return h.store.Get(ctx, key) })
	if err != nil {
		return err
	}
	if have, _ := v.keys.current(); cur <= have {
		return nil
	}
	return (&syncRun{v: v, h: h}).keyrings(ctx)
}
