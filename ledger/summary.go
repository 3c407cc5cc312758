package ledger

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/stores"
)

// FactKind is one kind of fact that a ledger's summary keeps.
//
// Some checks need what only the whole ledger knows: the highest number it
// records for a counter, whether a period was closed, who holds which role.
// Reading the whole ledger for them costs time in proportion to its length
// (seconds at millions of entries). A summary keeps such facts instead,
// folded from the entries in ledger order, one state per kind, and bound to
// the position and chain MAC of the last entry folded:
//
//   - In memory, each commit of the ledger folds its own entries into the
//     summary as it commits them (when the summary is current at the head
//     the commit follows), so a process that writes keeps it current
//     without reading anything.
//   - A query (Facts) first reads the ledger's head and folds the entries
//     after the summary's position (those other writers committed), each
//     checked in the chain from the summary's own entry: the facts it
//     answers with hold through the head as it was when the query began.
//   - Every checkpointEvery entries, the summary is stored sealed as a
//     checkpoint at prefix+"_ledger/checkpoint" (outside any commit, in
//     the background, and at Close), so that the next process loads it and
//     reads only the entries after it: its first query costs a few
//     thousand entries at most, however long the ledger.
//
// A checkpoint is trusted only as the chain confirms it: its position must
// be at or below the head and the entry there must carry the checkpoint's
// MAC (a ledger behind its checkpoint, or another entry at its position, is
// a rollback of the ledger: an error matching pins.ErrRollback, as
// vault.ErrRollback). A checkpoint that does not open is ErrTampered; one
// the store deletes or replays older is merely a longer read; a store
// cannot forge one (it is sealed with the vault's key and bound to its key).
//
// To add a kind: write its state (Facts), whose Fold must depend only on
// the entries folded before, in order; give it a Name that never changes
// once stored (a new meaning takes a new name, "people/2"); and add it to
// factKinds. A checkpoint without a section of a kind this ledger keeps is
// not used (the summary is rebuilt from the ledger once, and the next
// checkpoint holds every kind); a section of a kind it does not know is
// ignored.
type FactKind interface {
	// Name names the kind's section in a stored checkpoint.
	Name() string
	// New returns the facts of an empty ledger.
	New() Facts
}

// Facts is the state of one FactKind, as folded from a ledger's entries.
// Its methods are called with the summary's lock held, never concurrently.
type Facts interface {
	// Fold adds what e, the entry after those folded so far, says.
	Fold(e *Entry)
	// AppendBinary appends the state's encoding, for a checkpoint.
	AppendBinary(b []byte) ([]byte, error)
	// UnmarshalBinary replaces the state with the one b encodes (bytes
	// that do not decode give an error matching ErrMalformed).
	UnmarshalBinary(b []byte) error
}

// factKinds are the kinds every ledger's summary keeps.
var factKinds = []FactKind{numberFactKind{}}

// Storage of the checkpoint: prefix + "_ledger/checkpoint" (it sorts after
// every position and before the head), sealed, its plaintext
//
//	[1] version (1)
//	uvarint seq, uvarint len(MAC), MAC        the position folded through and its entry's MAC
//	uvarint n, then n times                   one section per kind
//	    uvarint len(name), name, uvarint len(data), data
const (
	checkpointName    = "checkpoint"
	checkpointVersion = 1
	// maxCheckpointBytes bounds a checkpoint's encoding: a summary larger
	// than this (tens of thousands of counters) is not stored, and each
	// process reads the ledger since the last one that was.
	maxCheckpointBytes = 1 << 20
	// maxKindName bounds the name of a kind.
	maxKindName = 64
	// defaultCheckpointEvery is how many entries a checkpoint may lag the
	// head before one is stored again.
	defaultCheckpointEvery = 1024
	// maxInbox bounds the entries of commits kept for the summary while a
	// query holds it; beyond, they are read back from the ledger.
	maxInbox = 4096
)

