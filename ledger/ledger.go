package ledger

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/internal/batch"
	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/gate"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// Head is the ledger's last position and the MAC of the entry there. The
// empty ledger's head is the zero Head.
type Head struct {
	// Seq is the position of the last entry, 0 for an empty ledger.
	Seq uint64
	// MAC is the chain MAC of entry Seq (nil for an empty ledger).
	MAC []byte

	// people is the position of the last people entry (see people.go), 0
	// when there is none from linkFrom on; linkFrom is the first position
	// whose people entries are linked (their From names the one before),
	// 0 when the head was written before links were (head version 1).
	people, linkFrom uint64
	// alone names the one person who has held the data key up to Seq (the
	// ledger's window of Chained entries is open for them: see sign.go,
	// "One person"); "" when the window is closed or not known (a head
	// written before windows were, head version 1 or 2).
	alone string
	// cover and coverPeople describe the commit being built on a head
	// that has not been committed yet (a batch's, see batch.go): the
	// position of its first Covered entry (0: none, nothing to sign) and
	// whether that entry changes people.
	cover       uint64
	coverPeople bool
}

// Equal reports whether h and o name the same position with the same MAC.
func (h Head) Equal(o Head) bool {
	return h.Seq == o.Seq && hmac.Equal(h.MAC, o.MAC)
}

// maxBatchBytes bounds the encoded size of the entries of one append.
const maxBatchBytes = wire.LedgerMaxBatchBytes

// ledger is an append-only, hash-chained audit ledger kept in a store under
// a key prefix: the writable ledger of a vault, which only the vault holds
// (through wire.Ledger; users read it through vault.Audit). It is safe for
// concurrent use.
type ledger struct {
	store  stores.Store
	tr     stores.Transactor // nil when the store has no transactions
	sealer seal.Sealer
	mac    seal.MACer
	// macAppend is mac when it appends its MACs in place (chainMAC).
	macAppend seal.MACAppender
	dir       string // prefix + "_ledger/"
	headKey   string
	actor     string
	now       func() time.Time
	policy    cas.Policy
	pins      pins.Ledger
	signer    wire.LedgerSigner // nil: entries are not signed
	alone     func() bool       // nil: the ledger never writes Chained entries
	people    func(ctx context.Context) (map[string]wire.LedgerPerson, error)
	guard     func(get func(key string) (stores.Item, error)) error // nil: no check
	guardKs   []string                                              // the keys guard reads

	magic [tokenMagicLen]byte   // random prefix of this ledger's head tokens
	q     batch.Queue[*request] // Append, AppendFunc and Update calls
	run   commitRun             // the batch being committed (commitTx)

	// pinPassed: the last commit found the head past this device's pin
	// (another writer appended meanwhile), so the next one likely will
	// too and prefetches the pinned entry with the head (pinKeys).
	pinPassed atomic.Bool
	// foreign is the highest position of a head this ledger found, at
	// the start of a commit, that it had not written last (another writer
	// appended since its last commit): see ForeignThrough.
	foreign atomic.Uint64

	mu         sync.Mutex
	lastSealed []byte    // the head bytes this ledger last wrote in a transaction
	lastHead   headState // what lastSealed decodes to
	built      record    // the last entry putEntries built (signCommit)
	// unwritten is the last entry putEntries built in the batch's own
	// transaction, Covered, when it has not written it yet (hasUnwritten):
	// signCommit writes it signed if it is the commit's last, else the
	// next putEntries or signCommit writes it as it is. Owned by the
	// batch's leader.
	unwritten    record
	hasUnwritten bool

	// sum is the summary of the ledger's facts (summary.go); bg is the
	// context of its background catch-ups, cancelled by Close.
	sum    summary
	bg     context.Context
	bgStop context.CancelFunc

	gate gate.Gate // calls in flight; closed by Close
}

