// Package batch combines concurrent calls into batches that one of the
// callers runs, so that many callers share one commit (one transaction, one
// fsync, one round trip) instead of each paying for its own.
//
// # Usage
//
// A call type embeds Slot, parameterised by its own pointer type, and a
// Queue is given the two functions that shape and run a batch:
//
//	type write struct {
//		batch.Slot[*write]
//		key string
//		err error // set by run
//	}
//
//	q := &batch.Queue[*write]{Run: run} // Cut nil: a batch is the whole queue
//
//	w := &write{key: "a"}
//	if err := q.Do(ctx, w); err != nil {
//		return err // ctx ended before w was taken, or the batch was abandoned
//	}
//	return w.err
//
// There is no timer and no goroutine of its own. A call that finds no batch
// running runs at once, alone, in its caller's goroutine. Calls that arrive
// while a batch runs wait in the queue; when the batch ends, the first of
// them becomes the next leader and runs the waiting calls (cut to what one
// batch may carry) as one batch. So a batch is what queued up during the
// previous one, and a lone call waits for nobody.
//
// # Cancellation
//
// One rule for every user: a call whose context ends while it waits in the
// queue leaves it and gets the context's error, and nothing is done for it.
// Once taken into a batch, a call sees the batch through: the batch runs
// under a context that carries the values of its leader's context and is
// cancelled only when every caller in it has given up, so one caller's
// cancellation never fails another.
//
// # Concurrency
//
// A Queue is safe for concurrent use; its zero value, with Run set, is
// ready. Run is called from one goroutine at a time.
package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrAbandoned is returned by Do to the members of a batch whose Run
// panicked in its leader's goroutine (where the panic goes on). Their
// outcome is what Run left in them, which may be incomplete.
var ErrAbandoned = errors.New("batch abandoned: a panic in the goroutine running it")

// Slot is the part of a call that the queue uses. Embed it, parameterised
// by the call's pointer type, in the call's struct; its zero value is ready.
// A call is in one Do at a time, and may be reused for another Do once its
// Do has returned.
type Slot[T any] struct {
	done      chan struct{}   // one signal per Do: the outcome is ready, or lead
	lead      []T             // set before done is signalled when the call must lead it
	one       [1]T            // the batch of a call that runs at once, alone
	ctx       context.Context // the context of the call's Do, while it runs
	abandoned bool
}

func (s *Slot[T]) slot() *Slot[T] { return s }

// Member is the constraint of Queue's type parameter: a pointer to a struct
// that embeds Slot[T].
type Member[T any] interface {
	comparable
	slot() *Slot[T]
}

// Queue batches calls of type T. Set Run (and Cut, if a batch has limits)
// before the first Do, and do not change them afterwards. A Queue is safe
// for concurrent use.
type Queue[T Member[T]] struct {
	// Run runs batch and leaves each call's outcome in it. ctx is cancelled
	// only once every caller in batch has given up. batch[0] is the call of
	// the goroutine running it. Run must not call Do on the same Queue.
	Run func(ctx context.Context, batch []T)
	// Cut splits waiting calls into the next batch and the calls that stay
	// queued, in order; the batch must hold at least one call when queue
	// holds any. nil means the whole queue is the next batch.
	Cut func(queue []T) (batch, rest []T)

	mu      sync.Mutex
	running bool
	queue   []T
}

// Do runs m in a batch and returns once m has its outcome (or, with an
// error, none). It returns nil when m was run; ctx's error when ctx ended
// while m waited, before any batch took it (nothing was done for m); and
// ErrAbandoned when the batch that held m panicked.
func (q *Queue[T]) Do(ctx context.Context, m T) error {
	s := m.slot()
	s.ctx, s.abandoned = ctx, false
	defer func() { s.ctx = nil }()

	q.mu.Lock()
	if !q.running {
		q.running = true
		q.mu.Unlock()
		s.one[0] = m
		q.lead(s.one[:])
		return nil
	}
	if s.done == nil {
		s.done = make(chan struct{}, 1) // only a call that waits needs one
	}
	q.queue = append(q.queue, m)
	q.mu.Unlock()

	if cancelled := ctx.Done(); cancelled == nil {
		<-s.done // a context that cannot end: no select needed
	} else {
		select {
		case <-s.done:
		case <-cancelled:
			q.mu.Lock()
			if i := slices.Index(q.queue, m); i >= 0 {
				q.queue = slices.Delete(q.queue, i, i+1)
				q.mu.Unlock()
				return ctx.Err()
			}
			q.mu.Unlock()
			<-s.done // taken already: see the batch through
		}
	}
	if s.lead != nil {
		batch := s.lead
		s.lead = nil
		q.lead(batch)
	}
	if s.abandoned {
		return ErrAbandoned
	}
	return nil
}

// Waiting returns how many calls wait in the queue, not yet taken into a
// batch. It is a snapshot, for tests and metrics.
func (q *Queue[T]) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// lead runs batch, whose first call is the caller's, then hands the queue
// to its next leader and wakes the other calls of batch, even when Run
// panics.
func (q *Queue[T]) lead(batch []T) {
	completed := false
	defer func() {
		if !completed {
			for _, m := range batch[1:] {
				m.slot().abandoned = true
			}
		}
		q.handOff(batch)
	}()
	ctx, release := batchContext(batch)
	defer release()
	q.Run(ctx, batch)
	completed = true
}

// handOff cuts the next batch from the queue, makes its first call the
// leader, and wakes the other calls of the batch that ended.
func (q *Queue[T]) handOff(ended []T) {
	q.mu.Lock()
	var next []T
	switch {
	case len(q.queue) == 0:
		q.running = false
	case q.Cut == nil:
		next, q.queue = q.queue, nil
	default:
		next, q.queue = q.Cut(q.queue)
		if len(next) == 0 {
			q.mu.Unlock()
			panic("batch: Cut returned an empty batch")
		}
		if len(q.queue) == 0 {
			q.queue = nil
		}
	}
	q.mu.Unlock()

	if len(next) > 0 {
		s := next[0].slot()
		s.lead = next
		s.done <- struct{}{}
	}
	for _, m := range ended[1:] {
		m.slot().done <- struct{}{} // m belongs to its caller from here on
	}
}

// noop is the stop function of a batch context that has nothing to stop
// (a variable, so that returning it allocates nothing).
var noop = func() {}

// batchContext is the context batch runs under: it carries the values of
// the leader's context and is cancelled only once every caller has given
// up. A batch of one runs under its caller's context.
func batchContext[T Member[T]](batch []T) (context.Context, func()) {
	first := batch[0].slot().ctx
	if len(batch) == 1 {
		return first, noop
	}
	base := context.WithoutCancel(first)
	for _, m := range batch {
		if m.slot().ctx.Done() == nil {
			return base, noop // this caller can never give up
		}
	}
	ctx, cancel := context.WithCancel(base)
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, m := range batch {
		stops[i] = context.AfterFunc(m.slot().ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
