package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// outcome is what the caller of an operation learnt.
type outcome uint8

const (
	ok      outcome = iota + 1 // it succeeded
	unknown                    // it failed, and may have taken effect
	none                       // it failed and took no effect (a documented refusal), or was skipped
)

// Event is one operation in the recorded history.
type Event struct {
	Step, Worker int
	Op           Op
	Call, Return int64 // logical times
	Outcome      outcome
	Err          error
	Key          string   // counter key of a numbering operation
	N            uint64   // the number handed out (the first of NextN's)
	K            int      // how many numbers the operation takes
	Val          *int     // a note's value after the operation (nil: deleted)
	Val2         *int     // the Tx's second note
	Skip         string   // why the operation did not run
	Conflicts    []string // a Sync's conflicts the hub's side won, as "collection/id"
	Fork         bool     // the device was served the hub's copy of an FFork
}

// history is the record of one run.
type history struct {
	clock  atomic.Int64
	mu     sync.Mutex
	events []*Event
	faults []string // faults, in order, with the logical time they ran at

	issued   map[string][]uint64 // per counter key: numbers handed out (for Void and Correct)
	bare     map[string][]uint64 // numbers of Next and NextN, which a Void may cancel
	closedAt map[string]int64    // counter key -> return time of a successful ClosePeriod
	closing  map[string]bool     // counter key -> a ClosePeriod was tried
	joinAt   int64               // logical time of the late join (0: none)
	lateJoin bool                // device 0 joins the hub late
	drops    []dropSpan          // when the hub deleted its ledger
	fork     *forkSpan           // the run's FFork, nil when none
}

func newHistory() *history {
	return &history{issued: map[string][]uint64{}, bare: map[string][]uint64{},
		closedAt: map[string]int64{}, closing: map[string]bool{}}
}

func (h *history) tick() int64 { return h.clock.Add(1) }

func (h *history) add(e *Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	if e.Outcome == ok && e.Key != "" && e.N > 0 {
		for i := range e.K {
			h.issued[e.Key] = append(h.issued[e.Key], e.N+uint64(i))
			if e.Op.Kind == KNext || e.Op.Kind == KNextN {
				h.bare[e.Key] = append(h.bare[e.Key], e.N+uint64(i))
			}
		}
	}
}

func (h *history) fault(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, fmt.Sprintf("t=%d %s", h.clock.Load(), s))
}

// pick chooses one of the numbers of key, from list.
func (h *history) pick(list map[string][]uint64, key string, i int) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := list[key]
	if len(l) == 0 {
		return 0
	}
	return l[i%len(l)]
}

// counterKey names a counter: series, partition and period.
func counterKey(series, region string, month int) string {
	k := series
	if region != "" {
		k += "/" + region
	}
	if month > 0 {
		k += "/" + periodLabel(month)
	}
	return k
}

func periodLabel(month int) string { return fmt.Sprintf("2026-%02d", month) }

func docDate(month int) time.Time {
	return time.Date(2026, time.Month(month), 15, 12, 0, 0, 0, time.UTC)
}

// runStep runs one step of a schedule.
func (w *world) runStep(ctx context.Context, si int, st Step) {
	w.step = si
	if w.forkEnd == si {
		w.endFork()
	}
	for _, f := range st.Faults {
		msg := w.inject(ctx, f)
		w.hist.fault(fmt.Sprintf("step %d %s %s", si, f, msg))
	}
	var started atomic.Int64
	var fired sync.Once
	fire := func() {
		if st.During == nil {
			return
		}
		fired.Do(func() {
			msg := w.inject(ctx, *st.During)
			w.hist.fault(fmt.Sprintf("step %d during %s %s", si, *st.During, msg))
		})
	}
	var wg sync.WaitGroup
	for wi, ops := range st.Workers {
		wg.Go(func() {
			for _, op := range ops {
				if started.Add(1) > int64(st.Trigger) {
					fire()
				}
				w.runOp(ctx, si, wi, op)
			}
		})
	}
	wg.Wait()
	fire()
	w.loseCommits(ctx)
}

