package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// ErrNumbersOnHub: Tx.Next in a Vault.Update of a device of a hub. On a
// device the counters live on the hub and the records on the device: a
// number and a record cannot commit together across the two stores, so the
// Update is refused before anything is taken. Take a numbered record with
// Collection.PutNumbered (the record and its number commit together on the
// hub, then the record is copied to the device), or write it through
// NumberingOf (numbered later by a pass on the hub, also offline).
var ErrNumbersOnHub = errors.New("on a device, numbers are taken on the hub and cannot commit with device records in one Update: use Collection.PutNumbered or NumberingOf")

// ErrNotOnDevice: Collection.PutNumbered on a device committed the record
// and its number on the hub, but the record could not be copied to the
// device store (a write error, or the device holds another revision of the
// record as new or newer: a conflict for the next sync to settle). The
// number is taken and in use; the record comes back with the error, and the
// next sync brings the hub's revision to the device. A retry of the same
// PutNumbered takes no second number (the record carries it) and tries the
// copy again.
var ErrNotOnDevice = errors.New("numbered on the hub, not copied to the device: the next sync brings it")

// putNumberedOnHub is Collection.PutNumbered on a device of a hub: the
// record and its number commit together on the hub (the hub-side vault's
// PutNumbered), then the record's sealed bytes, at the hub's revision, are
// copied to the device store with an entry in the device's ledger.
func putNumberedOnHub[T any](ctx context.Context, c *Collection[T], id string, seq *sequence.Sequence, build func(sequence.Serial) (T, error)) (T, error) {
	hc := &Collection[T]{v: c.v.hub, name: c.name}
	// The hub's feed position before the commit: copyFromHub finds the
	// commit's entry after it.
	before, err := c.v.hub.ledger.Head(ctx)
	if err != nil {
		return *new(T), fmt.Errorf("put numbered %s/%s: hub's feed: %w", c.name, id, feedErr(err))
	}
	out, err := hc.PutNumbered(ctx, id, seq, build)
	if errors.Is(err, errHubAhead) {
		// A rotation made elsewhere: learn it from the hub's keyring
		// (as a rotation on this device would) and seal with it.
		if kerr := (&syncRun{v: c.v, h: c.v.hub}).keyrings(ctx); kerr != nil {
			return out, fmt.Errorf("put numbered %s/%s: keyring: %w", c.name, id, kerr)
		}
		out, err = hc.PutNumbered(ctx, id, seq, build)
	}
	if err != nil && !errors.Is(err, ledger.ErrUnpinned) {
		return out, err // nothing committed (or, for a lost connection, unknown)
	}
	if cerr := c.v.copyFromHub(ctx, c.name, id, before.Seq); cerr != nil {
		return out, errors.Join(err, fmt.Errorf("put numbered %s/%s: %w: %w", c.name, id, ErrNotOnDevice, cerr))
	}
	return out, err
}

// errDeviceAhead: the device holds a revision of the record as new as the
// hub's, or newer, with other bytes.
var errDeviceAhead = errors.New("the device holds another revision of the record, as new or newer")

