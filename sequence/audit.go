package sequence

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/internal/wire"
)

// NumberState is the outcome of one number in an Audit.
type NumberState uint8

// The states of a number.
const (
	// StateUnbound: issued, but no record carries it and it was not voided; re-drive
	// the work that took it, or void it.
	StateUnbound NumberState = iota + 1
	// StateBound: a record carries the number.
	StateBound
	// StateVoided: the number was cancelled, with a reason.
	StateVoided
	// StateSeeded: skipped over by SeedTo (numbers imported from elsewhere).
	StateSeeded
	// StateMissing: below the counter, but the history does not show it issued
	// (a crash between the counter and its ledger entry on a store without
	// transactions, or a history that was tampered with).
	StateMissing
)

// String returns the state's name, e.g. "bound".
func (s NumberState) String() string {
	switch s {
	case StateUnbound:
		return "unbound"
	case StateBound:
		return "bound"
	case StateVoided:
		return "voided"
	case StateSeeded:
		return "seeded"
	case StateMissing:
		return "missing"
	}
	return fmt.Sprintf("NumberState(%d)", uint8(s))
}

// NumberAudit is what the history says about one number.
type NumberAudit struct {
	// N is the number.
	N uint64
	// State is what became of it.
	State NumberState
	// Collection and ID name the record carrying N (the last one, if several did).
	Collection, ID string
	// Reason is the void's reason.
	Reason string
	// Orphaned is true for a bound number whose record was later deleted, or
	// given another number of the series, so no live record carries it.
	Orphaned bool
}

// Run is a stretch From..To (inclusive) of consecutive numbers in one state.
// Unbound, seeded and missing numbers come in runs as long as they go; a
// bound or voided number is always a run of its own (From == To), since it
// names its record or its reason.
type Run struct {
	// From and To are the first and last numbers of the run.
	From, To uint64
	// State is what became of every number of the run.
	State NumberState
	// Collection and ID name the record carrying the number (bound, and
	// voided numbers that a record carried).
	Collection, ID string
	// Reason is the void's reason.
	Reason string
	// Orphaned: see NumberAudit.Orphaned.
	Orphaned bool
}

// Len returns how many numbers the run covers.
func (r Run) Len() uint64 { return r.To - r.From + 1 }

// AuditReport accounts for every number 1..Head of a series. Its size grows
// with the facts the history holds about the series, not with Head: a
// series seeded to 2,026,000,000 is one seeded run.
type AuditReport struct {
	// Series is the series name.
	Series string
	// Partition is the partition tuple in canonical text form (nil when the
	// series is not partitioned), without the period.
	Partition []string
	// Period is the label of the period audited ("" for a series without
	// periods).
	Period string
	// Head is the counter when the audit began: the last number handed out.
	Head uint64
	// Runs cover 1..Head in order, without gaps or overlaps; adjacent runs
	// never share a state unless one of them names a record or a reason.
	Runs []Run
	// Corrections lists, in ledger order, the numbers of this counter
	// taken to correct a number of another series (By is this counter's).
	Corrections []Correction
	// CorrectedBy lists, in ledger order, the numbers of this counter that
	// a number of a correcting series corrects (Of is this counter's).
	CorrectedBy []Correction
	// Counts per state, and of bound numbers no live record carries (each
	// at most math.MaxInt: sum the lengths of Runs for exact counts near
	// the top of the uint64 range).
	Bound, Unbound, Voided, Seeded, Missing, Orphaned int
}

// Numbers yields what the report says about each number 1..Head, in order,
// generated from Runs as it goes (no memory per number).
func (r AuditReport) Numbers() iter.Seq[NumberAudit] {
	return func(yield func(NumberAudit) bool) {
		for _, run := range r.Runs {
			for n := run.From; ; n++ {
				if !yield(NumberAudit{N: n, State: run.State, Collection: run.Collection, ID: run.ID, Reason: run.Reason, Orphaned: run.Orphaned}) {
					return
				}
				if n == run.To {
					break
				}
			}
		}
	}
}

// errNoHistory: the sequences were made without a history (audit ledger)
// to account for their numbers, so they cannot be audited. A vault's
// sequences always have one; only the package's own tests make others.
var errNoHistory = errors.New("sequence has no history to audit")

// numberFacts is what the history says about one number that it mentions.
type numberFacts struct {
	state          NumberState // 0: only mentioned by a fact that sets no state
	collection, id string
	reason         string
	orphaned       bool
}

