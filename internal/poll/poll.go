// Package poll waits for a condition that cannot signal its change, such
// as a lock whose wait cannot be cancelled: it tries, and backs off between
// tries.
package poll

import (
	"context"
	"time"
)

// Until calls try until it reports true or an error, waiting first between
// the first two tries and doubling the wait up to limit, or until ctx ends:
// then it returns ctx's error. try runs at least once unless ctx has
// already ended.
func Until(ctx context.Context, first, limit time.Duration, try func() (bool, error)) error {
	delay := first
	var t *time.Timer
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if t == nil {
			t = time.NewTimer(delay)
			defer t.Stop()
		} else {
			t.Reset(delay)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, limit)
	}
}