// copyFromHub copies the hub's current revision of record collection/id,
// its sealed bytes unchanged, to the device store, unless the device holds
// those bytes already. A device holding another revision as new or newer
// is left as it is (errDeviceAhead). The hub's revision is authenticated
// first.
//
// The copy is recorded as a sync would record pulling it: its sync base
// becomes the hub's revision (so a later change here is no conflict with
// it, and a pull of its feed entry changes nothing), and the device's
// ledger gets a RecordPulled entry with the hub's feed position of the
// revision, found among the entries after position after; a push never
// carries it back. When the position is not found (the hub's feed moved on
// by many entries meanwhile), the entry is a RecordPut of this device, which
// the next push finds on the hub already.
func (v *Vault) copyFromHub(ctx context.Context, collection, id string, after uint64) error {
	key := v.recordKey(collection, id)
	hit, err := v.hub.store.Get(ctx, key)
	if err != nil {
		return err
	}
	hrec, err := v.openStored(collection, id, hit, true)
	if err != nil {
		return fmt.Errorf("hub's record: %w", err)
	}
	hash := cipherHash(hit.Value)
	// check decides from the device's item whether to write.
	check := func(tx stores.Tx, it stores.Item, found bool) (bool, error) {
		if !found {
			return true, nil
		}
		if bytes.Equal(it.Value, hit.Value) {
			return false, nil
		}
		prev, err := v.openStoredTx(v.keyTx(tx), collection, id, it, true)
		if err != nil {
			return false, err
		}
		if prev.rev >= hrec.rev {
			return false, fmt.Errorf("%w (device %d, hub %d)", errDeviceAhead, prev.rev, hrec.rev)
		}
		return true, nil
	}
	e := ledger.Entry{Kind: ledger.RecordPut}
	if seq, ok, err := v.hubPosition(ctx, after, collection, id, hrec.rev, hash); err != nil {
		return err
	} else if ok {
		e = ledger.Entry{Kind: ledger.RecordPulled, Number: seq}
	}
	if _, ok := v.store.(stores.Transactor); ok && v.store.Capabilities().Transactions {
		// The sync base is written with the record: locked with it, in
		// key order (see lockKeys).
		err := v.ledger.UpdateKeys(ctx, []string{key, v.baseKey(collection, id)}, func(tx stores.Tx) error {
			it, err := tx.Get(key)
			found := err == nil
			if err != nil && !errors.Is(err, stores.ErrNotFound) {
				return err
			}
			write, err := check(tx, it, found)
			if err != nil || !write {
				return err
			}
			if err := v.putSealedValue(tx, v.baseKey(collection, id), encodeBase(base{rev: hrec.rev, hash: hash})); err != nil {
				return err
			}
			return v.putSealedAsIsTx(ctx, tx, collection, id, hit.Value, hrec.rev, hash, e)
		})
		if errors.Is(err, ledger.ErrUnpinned) {
			return nil // copied; the device's ledger pin lags, as after any write
		}
		return err
	}
	_, err = cas.Do(ctx, cas.Policy{}, func(int) error {
		it, err := v.store.Get(ctx, key)
		found := err == nil
		if err != nil && !errors.Is(err, stores.ErrNotFound) {
			return err
		}
		write, err := check(nil, it, found)
		if err != nil || !write {
			return err
		}
		if _, err := v.store.CompareAndSwap(ctx, key, it.Version, hit.Value); err != nil {
			return err
		}
		e.Collection, e.ID, e.Revision, e.CipherHash = collection, id, hrec.rev, hash
		_, err = v.ledger.Append(ctx, e)
		return err
	})
	return err
}

// hubHandoff is a handoff entry of the device copied to the hub.
type hubHandoff struct {
	key, provisional string
}

// settleOnHub is Numbered.Settle on a device of a hub: it hands off to the
// hub the device's pending records that are on the hub already (pushed by
// a sync) and pending there under the same provisional id, runs the pass on
// the hub (the hub's lock makes it exclusive across machines), and forgets
// the device's handoff entries of the records the hub numbered. The
// stamped records reach the device with the next sync.
func (n *Numbered[T]) settleOnHub(ctx context.Context) (numbering.PassReport, error) {
	fail := func(err error) (numbering.PassReport, error) {
		return numbering.PassReport{}, fmt.Errorf("numbering %q: pass on the hub: %w", n.series, err)
	}
	if err := n.c.v.learnHubGen(ctx); err != nil { // rotate_current.go
		return fail(err)
	}
	copied, err := n.handOffToHub(ctx)
	if err != nil {
		return fail(err)
	}
	rep, err := n.onHub.Settle(ctx)
	if err != nil && !errors.Is(err, sequence.ErrPeriodClosed) {
		return rep, err
	}
	// A closed period's records stay in line on the hub; the other
	// periods' were numbered: their entries here are dropped all the same.
	passErr := err
	for _, h := range copied {
		_, ok, err := n.onHub.Lookup(ctx, h.provisional) // of its period, for a handle with periods
		if err != nil {
			return rep, fmt.Errorf("numbering %q: after the pass on the hub: %w", n.series, err)
		}
		if !ok {
			continue
		}
		if err := n.c.v.store.Delete(ctx, h.key); err != nil {
			return rep, fmt.Errorf("numbering %q: after the pass on the hub: %w", n.series, err)
		}
	}
	return rep, passErr
}

