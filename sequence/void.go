package sequence

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// Void marks n, a number the series has handed out, as void with a reason
// (for example a cancelled invoice), so an audit can tell a voided number from
// a missing one. The number stays taken: voiding never rewinds the counter.
//
// It fails with ErrNotIssued when n is 0 or above the counter, with
// ErrRollback when the counter is below n but the vault's ledger records n
// or a higher number (the store rolled it back or dropped it), with
// ErrSkipped (which also matches ErrNotIssued) when n is one of the numbers a
// SeedTo skipped over (known from the vault's audit ledger), with ErrAlreadyVoided when n was voided before, with a *ValidationError for an
// empty reason or one longer than MaxReasonLen, and with ErrOffline on a
// store without atomic compare-and-swap. The audit ledger gets a
// number-voided entry: in the transaction that writes the marker, or after
// it on a store without transactions.
//
// On a series with periods it voids n of the current period (the handle's
// date's, for a handle of At); voiding into a closed period is allowed.
func (q *Sequence) Void(ctx context.Context, n uint64, reason string) error {
	if err := q.allocating(ctx, "void"); err != nil {
		return err
	}
	q, _, err := q.resolve(ctx)
	if err != nil {
		return err
	}
	// Admitted like the allocating calls, so Close waits for the marker's
	// write (on a store without transactions it is not in a ledger batch).
	if !q.svc.gate.Enter() {
		return q.errorf("void", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	switch {
	case reason == "":
		return invalid("reason", reason, "empty")
	case len(reason) > MaxReasonLen:
		return invalid("reason", reason, fmt.Sprintf("longer than %d bytes", MaxReasonLen))
	case !utf8.ValidString(reason):
		return invalid("reason", reason, "not valid UTF-8")
	}
	if n == 0 {
		return q.errorf("void", fmt.Errorf("number 0: %w", ErrNotIssued))
	}
	key := voidKey(q.c.key, n)
	sealed, err := q.svc.sealer.Seal(key, encodeReason(reason))
	if err != nil {
		return q.errorf("void", err)
	}
	events := []event{{Kind: wire.EventVoided, Series: q.series, Partition: q.c.partition, Number: n, Reason: reason}}

	// The counter only grows, so a number it covers now is issued for good:
	// it is read outside the marker's transaction, which then does not
	// conflict with allocations.
	current, err := q.peek(ctx)
	if err != nil {
		return err
	}
	if n > current {
		var highest uint64
		if q.svc.history != nil {
			if highest, err = q.c.recordedHighest(ctx, n); err != nil {
				return q.errorf("void", err)
			}
		}
		if highest < n {
			return q.errorf("void", fmt.Errorf("number %d (the counter is at %d): %w", n, current, ErrNotIssued))
		}
		// The ledger records n as issued. An allocation may have taken it
		// since the counter was read (its entry is written with the
		// counter, or after it): read the counter again. Still below, the
		// store serves a counter behind its ledger (rolled back or
		// dropped), which is no fault of the caller's.
		if current, err = q.peek(ctx); err != nil {
			return err
		}
		if n > current {
			return q.errorf("void", behind(current, highest))
		}
	}
	if q.svc.history != nil {
		// The seed that skipped n, if any, was recorded before the counter
		// reached n (in the same transaction, or just after on a store
		// without transactions), so reading the history now finds it.
		r, skipped, err := q.c.seededOver(ctx, n)
		if err != nil {
			return q.errorf("void", err)
		}
		if skipped {
			return q.errorf("void", fmt.Errorf("number %d (SeedTo skipped %d..%d): %w: %w", n, r.from, r.to, ErrSkipped, ErrNotIssued))
		}
	}
	if q.svc.txr != nil {
		attempts, err := cas.Do(ctx, q.svc.policy, func(int) error {
			return q.svc.update(ctx, []string{key}, func(tx stores.Tx) error {
				if _, err := tx.Get(key); err == nil {
					return fmt.Errorf("number %d: %w", n, ErrAlreadyVoided)
				} else if !errors.Is(err, stores.ErrNotFound) {
					return err
				}
				if err := tx.Put(key, sealed); err != nil {
					return err
				}
				if q.svc.journal != nil {
					return q.svc.journal.Record(ctx, tx, events)
				}
				return nil
			})
		})
		if cas.Exhausted(err) {
			return &ContentionError{Series: q.c.name, Attempts: attempts}
		}
		if errors.Is(err, pins.ErrUnpinned) {
			return q.errorf("void", fmt.Errorf("number %d was voided, but: %w", n, err))
		}
		return q.errorf("void", err)
	}

	// Without transactions, creating the marker with an expected version of
	// 0 fails if any other Void created it first.
	if _, err := q.svc.store.CompareAndSwap(ctx, key, 0, sealed); errors.Is(err, stores.ErrConflict) {
		return q.errorf("void", fmt.Errorf("number %d: %w", n, ErrAlreadyVoided))
	} else if err != nil {
		return q.errorf("void", err)
	}
	if q.svc.journal != nil {
		if err := q.svc.journal.Record(ctx, nil, events); err != nil {
			return q.errorf("void", fmt.Errorf("number %d was voided but the journal failed: %w", n, err))
		}
	}
	return nil
}

// Voided reports whether n was voided, and why. It never writes and works on
// every store.
func (q *Sequence) Voided(ctx context.Context, n uint64) (reason string, voided bool, err error) {
	q, _, err = q.resolve(ctx)
	if err != nil {
		return "", false, err
	}
	if !q.svc.gate.Enter() {
		return "", false, q.errorf("voided", stores.ErrClosed)
	}
	defer q.svc.gate.Exit()
	key := voidKey(q.c.key, n)
	item, err := q.svc.store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, q.errorf("voided", err)
	}
	pt, err := q.svc.sealer.Open(key, item.Value)
	if err == nil {
		reason, err = decodeReason(pt)
	}
	if err != nil {
		return "", false, q.errorf("voided", fmt.Errorf("read void marker: %w", err))
	}
	return reason, true, nil
}