// Close makes l refuse new calls (appends, updates, reads, Head) with
// stores.ErrClosed and waits for the calls in flight to end: a call
// already queued for a batch is committed (and the pins raised) before
// Close returns, or fails. It does not close the store; it is
// idempotent and must not be called from inside an Update or AppendFunc
// function, nor from the body of a range over Read.
func (l *ledger) Close() error {
	l.bgStop() // a background catch-up of the summary ends at once
	if l.gate.Close() {
		ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
		defer cancel()
		l.flushCheckpoint(ctx)
	}
	return nil
}

// closeFlushTimeout bounds the write of the summary's checkpoint at Close.
const closeFlushTimeout = 5 * time.Second

// enter admits a call, or returns stores.ErrClosed once l is closing.
func (l *ledger) enter() error {
	if !l.gate.Enter() {
		return stores.ErrClosed
	}
	return nil
}

// writer is a vault's writable ledger as the vault holds it.
type writer = wire.Ledger[Entry, Head, Report]

func init() {
	wire.NewLedger = func(store stores.Store, sealer seal.Sealer, mac seal.MACer, prefix string, opts wire.LedgerOptions) writer {
		return newLedger(store, sealer, mac, prefix, opts)
	}
}

// newLedger returns the ledger stored in store under prefix+"_ledger/". It
// does no I/O. sealer protects the stored values and mac chains the
// entries; both must stay the same for the life of the ledger. The vault
// reaches it through wire.NewLedger.
func newLedger(store stores.Store, sealer seal.Sealer, mac seal.MACer, prefix string, opts wire.LedgerOptions) *ledger {
	l := &ledger{
		store:   store,
		sealer:  sealer,
		mac:     mac,
		dir:     prefix + dirName,
		headKey: prefix + dirName + headName,
		actor:   opts.Actor,
		now:     opts.Now,
		// A hold is waited for by runBatch, without the store's lock.
		policy:  cas.Policy{MaxAttempts: opts.MaxAttempts, ReturnHolds: true},
		pins:    opts.Pins,
		signer:  opts.Signer,
		alone:   opts.Alone,
		people:  opts.People,
		guard:   opts.Guard,
		guardKs: slices.Clone(opts.GuardKeys),
	}
	if tr, ok := store.(stores.Transactor); ok && store.Capabilities().Transactions {
		l.tr = tr
	}
	l.macAppend, _ = mac.(seal.MACAppender)
	if l.now == nil {
		l.now = time.Now
	}
	l.sum.init(factKinds)
	l.bg, l.bgStop = context.WithCancel(context.Background())
	if _, err := rand.Read(l.magic[:]); err != nil {
		panic("ledger: no randomness: " + err.Error())
	}
	l.q.Run, l.q.Cut = l.runBatch, l.cut
	l.run.bind(l)
	return l
}

// Head returns the ledger's current head.
func (l *ledger) Head(ctx context.Context) (Head, error) {
	if err := l.enter(); err != nil {
		return Head{}, fmt.Errorf("ledger head: %w", err)
	}
	defer l.gate.Exit()
	hs, _, err := l.loadHead(ctx)
	if err != nil {
		return Head{}, fmt.Errorf("ledger head: %w", err)
	}
	return hs.Head, nil
}

// Append records facts: it appends entries as one batch, all or none, at the
// positions following the head at commit time, and returns the position and
// MAC of the batch's last entry (the ledger may already have grown past it).
// Seq is assigned and a zero Time or empty Actor filled in; the caller's
// slice is not modified.
//
// Concurrent Append, AppendFunc and Update calls on one ledger are combined
// into one commit, so they do not race each other; a commit that loses to another
// writer (another ledger on the same store) is retried, within
// LedgerOptions.MaxAttempts, and then fails with ErrContention. Append without
// entries returns the head.
func (l *ledger) Append(ctx context.Context, entries ...Entry) (Head, error) {
	if len(entries) == 0 {
		return l.Head(ctx)
	}
	size, err := checkBatch(entries)
	if err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	if err := l.enter(); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	defer l.gate.Exit()
	return l.submit(ctx, &request{entries: entries, cost: size})
}

