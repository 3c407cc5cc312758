package batch_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/batch"
)

type call struct {
	batch.Slot[*call]
	in    int
	out   int // set by Run: the position the call got
	ctxOK bool
}

// counterQueue hands out consecutive positions to the calls of each batch,
// and records the batch sizes.
type counterQueue struct {
	q     batch.Queue[*call]
	next  int
	sizes []int
}

func newCounterQueue(limit int) *counterQueue {
	c := &counterQueue{}
	c.q.Run = func(ctx context.Context, b []*call) {
		c.sizes = append(c.sizes, len(b))
		for _, m := range b {
			c.next++
			m.out = c.next
			m.ctxOK = ctx.Err() == nil
		}
	}
	if limit > 0 {
		c.q.Cut = func(queue []*call) ([]*call, []*call) {
			n := min(limit, len(queue))
			return queue[:n:n], queue[n:]
		}
	}
	return c
}

func TestEveryCallGetsOneOutcome(t *testing.T) {
	for _, limit := range []int{0, 1, 7} {
		c := newCounterQueue(limit)
		const callers, each = 32, 200
		got := make([][]int, callers)
		var wg sync.WaitGroup
		for g := range callers {
			wg.Go(func() {
				m := &call{} // reused across calls
				for range each {
					if err := c.q.Do(context.Background(), m); err != nil {
						t.Error(err)
						return
					}
					got[g] = append(got[g], m.out)
				}
			})
		}
		wg.Wait()
		seen := make(map[int]bool)
		for _, outs := range got {
			for _, n := range outs {
				assert.False(t, seen[n], "position %d handed out twice", n)
				seen[n] = true
			}
		}
		assert.Len(t, seen, callers*each, "limit %d", limit)
		for n := 1; n <= callers*each; n++ {
			assert.True(t, seen[n], "position %d missing", n)
		}
		for _, s := range c.sizes {
			if limit > 0 {
				assert.LessOrEqual(t, s, limit, "a batch over the limit")
			}
		}
	}
}

// blockingQueue runs batches that wait for release before they end, so a
// test can queue calls behind a running batch.
type blockingQueue struct {
	q       batch.Queue[*call]
	started chan []*call
	release chan struct{}
}

func newBlockingQueue() *blockingQueue {
	b := &blockingQueue{started: make(chan []*call, 16), release: make(chan struct{})}
	b.q.Run = func(ctx context.Context, batch []*call) {
		b.started <- batch
		<-b.release
		for _, m := range batch {
			m.out = m.in
			m.ctxOK = ctx.Err() == nil
		}
	}
	return b
}

// waitQueued spins until n calls wait in q's queue.
func waitQueued(q *batch.Queue[*call], n int) {
	for q.Waiting() < n {
		runtime.Gosched()
	}
}

func TestBatchIsWhatQueuedMeanwhile(t *testing.T) {
	b := newBlockingQueue()
	first := &call{in: 1}
	done := make(chan error, 8)
	go func() { done <- b.q.Do(context.Background(), first) }()
	require.Len(t, <-b.started, 1, "a lone call runs at once, alone")

	others := []*call{{in: 2}, {in: 3}, {in: 4}}
	for _, m := range others {
		go func() { done <- b.q.Do(context.Background(), m) }()
	}
	// The queued calls cannot run while the first batch holds the queue.
	waitQueued(&b.q, len(others))
	b.release <- struct{}{}
	require.NoError(t, <-done)
	second := <-b.started
	assert.Len(t, second, 3, "the calls that queued meanwhile run as one batch")
	b.release <- struct{}{}
	for range others {
		require.NoError(t, <-done)
	}
	for _, m := range others {
		assert.Equal(t, m.in, m.out)
	}
}

