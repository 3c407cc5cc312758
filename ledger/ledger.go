package ledger

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/stores"
)

// Sealer encrypts and authenticates the ledger's stored values, binding each
// to the store key it lives at, so that a value copied to another key fails
// to open. Open must fail for any value Seal did not make for that key.
type Sealer interface {
	// Seal encrypts plaintext for storage at key.
	Seal(key string, plaintext []byte) ([]byte, error)
	// Open authenticates and decrypts a value stored at key.
	Open(key string, sealed []byte) ([]byte, error)
}

// MACer computes the keyed MAC that chains the entries. It must encode its
// parts unambiguously (as crypto.Key.MAC does) and return at most 255 bytes.
type MACer interface {
	// MAC returns the MAC of parts.
	MAC(parts ...[]byte) []byte
}

// Options configures a Ledger. The zero value means the documented defaults.
type Options struct {
	// Actor is written into entries appended without one.
	Actor string
	// Now stamps entries appended with a zero Time; nil means time.Now.
	Now func() time.Time
	// MaxAttempts bounds the optimistic retries of one append; 0 means
	// cas.DefaultMaxAttempts (16).
	MaxAttempts int
}

// Head is the ledger's last position and the MAC of the entry there. The
// empty ledger's head is the zero Head.
type Head struct {
	// Seq is the position of the last entry, 0 for an empty ledger.
	Seq uint64
	// MAC is the chain MAC of entry Seq (nil for an empty ledger).
	MAC []byte
}

// Equal reports whether h and o name the same position with the same MAC.
func (h Head) Equal(o Head) bool {
	return h.Seq == o.Seq && hmac.Equal(h.MAC, o.MAC)
}

// MaxBatchBytes bounds the encoded size of the entries of one append.
const MaxBatchBytes = 1 << 20

// groupMaxEntries bounds how many entries concurrent Append calls combine
// into one commit.
const groupMaxEntries = 4096

// Ledger is an append-only, hash-chained audit ledger kept in a store under
// a key prefix. Create it with New. A Ledger is safe for concurrent use.
type Ledger struct {
	store   stores.Store
	tr      stores.Transactor // nil when the store has no transactions
	sealer  Sealer
	mac     MACer
	dir     string // prefix + "_ledger/"
	headKey string
	actor   string
	now     func() time.Time
	policy  cas.Policy

	mu      sync.Mutex
	queue   []*request // Append calls waiting for a commit
	leading bool       // a goroutine is committing a group
}

