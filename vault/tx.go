package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// The functions package sequence gives the vault through internal/wire.
var (
	seqNextTx = wire.SequenceNextTx.(func(context.Context, *sequence.Sequence, stores.Tx, *uint64, bool) (sequence.Serial, bool, error))
	seqCheck  = wire.SequenceCheck.(func(context.Context, *sequence.Sequence) error)
	seqPin    = wire.SequencePin.(func(*sequence.Sequence) uint64)
	seqOwner  = wire.SequenceOwner.(func(*sequence.Sequence) any)
	seqTarget = wire.SequenceTarget.(func(*sequence.Sequence) *sequence.Sequence)
)

// owns reports whether q was obtained from v (Vault.Sequence), not from
// another handle on the same vault, such as one opened by another DB: its
// counter writes and ledger entries go through that handle's ledger, which
// cannot append inside v's transactions.
func (v *Vault) owns(q *sequence.Sequence) bool {
	return q != nil && seqOwner(q) == any(v.seqs)
}

// maxTxChecks bounds the runs of an Update's function that end because a
// sequence it used had to be checked against its history first (once per
// sequence and vault).
const maxTxChecks = 8

// Tx is a multi-record transaction of a vault, handed to the function of
// Vault.Update. Read and write records through Collection.In(tx) and take
// numbers with Next: everything commits together, with its ledger entries,
// or not at all. A Tx is valid only during the function's run and is not
// safe for concurrent use. Like database/sql.Tx it keeps the context of
// the Update that made it, so that its methods need none.
type Tx struct {
	v     *Vault
	ctx   context.Context
	tx    stores.Tx
	ended bool
	taken map[*sequence.Sequence]uint64 // numbers taken: the last per sequence
	check []*sequence.Sequence          // sequences to check before running again
	stale []*sequence.Sequence          // sequences to pin before running again
	pins  map[*sequence.Sequence]uint64 // pins taken before the transaction began
	// checked holds the counters (their keys) checked against the ledger
	// in an earlier run of the Update, whatever handle named them: fn may
	// make its handles on each run (v.Sequence, q.At(date)). See
	// wire.SequenceNextTx.
	checked map[string]bool
	// failed is the first error of a call that had begun writing into the
	// transaction (a record without its ledger entry, a counter moved
	// without its event): the transaction then does not commit, whatever
	// fn returns.
	failed error
	// order is nil, or, on a store whose transactions lock the keys they
	// read (see txOrder), what keeps this run's locks in key order.
	order *txOrder
}

// txOrder follows, in one run of an Update's function on a store whose
// transactions lock each key as they first read it (stores.Prefetcher:
// PostgreSQL's row locks), the record keys the run reads and writes (and
// the counters it takes numbers of, and the collection definitions its
// numbered records may bind), so that they are locked in ascending key order, the one global order of
// the vault's commits (see lockKeys). A record key below one already
// locked (a collection named below '_', whose keys sort below the ledger's
// head; or records taken in descending order) breaks the run: from then
// on the run only collects the keys fn names (its writes do nothing, its
// reads read the store outside the transaction, taking no lock, its
// numbers are none), and its transaction is dropped; the next run names
// every key the broken one touched, which its transaction locks first, in
// key order, with the ledger's head. Without it such an Update could
// deadlock, on PostgreSQL, with a plain Put of one of its records, which
// locks the record first.
type txOrder struct {
	named   map[string]bool // locked at the start of the run
	top     string          // the greatest key locked so far
	touched []string        // the record keys this run read or wrote
	broken  bool            // a key came below top: the run only collects keys
}

// errTxOrder ends a run of an Update's function that named a record key
// below one its transaction had locked: Update runs fn again with the keys
// named.
var errTxOrder = errors.New("record keys must be locked in key order")

// touch notes that the run reads or writes key, and reports whether the
// run only collects keys from now on (see txOrder).
func (o *txOrder) touch(key string) (collect bool) {
	if o == nil {
		return false
	}
	o.touched = append(o.touched, key)
	switch {
	case o.broken:
		return true
	case o.named[key]:
		return false
	case key < o.top:
		o.broken = true
		return true
	}
	o.top = key
	return false
}

