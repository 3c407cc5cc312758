package cas_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/stores"
)

// fast keeps the backoff waits of conflict tests negligible.
var fast = cas.Policy{BaseDelay: time.Microsecond, MaxDelay: time.Microsecond}

func TestDoSucceedsFirstAttempt(t *testing.T) {
	var calls []int
	n, err := cas.Do(context.Background(), cas.Policy{}, func(attempt int) error {
		calls = append(calls, attempt)
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, []int{1}, calls)
}

func TestDoReturnsOtherErrorsAtOnce(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	n, err := cas.Do(context.Background(), fast, func(int) error {
		calls++
		return boom
	})
	assert.Same(t, boom, err, "a non-conflict error comes back unchanged")
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, calls)
}

func TestDoRetriesConflicts(t *testing.T) {
	var calls []int
	n, err := cas.Do(context.Background(), fast, func(attempt int) error {
		calls = append(calls, attempt)
		if attempt < 3 {
			// A wrapped conflict counts as a conflict.
			return fmt.Errorf("put counter: %w", stores.ErrConflict)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []int{1, 2, 3}, calls)
}

func TestDoStopsRetryingOnOtherError(t *testing.T) {
	boom := errors.New("boom")
	n, err := cas.Do(context.Background(), fast, func(attempt int) error {
		if attempt == 1 {
			return stores.ErrConflict
		}
		return boom
	})
	assert.Same(t, boom, err)
	assert.Equal(t, 2, n)
}

func TestDoExhaustsBudget(t *testing.T) {
	for _, tc := range []struct {
		max, want int
	}{{0, cas.DefaultMaxAttempts}, {1, 1}, {5, 5}} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			p := fast
			p.MaxAttempts = tc.max
			calls := 0
			n, err := cas.Do(context.Background(), p, func(int) error {
				calls++
				return stores.ErrConflict
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, cas.ErrExhausted)
			assert.ErrorIs(t, err, stores.ErrConflict)
			assert.Equal(t, tc.want, n)
			assert.Equal(t, tc.want, calls)
		})
	}
}

func TestDoDoneContextRunsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	n, err := cas.Do(ctx, fast, func(int) error {
		calls++
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 0, n)
	assert.Equal(t, 0, calls)
}

func TestDoCancelDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// An hour-long backoff: Do must return when ctx is cancelled, not when the timer fires.
	p := cas.Policy{BaseDelay: time.Hour, MaxDelay: time.Hour}
	calls := 0
	n, err := cas.Do(ctx, p, func(int) error {
		calls++
		cancel()
		return stores.ErrConflict
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, calls)
}

func TestDoDeadlineBetweenAttempts(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	_, err := cas.Do(ctx, fast, func(int) error { return nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCeiling(t *testing.T) {
	var zero cas.Policy
	assert.Equal(t, cas.DefaultBaseDelay, zero.Ceiling(1))
	assert.Equal(t, 2*cas.DefaultBaseDelay, zero.Ceiling(2))
	assert.Equal(t, 4*cas.DefaultBaseDelay, zero.Ceiling(3))
	assert.Equal(t, cas.DefaultMaxDelay, zero.Ceiling(20), "capped")
	assert.Equal(t, cas.DefaultMaxDelay, zero.Ceiling(1000), "no overflow")

	p := cas.Policy{BaseDelay: time.Millisecond, MaxDelay: 3 * time.Millisecond}
	assert.Equal(t, time.Millisecond, p.Ceiling(1))
	assert.Equal(t, 2*time.Millisecond, p.Ceiling(2))
	assert.Equal(t, 3*time.Millisecond, p.Ceiling(3))

	inverted := cas.Policy{BaseDelay: time.Second, MaxDelay: time.Millisecond}
	assert.Equal(t, time.Millisecond, inverted.Ceiling(1))
}

func TestBackoffIsJitteredWithinCeiling(t *testing.T) {
	p := cas.Policy{BaseDelay: time.Millisecond, MaxDelay: 8 * time.Millisecond}
	for attempt := 1; attempt <= 6; attempt++ {
		ceiling := p.Ceiling(attempt)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.Backoff(attempt)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, ceiling)
			seen[d] = true
		}
		assert.Greater(t, len(seen), 1, "attempt %d: delays are jittered", attempt)
	}
}

func TestRemainingSharesOneBudget(t *testing.T) {
	p := cas.Policy{MaxAttempts: 5, BaseDelay: time.Nanosecond}
	conflict := func(int) error { return stores.ErrConflict }
	first, err := cas.Do(context.Background(), p, func(a int) error {
		if a == 3 {
			return errors.New("stop")
		}
		return stores.ErrConflict
	})
	require.Error(t, err)
	require.Equal(t, 3, first)
	second, err := cas.Do(context.Background(), p.Remaining(first), conflict)
	require.True(t, cas.Exhausted(err))
	assert.Equal(t, 2, second, "both loops together spend the budget of 5")
	assert.Equal(t, 1, cas.Policy{MaxAttempts: 2}.Remaining(7).MaxAttempts, "at least one attempt")
	assert.Equal(t, cas.DefaultMaxAttempts-1, cas.Policy{}.Remaining(1).MaxAttempts)
}

func TestExhaustedIsDosOwn(t *testing.T) {
	_, err := cas.Do(context.Background(), cas.Policy{MaxAttempts: 1}, func(int) error { return stores.ErrConflict })
	assert.True(t, cas.Exhausted(err))
	assert.ErrorIs(t, err, cas.ErrExhausted)
	// An inner loop's contention, passed on through fn, is not Do's own.
	inner := fmt.Errorf("ledger: %w after 16 attempts", cas.ErrExhausted)
	_, err = cas.Do(context.Background(), cas.Policy{}, func(int) error { return inner })
	assert.False(t, cas.Exhausted(err))
	assert.ErrorIs(t, err, cas.ErrExhausted)
}

// testHold is a cas.Hold that passes when its channel is closed.
type testHold struct {
	over    chan struct{}
	awaited int
}

func (h *testHold) Error() string { return "held: " + stores.ErrConflict.Error() }
func (h *testHold) Unwrap() error { return stores.ErrConflict }
func (h *testHold) Await(ctx context.Context) error {
	h.awaited++
	select {
	case <-h.over:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestDoWaitsForAHoldWithoutSpendingTheBudget(t *testing.T) {
	h := &testHold{over: make(chan struct{})}
	close(h.over)
	var calls []int
	held := 0
	n, err := cas.Do(context.Background(), cas.Policy{MaxAttempts: 2, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond}, func(attempt int) error {
		calls = append(calls, attempt)
		switch {
		case held < 5:
			held++
			return fmt.Errorf("commit: %w", h)
		case attempt == 1:
			return stores.ErrConflict
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 7, n, "fn ran seven times")
	assert.Equal(t, []int{1, 1, 1, 1, 1, 1, 2}, calls, "the held attempts were not counted")
	assert.Equal(t, 5, h.awaited)
}

func TestDoReturnsAHoldWhenAsked(t *testing.T) {
	h := &testHold{over: make(chan struct{})}
	n, err := cas.Do(context.Background(), cas.Policy{ReturnHolds: true}, func(int) error { return h })
	assert.Same(t, cas.Hold(h), cas.HoldOf(err))
	assert.Equal(t, 1, n)
	assert.Zero(t, h.awaited, "the caller waits, not Do")
}

func TestDoStopsWaitingForAHoldWhenTheContextEnds(t *testing.T) {
	h := &testHold{over: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := cas.Do(ctx, fast, func(int) error {
		cancel()
		return h
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, n)
	assert.False(t, cas.Exhausted(err))
}