// AppendFunc records decisions: derive computes the entries from the head
// they will follow, and the append is fenced on that head. If another writer
// moves the head first, derive runs again on the fresh head; its earlier
// result is discarded, never written. derive may run several times and
// should only compute; it must not append to the same ledger. An error from
// derive ends the append and is returned unchanged (a panic in derive
// panics in the caller); no entries from derive means nothing is written,
// and the head derive saw is returned. Like Append calls, concurrent
// AppendFunc calls on one ledger share commits (with Append and Update
// calls) and do not race each other:
// each derive sees the head as it stands after the entries placed before
// its own.
func (l *ledger) AppendFunc(ctx context.Context, derive func(head Head) ([]Entry, error)) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	if err := l.enter(); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	defer l.gate.Exit()
	return l.submit(ctx, &request{derive: derive, cost: maxBatchBytes})
}

// AppendAfter appends entries only if the ledger's head is still expect, and
// otherwise fails with errStaleHead, writing nothing: the one-shot form of
// AppendFunc for callers that derive entries from what they read.
func (l *ledger) AppendAfter(ctx context.Context, expect Head, entries ...Entry) (Head, error) {
	if _, err := checkBatch(entries); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	return l.AppendFunc(ctx, func(h Head) ([]Entry, error) {
		if !h.Equal(expect) {
			return nil, fmt.Errorf("ledger append after %d: %w (head is at %d)", expect.Seq, errStaleHead, h.Seq)
		}
		return entries, nil
	})
}

// AppendTx appends entries inside a transaction on the ledger's store: it
// reads the head through tx and writes the entries and the new head through
// tx, so they commit or roll back with the transaction's other writes. It
// does not retry; a conflict surfaces from the transaction, which may run
// again. The returned head is valid only if tx commits.
//
// Inside Update (the way the SDK appends), tx holds the head as the batch
// leaves it, checked against the pin taken before the store's transaction
// began, and the head is written once when the batch commits. In a
// transaction the caller began itself, AppendTx reads and checks the stored
// head (against the pin as it is now: on a store whose transactions read a
// snapshot, such as badger, a head this process saw after that transaction
// began fails it as a rollback) and writes the new head itself.
func (l *ledger) AppendTx(ctx context.Context, tx stores.Tx, entries ...Entry) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	if err := l.enter(); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	defer l.gate.Exit()
	if _, err := checkBatch(entries); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	// In the caller's own transaction on a store of round trips, the head
	// and what the guard reads come in one step (a batch's transaction is
	// not a Prefetcher: it has them already).
	var pin *Head
	if _, ok := tx.(stores.Prefetcher); ok {
		p := l.pinned()
		pin = &p
		if err := l.prefetch(tx, l.pinKeys(p)); err != nil {
			return Head{}, fmt.Errorf("ledger append: %w", err)
		}
	}
	if bt, ok := tx.(*batchTx); ok && l.topTx(tx) {
		// An Update alone in its batch: append after the batch's head,
		// held by its transaction itself, without a token's round trip.
		nh, err := l.putEntries(tx, bt.head, entries, true)
		if err != nil {
			return Head{}, fmt.Errorf("ledger append: %w", err)
		}
		bt.head = nh
		return nh, nil
	}
	it, err := tx.Get(l.headKey)
	if err == nil {
		if h, ok := l.fromToken(it.Value); ok {
			// In a batch of Update: append after the batch's head.
			nh, err := l.putEntries(tx, h, entries, l.topTx(tx))
			if err != nil {
				return Head{}, fmt.Errorf("ledger append: %w", err)
			}
			if err := tx.Put(l.headKey, l.token(nh)); err != nil {
				return Head{}, fmt.Errorf("ledger append: %w", err)
			}
			return nh, nil
		}
	}
	if pin == nil {
		p := l.pinned()
		pin = &p
	}
	recs, hs, err := l.appendTx(tx, l.planOf(entries), *pin)
	if err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	return headOf(recs, hs), nil
}