// collecting reports whether the run only collects keys.
func (o *txOrder) collecting() bool { return o != nil && o.broken }

// newTxOrder returns the order of a run whose transaction locked names
// and the ledger's own keys first.
func (v *Vault) newTxOrder(names []string) *txOrder {
	o := &txOrder{named: make(map[string]bool, len(names))}
	// The ledger's batch locks its head and the guard's key with names.
	for _, k := range append(names, v.prefix+"_ledger/head", v.guard.key) {
		o.named[k] = true
		o.top = max(o.top, k)
	}
	return o
}

// locksOnRead reports whether the transactions of v's store lock each key
// as they first read it (their Tx is a stores.Prefetcher, as pgstore's),
// asking the store once, by an empty transaction: never call it inside
// one (a store's transaction may hold a lock the probe waits for).
func (v *Vault) locksOnRead(ctx context.Context) bool {
	switch v.txLocks.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	tr, ok := v.store.(stores.Transactor)
	if !ok {
		return false
	}
	locks := false
	errProbe := errors.New("probe")
	if err := tr.Update(ctx, func(tx stores.Tx) error {
		_, locks = tx.(stores.Prefetcher)
		return errProbe
	}); !errors.Is(err, errProbe) {
		return true // unknown: keep the order
	}
	if locks {
		v.txLocks.Store(2)
	} else {
		v.txLocks.Store(1)
	}
	return locks
}

// errTxCheck ends a run of an Update's function that used a sequence not
// yet checked against its history: Update checks it and runs fn again.
var errTxCheck = errors.New("sequence must be checked before the transaction")

// errTxEnded: a Tx used after its function returned.
var errTxEnded = fmt.Errorf("transaction has ended: %w", ErrInvalidArgument)

