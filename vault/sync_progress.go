package vault

import (
	"context"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/stores"
)

// SyncOptions tune one SyncWith.
type SyncOptions struct {
	// Progress, if set, is called as the sync moves through the hub's feed
	// (pulling) and this device's ledger (pushing): once when a phase
	// starts and after each commit. It runs on the syncing goroutine and
	// should return quickly.
	Progress func(SyncProgress)
}

// SyncPhase is what a sync is doing when it reports progress.
type SyncPhase uint8

// Phases of a sync.
const (
	// SyncPulling: applying the hub's change feed on this device.
	SyncPulling SyncPhase = iota
	// SyncPushing: writing this device's changes to the hub.
	SyncPushing
)

// String names the phase: "pull" or "push".
func (p SyncPhase) String() string {
	switch p {
	case SyncPulling:
		return "pull"
	case SyncPushing:
		return "push"
	}
	return fmt.Sprintf("SyncPhase(%d)", uint8(p))
}

// SyncProgress is how far a phase of a sync has come, in ledger entries
// (the hub's feed for a pull, this device's ledger for a push) since the
// position the sync started from. Done never exceeds Total; Total can grow
// during a sync (other devices push meanwhile, a push reads this device's
// ledger in passes, a sync repeats when a push raced it).
type SyncProgress struct {
	Phase       SyncPhase
	Done, Total uint64
}

// report calls the progress callback: the phase's cursor is at, its end at
// end (absolute positions). The first position reported for a phase is
// where it started.
func (s *syncRun) report(phase SyncPhase, at, end uint64) {
	if s.progress == nil {
		return
	}
	if s.from[phase] == nil {
		start := at
		s.from[phase] = &start
	}
	from := *s.from[phase]
	done, total := uint64(0), uint64(0)
	if at > from {
		done = at - from
	}
	if end > from {
		total = end - from
	}
	s.progress(SyncProgress{Phase: phase, Done: min(done, total), Total: total})
}

// SyncState is what a device knows of its syncs, from its own store only:
// it needs no hub.
type SyncState struct {
	// PulledThrough is the position in the hub's change feed that this
	// device has applied through (0: nothing pulled yet).
	PulledThrough uint64
	// PushedThrough is the position in this device's ledger whose record
	// changes the hub has accepted (or that were held back; see Pending).
	PushedThrough uint64
	// LedgerHead is the head of this device's ledger.
	LedgerHead uint64
	// Pending counts the records changed on this device since
	// PushedThrough that the next sync pushes; a record held by a kept
	// conflict is not counted (see Conflicts).
	Pending int
	// Conflicts counts the sync conflicts kept for the application
	// (Vault.Conflicts lists them).
	Conflicts int
}

// SyncState reports what this device knows of its syncs, reading only its
// own store (it works offline, and on a vault without a hub, where every
// record change is pending). Its cost grows with the changes not pushed yet.
func (v *Vault) SyncState(ctx context.Context) (SyncState, error) {
	var st SyncState
	if err := v.enter(ctx); err != nil {
		return st, fmt.Errorf("sync state: %w", err)
	}
	defer v.exit()
	s := &syncRun{v: v}
	pull, err := s.loadPull(ctx)
	if err != nil {
		return st, fmt.Errorf("sync state: %w", err)
	}
	push, err := s.loadPush(ctx)
	if err != nil {
		return st, fmt.Errorf("sync state: %w", err)
	}
	st.PulledThrough, st.PushedThrough = pull.seq, push
	head, err := v.ledger.Head(ctx)
	if err != nil {
		return st, fmt.Errorf("sync state: %w", err)
	}
	st.LedgerHead = head.Seq
	kept := map[recKey]bool{}
	dir := v.prefix + syncConfDir
	for it, err := range stores.ListUnder(ctx, v.store, dir) {
		if err != nil {
			return st, fmt.Errorf("sync state: %w", err)
		}
		coll, id, _ := strings.Cut(it.Key[len(dir):], "/")
		kept[recKey{coll, id}] = true
	}
	st.Conflicts = len(kept)
	if push >= head.Seq {
		return st, nil
	}
	changed := map[recKey]bool{}
	for e, err := range v.ledger.Read(ctx, push+1) {
		if err != nil {
			return st, fmt.Errorf("sync state: %w", err)
		}
		if k := (recKey{e.Collection, e.ID}); isOwnRecordEntry(e) && !kept[k] {
			changed[k] = true
		}
	}
	st.Pending = len(changed)
	return st, nil
}