// runOp runs one operation and records it.
func (w *world) runOp(ctx context.Context, si, wi int, op Op) {
	w.stats.Ops.Add(1)
	e := &Event{Step: si, Worker: wi, Op: op}
	d := w.devs[op.Dev]
	e.Fork = d.hub.onFork()
	h, dctx, err := w.handles(ctx, d)
	if err != nil {
		e.Call, e.Return = w.hist.tick(), w.hist.tick()
		e.Outcome, e.Skip, e.Err = none, "vault not open", err
		w.hist.add(e)
		return
	}
	timeout := w.opts.OpTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	octx, cancel := context.WithTimeout(dctx, timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			e.Return = w.hist.tick()
			e.Outcome = unknown
			e.Err = fmt.Errorf("%w: %v\n%s", errPanic, r, debug.Stack())
			w.hist.add(e)
		}
	}()
	began := time.Now()
	w.do(octx, d, h, e)
	if slowOps && time.Since(began) > 300*time.Millisecond {
		fmt.Printf("slow op: seed %d %s took %s: %v\n", w.sched.Seed, e, time.Since(began), e.Err)
	}
	w.hist.add(e)
}

var errPanic = errors.New("panic")

// slowOps prints the operations that take long (NOYDB_SIM_SLOW=1).
var slowOps = os.Getenv("NOYDB_SIM_SLOW") != ""

// settle sets an event's outcome from err.
func settle(e *Event, err error) {
	e.Err = err
	switch {
	case err == nil:
		e.Outcome = ok
	case refusal(e.Op.Kind, err):
		e.Outcome = none
	default:
		e.Outcome = unknown
	}
}

// refusal reports whether err is documented to take nothing.
func refusal(k Kind, err error) bool {
	var ce *sequence.CorrectionError
	switch {
	case errors.Is(err, sequence.ErrPeriodClosed), errors.As(err, &ce),
		errors.Is(err, vault.ErrNotPermitted), errors.Is(err, vault.ErrNoAccess), errors.Is(err, vault.ErrHubJoined),
		errors.Is(err, sequence.ErrAlreadyVoided), errors.Is(err, stores.ErrNotSupported):
		return true
	}
	return false
}