// Update runs fn in one transaction of the vault's store: the records fn
// writes through Collection.In(tx), the numbers it takes with tx.Next, and
// the ledger entries of both commit together when fn returns nil. If fn
// returns an error (returned as it is) or panics (the panic goes on in the
// caller), nothing is written and no number is taken. A nil fn gives
// ErrInvalidArgument; a store without transactions,
// stores.ErrNotSupported. A call through tx that fails after it began
// writing (its record or counter written, its ledger entry refused by the
// store) fails the whole transaction: Update returns its error even if fn
// went on and returned nil, and nothing is written. A call refused before
// writing (a *ConflictError, ErrNotFound, a bad argument) leaves the
// transaction to fn.
//
// fn may run more than once: when the transaction conflicts with another
// writer (another process; writers of this vault in this process are
// serialised, never conflicting), and the first time a sequence is used in
// a transaction of this vault (it is checked against its history outside
// the transaction, then fn runs again), and when a counter read in the
// transaction is below a rollback pin raised meanwhile by another DB
// sharing the state folder (fn runs again on a fresh snapshot, with the
// pin taken before it, which tells a stale snapshot from a rollback).
// Only the last run counts, so fn
// should only read, compute and write through tx. After the ledger's retry
// budget (16 attempts) Update fails with ledger.ErrContention. fn runs,
// possibly on another goroutine (the one committing the batch), while the
// vault's other writers wait: keep it short, and do not call the
// vault from it other than through tx (a Put, Next or Update of the vault
// would wait for fn forever).
//
// An Update whose commit reports an error may still have committed (a
// connection lost at COMMIT on PostgreSQL). The numbers tx.Next takes are
// not bound to a record the way PutNumbered binds them, so a blind retry
// would take a second number and leave the first one unused: to retry
// safely, let fn first look, through tx, for what it writes (the record it
// numbers) and do nothing when it is there.
func (v *Vault) Update(ctx context.Context, fn func(tx *Tx) error) error {
	if fn == nil {
		return fmt.Errorf("vault update: nil function: %w", ErrInvalidArgument)
	}
	if err := v.enter(ctx); err != nil {
		return fmt.Errorf("vault update: %w", err)
	}
	defer v.exit()
	if _, ok := v.store.(stores.Transactor); !ok {
		return fmt.Errorf("vault update: %w", stores.ErrNotSupported)
	}
	// pins holds the rollback pins of the sequences whose counter a run
	// found below a pin read inside its transaction: taken here, before
	// the next run's transaction begins, they decide whether it is a
	// rollback or a snapshot older than the pin.
	var pins map[*sequence.Sequence]uint64
	var checked map[string]bool
	// fn's record writes read currentGenKey (freshSealTx): named here, it
	// is locked with the ledger's head, in key order, not after the head
	// by the first write (see lockKeys). So are the record keys of a run
	// that had to end for their order (txOrder).
	names := []string{v.prefix + currentGenKey}
	ordered := v.locksOnRead(ctx) // before any transaction: it may ask the store
	// Tx.Next checks a limited person's numbers against the ledger's
	// grant, which it cannot read inside the transaction.
	if err := v.freshenGrant(ctx); err != nil {
		return fmt.Errorf("vault update: %w", err)
	}
	for range maxTxChecks {
		var last *Tx
		err := v.ledger.UpdateKeys(ctx, names, func(stx stores.Tx) error {
			tx := &Tx{v: v, ctx: ctx, tx: stx, pins: pins, checked: checked}
			if ordered {
				tx.order = v.newTxOrder(names)
			}
			last = tx
			defer func() { tx.ended = true }()
			err := fn(tx)
			switch {
			case tx.order != nil && tx.order.broken:
				return errTxOrder
			case len(tx.check) > 0 || len(tx.stale) > 0:
				return errTxCheck
			case err != nil:
				return err
			case tx.failed != nil:
				return fmt.Errorf("vault update: a write of the transaction failed, nothing was committed: %w", tx.failed)
			}
			return nil
		})
		if errors.Is(err, errTxOrder) && last.order != nil && last.order.broken {
			names = append(names, last.order.touched...)
			slices.Sort(names)
			names = slices.Compact(names)
			continue
		}
		if errors.Is(err, errTxCheck) {
			if len(last.check) > 0 {
				checked = maps.Clone(checked)
				if checked == nil {
					checked = make(map[string]bool, len(last.check))
				}
			}
			for _, q := range last.check {
				if err := seqCheck(ctx, q); err != nil {
					return fmt.Errorf("vault update: %w", err)
				}
				// The counter q names, with its definition loaded now.
				checked[seqTarget(q).Key()] = true
			}
			if len(last.stale) > 0 {
				pins = maps.Clone(pins)
				if pins == nil {
					pins = make(map[*sequence.Sequence]uint64, len(last.stale))
				}
				for _, q := range last.stale {
					pins[q] = seqPin(q)
				}
			}
			continue
		}
		if err == nil || errors.Is(err, ErrUnpinned) {
			// Committed: raise the rollback pins of the counters moved.
			var perr error
			for q, n := range last.taken {
				perr = errors.Join(perr, v.pins.RaiseCounter(q.Key(), n))
			}
			if perr != nil && err == nil {
				err = fmt.Errorf("%w: %w", ErrUnpinned, perr)
			}
		}
		return err
	}
	return fmt.Errorf("vault update: sequences still unchecked, or record keys still out of order, after %d runs: %w", maxTxChecks, ErrInvalidArgument)
}

// use checks that tx may still be used.
func (tx *Tx) use() error {
	if tx == nil {
		return fmt.Errorf("nil transaction: %w", ErrInvalidArgument)
	}
	if tx.ended {
		return errTxEnded
	}
	if len(tx.check) > 0 || len(tx.stale) > 0 {
		return errTxCheck
	}
	return tx.ctx.Err()
}

// spoil records err, of a call that had begun writing into the
// transaction, so that the transaction does not commit.
func (tx *Tx) spoil(err error) {
	if tx.failed == nil {
		tx.failed = err
	}
}