// Audit accounts for every number from 1 to the counter: which record each
// is bound to, which were voided, which were skipped by SeedTo, and which were
// issued but never bound (so they can be re-driven or voided). It reads the
// whole history of the vault, so its time grows with the ledger; its memory
// grows with the facts about this series, not with the counter.
//
// It fails with an error wrapping ErrRollback when the history records a
// number of the series above the counter (a counter deleted or replayed to
// an older value by the store).
//
// On a series with periods it audits the current period (the handle's
// date's, for a handle of At).
func (q *Sequence) Audit(ctx context.Context) (AuditReport, error) {
	if q.svc.history == nil {
		return AuditReport{}, q.errorf("audit", errNoHistory)
	}
	q, _, err := q.resolve(ctx)
	if err != nil {
		return AuditReport{}, err
	}
	head, err := q.auditHead(ctx)
	if err != nil {
		return AuditReport{}, err
	}
	rep := AuditReport{Series: q.series, Partition: q.Partition(), Period: q.period, Head: head}
	var (
		highest uint64
		seeds   []seedRange
		known   = map[uint64]*numberFacts{}
		carrier = map[string]uint64{} // collection "\x00" id -> the number that record carries
	)
	about := func(n uint64) *numberFacts {
		a := known[n]
		if a == nil {
			a = &numberFacts{}
			known[n] = a
		}
		return a
	}
	var corrections, correctedBy []wire.CorrectionRef // pairs: this number, the other
	_, err = q.svc.history.Facts(ctx, q.series, q.c.partition, 0, func(f fact) error {
		if f.Kind == wire.FactCorrected {
			// Another series' number corrects f.Number of this one.
			correctedBy = append(correctedBy, wire.CorrectionRef{N: f.Number}, f.Corrector)
			return nil
		}
		if f.Kind == wire.FactRecordDeleted {
			rec := f.Collection + "\x00" + f.ID
			if n, ok := carrier[rec]; ok {
				known[n].orphaned = true
				delete(carrier, rec)
			}
			return nil
		}
		if f.Kind == wire.FactBrought {
			// Issued on a device before it joined: the seed over them
			// says seeded, and they are not held against the counter.
			return nil
		}
		highest = max(highest, f.Number)
		if f.Kind == wire.FactSeeded {
			if f.Number > f.From {
				seeds = addSeed(seeds, f.From, f.Number) // clipped to head by buildRuns
			}
			return nil
		}
		if f.Number == 0 || f.Number > head {
			return nil // recorded after the Peek: checked below
		}
		switch f.Kind {
		case wire.FactAllocated:
			if a := about(f.Number); a.state == 0 {
				a.state = StateUnbound
			}
			if r, ok := wire.ParseCorrection(f.Reason); ok {
				corrections = append(corrections, wire.CorrectionRef{N: f.Number}, r)
			}
		case wire.FactBound:
			a := about(f.Number)
			if a.state != StateVoided {
				a.state = StateBound
			}
			a.collection, a.id, a.orphaned = f.Collection, f.ID, false
			rec := f.Collection + "\x00" + f.ID
			if m, ok := carrier[rec]; ok && m != f.Number {
				known[m].orphaned = true
			}
			carrier[rec] = f.Number
		case wire.FactVoided:
			a := about(f.Number)
			a.state, a.reason = StateVoided, f.Reason
		}
		return nil
	})
	if err != nil {
		return AuditReport{}, q.errorf("audit", err)
	}
	if highest > head {
		// Facts recorded after the Peek are fine if the counter has moved on
		// since; a counter still behind them was deleted or replayed.
		now, err := q.auditHead(ctx)
		if err != nil {
			return AuditReport{}, err
		}
		if now < highest {
			return AuditReport{}, q.errorf("audit", behind(now, highest))
		}
	}
	rep.Runs = buildRuns(head, known, seeds)
	self := func(n uint64) Ref {
		return Ref{Series: q.series, Partition: q.Partition(), Period: q.period, N: n}
	}
	for i := 0; i < len(corrections); i += 2 {
		if n := corrections[i].N; n <= head {
			rep.Corrections = append(rep.Corrections, Correction{By: self(n), Of: Ref(corrections[i+1])})
		}
	}
	for i := 0; i < len(correctedBy); i += 2 {
		if n := correctedBy[i].N; n <= head {
			by := correctedBy[i+1]
			rep.CorrectedBy = append(rep.CorrectedBy, Correction{By: q.svc.splitRef(ctx, by.Series, by.Partition, by.N), Of: self(n)})
		}
	}
	for _, r := range rep.Runs {
		n := r.Len()
		if r.Orphaned {
			addCount(&rep.Orphaned, n)
		}
		switch r.State {
		case StateBound:
			addCount(&rep.Bound, n)
		case StateUnbound:
			addCount(&rep.Unbound, n)
		case StateVoided:
			addCount(&rep.Voided, n)
		case StateSeeded:
			addCount(&rep.Seeded, n)
		case StateMissing:
			addCount(&rep.Missing, n)
		}
	}
	return rep, nil
}