// New returns the ledger stored in store under prefix+"_ledger/". It does no
// I/O. sealer protects the stored values and mac chains the entries; both
// must stay the same for the life of the ledger.
func New(store stores.Store, sealer Sealer, mac MACer, prefix string, opts Options) *Ledger {
	l := &Ledger{
		store:   store,
		sealer:  sealer,
		mac:     mac,
		dir:     prefix + dirName,
		headKey: prefix + dirName + headName,
		actor:   opts.Actor,
		now:     opts.Now,
		policy:  cas.Policy{MaxAttempts: opts.MaxAttempts},
	}
	if tr, ok := store.(stores.Transactor); ok && store.Capabilities().Transactions {
		l.tr = tr
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

// Head returns the ledger's current head.
func (l *Ledger) Head(ctx context.Context) (Head, error) {
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
// Concurrent Append calls on one Ledger are combined into one commit, so they
// do not race each other; a commit that loses to another writer (another
// Ledger on the same store) is retried, within Options.MaxAttempts, and then
// fails with ErrContention. Append without entries returns the head.
func (l *Ledger) Append(ctx context.Context, entries ...Entry) (Head, error) {
	if len(entries) == 0 {
		return l.Head(ctx)
	}
	if err := checkBatch(entries); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	return l.group(ctx, entries)
}

// AppendFunc records decisions: derive computes the entries from the head
// they will follow, and the append is fenced on that head. If another writer
// moves the head first, derive runs again on the fresh head; its earlier
// result is discarded, never written. derive may run several times and
// should only compute. An error from derive ends the append and is returned
// unchanged; no entries from derive means nothing is written and the head is
// returned.
func (l *Ledger) AppendFunc(ctx context.Context, derive func(head Head) ([]Entry, error)) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	recs, hs, err := l.commit(ctx, func(h Head) ([]Entry, error) {
		entries, err := derive(h)
		if err != nil {
			return nil, &stopError{err}
		}
		if err := checkBatch(entries); err != nil {
			return nil, &stopError{fmt.Errorf("ledger append: %w", err)}
		}
		return entries, nil
	})
	if err != nil {
		return Head{}, err
	}
	return headOf(recs, hs), nil
}

// AppendAfter appends entries only if the ledger's head is still expect, and
// otherwise fails with ErrStaleHead, writing nothing: the one-shot form of
// AppendFunc for callers that derive entries from what they read.
func (l *Ledger) AppendAfter(ctx context.Context, expect Head, entries ...Entry) (Head, error) {
	if err := checkBatch(entries); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	return l.AppendFunc(ctx, func(h Head) ([]Entry, error) {
		if !h.Equal(expect) {
			return nil, fmt.Errorf("ledger append after %d: %w (head is at %d)", expect.Seq, ErrStaleHead, h.Seq)
		}
		return entries, nil
	})
}

// AppendTx appends entries inside the caller's transaction on the ledger's
// store: it reads the head through tx and writes the entries and the new
// head through tx, so they commit or roll back with the caller's other
// writes. It does not retry; a conflict surfaces from the caller's Update,
// which may run again. The returned head is valid only if tx commits.
func (l *Ledger) AppendTx(ctx context.Context, tx stores.Tx, entries ...Entry) (Head, error) {
	if err := ctx.Err(); err != nil {
		return Head{}, err
	}
	if err := checkBatch(entries); err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	recs, hs, err := l.appendTx(tx, fixed(entries))
	if err != nil {
		return Head{}, fmt.Errorf("ledger append: %w", err)
	}
	return headOf(recs, hs), nil
}

// deriveFunc returns the entries to append after head.
type deriveFunc func(head Head) ([]Entry, error)

func fixed(entries []Entry) deriveFunc {
	return func(Head) ([]Entry, error) { return entries, nil }
}

// stopError carries an error that must end the retry loop even if it
// matches stores.ErrConflict (it has no Unwrap, so cas.Do does not see one).
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }

// headOf is the head right after recs, or hs when nothing was appended.
func headOf(recs []record, hs Head) Head {
	if len(recs) == 0 {
		return hs
	}
	r := recs[len(recs)-1]
	return Head{Seq: r.entry.Seq, MAC: slices.Clone(r.mac())}
}

// checkBatch rejects invalid entries and batches over MaxBatchBytes.
func checkBatch(entries []Entry) error {
	size := 0
	for i := range entries {
		if err := entries[i].check(); err != nil {
			return err
		}
		size += entries[i].encodedLen()
	}
	if size > MaxBatchBytes {
		return fmt.Errorf("%w: about %d bytes (at most %d)", ErrBatchTooLarge, size, MaxBatchBytes)
	}
	return nil
}

// commit runs one append attempt after another until one commits, using the
// store's transactions when it has them and compare-and-swap on the head
// otherwise. It returns the appended records and the head they follow.
func (l *Ledger) commit(ctx context.Context, derive deriveFunc) ([]record, Head, error) {
	var (
		recs []record
		head Head
	)
	attempts, err := cas.Do(ctx, l.policy, func(int) error {
		var err error
		if l.tr != nil {
			err = l.tr.Update(ctx, func(tx stores.Tx) error {
				var err error
				recs, head, err = l.appendTx(tx, derive)
				return err
			})
		} else {
			recs, head, err = l.appendCAS(ctx, derive)
		}
		return err
	})
	var stop *stopError
	switch {
	case err == nil:
		return recs, head, nil
	case errors.As(err, &stop):
		return nil, Head{}, stop.err
	case errors.Is(err, cas.ErrExhausted):
		return nil, Head{}, fmt.Errorf("ledger append: %w after %d attempts", ErrContention, attempts)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return nil, Head{}, err
	default:
		return nil, Head{}, fmt.Errorf("ledger append: %w", err)
	}
}

// appendTx is one append attempt inside a transaction: entries and head are
// written together. A head left with pending entries by a compare-and-swap
// writer has them written out too.
func (l *Ledger) appendTx(tx stores.Tx, derive deriveFunc) ([]record, Head, error) {
	var hs headState
	it, err := tx.Get(l.headKey)
	switch {
	case errors.Is(err, stores.ErrNotFound):
	case err != nil:
		return nil, Head{}, err
	default:
		if hs, err = l.openHead(it.Value); err != nil {
			return nil, Head{}, err
		}
	}
	put := func(r record) error {
		sealed, err := l.sealer.Seal(l.entryKey(r.entry.Seq), r.plain)
		if err != nil {
			return fmt.Errorf("seal entry: %w", err)
		}
		return tx.Put(l.entryKey(r.entry.Seq), sealed)
	}
	for _, r := range hs.pending {
		if err := put(r); err != nil {
			return nil, Head{}, err
		}
	}
	entries, err := derive(hs.Head)
	if err != nil || len(entries) == 0 {
		return nil, hs.Head, err
	}
	recs, err := l.build(hs.Head, entries)
	if err != nil {
		return nil, Head{}, err
	}
	for _, r := range recs {
		if err := put(r); err != nil {
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
func (l *Ledger) appendCAS(ctx context.Context, derive deriveFunc) ([]record, Head, error) {
	hs, version, err := l.loadHead(ctx)
	if err != nil {
		return nil, Head{}, err
	}
	if err := l.materialize(ctx, hs.pending); err != nil {
		return nil, Head{}, err
	}
	entries, err := derive(hs.Head)
	if err != nil || len(entries) == 0 {
		return nil, hs.Head, err
	}
	recs, err := l.build(hs.Head, entries)
	if err != nil {
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

// materialize writes committed entries at their own keys. Writing one twice
// is harmless: it is the same entry.
func (l *Ledger) materialize(ctx context.Context, recs []record) error {
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
func (l *Ledger) build(head Head, entries []Entry) ([]record, error) {
	now := l.now().UTC()
	recs := make([]record, len(entries))
	prev, seq := head.MAC, head.Seq
	for i, e := range entries {
		seq++
		e.Seq = seq
		if e.Time.IsZero() {
			e.Time = now
		}
		if e.Actor == "" {
			e.Actor = l.actor
		}
		plain, err := e.AppendBinary(make([]byte, 0, e.encodedLen()+64))
		if err != nil {
			return nil, err
		}
		mac := l.chainMAC(prev, seq, plain)
		if len(mac) == 0 || len(mac) > maxMAC {
			return nil, fmt.Errorf("ledger: MACer returned %d bytes (want 1 to %d)", len(mac), maxMAC)
		}
		recs[i] = record{entry: e, plain: append(plain, mac...), encLen: len(plain)}
		prev = mac
	}
	return recs, nil
}

// request is one Append call waiting in the group-commit queue.
type request struct {
	ctx      context.Context
	entries  []Entry
	wake     chan struct{} // receives once: done, or promoted to leader
	promoted bool          // guarded by Ledger.mu
	head     Head
	err      error
}

// group commits entries together with those of concurrent Append calls: the
// first caller leads and commits everything queued (up to groupMaxEntries
// entries) in one commit, then hands the lead to the next waiting caller.
// Each call still commits all or none of its own entries.
func (l *Ledger) group(ctx context.Context, entries []Entry) (Head, error) {
	req := &request{ctx: ctx, entries: entries, wake: make(chan struct{}, 1)}
	l.mu.Lock()
	l.queue = append(l.queue, req)
	lead := !l.leading
	l.leading = true
	l.mu.Unlock()
	if !lead {
		select {
		case <-req.wake:
		case <-ctx.Done():
			l.mu.Lock()
			if i := slices.Index(l.queue, req); i >= 0 && !req.promoted {
				l.queue = slices.Delete(l.queue, i, i+1)
				l.mu.Unlock()
				return Head{}, ctx.Err()
			}
			l.mu.Unlock()
			<-req.wake // in a commit already, or just promoted: see it through
		}
		l.mu.Lock()
		lead = req.promoted
		l.mu.Unlock()
		if !lead {
			return req.head, req.err
		}
	}
	l.lead(ctx)
	return req.head, req.err
}

// lead commits the requests at the front of the queue (the leader's own
// first) and then passes the lead on.
func (l *Ledger) lead(ctx context.Context) {
	l.mu.Lock()
	n, count := 0, 0
	for n < len(l.queue) && (n == 0 || count+len(l.queue[n].entries) <= groupMaxEntries) {
		count += len(l.queue[n].entries)
		n++
	}
	batch := slices.Clone(l.queue[:n])
	l.queue = slices.Delete(l.queue, 0, n)
	l.mu.Unlock()

	all := batch[0].entries
	if len(batch) > 1 {
		all = make([]Entry, 0, count)
		for _, r := range batch {
			all = append(all, r.entries...)
		}
	}
	var (
		recs     []record
		err      error
		panicked any
	)
	func() {
		// A panic (in the sealer, say) must not strand the waiting callers
		// or the lead: they get an error, and the panic goes on afterwards.
		defer func() {
			if p := recover(); p != nil {
				panicked = p
				err = fmt.Errorf("ledger append: panic during commit: %v", p)
			}
		}()
		recs, _, err = l.commit(ctx, fixed(all))
	}()
	if panicked != nil {
		defer panic(panicked)
	}

	var retry []*request
	off := 0
	for i, r := range batch {
		switch {
		case err == nil:
			off += len(r.entries)
			r.head = headOf(recs[:off], Head{})
		case i > 0 && ctx.Err() != nil && r.ctx.Err() == nil:
			// The leader gave up, not this caller: queue it again.
			retry = append(retry, r)
			continue
		default:
			r.err = err
		}
		if i > 0 {
			r.wake <- struct{}{}
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(retry, l.queue...)
	if len(l.queue) == 0 {
		l.leading = false
		return
	}
	next := l.queue[0]
	next.promoted = true
	next.wake <- struct{}{}
}