// Next takes the next number of seq in the transaction: the number is
// taken if, and only if, the transaction commits. Numbers taken in one
// transaction follow each other. seq must come from the transaction's
// vault handle (Vault.Sequence of the same *Vault; a handle on the same
// vault opened by another DB is another handle): else ErrInvalidArgument.
// On a series with periods the number is taken in the period of the
// current date, or of the document's date for a handle of Sequence.At; a
// closed period gives an error matching sequence.ErrPeriodClosed.
// On a device of a hub it fails with ErrNumbersOnHub.
func (tx *Tx) Next(seq *sequence.Sequence) (sequence.Serial, error) {
	if err := tx.use(); err != nil {
		return sequence.Serial{}, fmt.Errorf("next: %w", err)
	}
	if tx.v.hub != nil {
		return sequence.Serial{}, fmt.Errorf("next: %w", ErrNumbersOnHub) // hub_numbered.go
	}
	if tx.order.collecting() {
		return sequence.Serial{}, nil // a run that only collects keys takes no number
	}
	switch {
	case seq == nil:
		return sequence.Serial{}, fmt.Errorf("next: nil sequence: %w", ErrInvalidArgument)
	case !tx.v.owns(seq):
		return sequence.Serial{}, fmt.Errorf("next: series %q belongs to another vault or vault handle: %w", seq.Series(), ErrInvalidArgument)
	}
	// The counter the number comes from: for a series with periods, that
	// of the period of seq's date (or of now), whose pins and taken
	// numbers are its own.
	target := seqTarget(seq)
	if tx.order.touch(target.Key()) {
		// A counter below a key locked already (a record read first): the
		// next run names it (see txOrder).
		return sequence.Serial{}, nil
	}
	var pinned *uint64
	if p, ok := tx.pins[target]; ok {
		pinned = &p
	}
	s, check, err := seqNextTx(tx.ctx, seq, tx.tx, pinned, tx.checked[target.Key()])
	if check {
		tx.check = append(tx.check, seq)
		return sequence.Serial{}, fmt.Errorf("next: %w", errTxCheck)
	}
	if errors.Is(err, wire.ErrTxStale) {
		// Refused on a pin that may be newer than this transaction's
		// snapshot: Update runs fn again with the pin taken before.
		tx.stale = append(tx.stale, target)
		return sequence.Serial{}, fmt.Errorf("next: %w", errTxCheck)
	}
	if errors.Is(err, wire.ErrTxWrote) {
		tx.spoil(err)
	}
	if err != nil {
		return sequence.Serial{}, err
	}
	if tx.taken == nil {
		tx.taken = map[*sequence.Sequence]uint64{}
	}
	tx.taken[target] = s.N
	return s, nil
}

// TxCollection is a collection bound to a transaction: its reads see the
// transaction's writes, and its writes commit with the transaction. Obtain
// one with Collection.In; it is valid while its Tx is, and not safe for
// concurrent use.
type TxCollection[T any] struct {
	c  *Collection[T]
	tx *Tx
}

// In binds c to tx, a transaction of c's vault (else every call fails with
// ErrInvalidArgument).
func (c *Collection[T]) In(tx *Tx) *TxCollection[T] {
	return &TxCollection[T]{c: c, tx: tx}
}