// auditHead is the head an audit accounts up to: the counter, or the head
// of the series' passes when it is above (passes that did not raise the
// counter: see wire.SequenceConfig.PassHead).
func (q *Sequence) auditHead(ctx context.Context) (uint64, error) {
	head, err := q.peek(ctx)
	if err != nil {
		return 0, err
	}
	base, err := q.c.passHead(ctx)
	if err != nil {
		return 0, q.errorf("audit", err)
	}
	return max(head, base), nil
}

// addCount adds n to a count of the report, saturating at math.MaxInt (a
// seed can skip more numbers than an int holds).
func addCount(count *int, n uint64) {
	if n > uint64(math.MaxInt-*count) {
		*count = math.MaxInt
		return
	}
	*count += int(n)
}

// buildRuns turns the facts about the numbers the history mentions, and the
// seeded ranges, into runs covering 1..head.
func buildRuns(head uint64, known map[uint64]*numberFacts, seeds []seedRange) []Run {
	nums := make([]uint64, 0, len(known))
	for n := range known {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	var runs []Run
	add := func(r Run) {
		if last := len(runs) - 1; last >= 0 {
			p := &runs[last]
			if p.State == r.State && p.To+1 == r.From && mergeable(*p) && mergeable(r) {
				p.To = r.To
				return
			}
		}
		runs = append(runs, r)
	}
	// gap adds the numbers from..to that no fact mentions: seeded where a
	// seed covers them, missing elsewhere.
	gap := func(from, to uint64) {
		for from <= to {
			i, _ := slices.BinarySearchFunc(seeds, from, func(s seedRange, n uint64) int {
				switch {
				case s.to < n:
					return -1
				case s.from > n:
					return 1
				}
				return 0
			})
			if i < len(seeds) && seeds[i].from <= from {
				end := min(seeds[i].to, to)
				add(Run{From: from, To: end, State: StateSeeded})
				if end == to {
					return
				}
				from = end + 1
				continue
			}
			end := to
			if i < len(seeds) && seeds[i].from <= to {
				end = seeds[i].from - 1
			}
			add(Run{From: from, To: end, State: StateMissing})
			if end == to {
				return
			}
			from = end + 1
		}
	}
	next := uint64(1) // the first number not covered yet; 0 once all are (past the top)
	for _, n := range nums {
		a := known[n]
		if n > next {
			gap(next, n-1)
		}
		state := a.state
		if state == 0 {
			state = StateMissing
		}
		r := Run{From: n, To: n, State: state, Orphaned: a.orphaned}
		if state == StateBound || state == StateVoided {
			r.Collection, r.ID, r.Reason = a.collection, a.id, a.reason
		}
		add(r)
		next = n + 1
	}
	if next != 0 && head >= next {
		gap(next, head)
	}
	return runs
}

// mergeable reports whether r carries nothing that ties it to one number.
func mergeable(r Run) bool {
	return r.State != StateBound && r.State != StateVoided && !r.Orphaned
}

// seedRange is the numbers a SeedTo skipped: from+1..to (from is the counter
// before the seed, so the range holds to-from numbers).
type seedRange struct{ from, to uint64 }

// addSeed adds the numbers from+1..to skipped by a seed to seeds, kept
// sorted, disjoint and merged (each seed starts where the counter was, so in
// an honest history they never overlap).
func addSeed(seeds []seedRange, from, to uint64) []seedRange {
	r := seedRange{from: from + 1, to: to}
	i, _ := slices.BinarySearchFunc(seeds, r.from, func(s seedRange, n uint64) int {
		switch {
		case s.to < n-1: // n >= 1
			return -1
		case s.from > n:
			return 1
		}
		return 0
	})
	// Absorb every range that touches or overlaps r.
	j := i
	for j < len(seeds) && seeds[j].from-1 <= r.to { // from >= 1
		r.from, r.to = min(r.from, seeds[j].from), max(r.to, seeds[j].to)
		j++
	}
	return slices.Replace(seeds, i, j, r)
}

// skippedBySeed reports whether n lies in one of seeds.
func skippedBySeed(seeds []seedRange, n uint64) (seedRange, bool) {
	i, ok := slices.BinarySearchFunc(seeds, n, func(s seedRange, n uint64) int {
		switch {
		case s.to < n:
			return -1
		case s.from > n:
			return 1
		}
		return 0
	})
	if !ok {
		return seedRange{}, false
	}
	return seeds[i], true
}

// behind is the error of a counter at value below a number the history
// recorded for it.
func behind(value, recorded uint64) error {
	return fmt.Errorf("counter is at %d but the ledger records number %d: %w", value, recorded, ErrRollback)
}

// reopened is the error of a counter found open, at value, although its
// period was closed: the store replayed or deleted its closed state.
func reopened(value uint64) error {
	return fmt.Errorf("counter is open at %d but its period was closed: %w", value, ErrRollback)
}

// ledgerView is what a counter has learnt from the History: the highest
// number recorded (for the rollback check), the ranges skipped by seeds (for
// Void) and, once a claim record was found missing, the request ids of
// Claim allocations (for Claim).
//
// It is read incrementally (each catch-up reads only what was recorded since
// the last) and kept current by the counter's own writes: while no other
// writer has taken numbers in between, a batch this Service commits adds its
// seeds and claims without reading anything. covered is the number up to
// which the view is complete: the History records allocations in the order
// of their numbers (the counter serialises them and each commits with its
// entry), so once it has been read up to a fact about number h, every seed
// and claim of a number up to h was read too.
//
// Two locks: write serialises the view's writers (catchUp, noteCommit) and
// is held across a catch-up's read of the History; mu guards the fields and
// is never held across a read. Code inside a store transaction (findClaim,
// through claimed) takes mu only: on a store whose transaction holds a
// store-wide lock (memstore), the History's read waits for the transaction,
// so a transaction waiting for write could wait for itself.
type ledgerView struct {
	write   sync.Mutex // serialises catchUp and noteCommit; never taken inside a transaction
	mu      sync.Mutex // guards the fields below; never held across a read
	read    bool       // the history was read at least once (catchUp)
	through uint64     // history position read through
	highest uint64     // the highest number read in the history
	covered uint64     // seeds and claims of numbers up to covered are all known
	closed  bool       // the history records a close of the counter's period
	defined bool       // the history records a definition of the counter's series
	seeds   []seedRange
	brought []seedRange       // numbers issued on a device before it joined (FactBrought)
	claims  map[string]uint64 // claim index key (see indexKey) -> number; nil until wanted
}

// catchUp reads the history recorded since the last catch-up. With
// wantClaims it also indexes the request ids of claims, reading the history
// from the start the first time (the one time an entry is read twice). It
// must not run inside a store transaction. The view's lock is not held
// during the read: what it finds is added to the view after it, and a read
// that fails adds nothing.
func (c *counter) catchUp(ctx context.Context, wantClaims bool) error {
	v := &c.view
	v.write.Lock()
	defer v.write.Unlock()
	v.mu.Lock()
	old, indexed := v.through, v.claims != nil
	v.mu.Unlock()
	after := old
	fresh := wantClaims && !indexed
	if fresh {
		after = 0
	}
	// What the read finds (v changes only under v.write, held: nothing
	// else can change through, claims or seeds meanwhile).
	var (
		highest         uint64
		closed, defined bool
		seeds, brought  []seedRange
		claims          map[string]uint64
	)
	if fresh || indexed {
		claims = map[string]uint64{}
	}
	through, err := c.svc.history.Facts(ctx, c.series, c.partition, after, func(f fact) error {
		switch f.Kind {
		case wire.FactRecordDeleted, wire.FactCorrected:
			return nil
		case wire.FactClosed:
			closed = true
		case wire.FactDefined:
			defined = true
		case wire.FactSeeded:
			if f.Seq > old && f.Number > f.From {
				seeds = addSeed(seeds, f.From, f.Number)
			}
		case wire.FactBrought:
			if f.Seq > old && f.Number > f.From {
				brought = addSeed(brought, f.From, f.Number)
			}
			if claims != nil && f.RequestID != "" {
				// A number a device gave to a Claim before it joined.
				k := c.svc.indexKey(f.RequestID)
				if _, ok := claims[k]; !ok {
					claims[k] = f.Number
				}
			}
			return nil // not held against the counter
		case wire.FactAllocated:
			if claims != nil && f.RequestID != "" {
				k := c.svc.indexKey(f.RequestID)
				if _, ok := claims[k]; !ok {
					claims[k] = f.Number
				}
			}
		}
		highest = max(highest, f.Number)
		return nil
	})
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.closed = v.closed || closed
	v.defined = v.defined || defined
	for _, r := range seeds {
		v.seeds = addSeed(v.seeds, r.from-1, r.to)
	}
	for _, r := range brought {
		v.brought = addSeed(v.brought, r.from-1, r.to)
	}
	if fresh {
		v.claims = claims
	} else {
		for k, n := range claims {
			if _, ok := v.claims[k]; !ok { // the earlier claim of an id wins
				v.claims[k] = n
			}
		}
	}
	v.highest = max(v.highest, highest)
	v.through = max(v.through, through)
	v.covered = max(v.covered, v.highest)
	v.read = true
	return nil
}

// noteCommit brings the view up to date with a batch this Service committed,
// which moved the counter from start to end, when the view was complete up to
// start (no other writer took numbers it has not read).
func (c *counter) noteCommit(start, end uint64, batch []*op, seeds []seedRange) {
	v := &c.view
	v.write.Lock()
	defer v.write.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.read || v.covered < start || end <= v.covered {
		// Not complete up to start, or never read: a counter checked
		// against the ledger's summary has read none of its facts (a
		// join's brought numbers, another writer's seeds), so a commit
		// of this Service does not make the view complete.
		return
	}
	for _, r := range seeds {
		v.seeds = addSeed(v.seeds, r.from-1, r.to)
	}
	if v.claims != nil {
		for _, o := range batch {
			if o.kind == opClaim && o.fresh {
				v.claims[c.svc.indexKey(o.id)] = o.n
			}
		}
	}
	v.covered = end
}

// claimed returns the number the history records for a claim of id, and
// whether the view knows every claim of the numbers up to value (if not, the
// answer may be missing a claim another writer made since the last read).
func (c *counter) claimed(id string, value uint64) (n uint64, found, complete bool) {
	c.view.mu.Lock()
	defer c.view.mu.Unlock()
	if c.view.claims == nil {
		return 0, false, false
	}
	n, found = c.view.claims[c.svc.indexKey(id)]
	return n, found, c.view.covered >= value
}

// recordedHighest returns the highest number the history records for the
// counter, reading the history first unless the view already covers n.
func (c *counter) recordedHighest(ctx context.Context, n uint64) (uint64, error) {
	c.view.mu.Lock()
	known := n <= c.view.covered
	c.view.mu.Unlock()
	if !known {
		if err := c.catchUp(ctx, false); err != nil {
			return 0, err
		}
	}
	c.view.mu.Lock()
	defer c.view.mu.Unlock()
	return max(c.view.highest, c.view.covered), nil
}

// seededOver reports the seed that skipped n, reading the history first
// unless the view already covers n. A number a join brought (FactBrought)
// was issued, on the device that joined, even where the join's seed
// covers it: it is not skipped. (A join records what it brought before
// the seed that covers it, so a view that knows the seed knows that too.)
func (c *counter) seededOver(ctx context.Context, n uint64) (seedRange, bool, error) {
	c.view.mu.Lock()
	known := n <= c.view.covered
	c.view.mu.Unlock()
	if !known {
		if err := c.catchUp(ctx, false); err != nil {
			return seedRange{}, false, err
		}
	}
	r, skipped := c.skipped(n)
	return r, skipped, nil
}

// skipped reports, from the view, the seed that skipped n: none for a
// number a join brought.
func (c *counter) skipped(n uint64) (seedRange, bool) {
	c.view.mu.Lock()
	defer c.view.mu.Unlock()
	if _, ok := skippedBySeed(c.view.brought, n); ok {
		return seedRange{}, false // issued on a device before a join brought it
	}
	return skippedBySeed(c.view.seeds, n)
}
