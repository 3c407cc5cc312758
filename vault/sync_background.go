package vault

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Syncer syncs a vault in the background, every period, until stopped,
// and keeps a status the application can show. Obtain one with
// Vault.SyncEvery. It is safe for concurrent use.
type Syncer struct {
	v      *Vault
	period time.Duration
	settle bool // each sync is a SyncAndSettle
	cancel context.CancelFunc
	done   chan struct{}
	now    chan chan syncResult

	mu     sync.Mutex
	status SyncStatus
}

// SyncStatus is what a Syncer has done so far.
type SyncStatus struct {
	// Running reports whether a sync is under way.
	Running bool
	// Syncs counts the syncs that ended (with or without an error).
	Syncs int
	// LastReport is the report of the last sync that ended (partial when
	// it failed).
	LastReport SyncReport
	// LastError is the error of the last sync that ended, nil when it
	// succeeded.
	LastError error
	// LastEnded is when the last sync ended (zero before the first).
	LastEnded time.Time
	// Stopped reports whether the Syncer has stopped: Stop was called, the
	// context of SyncEvery ended or the vault was closed.
	Stopped bool
}

type syncResult struct {
	rep SyncReport
	err error
}

// SyncerOption configures a Syncer (SyncEvery).
type SyncerOption func(*Syncer)

// SettleNumbers makes each sync of a Syncer a SyncAndSettle: the records
// written with the vault's NumberingOf handles get their numbers from a
// pass on the hub within one period, and come back with them.
func SettleNumbers() SyncerOption { return func(s *Syncer) { s.settle = true } }

// SyncEvery starts syncing v in the background: at once, then every
// period, until Stop is called, ctx ends or the vault is closed (the sync
// then under way ends with ErrClosed, in Status). A vault without a hub gives
// ErrNoHub and a period that is not positive ErrInvalidArgument; neither
// starts anything. A sync that fails is retried at the next period; its
// error is in Status. With SettleNumbers each sync is a SyncAndSettle.
func (v *Vault) SyncEvery(ctx context.Context, period time.Duration, opts ...SyncerOption) (*Syncer, error) {
	if v.hub == nil {
		return nil, fmt.Errorf("sync %s: %w", v.name, ErrNoHub)
	}
	if period <= 0 {
		return nil, fmt.Errorf("sync %s: period %v is not positive: %w", v.name, period, ErrInvalidArgument)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Syncer{v: v, period: period, cancel: cancel, done: make(chan struct{}), now: make(chan chan syncResult)}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	go s.loop(ctx)
	return s, nil
}

func (s *Syncer) loop(ctx context.Context) {
	defer close(s.done)
	defer func() {
		s.mu.Lock()
		s.status.Stopped = true
		s.mu.Unlock()
	}()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		var reply chan syncResult
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case reply = <-s.now:
		}
		r := s.run(ctx)
		if reply != nil {
			reply <- r
		}
		if s.v.Closed() {
			return // the vault was closed: nothing more to sync
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(s.period)
	}
}

func (s *Syncer) run(ctx context.Context) syncResult {
	s.mu.Lock()
	s.status.Running = true
	s.mu.Unlock()
	sync := s.v.Sync
	if s.settle {
		sync = s.v.SyncAndSettle
	}
	rep, err := sync(ctx)
	s.mu.Lock()
	s.status = SyncStatus{Syncs: s.status.Syncs + 1, LastReport: rep, LastError: err, LastEnded: time.Now()}
	s.mu.Unlock()
	return syncResult{rep, err}
}

// SyncNow runs a sync at once (after the one under way, if any), returns
// its report and starts the period over. After Stop it gives ErrClosed.
func (s *Syncer) SyncNow(ctx context.Context) (SyncReport, error) {
	reply := make(chan syncResult, 1)
	select {
	case s.now <- reply:
	case <-s.done:
		return SyncReport{}, fmt.Errorf("sync %s: syncer stopped: %w", s.v.name, ErrClosed)
	case <-ctx.Done():
		return SyncReport{}, ctx.Err()
	}
	select {
	case r := <-reply:
		return r.rep, r.err
	case <-ctx.Done():
		return SyncReport{}, ctx.Err()
	}
}

// Status returns what the Syncer has done so far.
func (s *Syncer) Status() SyncStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	select {
	case <-s.done:
		st.Stopped = true
	default:
	}
	return st
}

// Stop ends the background syncs: a sync under way is cancelled (the next
// one continues where it stopped) and Stop returns once it has ended. It
// is idempotent.
func (s *Syncer) Stop() {
	s.cancel()
	<-s.done
}

// Done is closed once the Syncer has stopped (Stop, the end of the context
// of SyncEvery, or the vault closed) and its last sync has ended.
func (s *Syncer) Done() <-chan struct{} { return s.done }
