// Package cas is the one optimistic compare-and-swap retry helper that the
// sequence and ledger packages share.
//
// # Usage
//
// Do runs an attempt function; when the attempt loses a compare-and-swap race
// (its error matches stores.ErrConflict) Do waits a jittered, exponentially
// growing delay and runs it again, up to a bounded number of attempts. Every
// other error, and success, ends the loop at once:
//
//	attempts, err := cas.Do(ctx, cas.Policy{}, func(attempt int) error {
//		item, err := store.Get(ctx, key)
//		// ... compute the new value from item ...
//		_, err = store.CompareAndSwap(ctx, key, item.Version, value)
//		return err
//	})
//	if errors.Is(err, cas.ErrExhausted) {
//		// turn it into the caller's contention error, reporting attempts
//	}
//
// # Concurrency
//
// Do and Policy are safe for concurrent use; Do calls fn from the calling
// goroutine only, one attempt at a time.
package cas

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/noydb-go/noydb/internal/errs"
	"github.com/noydb-go/noydb/stores"
)

// Defaults used for the zero fields of a Policy.
const (
	// DefaultMaxAttempts is the retry budget of a zero Policy.
	DefaultMaxAttempts = 16
	// DefaultBaseDelay is the backoff ceiling after the first conflict.
	DefaultBaseDelay = 50 * time.Microsecond
	// DefaultMaxDelay caps the backoff ceiling however many conflicts came before.
	DefaultMaxDelay = 10 * time.Millisecond
)

// ErrExhausted is returned (wrapping the last conflict) when every attempt of
// the budget lost a compare-and-swap race. It is the one contention error
// (sequence.ErrContention, ledger.ErrContention are the same value).
var ErrExhausted = errs.ErrContention

// Hold is an error an attempt returns, matching stores.ErrConflict, when
// it was held back by something it must not overlap (a renewal of the
// signing key its commit would be signed with), which ends by itself: the
// attempt wrote nothing, and the loop waits for the hold to pass (Await),
// outside the attempt, and runs it again without counting it against the
// budget. Await must return once the hold is over, or ctx's error once ctx
// is done.
type Hold interface {
	error
	Await(ctx context.Context) error
}

// HoldOf returns the Hold in err's chain, nil when there is none.
func HoldOf(err error) Hold {
	var h Hold
	if err != nil && errors.As(err, &h) {
		return h
	}
	return nil
}

// Policy bounds a retry loop. The zero value means the documented defaults.
type Policy struct {
	// MaxAttempts is the largest number of times fn runs, attempts held
	// back by a Hold not counted; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// BaseDelay is the backoff ceiling after the first conflict; it doubles after
	// each further conflict. 0 means DefaultBaseDelay.
	BaseDelay time.Duration
	// MaxDelay caps the backoff ceiling; 0 means DefaultMaxDelay.
	MaxDelay time.Duration
	// ReturnHolds makes Do return an attempt's Hold instead of waiting for
	// it: for a caller that holds something (a lock) the hold's end may
	// need, and waits once it let go.
	ReturnHolds bool
}

func (p Policy) maxAttempts() int {
	if p.MaxAttempts <= 0 {
		return DefaultMaxAttempts
	}
	return p.MaxAttempts
}

// Remaining returns p with the budget left after used attempts (at least
// one), for a second loop that must share p's budget with a first one.
func (p Policy) Remaining(used int) Policy {
	p.MaxAttempts = max(p.maxAttempts()-used, 1)
	return p
}

// Exhausted reports whether err is Do's own report of a spent budget (as
// opposed to a contention error an inner loop returned through fn, which
// Do passes on unchanged and which also matches ErrExhausted).
func Exhausted(err error) bool {
	return errors.Is(err, ErrExhausted) && errors.Is(err, stores.ErrConflict)
}

// Ceiling returns the longest delay Do may wait after the given failed attempt
// (1 for the first): BaseDelay doubled attempt-1 times, capped at MaxDelay.
func (p Policy) Ceiling(attempt int) time.Duration {
	base, limit := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if limit <= 0 {
		limit = DefaultMaxDelay
	}
	if base > limit {
		return limit
	}
	d := base
	for i := 1; i < attempt; i++ {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return d
}

// Backoff returns the delay Do waits after the given failed attempt: a uniformly
// random duration in [0, Ceiling(attempt)] ("full jitter"), so writers that
// collided once spread out instead of colliding again in lockstep.
func (p Policy) Backoff(attempt int) time.Duration {
	c := p.Ceiling(attempt)
	if c <= 0 {
		return 0
	}
	return rand.N(c + 1)
}

// Do runs fn until it succeeds, fails with an error other than a conflict, the
// budget is spent, or ctx is done. attempt counts from 1. An attempt held back
// by a Hold is not counted: Do waits for the hold to pass (unless
// p.ReturnHolds) and runs fn again with the same attempt number. It returns
// how many times fn ran and:
//
//   - nil when fn returned nil;
//   - fn's error, unchanged, when it does not match stores.ErrConflict, or is
//     a Hold and p.ReturnHolds is set;
//   - an error matching both ErrExhausted and stores.ErrConflict when all
//     MaxAttempts attempts conflicted;
//   - ctx.Err() when ctx is done before an attempt, during a backoff wait
//     or while waiting for a hold (fn is never started with a done context).
func Do(ctx context.Context, p Policy, fn func(attempt int) error) (ran int, err error) {
	limit := p.maxAttempts()
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return ran, err
		}
		err := fn(attempt)
		ran++
		if err == nil || !errors.Is(err, stores.ErrConflict) {
			return ran, err
		}
		if h := HoldOf(err); h != nil {
			if p.ReturnHolds {
				return ran, err
			}
			if err := h.Await(ctx); err != nil {
				return ran, err
			}
			attempt-- // not counted
			continue
		}
		if attempt >= limit {
			return ran, fmt.Errorf("%w after %d attempts: %w", ErrExhausted, attempt, err)
		}
		if err := wait(ctx, p.Backoff(attempt)); err != nil {
			return ran, err
		}
	}
}

// wait sleeps for d or until ctx is done, whichever comes first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