// begin checks a call: the transaction, the collection's name and vault,
// and id. collect reports a run that only collects keys (see txOrder).
func (b *TxCollection[T]) begin(op, id string) (collect bool, err error) {
	c := b.c
	if err := b.tx.use(); err != nil {
		return false, fmt.Errorf("%s %s/%s: %w", op, c.name, id, err)
	}
	// Inside the transaction the keyring entry is not read again: a
	// collection given since the handle last read it is refused until a
	// call outside one (or a key load) has seen it.
	err = c.err
	if c.denied {
		err = c.v.keys.permits(c.name)
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	if c.v != b.tx.v {
		return false, fmt.Errorf("%s %s/%s: collection of another vault: %w", op, c.name, id, ErrInvalidArgument)
	}
	if err := checkIDFor(op, id); err != nil {
		return false, fmt.Errorf("%s %s: %w", op, c.name, err)
	}
	return b.tx.order.touch(c.v.recordKey(c.name, id)), nil
}

// GetRecord returns the record at id as the transaction sees it, or an
// error wrapping ErrNotFound.
func (b *TxCollection[T]) GetRecord(id string) (Record[T], error) {
	collect, err := b.begin("get", id)
	if err != nil {
		return Record[T]{}, err
	}
	c := b.c
	if collect {
		// Outside the transaction: no lock taken (see txOrder).
		r, err := c.GetRecord(b.tx.ctx, id)
		if err != nil {
			return Record[T]{}, err
		}
		return r, nil
	}
	prev, err := c.v.readTx(b.tx.tx, c.name, id, false)
	if err != nil {
		return Record[T]{}, fmt.Errorf("get %s/%s: %w", c.name, id, err)
	}
	r := Record[T]{ID: id, Revision: prev.rev, Modified: prev.meta.modified, Author: prev.meta.author}
	if err := json.Unmarshal(prev.body, &r.Value); err != nil {
		return Record[T]{}, fmt.Errorf("get %s/%s: decode: %w", c.name, id, err)
	}
	return r, nil
}

// Get returns the value of the record at id as the transaction sees it, or
// an error wrapping ErrNotFound.
func (b *TxCollection[T]) Get(id string) (T, error) {
	r, err := b.GetRecord(id)
	return r.Value, err
}

// Put writes value under id in the transaction, with its ledger entry.
func (b *TxCollection[T]) Put(id string, value T) error {
	return b.put("put", id, value, nil)
}

// PutIf is Put on the condition that the record is at revision rev (0: that
// there is none), as Collection.PutIf. A mismatch gives a *ConflictError
// and writes nothing: the transaction goes on, without this write, unless
// fn returns it.
func (b *TxCollection[T]) PutIf(id string, value T, rev uint64) error {
	return b.put("put", id, value, &rev)
}

func (b *TxCollection[T]) put(op, id string, value T, rev *uint64) error {
	if collect, err := b.begin(op, id); err != nil || collect {
		return err
	}
	c := b.c
	plain, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("%s %s/%s: encode: %w", op, c.name, id, err)
	}
	decided := false // the write began: a failure from here spoils the transaction
	if _, err := c.v.modifyTx(b.tx.ctx, b.tx.tx, c.name, id, func(prev stored) (change, error) {
		if rev != nil && prev.rev != *rev {
			return change{}, &ConflictError{Collection: c.name, ID: id, Want: *rev, Got: prev.rev}
		}
		decided = true
		return change{body: plain}, nil
	}); err != nil {
		// A revision that cannot advance is refused before writing.
		spoiled := decided && !errors.Is(err, ErrRevisionOverflow)
		err = fmt.Errorf("%s %s/%s: %w", op, c.name, id, err)
		if spoiled {
			b.tx.spoil(err)
		}
		return err
	}
	return nil
}

// Delete removes the record at id in the transaction, with its ledger
// entry; a missing record gives an error wrapping ErrNotFound.
func (b *TxCollection[T]) Delete(id string) error {
	return b.del(id, nil)
}

// DeleteIf is Delete on the condition that the record is at revision rev,
// as Collection.DeleteIf.
func (b *TxCollection[T]) DeleteIf(id string, rev uint64) error {
	if rev == 0 {
		return fmt.Errorf("delete %s/%s: revision 0: %w", b.c.name, id, ErrInvalidArgument)
	}
	return b.del(id, &rev)
}

func (b *TxCollection[T]) del(id string, rev *uint64) error {
	if collect, err := b.begin("delete", id); err != nil || collect {
		return err
	}
	c := b.c
	decided := false // as in put
	if _, err := c.v.modifyTx(b.tx.ctx, b.tx.tx, c.name, id, func(prev stored) (change, error) {
		if rev != nil && prev.rev != *rev {
			return change{}, &ConflictError{Collection: c.name, ID: id, Want: *rev, Got: prev.rev}
		}
		decided = prev.rev != 0 // a missing record is refused before writing
		return change{del: true}, nil
	}); err != nil {
		err = fmt.Errorf("delete %s/%s: %w", c.name, id, err)
		if decided {
			b.tx.spoil(err)
		}
		return err
	}
	return nil
}