// summary is a ledger's summary of facts (see FactKind).
type summary struct {
	kinds []FactKind
	every uint64 // checkpointEvery

	// mu guards the fields below. A query holds it across its reads of the
	// ledger; a commit only tries it (a commit waiting for a read would
	// stall every writer), and leaves its entries in the inbox when it is
	// taken.
	mu      sync.Mutex
	loaded  bool
	through Head    // the facts are folded through this entry
	facts   []Facts // one per kind, in the order of kinds
	saved   uint64  // the newest checkpoint known to be stored (0: none)

	inMu    sync.Mutex // guards inbox; never held across a read
	inbox   []inboxCommit
	inboxed int  // the entries of the commits in inbox
	lost    bool // commits were dropped from the inbox

	running atomic.Bool    // a background catch-up is running
	bgRuns  sync.WaitGroup // background catch-ups started (tests wait for them)
	wrote   atomic.Bool    // this ledger committed entries (Close may store a checkpoint)

	// The commit in flight: the head it follows and its entries, collected
	// by putEntries; owned by the batch's leader (under the ledger's mu).
	colStart Head
	colBase  uint64
	col      []Entry
}

// inboxCommit is a commit the summary did not fold when it committed.
type inboxCommit struct {
	start, end Head
	entries    []Entry
}

func (s *summary) init(kinds []FactKind) {
	s.kinds = kinds
	s.every = defaultCheckpointEvery
}

// kindIndex returns the index of the kind named name, or -1.
func (s *summary) kindIndex(name string) int {
	return slices.IndexFunc(s.kinds, func(k FactKind) bool { return k.Name() == name })
}

// fresh resets the summary to that of an empty ledger.
func (s *summary) fresh() {
	s.facts = make([]Facts, len(s.kinds))
	for i, k := range s.kinds {
		s.facts[i] = k.New()
	}
	s.through, s.saved = Head{}, 0
}

// fold adds e to every kind's facts.
func (s *summary) fold(e *Entry) {
	for _, f := range s.facts {
		f.Fold(e)
	}
}

// foldCommit adds a commit's entries, which moved the head from start to
// end, when the summary is folded through start. s.mu is held.
func (s *summary) foldCommit(start, end Head, entries []Entry) {
	if !s.loaded || !s.through.Equal(start) || uint64(len(entries)) != end.Seq-start.Seq {
		return // not current, or not loaded: a query reads them back
	}
	for i := range entries {
		s.fold(&entries[i])
	}
	s.through = end
}

// drain folds the commits left in the inbox, in order. s.mu is held.
func (s *summary) drain() {
	s.inMu.Lock()
	inbox, lost := s.inbox, s.lost
	s.inbox, s.inboxed, s.lost = nil, 0, false
	s.inMu.Unlock()
	if lost {
		return // some were dropped: a later query reads them back
	}
	for _, c := range inbox {
		s.foldCommit(c.start, c.end, c.entries)
	}
}

// unlock drains the inbox and releases s.mu.
func (s *summary) unlock() {
	s.drain()
	s.mu.Unlock()
}

// checkpointKey is the key of the ledger's checkpoint.
func (l *ledger) checkpointKey() string { return l.dir + checkpointName }

// Facts brings the summary up to the ledger's head and calls fn with the
// facts of the kind named kind (*NumberFacts for NumberFactsKind), and
// returns the head the facts are folded through. fn must only read them,
// must not keep them, and must not call the ledger: it runs with the
// summary's lock held. It must not be called inside a transaction of the
// ledger's store (it reads the ledger). An error of the reads (the
// ledger's Read errors, a rollback, a checkpoint that does not open) is
// returned and fn is not called.
func (l *ledger) Facts(ctx context.Context, kind string, fn func(facts any) error) (Head, error) {
	if err := l.enter(); err != nil {
		return Head{}, fmt.Errorf("ledger facts: %w", err)
	}
	defer l.gate.Exit()
	s := &l.sum
	i := s.kindIndex(kind)
	if i < 0 {
		return Head{}, fmt.Errorf("ledger facts: unknown kind %q", kind)
	}
	s.mu.Lock()
	defer s.unlock()
	s.drain()
	if err := l.catchUp(ctx); err != nil {
		return Head{}, fmt.Errorf("ledger facts: %w", err)
	}
	h := Head{Seq: s.through.Seq, MAC: slices.Clone(s.through.MAC)}
	return h, fn(s.facts[i])
}

