package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// splitHub is the hub as one device sees it: every call goes to the view
// it is served at the moment, the real hub or, during an FFork aimed at
// the device, a copy of it. Both views are faultstore wrappers of stores
// of one kind with transactions.
type splitHub struct {
	mu     sync.Mutex
	view   stores.Store
	forked bool
}

func (h *splitHub) serve(view stores.Store, forked bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.view, h.forked = view, forked
}

func (h *splitHub) cur() stores.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.view
}

// onFork reports whether the device is served the copy.
func (h *splitHub) onFork() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.forked
}

func (h *splitHub) Get(ctx context.Context, key string) (stores.Item, error) {
	return h.cur().Get(ctx, key)
}

func (h *splitHub) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return h.cur().Put(ctx, key, value)
}

func (h *splitHub) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	return h.cur().CompareAndSwap(ctx, key, expected, value)
}

func (h *splitHub) Delete(ctx context.Context, key string) error { return h.cur().Delete(ctx, key) }

func (h *splitHub) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return h.cur().List(ctx, prefix)
}

func (h *splitHub) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return stores.ListAfter(ctx, h.cur(), prefix, after)
}

func (h *splitHub) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	return stores.GetMany(ctx, h.cur(), keys)
}

func (h *splitHub) Capabilities() stores.Capabilities { return h.cur().Capabilities() }

// Close does nothing: the world closes the views.
func (h *splitHub) Close() error { return nil }

func (h *splitHub) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	tx, ok := h.cur().(stores.Transactor)
	if !ok {
		return stores.ErrNotSupported
	}
	return tx.Update(ctx, fn)
}

// forkSpan is the fork of a run: which device was served the copy, and
// the logical times it began and ended (0: not yet).
type forkSpan struct {
	dev      int
	from, to int64
}

// startFork serves device dev a copy of the hub as it is now.
func (w *world) startFork(ctx context.Context, si int, f Fault) string {
	if w.fork != nil && w.fork.to == 0 {
		return "a fork is served already"
	}
	if f.Target < 0 || f.Target >= len(w.devs) || !w.devs[f.Target].onHub {
		return "the device is not on the hub"
	}
	snap, err := w.hub.adv.Snapshot(ctx)
	if err != nil {
		return "fork: " + err.Error()
	}
	var inner stores.Store = memstore.New()
	if w.opts.Hub != nil {
		st, done, err := w.opts.Hub(ctx)
		if err != nil {
			return "fork: " + err.Error()
		}
		inner = st
		w.cleanups = append(w.cleanups, done)
	}
	c := newCtl("hub fork", inner, w.sched.Seed^0xf04c, w.stats)
	if err := c.adv.Restore(ctx, snap, ""); err != nil {
		return "fork: " + err.Error()
	}
	// The copy answers, storms and lies about commits as the hub does.
	w.hub.mu.Lock()
	storm, ambig, before := w.hub.storm, w.hub.ambig, w.hub.before
	w.hub.mu.Unlock()
	c.set(storm, ambig, before)
	c.down.Store(w.hub.down.Load())
	c.slow.Store(w.hub.slow.Load())
	w.forkCtl = c
	w.fork = &forkSpan{dev: f.Target, from: w.hist.tick()}
	w.hist.fork = w.fork
	w.forkEnd = -1
	if f.Span > 0 {
		w.forkEnd = si + f.Span
	}
	w.devs[f.Target].hub.serve(c.wrap(nil), true)
	return fmt.Sprintf("(%d keys copied)", len(snap))
}

// forkNeverEnds is a mutation for the checker's tests: a fork's end is
// recorded, but the device is served the copy still, so it never sees the
// real hub again and cannot detect the fork, as a device that did not
// check the hub's history would not.
var forkNeverEnds bool

// endFork serves the forked device the real hub again.
func (w *world) endFork() {
	if w.fork == nil || w.fork.to != 0 {
		return
	}
	view := w.hubSt
	if forkNeverEnds {
		view = w.devs[w.fork.dev].hub.cur()
	}
	w.devs[w.fork.dev].hub.serve(view, false)
	w.fork.to = w.hist.tick()
	w.hist.fault(fmt.Sprintf("fork ends: d%d is served the real hub again", w.fork.dev))
}

// hubCtls are the controllers of the hub: the real one and its copy.
func (w *world) hubCtls() []*storeCtl {
	if w.forkCtl != nil {
		return []*storeCtl{w.hub, w.forkCtl}
	}
	return []*storeCtl{w.hub}
}

// forkDoc is the threat table's row for a fork.
const forkDoc = "hub fork (threat table, split view: a number taken in both views is given twice, and no device can tell)"

