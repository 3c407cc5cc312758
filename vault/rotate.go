package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// rotationKey holds, sealed, the generation a rotation re-seals records
// with, from the commit that made it until every record is re-sealed.
const rotationKey = "_rotation"

// ResealedReason is the Reason of the ledger.RecordPut entry of a record
// re-sealed by a rotation: a new revision with the same content (metadata
// included: Modified and Author stay those of the revision re-sealed).
const ResealedReason = "resealed"

// resealBatch is how many records one re-sealing commit holds.
const resealBatch = 256

// progressEvery is how often a rotation calls its progress function.
const progressEvery = 200 * time.Millisecond

// RotationProgress is the state of a rotation's re-sealing.
type RotationProgress struct {
	// Generation is the data key generation records are re-sealed with.
	Generation uint64
	// Done counts the records handled so far (re-sealed, or found
	// written, re-sealed or deleted meanwhile); Total the records found
	// sealed by an older generation so far (it may grow: records written
	// by another handle meanwhile are found by a later pass).
	Done, Total uint64
	// Finished is true once no record is sealed by an older generation.
	Finished bool
}

// RotateOption configures RotateKeys and ResumeRotation.
type RotateOption func(*rotateOptions)

type rotateOptions struct {
	progress func(RotationProgress)
}

// WithRotationProgress has fn called with the rotation's progress from the
// re-sealing goroutine every 200 milliseconds while it runs and once when
// it ends (with Finished set when it finished). fn must return quickly and
// must not call the vault's Close.
func WithRotationProgress(fn func(RotationProgress)) RotateOption {
	return func(o *rotateOptions) { o.progress = fn }
}

// Rotation is the re-sealing of a vault's records under a new data key
// generation, running in the background. Its methods are safe for
// concurrent use.
type Rotation struct {
	gen         uint64
	done, total atomic.Uint64
	finished    atomic.Bool
	stop        context.CancelFunc
	end         chan struct{}
	err         error    // set before end is closed
	skipped     []string // set before the rotation is published
}

// Generation returns the generation records are re-sealed with.
func (r *Rotation) Generation() uint64 { return r.gen }

// Skipped names the people, sorted, whose keyring entry was given no key
// of the new generation although it is not revoked: the entry fails the
// check of authority (people_ledger.go: ErrTampered elsewhere), as one a
// person planted or granted themselves, or one put back as it was before
// a revocation or a narrowing (revoked since, another role or signing
// key, more collections than the ledger's latest grant). Nil for a
// resumed rotation.
func (r *Rotation) Skipped() []string { return slices.Clone(r.skipped) }

// Progress returns how far the re-sealing is.
func (r *Rotation) Progress() RotationProgress {
	return RotationProgress{Generation: r.gen, Done: r.done.Load(), Total: r.total.Load(), Finished: r.finished.Load()}
}

// Done is closed when the re-sealing ends: finished, failed, stopped, or
// ended by the vault's Close.
func (r *Rotation) Done() <-chan struct{} { return r.end }

