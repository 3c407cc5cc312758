package vault

import (
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/ledger"
)

// joins holds, by device (state folder and vault name), whether a handle
// of this process opened the vault with a hub: handles opened before
// without one learn of the join at their next number (seriesLedger), at
// the cost of an atomic load. A join made by another process is learnt
// when the vault is opened again (isDevice, then ErrOffline), not by a
// handle already open here: the README's threat table says so.
var joins struct {
	mu sync.Mutex
	m  map[string]*atomic.Bool
}

// joinFlag returns the join flag of cfg's device, nil when cfg has no
// state folder (nothing names the device across handles then).
func joinFlag(cfg Config) *atomic.Bool {
	if cfg.StateDir == "" {
		return nil
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil
	}
	k := dir + "\x00" + cfg.Name
	joins.mu.Lock()
	defer joins.mu.Unlock()
	if joins.m == nil {
		joins.m = map[string]*atomic.Bool{}
	}
	f := joins.m[k]
	if f == nil {
		f = new(atomic.Bool)
		joins.m[k] = f
	}
	return f
}

// joinedSince reports whether the vault, opened without a hub, joined one
// since (see ErrHubJoined).
func (v *Vault) joinedSince() bool {
	return v.joined != nil && v.joined.Load()
}

// numbersHere refuses entries that name a series (numbers, voids, periods,
// numbered records) once the vault joined a hub after this handle opened:
// ErrHubJoined. Every number passes here (seriesLedger).
func (v *Vault) numbersHere(entries []ledger.Entry) error {
	if !v.joinedSince() {
		return nil
	}
	for i := range entries {
		if entries[i].Series != "" {
			return ErrHubJoined
		}
	}
	return nil
}