// splitViews reports whether a and b were served two views of a fork: one
// by the forked device on the copy, the other on the real hub after the
// copy was taken.
func (h *history) splitViews(a, b *Event) bool {
	f := h.fork
	if f == nil || a.Fork == b.Fork {
		return false
	}
	real := a
	if a.Fork {
		real = b
	}
	return real.Return >= f.from
}

// issuedInOtherViewOnly reports whether every call that was handed the
// number a Void (e) names, before e was called, was served the other
// view of a fork than e.
func (h *history) issuedInOtherViewOnly(e *Event) bool {
	if h.fork == nil {
		return false
	}
	found := false
	for _, g := range h.events {
		if g.Key != e.Key || !gaveNumber(g) || g.Return >= e.Call || e.N < g.N || e.N >= g.N+uint64(max(g.K, 1)) {
			continue
		}
		if !h.splitViews(g, e) {
			return false
		}
		found = true
	}
	return found
}

// closedInView reports whether a ClosePeriod of key that succeeded before
// e was called holds in the view e was served: one made in e's view, or
// before the fork.
func (h *history) closedInView(key string, e *Event) bool {
	for _, c := range h.events {
		if c.Op.Kind != KClose || c.Key != key || c.Outcome != ok || c.Return >= e.Call {
			continue
		}
		if h.fork == nil || c.Fork == e.Fork || c.Return < h.fork.from {
			return true
		}
	}
	return false
}

// checkFork: a device the hub forked, which took a number on the copy
// (or, when the fork is the run's only lie, pushed a change to it), learns
// it once it is served the real hub again. Its first call that
// gives a number there is preceded by, or is, an ErrRollback (the threat
// table's split-view row); when the fork was the run's only lie, it must
// see ErrRollback by the end of the run, and no other device may see a
// detection error.
func (w *world) checkFork(res *Result, onlyFork bool, fail func(string, string, ...*Event)) {
	f := w.hist.fork
	if f == nil {
		return
	}
	if onlyFork {
		for _, e := range w.hist.events {
			if e.Op.Dev == f.dev || e.Err == nil {
				continue
			}
			if name, ok := detectionErr(e.Err); ok {
				fail("false alarm", fmt.Sprintf("%s on a device the hub did not fork: %v", name, e.Err), e)
			}
		}
	}
	var took *Event
	var after []*Event
	for _, e := range w.hist.events {
		if e.Op.Dev != f.dev || e.Op.Kind == KGuestNext {
			continue
		}
		if e.Fork && took == nil && gaveNumber(e) {
			took = e
		}
		if !e.Fork && f.to > 0 && e.Call > f.to {
			after = append(after, e)
		}
	}
	if took == nil && onlyFork {
		took = w.pushedOnFork()
	}
	if took == nil || f.to == 0 {
		return
	}
	slices.SortFunc(after, func(a, b *Event) int { return cmp.Compare(a.Call, b.Call) })
	detected := false
	for _, e := range after {
		if errors.Is(e.Err, vault.ErrRollback) {
			detected = true
			break
		}
		if !onlyFork {
			if _, ok := detectionErr(e.Err); ok {
				detected = true // another lie of the run was found first
				break
			}
		}
		if gaveNumber(e) {
			fail("fork undetected", fmt.Sprintf("d%d wrote to the hub's copy, then took a number on the real hub with no ErrRollback", f.dev), took, e)
			return
		}
	}
	if !detected && onlyFork {
		fail("fork undetected", fmt.Sprintf("d%d took a number on the hub's copy and never got ErrRollback once served the real hub", f.dev), took)
	}
}

// pushedOnFork returns a Sync of the forked device, on the hub's copy,
// that pushed a note written during the fork (and not lost to a
// conflict), or nil. Its push wrote to the copy's ledger.
func (w *world) pushedOnFork() *Event {
	f := w.hist.fork
	for _, s := range w.hist.events {
		if s.Op.Dev != f.dev || !s.Fork || s.Op.Kind != KSync || s.Outcome != ok {
			continue
		}
		for _, c := range w.hist.events {
			if c.Op.Dev != f.dev || c.Outcome != ok || c.Call < f.from || c.Return >= s.Call {
				continue
			}
			switch c.Op.Kind {
			case KPut, KDelete, KUpdate, KTx:
			default:
				continue
			}
			ids := []string{c.Op.ID}
			if c.Op.ID2 != "" {
				ids = append(ids, c.Op.ID2)
			}
			for _, id := range ids {
				if !slices.Contains(s.Conflicts, "notes/"+id) {
					return s
				}
			}
		}
	}
	return nil
}

// gaveNumber reports whether e handed its caller a number.
func gaveNumber(e *Event) bool {
	return e.Outcome == ok && e.Key != "" && e.N > 0 && e.Op.Kind != KVoid && e.Op.Kind != KClose && e.Op.Kind != kPeek
}