// Wait waits for the re-sealing to end and returns why it did: nil once
// every record is sealed with the rotation's generation (or a later one),
// else the error (ErrClosed when the vault was closed, context.Canceled
// after Stop). A rotation that did not finish is continued by
// ResumeRotation, on this handle or after a new Open. ctx bounds the wait
// only.
func (r *Rotation) Wait(ctx context.Context) error {
	select {
	case <-r.end:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop ends the re-sealing after the commit in progress and waits for it;
// ResumeRotation continues it later.
func (r *Rotation) Stop() {
	r.stop()
	<-r.end
}

// Rotation returns the last rotation this handle started (RotateKeys,
// ResumeRotation, or a Revoke that rotated), or nil.
func (v *Vault) Rotation() *Rotation { return v.rot.Load() }

// RotateKeys makes a new generation of data keys and starts re-sealing the
// vault's records with it in the background. In one commit, with a
// ledger.KeysRotated entry, the new data key is wrapped for every person
// not revoked (to their public key, so no secret is needed) and the
// rotation is recorded as pending; from then on every record this handle
// writes is sealed with the new generation. Records are then re-sealed,
// in batches, each a new revision of unchanged content with a
// ledger.RecordPut entry whose Reason is ResealedReason (see the package
// documentation on rotation for why a new revision). Reads work
// throughout: a record names the generation that sealed it.
//
// What stays on the first generation: the vault's internal values
// (counters, ledger entries, sync state, rollback pins), the ledger's
// chain key and the claim key, and the MAC of keyring entries are all
// derived from the first data key, which every person granted ever held.
// A rotation protects records written afterwards, not those values.
//
// Each person's keyring entry is checked against the people of the
// vault's ledger (on a device of a hub, the hub's ledger too): an entry
// whose grant no owner signed (one a person planted, or rewrote as
// granted by themselves), that is revoked there, has another role or
// signing key, or names collections outside the latest grant's is given
// no new key and left as it is (Rotation.Skipped names these people): it
// does not stop the rotation. An entry a store, or the person themself,
// put back as it was before their revocation or the narrowing of their
// collections is such an entry.
//
// Other handles open on the vault (another process, another device) keep
// sealing with the generation they know until they read a record of the
// new one or are opened again; ResumeRotation re-seals what they wrote.
//
// Only an owner rotates (ErrNotPermitted), on a store with transactions
// (stores.ErrNotSupported otherwise); a keyring holding an entry of layout
// version 1 that is not revoked, in a vault of that layout, cannot give
// it the new key (ErrNotPermitted: its holder calls UpgradeKeyring
// first; elsewhere such an entry is a plant, skipped). A crash, Stop or
// Close leaves the rotation pending: ResumeRotation continues it.
//
// On a device of a hub the rotation is made on the hub first (see
// rotate_hub.go): the new keyring entries commit on the hub, then on the
// device; the re-sealed records reach the hub and the other devices with
// Sync, and each device seals with the new generation from its next Sync
// on. A device that cannot reach its hub, or opened without it, does not
// rotate: an error wrapping sequence.ErrOffline, nothing written. A
// rotation (or any change of a person) committed on the hub meanwhile by
// another device makes it fail with an error matching stores.ErrConflict,
// writing nothing: call again, which makes the next generation. Should
// the device's commit fail after the hub's, the error says so: the
// generation is on the hub, the device's next Sync brings it, and
// ResumeRotation then re-seals the records.
func (v *Vault) RotateKeys(ctx context.Context, opts ...RotateOption) (*Rotation, error) {
	if err := v.enter(ctx); err != nil {
		return nil, fmt.Errorf("rotate keys: %w", err)
	}
	defer v.exit()
	if _, err := v.ownerSeed(); err != nil {
		return nil, fmt.Errorf("rotate keys: %w", err)
	}
	if err := v.checkStillHeld(ctx, true); err != nil {
		return nil, fmt.Errorf("rotate keys: %w", err)
	}
	gen, skipped, err := v.newGeneration(ctx, "rotate", nil)
	if err != nil {
		return nil, fmt.Errorf("rotate keys: %w", err)
	}
	return v.startReseal(gen, opts, skipped), nil
}

// ResumeRotation continues re-sealing records under the latest data key
// generation: the rotation left pending by a crash, Stop or Close (see
// PendingRotation), or records still sealed by an older generation for
// another reason (written by a handle that did not know of the rotation,
// or pulled by Sync from a device that did not). Without anything left it
// returns a rotation that finishes at once. Any role but a reader may
// resume (re-sealing writes records), except a person limited to some
// collections (ErrNotPermitted); it needs a store with transactions.
func (v *Vault) ResumeRotation(ctx context.Context, opts ...RotateOption) (*Rotation, error) {
	if err := v.enter(ctx); err != nil {
		return nil, fmt.Errorf("resume rotation: %w", err)
	}
	defer v.exit()
	if v.Role() == RoleReader {
		return nil, fmt.Errorf("resume rotation: a reader writes nothing: %w", ErrNotPermitted)
	}
	if v.keys.limitedTo() != nil {
		return nil, fmt.Errorf("resume rotation: a person limited to some collections cannot open the others' records: %w", ErrNotPermitted)
	}
	if !transactional(v.store) {
		return nil, fmt.Errorf("resume rotation: %w", stores.ErrNotSupported)
	}
	gen, pending, err := v.pendingRotation(ctx)
	if err != nil {
		return nil, fmt.Errorf("resume rotation: %w", err)
	}
	if pending {
		// A rotation made by another handle: learn its key.
		if _, err := v.keys.get(gen, nil); err != nil {
			return nil, fmt.Errorf("resume rotation: %w", err)
		}
	}
	cur, _ := v.keys.current()
	return v.startReseal(max(gen, cur), opts, nil), nil
}

// PendingRotation reports whether a rotation is pending on the vault's
// store (made, and its records not all re-sealed yet), and its generation.
func (v *Vault) PendingRotation(ctx context.Context) (gen uint64, pending bool, err error) {
	if err := v.enter(ctx); err != nil {
		return 0, false, fmt.Errorf("pending rotation: %w", err)
	}
	defer v.exit()
	gen, pending, err = v.pendingRotation(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("pending rotation: %w", err)
	}
	return gen, pending, nil
}

func (v *Vault) pendingRotation(ctx context.Context) (uint64, bool, error) {
	it, err := v.store.Get(ctx, v.prefix+rotationKey)
	if errors.Is(err, stores.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	gen, err := v.openRotationMark(it.Value)
	if err != nil {
		return 0, false, err
	}
	return gen, true, nil
}

func (v *Vault) openRotationMark(sealed []byte) (uint64, error) {
	plain, err := v.seal.Open(v.prefix+rotationKey, sealed)
	if err != nil {
		return 0, v.openFailed(err)
	}
	gen, err := decodeRotationMark(plain)
	if err != nil {
		return 0, fmt.Errorf("rotation mark: %w: %w", ErrTampered, err)
	}
	return gen, nil
}

// encodeRotationMark is the plaintext of the rotation mark: the
// generation being re-sealed with, as a uvarint (2 or more: the first
// generation is no rotation).
func encodeRotationMark(gen uint64) []byte { return codec.AppendUvarint(nil, gen) }

// decodeRotationMark reads encodeRotationMark's layout; anything else is
// a *codec.Error (matching ErrCorrupt).
func decodeRotationMark(b []byte) (uint64, error) {
	r := codec.NewReader(b)
	gen := r.Uvarint()
	if r.Err() == nil && gen < 2 {
		r.Fail("rotation to a generation below 2")
	}
	if err := r.End(); err != nil {
		return 0, err
	}
	return gen, nil
}

func transactional(st stores.Store) bool {
	_, ok := st.(stores.Transactor)
	return ok && st.Capabilities().Transactions
}

// keyringWrite is a keyring entry to replace in the rotation's commit: the
// revocation a Revoke rotates with, or the grant of a person limited to
// some collections (add: their entry, to which the new generation's keys
// are added before it is sealed into val; old nil: no entry before).
type keyringWrite struct {
	user     string
	old, val []byte
	add      *keyringEntry
	entry    ledger.Entry
}

// newGeneration makes the next data key generation and commits it: every
// active person's entry with the new key wrapped for them, the rotation
// mark and a ledger.KeysRotated entry (after also's own change and entry,
// when given), then installs the key in the handle. On a device of a hub
// the keyring entries are committed on the hub first (rotate_hub.go).
func (v *Vault) newGeneration(ctx context.Context, reason string, also *keyringWrite) (uint64, []string, error) {
	if _, err := v.ownerSeed(); err != nil {
		return 0, nil, err
	}
	if !transactional(v.me.store) {
		return 0, nil, fmt.Errorf("a rotation needs a store with transactions: %w", stores.ErrNotSupported)
	}
	if err := v.readyToRotate(ctx); err != nil { // rotate_hub.go
		return 0, nil, err
	}
	var (
		changes []keyringChange
		active  []*keyringEntry
		olds    [][]byte
	)
	// Each entry is checked against the people of the ledger (on a device
	// of a hub, the hub's, which records every device's changes): a MAC
	// every person can compute, a grant signed by its own key, an entry
	// put back as it was before a revocation or a narrowing are not enough
	// to be given the new key (people_ledger.go).
	a, err := v.rotationAuthority(ctx)
	if err != nil {
		return 0, nil, err
	}
	var skipped []string
	cur, _ := v.keys.current()
	top := cur
	kp := v.prefix + keyringPrefix
	for it, err := range stores.ListUnder(ctx, v.keyringStore(), kp) { // see rotate_hub.go
		if err != nil {
			return 0, nil, err
		}
		name := it.Key[len(kp):]
		if also != nil && name == also.user {
			continue
		}
		if e, err := decodeKeyring(it.Value); err == nil && e.user == name {
			for _, g := range e.gens {
				top = max(top, g.gen)
			}
		}
		e, err := a.entry(ctx, name, it.Value)
		switch {
		case refused(err):
			// An entry the check refuses gets no new key and stays as it
			// is (Rotation.Skipped names it): it cannot stop a rotation,
			// and so a revocation, either.
			skipped = append(skipped, name)
			continue
		case err != nil:
			return 0, nil, err
		case e == nil:
			return 0, nil, fmt.Errorf("%q holds a keyring entry of layout version 1, which cannot take a new key "+
				"(they call UpgradeKeyring first, or are revoked): %w", name, ErrNotPermitted)
		}
		if !e.revoked {
			active = append(active, e)
			olds = append(olds, it.Value)
		}
	}
	if top >= maxKeyringList {
		return 0, nil, fmt.Errorf("%w: the vault has %d key generations, the most a keyring entry holds", ErrInvalidArgument, top)
	}
	gen := top + 1
	k, err := crypto.GenerateKey()
	if err != nil {
		return 0, nil, err
	}
	var mine *keyringEntry
	for i, e := range active {
		ne := *e
		ne.serial++
		if len(ne.colKeys)+len(ne.collections) > maxKeyringList {
			k.Wipe()
			return 0, nil, fmt.Errorf("%w: %q holds %d collection keys, the most a keyring entry holds", ErrInvalidArgument, e.user, len(ne.colKeys))
		}
		if err := ne.wrapNew(v.name, v.me.header, gen, k); err != nil {
			k.Wipe()
			return 0, nil, err
		}
		ne.seal(v.dk, v.name, v.me.header)
		changes = append(changes, keyringChange{key: kp + e.user, old: olds[i], val: ne.encode()})
		if e.user == v.user {
			mine = &ne
		}
	}
	if also != nil {
		if also.add != nil {
			// A person granted with this generation: it is theirs too.
			if err := also.add.wrapNew(v.name, v.me.header, gen, k); err != nil {
				k.Wipe()
				return 0, nil, err
			}
			also.add.seal(v.dk, v.name, v.me.header)
			also.val = also.add.encode()
			also.entry.CipherHash = hashOf(also.val)
		}
		changes = append(changes, keyringChange{key: kp + also.user, old: also.old, val: also.val})
	}
	mark, err := v.seal.Seal(v.prefix+rotationKey, encodeRotationMark(gen))
	if err != nil {
		k.Wipe()
		return 0, nil, err
	}
	current, err := v.sealCurrentGen(gen) // rotate_current.go
	if err != nil {
		k.Wipe()
		return 0, nil, err
	}
	if v.rotatesOnHub() {
		var onHub []ledger.Entry
		if also != nil {
			onHub = append(onHub, also.entry)
		}
		if err := v.commitOnHub(ctx, changes, current, onHub); err != nil {
			k.Wipe()
			return 0, nil, err
		}
	}
	// The rotation mark and the current generation are written blind; named
	// with the keys read, they are locked with them in key order (lockKeys)
	// rather than at the commit, after the ledger's head.
	keys := append(changeKeys(changes), v.prefix+rotationKey, v.prefix+currentGenKey)
	err = v.ledger.UpdateKeys(ctx, keys, func(tx stores.Tx) error {
		for _, c := range changes {
			it, err := tx.Get(c.key)
			switch {
			case v.rotatesOnHub(): // committed on the hub already
				if err != nil && !errors.Is(err, stores.ErrNotFound) {
					return err
				}
				if !takesHubEntry(it, err == nil, c) {
					continue
				}
			case errors.Is(err, stores.ErrNotFound):
				if c.old != nil {
					return errEntryMoved
				}
			case err == nil && c.old == nil:
				return errEntryMoved // granted meanwhile
			case err != nil:
				return err
			case !bytes.Equal(it.Value, c.old):
				return errEntryMoved
			}
			if err := tx.Put(c.key, c.val); err != nil {
				return err
			}
		}
		if err := tx.Put(v.prefix+rotationKey, mark); err != nil {
			return err
		}
		if err := tx.Put(v.prefix+currentGenKey, current); err != nil {
			return err
		}
		var entries []ledger.Entry
		if also != nil {
			entries = append(entries, also.entry)
		}
		entries = append(entries, ledger.Entry{Kind: ledger.KeysRotated, Number: gen, Reason: reason})
		_, err := v.ledger.AppendTx(ctx, tx, entries...)
		return err
	})
	if errors.Is(err, errEntryMoved) {
		err = errPeopleChanged
	}
	if err != nil {
		k.Wipe()
		if v.rotatesOnHub() {
			err = fmt.Errorf("generation %d is on the hub, not on this device (its next Sync brings it): %w", gen, err)
		}
		return 0, nil, closedIfWiped(err)
	}
	v.keys.add(gen, k)
	if mine != nil {
		v.me.mu.Lock()
		v.me.entry = mine
		v.me.mu.Unlock()
	}
	return gen, skipped, nil
}

// startReseal starts the background re-sealing of records below gen.
func (v *Vault) startReseal(gen uint64, opts []RotateOption, skipped []string) *Rotation {
	var o rotateOptions
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Rotation{gen: gen, stop: cancel, end: make(chan struct{}), skipped: skipped}
	v.rot.Store(r)
	var ticker sync.WaitGroup
	tickDone := make(chan struct{})
	if o.progress != nil {
		ticker.Add(1)
		go func() {
			defer ticker.Done()
			t := time.NewTicker(progressEvery)
			defer t.Stop()
			for {
				select {
				case <-tickDone:
					return
				case <-t.C:
					o.progress(r.Progress())
				}
			}
		}()
	}
	go func() {
		r.err = v.reseal(ctx, r)
		if r.err == nil {
			r.finished.Store(true)
		}
		close(tickDone)
		ticker.Wait()
		if o.progress != nil {
			o.progress(r.Progress())
		}
		cancel()
		close(r.end)
	}()
	return r
}

// reseal re-seals, pass after pass, the records sealed below r.gen, until
// a pass finds none; then it clears the rotation mark.
func (v *Vault) reseal(ctx context.Context, r *Rotation) error {
	for {
		keys, err := v.recordsBelow(ctx, r.gen)
		if err != nil {
			return fmt.Errorf("rotation: %w", err)
		}
		if len(keys) == 0 {
			return v.clearRotation(ctx, r.gen)
		}
		r.total.Add(uint64(len(keys)))
		var bad error
		for len(keys) > 0 {
			n := min(len(keys), resealBatch)
			done, err := v.resealKeys(ctx, keys[:n], r.gen)
			if err != nil {
				return fmt.Errorf("rotation: %w", err)
			}
			r.done.Add(uint64(n))
			if done.bad != nil && bad == nil {
				bad = done.bad
			}
			keys = keys[n:]
		}
		if bad != nil {
			// A record that does not open stays as it is; the rotation
			// stays pending.
			return fmt.Errorf("rotation: %w", bad)
		}
	}
}

// recordsBelow lists the records sealed by a generation below gen.
func (v *Vault) recordsBelow(ctx context.Context, gen uint64) ([]recKey, error) {
	if err := v.enter(ctx); err != nil {
		return nil, err
	}
	defer v.exit()
	// Learn first every generation the person holds (a rotation made by
	// another handle): the re-sealing commits open records inside a
	// transaction, where loading a key from the store would wait for the
	// transaction itself on a store that locks (memstore).
	if _, err := v.heldGenerations(ctx); err != nil {
		return nil, closedIfWiped(err)
	}
	var out []recKey
	// One listing per first byte a collection name may start with, so
	// that the vault's internal values (under '_': the ledger above all,
	// which outgrows the records) are not listed.
	for b := 0x20; b <= 0xff; b++ {
		if b == '_' || b == '/' || b == 0x7f {
			continue
		}
		for it, err := range v.store.List(ctx, v.prefix+string([]byte{byte(b)})) {
			if err != nil {
				return nil, err
			}
			coll, id, ok := strings.Cut(it.Key[len(v.prefix):], "/")
			if !ok {
				continue
			}
			g, err := recordGeneration(it.Value)
			if err != nil || g < gen {
				out = append(out, recKey{coll, id})
			}
		}
	}
	return out, nil
}

// resealed is what one re-sealing commit did: a record that did not open
// (left as it is) in bad.
type resealed struct{ bad error }

// resealKeys re-seals, in one commit, those of keys still sealed below gen.
func (v *Vault) resealKeys(ctx context.Context, keys []recKey, gen uint64) (resealed, error) {
	if err := v.enter(ctx); err != nil {
		return resealed{}, err
	}
	defer v.exit()
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = v.recordKey(k.coll, k.id)
	}
	var out resealed
	err := v.ledger.UpdateKeys(ctx, full, func(tx stores.Tx) error {
		out = resealed{}
		entries := make([]ledger.Entry, 0, len(keys))
		for i, k := range keys {
			it, err := tx.Get(full[i])
			if errors.Is(err, stores.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			if g, err := recordGeneration(it.Value); err == nil && g >= gen {
				continue // written again meanwhile
			}
			plain, rev, err := v.openRecordTx(v.keyTx(tx), k.coll, k.id, it.Value)
			if err != nil {
				if errors.Is(err, ErrClosed) {
					return err
				}
				out.bad = fmt.Errorf("%s/%s: %w", k.coll, k.id, err)
				continue
			}
			if rev == math.MaxUint64 {
				out.bad = fmt.Errorf("%s/%s: %w", k.coll, k.id, ErrRevisionOverflow)
				continue
			}
			sealed, err := v.sealRecordTx(v.keyTx(tx), k.coll, k.id, plain, rev+1)
			clear(plain)
			if err != nil {
				return closedIfWiped(err)
			}
			if err := tx.Put(full[i], sealed); err != nil {
				return err
			}
			entries = append(entries, ledger.Entry{Kind: ledger.RecordPut, Collection: k.coll, ID: k.id,
				Revision: rev + 1, CipherHash: cipherHash(sealed), Reason: ResealedReason})
		}
		if len(entries) == 0 {
			return nil
		}
		_, err := v.ledger.AppendTx(ctx, tx, entries...)
		return err
	})
	if errors.Is(err, ledger.ErrUnpinned) {
		err = nil // committed; the pin is caught up by the next write
	}
	return out, closedIfWiped(err)
}

// clearRotation removes the rotation mark once its generation's records
// are all re-sealed (a later rotation's mark stays).
func (v *Vault) clearRotation(ctx context.Context, gen uint64) error {
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	if !transactional(v.store) {
		return stores.ErrNotSupported
	}
	// With the mark goes a signed ledger.KeysResealed entry: from it on,
	// a record of this store sealed below gen is not one the vault wrote
	// (the generation floor, people_ledger.go). Not on a device of a hub:
	// its ledger is the hub's, whose records devices that had not heard
	// of the rotation still push sealed below gen.
	// Only an owner's counts (ledger.PeopleState.Floor): a writer's handle
	// that finishes a re-seal clears the mark and records no floor.
	floor := !v.isDevice() && v.Role() == RoleOwner
	cleared := false
	err := v.ledger.UpdateKeys(ctx, []string{v.prefix + rotationKey}, func(tx stores.Tx) error {
		cleared = false
		it, err := tx.Get(v.prefix + rotationKey)
		if errors.Is(err, stores.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		g, err := v.openRotationMark(it.Value)
		if err != nil {
			return err
		}
		if g > gen {
			return nil
		}
		if err := tx.Delete(v.prefix + rotationKey); err != nil {
			return err
		}
		cleared = true
		if !floor {
			return nil
		}
		_, err = v.ledger.AppendTx(ctx, tx, ledger.Entry{Kind: ledger.KeysResealed, Number: gen})
		return err
	})
	if errors.Is(err, ledger.ErrUnpinned) {
		err = nil // committed; the pin is caught up by the next write
	}
	if err == nil && cleared && floor {
		v.raiseFloor(gen)
	}
	return closedIfWiped(err)
}