func TestCancelledWhileQueuedLeavesTheQueue(t *testing.T) {
	b := newBlockingQueue()
	done := make(chan error, 4)
	go func() { done <- b.q.Do(context.Background(), &call{in: 1}) }()
	<-b.started

	ctx, cancel := context.WithCancel(context.Background())
	gone := &call{in: 2}
	go func() { done <- b.q.Do(ctx, gone) }()
	waitQueued(&b.q, 1)
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled, "a call cancelled in the queue gets its context's error")
	assert.Equal(t, 0, b.q.Waiting(), "and leaves the queue")
	b.release <- struct{}{}
	require.NoError(t, <-done)
	assert.Zero(t, gone.out, "nothing was done for it")

	// The queue still works afterwards.
	go func() { done <- b.q.Do(context.Background(), &call{in: 3}) }()
	<-b.started
	b.release <- struct{}{}
	require.NoError(t, <-done)
}

func TestOneCallerGivingUpDoesNotCancelTheBatch(t *testing.T) {
	b := newBlockingQueue()
	done := make(chan error, 4)
	go func() { done <- b.q.Do(context.Background(), &call{in: 1}) }()
	<-b.started

	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	a, bb := &call{in: 2}, &call{in: 3}
	go func() { done <- b.q.Do(ctxA, a) }()
	go func() { done <- b.q.Do(ctxB, bb) }()
	waitQueued(&b.q, 2)
	b.release <- struct{}{}
	require.NoError(t, <-done)
	second := <-b.started // a and b now run as one batch
	require.Len(t, second, 2)
	cancelA() // a gives up while its batch runs; b has not
	b.release <- struct{}{}
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	assert.True(t, a.ctxOK && bb.ctxOK, "the batch context lives while one caller still waits")
	assert.Equal(t, 2, a.out, "a taken into a batch sees it through")
	cancelB()
}

func TestBatchContextEndsWhenEveryCallerGaveUp(t *testing.T) {
	var q batch.Queue[*call]
	entered := make(chan struct{})
	ended := make(chan struct{})
	q.Run = func(ctx context.Context, b []*call) {
		if b[0].in == 1 {
			close(entered)
			<-ended
			return
		}
		<-ctx.Done() // returns only once every caller gave up
	}
	done := make(chan error, 4)
	go func() { done <- q.Do(context.Background(), &call{in: 1}) }()
	<-entered
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	go func() { done <- q.Do(ctxA, &call{in: 2}) }()
	go func() { done <- q.Do(ctxB, &call{in: 3}) }()
	waitQueued(&q, 2)
	close(ended)
	require.NoError(t, <-done)
	// The first batch handed the queue on before its Do returned: the
	// second batch holds both calls. Its Run returns only once its context
	// ends, which cancelling both callers must bring about (the test hangs
	// otherwise).
	require.Zero(t, q.Waiting(), "both calls were taken into the second batch")
	cancelA()
	cancelB()
	require.NoError(t, <-done, "taken into a batch: seen through")
	require.NoError(t, <-done, "taken into a batch: seen through")
}

func TestPanicInRunAbandonsTheOthers(t *testing.T) {
	var q batch.Queue[*call]
	entered := make(chan struct{})
	release := make(chan struct{})
	var runs atomic.Int32
	q.Run = func(ctx context.Context, b []*call) {
		switch runs.Add(1) {
		case 1:
			close(entered)
			<-release
		case 2:
			panic("boom")
		}
	}
	done := make(chan error, 4)
	go func() { done <- q.Do(context.Background(), &call{in: 1}) }()
	<-entered
	panicked := make(chan any, 4)
	for i := range 3 {
		go func() {
			defer func() { panicked <- recover() }()
			done <- q.Do(context.Background(), &call{in: 2 + i})
		}()
	}
	waitQueued(&q, 3)
	close(release)
	require.NoError(t, <-done)
	var abandoned, panics int
	for range 3 {
		if p := <-panicked; p != nil {
			assert.Equal(t, "boom", p)
			panics++
			continue
		}
		err := <-done
		assert.ErrorIs(t, err, batch.ErrAbandoned)
		abandoned++
	}
	assert.Equal(t, 1, panics, "the panic goes on in the leader's goroutine")
	assert.Equal(t, 2, abandoned, "the others are told")

	// The queue is usable afterwards.
	require.NoError(t, q.Do(context.Background(), &call{in: 9}))
}