func (w *world) do(ctx context.Context, d *device, h *handles, e *Event) {
	op := e.Op
	hist := w.hist
	switch op.Kind {
	case KNext, KNextN:
		q := seqOf(h, op)
		e.Key, e.K = counterKey(op.Series, op.Region, op.Month), max(op.K, 1)
		e.Call = hist.tick()
		var n uint64
		var err error
		if op.Kind == KNext {
			n, err = q.Next(ctx)
		} else {
			n, err = q.NextN(ctx, op.K)
		}
		e.Return = hist.tick()
		settle(e, err)
		e.N = n
	case KGuestNext:
		g, err := w.openGuest(ctx, d)
		if err != nil {
			e.Call, e.Return = hist.tick(), hist.tick()
			e.Outcome, e.Skip, e.Err = none, "guest cannot open", err
			return
		}
		e.Key, e.K = "tick", 1
		e.Call = hist.tick()
		n, err := g.seqs["tick"].Next(ctx)
		e.Return = hist.tick()
		settle(e, err)
		e.N = n
		if errors.Is(err, vault.ErrNoAccess) || errors.Is(err, vault.ErrNotPermitted) || errors.Is(err, vault.ErrHubJoined) {
			d.dropGuest()
		}
	case KPutNumbered:
		q := seqOf(h, op)
		e.Key, e.K = counterKey(op.Series, op.Region, op.Month), 1
		e.Call = hist.tick()
		inv, err := h.inv.PutNumbered(ctx, op.ID, q, func(s sequence.Serial) (Invoice, error) {
			return Invoice{N: s.N, Period: s.Period, Number: s.Formatted}, nil
		})
		e.Return = hist.tick()
		settle(e, err)
		e.N = inv.N
	case KCorrect:
		ref := counterKey("inv", regions[op.Pick%2], op.Month)
		n := hist.pick(hist.issued, ref, op.Pick/2)
		if n == 0 {
			e.Call, e.Return, e.Outcome, e.Skip = hist.tick(), hist.tick(), none, "nothing to correct"
			return
		}
		e.Key, e.K = counterKey("cn", "", op.Month), 1
		e.Call = hist.tick()
		s, err := h.seqs["cn"].At(docDate(op.Month)).Correcting(sequence.Ref{
			Partition: []string{regions[op.Pick%2]}, Period: periodLabel(op.Month), N: n}).NextSerial(ctx)
		e.Return = hist.tick()
		settle(e, err)
		e.N = s.N
	case KVoid:
		key := counterKey(op.Series, op.Region, op.Month)
		n := hist.pick(hist.bare, key, op.Pick)
		if n == 0 {
			e.Call, e.Return, e.Outcome, e.Skip = hist.tick(), hist.tick(), none, "nothing to void"
			return
		}
		e.Key, e.N = key, n
		e.Call = hist.tick()
		err := seqOf(h, op).Void(ctx, n, "sim")
		e.Return = hist.tick()
		settle(e, err)
	case KClose:
		key := counterKey(op.Series, op.Region, op.Month)
		hist.mu.Lock()
		hist.closing[key] = true
		hist.mu.Unlock()
		e.Key = key
		e.Call = hist.tick()
		err := seqOf(h, op).ClosePeriod(ctx, periodLabel(op.Month))
		e.Return = hist.tick()
		settle(e, err)
		if err == nil {
			hist.mu.Lock()
			if _, ok := hist.closedAt[key]; !ok {
				hist.closedAt[key] = e.Return
			}
			hist.mu.Unlock()
		}
	case KNumPut:
		online := h.rc.Online()
		if online {
			e.Key, e.K = "rcpt", 1 // numbered at write time, on the series' counter
		}
		e.Call = hist.tick()
		r, err := h.rc.Put(ctx, op.ID, Receipt{Val: op.Val})
		e.Return = hist.tick()
		settle(e, err)
		if err == nil && !r.Pending {
			e.Key, e.K, e.N = "rcpt", 1, r.Serial.N
		}
	case KSettle:
		e.Call = hist.tick()
		_, err := h.rc.Settle(ctx)
		e.Return = hist.tick()
		settle(e, err)
	case KPut:
		e.Call = hist.tick()
		err := h.notes.Put(ctx, op.ID, Note{Val: op.Val})
		e.Return = hist.tick()
		settle(e, err)
		v := op.Val
		e.Val = &v
	case KDelete:
		e.Call = hist.tick()
		err := h.notes.Delete(ctx, op.ID)
		e.Return = hist.tick()
		settle(e, err)
		if errors.Is(err, vault.ErrNotFound) {
			e.Outcome = none
		}
	case KUpdate:
		e.Call = hist.tick()
		rec, err := h.notes.Update(ctx, op.ID, func(n *Note) error { n.Val += 1000; return nil })
		e.Return = hist.tick()
		settle(e, err)
		if errors.Is(err, vault.ErrNotFound) {
			e.Outcome = none
		}
		if err == nil {
			v := rec.Value.Val
			e.Val = &v
		}
	case KTx:
		e.Call = hist.tick()
		err := h.v.Update(ctx, func(tx *vault.Tx) error {
			c := h.notes.In(tx)
			if err := c.Put(op.ID, Note{Val: op.Val}); err != nil {
				return err
			}
			return c.Put(op.ID2, Note{Val: op.Val})
		})
		e.Return = hist.tick()
		settle(e, err)
		v := op.Val
		e.Val, e.Val2 = &v, &v
	case KSync:
		if !d.onHub {
			e.Call, e.Return, e.Outcome, e.Skip = hist.tick(), hist.tick(), none, "no hub"
			return
		}
		e.Call = hist.tick()
		rep, err := h.v.Sync(ctx)
		e.Return = hist.tick()
		settle(e, err)
		e.Conflicts = lost(rep)
	case KRotate:
		e.Call = hist.tick()
		r, err := h.v.RotateKeys(ctx)
		if err == nil {
			err = r.Wait(ctx)
		}
		e.Return = hist.tick()
		settle(e, err)
	case KGrant:
		e.Call = hist.tick()
		err := h.v.Grant(ctx, guest, vault.Secret(guestSecret), vault.RoleWriter)
		e.Return = hist.tick()
		settle(e, err)
		if errors.Is(err, vault.ErrPersonExists) {
			e.Outcome = none
		}
	case KRevoke:
		e.Call = hist.tick()
		var opts []vault.RevokeOption
		if op.K == 1 {
			opts = append(opts, vault.RevokeWithoutRotation())
		}
		err := h.v.Revoke(ctx, guest, opts...)
		e.Return = hist.tick()
		settle(e, err)
		if errors.Is(err, vault.ErrNotFound) {
			e.Outcome = none
		}
	case KClaim:
		e.Key, e.K = "clm", 1
		e.Call = hist.tick()
		n, err := h.seqs["clm"].Claim(ctx, op.ID)
		e.Return = hist.tick()
		settle(e, err)
		e.N = n
	}
}

// seqOf returns the handle an operation numbers with.
func seqOf(h *handles, op Op) *sequence.Sequence {
	switch op.Series {
	case "inv":
		return h.seqs["inv/"+op.Region].At(docDate(op.Month))
	default:
		return h.seqs[op.Series]
	}
}

// lost lists the records whose device side lost a sync conflict.
func lost(rep vault.SyncReport) []string {
	var out []string
	for _, c := range rep.Conflicts {
		if c.HubWon {
			out = append(out, c.Collection+"/"+c.ID)
		}
	}
	return out
}