// catchUp folds the entries after the summary's position up to the head,
// loading the checkpoint first when the summary is not loaded. s.mu is
// held.
func (l *ledger) catchUp(ctx context.Context) error {
	s := &l.sum
	if !s.loaded {
		if err := l.loadCheckpoint(ctx); err != nil {
			return err
		}
	}
	var anchorErr error
	first := true
	head, err := l.walk(ctx, s.through.Seq+1, false, func(r record, prev []byte) bool {
		if first && s.through.Seq > 0 && !hmac.Equal(prev, s.through.MAC) {
			anchorErr = rolledBack(s.through.Seq, "holds another entry")
			return false
		}
		first = false
		s.fold(&r.entry)
		s.through = Head{Seq: r.entry.Seq, MAC: r.mac()}
		return true
	})
	switch {
	case anchorErr != nil:
		return anchorErr
	case err != nil:
		return err
	case head.Seq < s.through.Seq:
		return rolledBack(s.through.Seq, fmt.Sprintf("is beyond the head (%d)", head.Seq))
	case head.Seq == s.through.Seq && !hmac.Equal(head.MAC, s.through.MAC):
		return rolledBack(s.through.Seq, "holds another entry")
	}
	return nil
}

// rolledBack is the error of a summary the ledger does not confirm.
func rolledBack(seq uint64, what string) error {
	return fmt.Errorf("ledger: position %d, summarised before, %s: %w", seq, what, pins.ErrRollback)
}

// loadCheckpoint loads the stored checkpoint into the summary: when the
// summary is not loaded (no checkpoint: the facts of an empty ledger), or
// when the stored one is beyond the summary's position. s.mu is held.
func (l *ledger) loadCheckpoint(ctx context.Context) error {
	s := &l.sum
	key := l.checkpointKey()
	it, err := l.store.Get(ctx, key)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		if !s.loaded {
			s.fresh()
			s.loaded = true
		}
		return nil
	case err != nil:
		return err
	}
	plain, err := l.sealer.Open(key, it.Value)
	if err != nil {
		return fmt.Errorf("ledger: checkpoint failed authentication: %w", ErrTampered)
	}
	through, facts, ok, err := decodeCheckpoint(plain, s.kinds)
	if err != nil {
		return fmt.Errorf("ledger: checkpoint: %w: %w", ErrTampered, err)
	}
	if s.loaded && through.Seq <= s.through.Seq {
		s.saved = max(s.saved, through.Seq)
		return nil
	}
	if !ok {
		// Stored by a version that kept fewer kinds: rebuilt from the ledger.
		if !s.loaded {
			s.fresh()
			s.loaded = true
		}
		return nil
	}
	s.through, s.facts, s.saved, s.loaded = through, facts, through.Seq, true
	return nil
}

// encodeCheckpoint returns the plaintext of a checkpoint of facts through
// head, or nil when it would exceed maxCheckpointBytes.
func encodeCheckpoint(head Head, kinds []FactKind, facts []Facts) ([]byte, error) {
	b := []byte{checkpointVersion}
	b = codec.AppendUvarint(b, head.Seq)
	b = codec.AppendBytes(b, head.MAC)
	b = codec.AppendUvarint(b, uint64(len(kinds)))
	var data []byte
	for i, k := range kinds {
		var err error
		if data, err = facts[i].AppendBinary(data[:0]); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", k.Name(), err)
		}
		b = codec.AppendString(b, k.Name())
		b = codec.AppendBytes(b, data)
		if len(b) > maxCheckpointBytes {
			return nil, nil
		}
	}
	return b, nil
}