// Update runs fn in a transaction of the ledger's store, together with the
// Append, AppendFunc and Update calls of this ledger that are waiting when
// it starts (one commit for all of them; see batch.go), and retries it when
// it conflicts with another writer (within LedgerOptions.MaxAttempts, then
// ErrContention). fn appends with AppendTx and may write other keys (a
// record and its entry); it may run several times. An error from fn drops
// fn's writes, and only fn's, and is returned unchanged; a panic in fn
// drops them too and panics in the caller. Writers that go through Update,
// Append and AppendFunc of one ledger never conflict with each other on the
// ledger's head, which matters on stores whose transactions are optimistic
// (badger), where concurrent transactions that all append would otherwise
// fail one another. The store must implement stores.Transactor, else
// stores.ErrNotSupported.
func (l *ledger) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return l.UpdateKeys(ctx, nil, fn)
}

// UpdateKeys is Update for a function that reads keys: on a store whose
// transactions read in round trips (stores.Prefetcher, PostgreSQL), the
// batch reads the keys of all its calls in one step before running them,
// in sorted order, so that transactions batching different keys cannot
// deadlock on them. Keys that fn does not read cost a read; keys it reads
// and did not name cost a round trip each. On any other store UpdateKeys is
// Update.
func (l *ledger) UpdateKeys(ctx context.Context, keys []string, fn func(tx stores.Tx) error) error {
	if l.tr == nil {
		return fmt.Errorf("ledger update: %w", stores.ErrNotSupported)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := l.enter(); err != nil {
		return fmt.Errorf("ledger update: %w", err)
	}
	defer l.gate.Exit()
	req := requests.Get().(*request)
	req.update, req.keys = fn, keys
	_, err := l.submit(ctx, req)
	req.recycle()
	return err
}

// planFunc builds the records to append after head.
type planFunc func(head Head) ([]record, error)

// planOf plans entries as they are.
func (l *ledger) planOf(entries []Entry) planFunc {
	return func(h Head) ([]record, error) {
		recs, _, err := l.buildSigned(h, entries)
		return recs, err
	}
}

// headOf is the head right after recs, the entries of one commit built
// after hs, or hs when nothing was appended.
func headOf(recs []record, hs Head) Head {
	if len(recs) == 0 {
		return hs
	}
	r := recs[len(recs)-1]
	h := Head{Seq: r.entry.Seq, MAC: slices.Clone(r.mac()), people: hs.people, linkFrom: hs.linkFrom, alone: hs.alone}
	if h.linkFrom == 0 {
		// The first append that links people entries: from its first
		// entry on (build linked its people entries from 0).
		h.linkFrom, h.people = recs[0].entry.Seq, 0
	}
	if hs.Seq == 0 {
		h.alone = genesisOwner(&recs[0].entry)
	}
	for i := range recs {
		e := &recs[i].entry
		if isPeopleKind(e.Kind) {
			h.people = e.Seq
		}
		if closesWindow(e, h.alone) {
			h.alone = ""
		}
		if (e.Covered || len(e.Signature) > 0) && h.cover == 0 {
			h.cover, h.coverPeople = e.Seq, isPeopleKind(e.Kind)
		}
	}
	return h.committed()
}

// checkBatch rejects invalid entries and batches over maxBatchBytes, and
// returns a bound of the batch's encoded size.
func checkBatch(entries []Entry) (int, error) {
	size := 0
	for i := range entries {
		if err := entries[i].check(); err != nil {
			return 0, err
		}
		size += entries[i].encodedLen()
	}
	if size > maxBatchBytes {
		return 0, fmt.Errorf("%w: about %d bytes (at most %d)", errBatchTooLarge, size, maxBatchBytes)
	}
	return size, nil
}

// commitCAS runs one append attempt after another, by compare-and-swap of
// the head on a store without transactions, until one commits. It returns
// the appended records and the head they follow.
func (l *ledger) commitCAS(ctx context.Context, plan planFunc) ([]record, Head, error) {
	var (
		recs []record
		head Head
	)
	// Writers in other processes race on the head; where the store can
	// lock for all of them, runBatch holds that lock.
	attempts, err := cas.Do(ctx, l.policy, func(int) error {
		var err error
		recs, head, err = l.appendCAS(ctx, plan)
		return err
	})
	switch {
	case err == nil:
		return recs, head, nil
	case errors.Is(err, cas.ErrExhausted):
		return nil, Head{}, fmt.Errorf("ledger append: %w after %d attempts", ErrContention, attempts)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, Head{}, err
	default:
		return nil, Head{}, fmt.Errorf("ledger append: %w", err)
	}
}

// pinned returns the device's pin, taken before a head is read.
//
// In a transaction the pin is taken before the transaction begins. A
// transaction may read a snapshot taken when it began (badger's), older
// than heads that this process saw, and pinned, while it ran; a pin taken
// inside would make such an honest, merely stale, read look like a
// rollback. Every head pinned before the transaction began was committed
// before it began, so its snapshot holds that head or a later one unless
// the store rolled back.
func (l *ledger) pinned() Head {
	if l.pins == nil {
		return Head{}
	}
	seq, mac := l.pins.LedgerPin(l.dir)
	return Head{Seq: seq, MAC: mac}
}

// checkPin fails when h, read after pin was taken, cannot follow it: a lower
// seq, or the pinned seq with another MAC. A pin raised after the read (by
// this process's own appends) is not held against it.
func (l *ledger) checkPin(h, pin Head) error {
	if l.pins == nil || h.Seq > pin.Seq || (h.Seq == pin.Seq && hmac.Equal(h.MAC, pin.MAC)) {
		return nil
	}
	if err := l.pins.CheckLedger(l.dir, h.Seq, h.MAC); err != nil {
		return err
	}
	return nil
}

// checkPinEntry fails a commit whose head hs has moved past pin when the
// entry at the pinned position is not the one pinned (another MAC there):
// the store serves another history than the one this device saw, grown
// past the point where it saw it (a hub that shows devices two histories,
// then this one the other's). checkPin alone lets such a head through,
// being further than the pin, and the commit would write on that other
// history; readers catch it only as they pass the pinned position. get
// reads through the commit (the entry is prefetched with the head on a
// store of round trips). The error is the Pins' own (a rollback).
func (l *ledger) checkPinEntry(get func(key string) (stores.Item, error), hs headState, pin Head) error {
	passed := l.pins != nil && pin.Seq != 0 && hs.Seq > pin.Seq
	l.pinPassed.Store(passed)
	if !passed {
		return nil
	}
	var mac []byte
	if stored := hs.Seq - uint64(len(hs.pending)); pin.Seq > stored {
		mac = hs.pending[pin.Seq-stored-1].mac()
	} else {
		key := l.entryKey(pin.Seq)
		it, err := get(key)
		if errors.Is(err, stores.ErrNotFound) {
			return &GapError{Want: pin.Seq}
		}
		if err != nil {
			return err
		}
		r, err := l.openEntry(key, pin.Seq, it.Value, true)
		if err != nil {
			return err
		}
		mac = r.mac()
	}
	if hmac.Equal(mac, pin.MAC) {
		return nil
	}
	return l.pins.CheckLedger(l.dir, pin.Seq, mac)
}

// pinKeys is the key of the pinned entry, which a commit reads when the
// head moved past it (checkPinEntry), for a prefetch: when the last
// commit found the head past the pin, so that on a store of round trips
// the read costs none; a lone writer, whose head stays at its pin,
// fetches nothing more (and pays one trip the rare time another writer
// came in between).
func (l *ledger) pinKeys(pin Head) []string {
	if l.pins == nil || pin.Seq == 0 || !l.pinPassed.Load() {
		return nil
	}
	return []string{l.entryKey(pin.Seq)}
}

// raisePin moves the pin to h, a head known to be committed. Its error says
// the pin could not be made durable.
func (l *ledger) raisePin(h Head) error {
	if l.pins == nil || h.Seq == 0 {
		return nil
	}
	if err := l.pins.RaiseLedger(l.dir, h.Seq, h.MAC); err != nil {
		return fmt.Errorf("ledger head %d: %w: %w", h.Seq, ErrUnpinned, err)
	}
	return nil
}

// appendTx appends in a transaction the caller began itself: entries and
// head are written together. A head left with pending entries by a
// compare-and-swap writer has them written out too. pin is the device's pin
// as it was before the head was read.
func (l *ledger) appendTx(tx stores.Tx, plan planFunc, pin Head) ([]record, Head, error) {
	hs, err := l.readHeadTx(tx)
	if err != nil {
		return nil, Head{}, err
	}
	if err := l.checkPin(hs.Head, pin); err != nil {
		return nil, Head{}, err
	}
	if err := l.checkPinEntry(tx.Get, hs, pin); err != nil {
		return nil, Head{}, err
	}
	for _, r := range hs.pending {
		if err := l.putEntry(tx, r); err != nil {
			return nil, Head{}, err
		}
	}
	recs, err := plan(hs.Head)
	if err != nil || len(recs) == 0 {
		return nil, hs.Head, err
	}
	if err := l.check(tx.Get); err != nil {
		return nil, Head{}, err
	}
	for _, r := range recs {
		if err := l.putEntry(tx, r); err != nil {
			return nil, Head{}, err
		}
	}
	sealed, err := l.sealHead(headOf(recs, hs.Head), nil)
	if err != nil {
		return nil, Head{}, err
	}
	if err := tx.Put(l.headKey, sealed); err != nil {
		return nil, Head{}, err
	}
	return recs, hs.Head, nil
}

// appendCAS is one append attempt on a store without transactions. The head
// record is the commit point and a write-ahead log of the batch: the new head
// carries the batch's entries and is written by compare-and-swap; only then
// are the entries written at their own keys, and the head rewritten without
// them. So nothing is ever written at a position before it is committed, and
// a writer with a stale view cannot overwrite a committed entry: every write
// to an entry key writes that position's committed content. A crash after
// the commit leaves the entries in the head, where readers find them and the
// next append writes them out before it commits its own.
func (l *ledger) appendCAS(ctx context.Context, plan planFunc) ([]record, Head, error) {
	pin := l.pinned()
	hs, version, err := l.loadHeadAfter(ctx, pin)
	if err != nil {
		return nil, Head{}, err
	}
	if err := l.checkPinEntry(func(key string) (stores.Item, error) { return l.store.Get(ctx, key) }, hs, pin); err != nil {
		return nil, Head{}, err
	}
	if err := l.materialize(ctx, hs.pending); err != nil {
		return nil, Head{}, err
	}
	recs, err := plan(hs.Head)
	if err != nil || len(recs) == 0 {
		return nil, hs.Head, err
	}
	// Without a transaction the guard reads just before the commit: a
	// revocation committed in between is not seen (see wire.LedgerOptions).
	if err := l.check(func(key string) (stores.Item, error) { return l.store.Get(ctx, key) }); err != nil {
		return nil, Head{}, err
	}
	head := headOf(recs, hs.Head)
	sealed, err := l.sealHead(head, recs)
	if err != nil {
		return nil, Head{}, err
	}
	version, err = l.store.CompareAndSwap(ctx, l.headKey, version, sealed)
	if err != nil {
		return nil, Head{}, err
	}
	// Committed. What follows only moves the entries out of the head; if it
	// fails, readers and the next append use the copies in the head.
	if l.materialize(ctx, recs) == nil {
		if sealed, err := l.sealHead(head, nil); err == nil {
			// Losing this race is fine: whoever moved the head wrote our entries first.
			_, _ = l.store.CompareAndSwap(ctx, l.headKey, version, sealed)
		}
	}
	return recs, hs.Head, nil
}

// check asks the guard, if any, whether a commit may append, reading
// through get.
func (l *ledger) check(get func(key string) (stores.Item, error)) error {
	if l.guard == nil {
		return nil
	}
	return l.guard(get)
}

// prefetch fetches the head, the guard's keys and more in one step, on a
// transaction whose reads are round trips.
func (l *ledger) prefetch(tx stores.Tx, more []string) error {
	p, ok := tx.(stores.Prefetcher)
	if !ok {
		return nil
	}
	keys := make([]string, 0, 1+len(l.guardKs)+len(more))
	keys = append(append(append(keys, l.headKey), l.guardKs...), more...)
	return p.Prefetch(keys)
}

// materialize writes committed entries at their own keys. Writing one twice
// is harmless: it is the same entry.
func (l *ledger) materialize(ctx context.Context, recs []record) error {
	for _, r := range recs {
		key := l.entryKey(r.entry.Seq)
		sealed, err := l.sealer.Seal(key, r.plain)
		if err != nil {
			return fmt.Errorf("seal entry: %w", err)
		}
		if _, err := l.store.Put(ctx, key, sealed); err != nil {
			return err
		}
	}
	return nil
}

// build assigns positions after head, fills in defaults, and chains the entries.
// It returns the head after them, with the state of the commit they
// continue (see Head).
func (l *ledger) build(head Head, entries []Entry) ([]record, Head, error) {
	recs := make([]record, len(entries))
	b := l.chainAfter(head)
	b.chunk = chunkFor(len(entries))
	for i, e := range entries {
		var err error
		if recs[i], err = b.next(e); err != nil {
			return nil, Head{}, err
		}
	}
	return recs, b.head(), nil
}

// genesisOwner returns the author of e, the first entry of a ledger, when
// it opens the window of one person: Chained, with its author's signing
// key. "" otherwise.
func genesisOwner(e *Entry) string {
	if e.Seq == 1 && e.Chained && len(e.SigningKey) == signingKeySize {
		return e.Actor
	}
	return ""
}

// closesWindow reports whether e, an entry written while the window of
// owner is open, closes it: an entry by someone else, a grant to someone
// else, an upgrade of a keyring entry of layout version 1 (a vault that
// may have had several holders), a renewal of the owner's keys (whoever
// held their old secret or a used recovery code holds the chain key too).
func closesWindow(e *Entry, owner string) bool {
	return owner != "" && (e.Actor != owner || e.Kind == PersonGranted && e.ID != owner || e.Kind == KeyringUpgraded ||
		e.Kind == KeysRenewed)
}

// committed returns h, the head after the last entry of a commit, as the
// commit leaves it: a commit that is signed closes the window unless its
// signed entries begin with a change of people (a one-person vault's own
// rotation or its genesis); a writer who learns of a second person signs
// its next commit, which closes it.
func (h Head) committed() Head {
	if h.cover != 0 && !h.coverPeople {
		h.alone = ""
	}
	h.cover, h.coverPeople = 0, false
	return h
}

// chainer builds entries one at a time after a head: the positions, the
// defaults and the chain (build, putEntries).
type chainer struct {
	l    *ledger
	now  time.Time
	pub  []byte // the signer's key: entries are Covered, or Chained
	prev []byte // the MAC of the entry before
	seq  uint64 // the position of the entry before
	// people and linkFrom are those of the head after the entry before
	// (see Head): people entries are linked, each naming the one before
	// (From), so that the people of the ledger are read without the rest.
	people, linkFrom uint64
	// alone, cover and coverPeople are the head's (see Head); chained is
	// true while the entries are built Chained: the window is open for
	// the ledger's person, who is, as far as the vault knows, still the
	// only one (LedgerOptions.Alone), and the commit has no Covered entry.
	alone       string
	cover       uint64
	coverPeople bool
	chained     bool
	// chunk, when not zero, is the size of the buffers the records'
	// plaintexts are carved from (see room), for a run of entries.
	chunk int
	arena []byte
}

// chunkFor returns the chunk size for a run of n entries: the plaintexts
// of a run share buffers instead of taking one allocation each.
func chunkFor(n int) int {
	if n < 2 {
		return 0
	}
	return min(n*160, 16<<10)
}

// room returns k bytes for a record's plaintext: carved from the run's
// buffers (capped, so that an append to one never reaches the next), or
// allocated alone.
func (c *chainer) room(k int) []byte {
	if c.chunk == 0 {
		return make([]byte, k)
	}
	if cap(c.arena)-len(c.arena) < k {
		c.arena = make([]byte, 0, max(k, c.chunk))
	}
	at := len(c.arena)
	c.arena = c.arena[:at+k]
	return c.arena[at : at+k : at+k]
}

// encodings holds scratch buffers an entry is encoded and chained in
// before it is copied to its record at its exact size.
var encodings = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// chainAfter returns a chainer of entries after head.
func (l *ledger) chainAfter(head Head) chainer {
	c := chainer{l: l, now: l.now().UTC(), prev: head.MAC, seq: head.Seq, people: head.people, linkFrom: head.linkFrom,
		alone: head.alone, cover: head.cover, coverPeople: head.coverPeople}
	if l.signer != nil {
		c.pub = l.signer.Public()
	}
	owner := c.alone
	if head.Seq == 0 {
		owner = l.actor // the first entry opens the window (genesisOwner)
	}
	c.chained = c.pub != nil && c.cover == 0 && owner != "" && owner == l.actor && l.alone != nil && l.alone()
	if c.chained {
		c.alone = owner
	}
	return c
}

// next builds e as the entry after the last one.
func (c *chainer) next(e Entry) (record, error) {
	l := c.l
	seq := c.seq + 1
	e.Seq = seq
	if e.Time.IsZero() {
		e.Time = c.now
	}
	if e.Actor == "" {
		e.Actor = l.actor
	}
	if c.linkFrom == 0 {
		// The first append that links people entries: from this entry
		// on, the first linked entry naming none.
		c.linkFrom, c.people = seq, 0
	}
	if isPeopleKind(e.Kind) {
		e.From, c.people = c.people, seq
	}
	if c.chained && (isPeopleKind(e.Kind) || e.Actor != c.alone) {
		// A change of people is signed (it and the rest of the commit).
		c.chained = false
	}
	bp := encodings.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			encodings.Put(bp)
		}
	}()
	var (
		enc []byte
		err error
	)
	switch {
	case c.chained:
		e.Signature, e.Covered, e.Chained = nil, false, true
		if seq == 1 && e.SigningKey == nil {
			e.SigningKey = c.pub // the genesis: its author's key
		}
		enc, err = e.AppendBinary((*bp)[:0])
	case c.pub != nil:
		enc, err = l.coverEntry(&e, c.pub, (*bp)[:0])
		if c.cover == 0 {
			c.cover, c.coverPeople = seq, isPeopleKind(e.Kind)
		}
	default:
		enc, err = e.AppendBinary((*bp)[:0])
	}
	*bp = enc[:0]
	if err != nil {
		return record{}, err
	}
	if seq == 1 {
		c.alone = genesisOwner(&e)
	}
	if closesWindow(&e, c.alone) {
		c.alone, c.chained = "", false
	}
	n := len(enc)
	enc = l.appendChainMAC(enc, c.prev, seq, enc)
	*bp = enc[:0]
	plain := c.room(len(enc))
	copy(plain, enc)
	mac := plain[n:]
	if len(mac) == 0 || len(mac) > maxMAC {
		return record{}, fmt.Errorf("ledger: MACer returned %d bytes (want 1 to %d)", len(mac), maxMAC)
	}
	r := record{entry: e, plain: plain, encLen: n, prev: c.prev}
	c.prev, c.seq = mac, seq
	return r, nil
}

// head returns the head after the last entry built (the head the chainer
// started from when it built none), with the commit's state.
func (c *chainer) head() Head {
	mac := c.prev
	if c.chunk != 0 {
		// Not to keep the run's shared buffer alive for as long as the
		// head is kept.
		mac = slices.Clone(mac)
	}
	// Otherwise the MAC is the end of the last record's plaintext, which
	// is its own allocation and never modified.
	return Head{Seq: c.seq, MAC: mac, people: c.people, linkFrom: c.linkFrom,
		alone: c.alone, cover: c.cover, coverPeople: c.coverPeople}
}