// handOffToHub copies to the hub each handoff entry of the device whose
// record the hub holds pending under the entry's provisional id, and
// returns them with the entries whose record the hub holds otherwise
// (numbered there, maybe). Entries whose record has not reached the hub
// stay on the device: the hub's pass would only wait for them.
func (n *Numbered[T]) handOffToHub(ctx context.Context) ([]hubHandoff, error) {
	if n.date == nil || n.opts.Period == sequence.PeriodNone {
		return n.handOffQueue(ctx, n.hooks, nil)
	}
	// A handle numbering by period: each period's queue, the period
	// listed on the hub first (numbered_periods.go).
	labels, err := n.hooks.Periods(ctx)
	if err != nil {
		return nil, err
	}
	var out []hubHandoff
	for _, label := range labels {
		ps, err := n.period(label)
		if err != nil {
			return nil, err
		}
		key, value, err := ps.hooks.Period()
		if err != nil {
			return nil, err
		}
		if _, err := n.c.v.hub.store.Get(ctx, key); errors.Is(err, stores.ErrNotFound) {
			if _, err := n.c.v.hub.store.Put(ctx, key, value); err != nil {
				return nil, err
			}
		} else if err != nil {
			return nil, err
		}
		if out, err = n.handOffQueue(ctx, ps.hooks, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// handOffQueue is handOffToHub for the queue of the deferred series whose
// hooks are hooks, appending to out.
func (n *Numbered[T]) handOffQueue(ctx context.Context, hooks deferred.Hooks, out []hubHandoff) ([]hubHandoff, error) {
	v, h := n.c.v, n.c.v.hub
	const probe = "01890a5d-ac96-774b-bcce-b302099a8057/i" // a UUIDv7 and an id
	probeKey, _, err := hooks.Handoff(probe[:36], probe[37:])
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(probeKey, probe) // the series' pending folder
	for it, err := range v.store.List(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		if err := stores.CheckListed(prefix, it.Key); err != nil {
			return nil, err
		}
		p, id, ok := strings.Cut(it.Key[len(prefix):], "/")
		if !ok || checkStoredID(id) != nil {
			continue
		}
		hit, err := h.store.Get(ctx, h.recordKey(n.c.name, id))
		if errors.Is(err, stores.ErrNotFound) {
			continue // not pushed yet
		}
		if err != nil {
			return nil, err
		}
		rec, err := h.openStored(n.c.name, id, hit, true)
		if err != nil {
			return nil, fmt.Errorf("hub's record %s/%s: %w", n.c.name, id, err)
		}
		if pendingOf(rec.marks, n.series) != p {
			// Numbered on the hub already (by a pass another device ran
			// after this one copied the entry), or handed off anew there:
			// the pass's index tells settleOnHub whether to forget it.
			out = append(out, hubHandoff{key: it.Key, provisional: p})
			continue
		}
		switch _, err := h.store.Get(ctx, it.Key); {
		case errors.Is(err, stores.ErrNotFound):
			if _, err := h.store.CompareAndSwap(ctx, it.Key, 0, it.Value); err != nil && !errors.Is(err, stores.ErrConflict) {
				return nil, err
			}
		case err != nil:
			return nil, err
		}
		out = append(out, hubHandoff{key: it.Key, provisional: p})
	}
	return out, nil
}

// hubPositionScan bounds the feed entries hubPosition reads.
const hubPositionScan = 4096

// hubPosition finds, among the hub's feed entries after position after,
// the RecordPut of revision rev of collection/id with cipher hash hash,
// and returns its position.
func (v *Vault) hubPosition(ctx context.Context, after uint64, collection, id string, rev uint64, hash []byte) (uint64, bool, error) {
	n := 0
	for e, err := range v.hub.ledger.Read(ctx, after+1) {
		if err != nil {
			return 0, false, feedErr(err)
		}
		if e.Kind == ledger.RecordPut && e.Collection == collection && e.ID == id && e.Revision == rev && bytes.Equal(e.CipherHash, hash) {
			return e.Seq, true, nil
		}
		if n++; n == hubPositionScan {
			break
		}
	}
	return 0, false, nil
}