// decodeCheckpoint decodes a checkpoint's plaintext into the facts of
// kinds; ok is false when a kind has no section.
func decodeCheckpoint(plain []byte, kinds []FactKind) (through Head, facts []Facts, ok bool, err error) {
	r := codec.NewReader(plain)
	r.Version(checkpointVersion)
	through.Seq = r.Uvarint()
	if mac := r.Bytes(maxMAC); len(mac) > 0 {
		through.MAC = slices.Clone(mac)
	}
	if r.Err() == nil && (through.Seq == 0) != (len(through.MAC) == 0) {
		r.Fail("bad checkpoint MAC")
	}
	n := r.Count(uint64(maxCheckpointBytes), 2)
	facts = make([]Facts, len(kinds))
	for range n {
		name := r.String(maxKindName)
		data := r.Bytes(maxCheckpointBytes)
		if r.Err() != nil {
			break
		}
		i := slices.IndexFunc(kinds, func(k FactKind) bool { return k.Name() == name })
		if i < 0 {
			continue // a kind of a later version
		}
		if facts[i] != nil {
			r.Failf("kind %q twice", name)
			break
		}
		f := kinds[i].New()
		if err := f.UnmarshalBinary(data); err != nil {
			return Head{}, nil, false, fmt.Errorf("kind %q: %w", name, err)
		}
		facts[i] = f
	}
	if err := r.End(); err != nil {
		return Head{}, nil, false, err
	}
	return through, facts, !slices.Contains(facts, nil), nil
}

// collectStart begins collecting the entries of a commit that follows
// start (called by the batch's leader).
func (l *ledger) collectStart(start Head) {
	l.mu.Lock()
	l.sum.colStart, l.sum.colBase, l.sum.col = start, start.Seq, l.sum.col[:0]
	l.mu.Unlock()
}

// foldCollected tells the summary that the commit collected since
// collectStart committed, leaving the head at end.
func (l *ledger) foldCollected(end Head) {
	l.mu.Lock()
	start, entries := l.sum.colStart, l.sum.col
	l.mu.Unlock()
	l.committed(start, end, entries)
}

// collect records entries built at their positions for the commit in
// flight; an entry at a position already collected (a closure's writes
// that were dropped, then written again) replaces it and those after it.
// l.mu is held.
func (l *ledger) collect(recs []record) {
	for i := range recs {
		l.collectEntry(&recs[i].entry)
	}
}

// collectEntry is collect of one entry. l.mu is held.
func (l *ledger) collectEntry(e *Entry) {
	s := &l.sum
	if s.colBase == ^uint64(0) {
		return // out of order already
	}
	i := e.Seq - s.colBase - 1
	if e.Seq <= s.colBase || i > uint64(len(s.col)) {
		s.col = s.col[:0]
		s.colBase = ^uint64(0) // out of order: collect nothing more
		return
	}
	s.col = append(s.col[:i], *e)
}

// committed tells the summary that a commit of this ledger moved the head
// from start to end with entries (the entries of positions start.Seq+1 …
// end.Seq, in order; their slice is reused once committed returns). It
// folds them when the summary is current, keeps a copy for the query
// holding the summary otherwise, and starts a background catch-up when a
// checkpoint is due.
func (l *ledger) committed(start, end Head, entries []Entry) {
	s := &l.sum
	if end.Seq <= start.Seq {
		return
	}
	s.wrote.Store(true)
	due := false
	if s.mu.TryLock() {
		s.drain()
		s.foldCommit(start, end, entries)
		due = s.dueLocked(end.Seq)
		s.mu.Unlock()
	} else {
		s.inMu.Lock()
		if s.lost || s.inboxed+len(entries) > maxInbox {
			s.inbox, s.inboxed, s.lost = nil, 0, true
		} else {
			s.inbox = append(s.inbox, inboxCommit{start: start, end: end, entries: slices.Clone(entries)})
			s.inboxed += len(entries)
		}
		s.inMu.Unlock()
	}
	if due {
		l.background()
	}
}

// dueLocked reports whether a background catch-up is due after a commit
// that left the head at head: a checkpoint lags by checkpointEvery
// entries (a summary not loaded counts as one without checkpoint). s.mu is
// held.
func (s *summary) dueLocked(head uint64) bool {
	if !s.loaded {
		return head >= s.every
	}
	return head-s.saved >= s.every
}

// background starts, unless one runs, a catch-up of the summary that then
// stores a checkpoint when one is due. It runs until done or the ledger
// closes.
func (l *ledger) background() {
	s := &l.sum
	if !s.running.CompareAndSwap(false, true) {
		return
	}
	if !l.gate.Enter() {
		s.running.Store(false)
		return
	}
	s.bgRuns.Add(1)
	go func() {
		defer s.bgRuns.Done()
		defer l.gate.Exit()
		defer s.running.Store(false)
		_ = l.checkpoint(l.bg)
	}()
}

// checkpoint catches the summary up, adopting the stored checkpoint when it
// is newer, and stores a new one when the stored one lags the head by
// checkpointEvery entries. Its errors leave the summary as the reads left
// it (each entry folded is one the chain confirmed).
func (l *ledger) checkpoint(ctx context.Context) error {
	s := &l.sum
	s.mu.Lock()
	s.drain()
	// The stored checkpoint first: another process may keep it current,
	// and then this one reads nothing more.
	if err := l.loadCheckpoint(ctx); err != nil {
		s.unlock()
		return err
	}
	hs, _, err := l.loadHead(ctx)
	if err != nil {
		s.unlock()
		return err
	}
	if hs.Seq-min(s.saved, hs.Seq) < s.every {
		s.unlock()
		return nil
	}
	if err := l.catchUp(ctx); err != nil {
		s.unlock()
		return err
	}
	if s.through.Seq-min(s.saved, s.through.Seq) < s.every {
		s.unlock()
		return nil
	}
	plain, err := encodeCheckpoint(s.through, s.kinds, s.facts)
	through := s.through.Seq
	s.unlock()
	if err != nil || plain == nil {
		return err
	}
	return l.storeCheckpoint(ctx, through, plain)
}

// storeCheckpoint seals and stores a checkpoint's plaintext, folded
// through position through. Two processes may store theirs in either
// order: an older one left last only makes the next load read more.
func (l *ledger) storeCheckpoint(ctx context.Context, through uint64, plain []byte) error {
	key := l.checkpointKey()
	sealed, err := l.sealer.Seal(key, plain)
	if err != nil {
		return err
	}
	if _, err := l.store.Put(ctx, key, sealed); err != nil {
		return err
	}
	s := &l.sum
	s.mu.Lock()
	s.saved = max(s.saved, through)
	s.unlock()
	return nil
}

// flushCheckpoint stores a checkpoint, at Close, when the summary is
// loaded and one is due, without reading the ledger: a short-lived process
// (a command) leaves what it folded for the next one.
func (l *ledger) flushCheckpoint(ctx context.Context) {
	s := &l.sum
	if !s.wrote.Load() {
		return // a process that only read leaves the store as it was
	}
	s.mu.Lock()
	s.drain()
	if !s.loaded || s.through.Seq-min(s.saved, s.through.Seq) < s.every {
		s.mu.Unlock()
		return
	}
	plain, err := encodeCheckpoint(s.through, s.kinds, s.facts)
	through := s.through.Seq
	s.mu.Unlock()
	if err == nil && plain != nil {
		_ = l.storeCheckpoint(ctx, through, plain)
	}
}
