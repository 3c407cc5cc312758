package vault

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/crypto"
)

// genKeys holds the data keys, by generation, that a vault's person holds,
// and the generation new records are sealed with (the highest known). A
// device vault and its hub-side vault share one. Reads take a snapshot
// without locking; adding a generation copies it.
type genKeys struct {
	snap atomic.Pointer[genSnap]
	mu   sync.Mutex // serialises add and load
	// load fetches a generation this handle does not hold from the
	// person's keyring entry (written by a rotation made elsewhere); nil
	// when it cannot (a version 1 entry).
	load func(ctx context.Context, gen uint64) (*crypto.Key, error)
}

type genSnap struct {
	cur  uint64
	keys map[uint64]*crypto.Key
}

// newGenKeys returns the keys of a member: its generations (at least the
// first).
func newGenKeys(keys map[uint64]*crypto.Key) *genKeys {
	g := &genKeys{}
	s := &genSnap{keys: keys}
	for n := range keys {
		s.cur = max(s.cur, n)
	}
	g.snap.Store(s)
	return g
}

// current returns the generation and key new records are sealed with.
func (g *genKeys) current() (uint64, *crypto.Key) {
	s := g.snap.Load()
	return s.cur, s.keys[s.cur]
}

// get returns the key of generation gen, loading it from the person's
// keyring entry when this handle does not hold it yet; nil (and an
// error) when the person holds no such generation.
func (g *genKeys) get(gen uint64) (*crypto.Key, error) {
	if k := g.snap.Load().keys[gen]; k != nil {
		return k, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if k := g.snap.Load().keys[gen]; k != nil {
		return k, nil
	}
	if g.load == nil {
		return nil, fmt.Errorf("data key generation %d: %w", gen, ErrNoAccess)
	}
	k, err := g.load(context.Background(), gen)
	if err != nil {
		return nil, err
	}
	g.addLocked(gen, k)
	return k, nil
}

// add installs the key of generation gen; a generation above the current
// one becomes current.
func (g *genKeys) add(gen uint64, k *crypto.Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addLocked(gen, k)
}

func (g *genKeys) addLocked(gen uint64, k *crypto.Key) {
	old := g.snap.Load()
	if old.keys[gen] != nil {
		k.Wipe()
		return
	}
	s := &genSnap{cur: max(old.cur, gen), keys: make(map[uint64]*crypto.Key, len(old.keys)+1)}
	for n, key := range old.keys {
		s.keys[n] = key
	}
	s.keys[gen] = k
	g.snap.Store(s)
}

// wipe wipes every key.
func (g *genKeys) wipe() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range g.snap.Load().keys {
		k.Wipe()
	}
}

// generation returns the generation a stored record envelope names: a
// version 1 envelope, which names none, was sealed by the first.
func recordGeneration(sealed []byte) (uint64, error) {
	gen, err := crypto.RecordGeneration(sealed)
	if err != nil {
		return 0, err
	}
	if gen == 0 {
		gen = 1
	}
	return gen, nil
}

// genKeys returns the keys of m's generations, loading a later one from
// m's keyring entry on the store when a record names it (a rotation made
// by another handle or device, whose keyring entry Sync brought).
func (m *member) genKeys(cfg Config, prefix string) *genKeys {
	if m.gens == nil {
		return newGenKeys(map[uint64]*crypto.Key{1: m.dk})
	}
	g := newGenKeys(m.gens)
	name, user, header, st, box, dk := cfg.Name, cfg.User, m.header, cfg.Store, m.box, m.dk
	g.load = func(ctx context.Context, gen uint64) (*crypto.Key, error) {
		it, err := st.Get(ctx, prefix+keyringPrefix+user)
		if err != nil {
			return nil, fmt.Errorf("data key generation %d: keyring entry: %w", gen, err)
		}
		e, err := decodeKeyring(it.Value)
		if err != nil {
			return nil, fmt.Errorf("keyring entry of %q: %w: %w", user, ErrTampered, err)
		}
		if err := e.verify(dk, name, user, header); err != nil {
			return nil, err
		}
		if e.revoked {
			return nil, fmt.Errorf("user %q was revoked: %w", user, ErrNoAccess)
		}
		for _, w := range e.gens {
			if w.gen == gen {
				k, err := crypto.UnwrapKeyWith(box, w.key, wrapAD(name, user, header, genPurpose(gen)))
				if err != nil {
					return nil, fmt.Errorf("keyring entry of %q: data key of generation %d: %w", user, gen, ErrTampered)
				}
				return k, nil
			}
		}
		return nil, fmt.Errorf("user %q holds no data key of generation %d: %w", user, gen, ErrNoAccess)
	}
	return g
}

// heldGenerations returns every data key generation the vault's person
// holds, those a rotation made by another handle added to their stored
// keyring entry included (a grant gives them all to the new person).
func (v *Vault) heldGenerations(ctx context.Context) (map[uint64]*crypto.Key, error) {
	it, err := v.me.store.Get(ctx, v.prefix+keyringPrefix+v.user)
	if err != nil {
		return nil, err
	}
	if isKeyringV2(it.Value) {
		e, err := v.readEntry(v.user, it.Value)
		if err != nil {
			return nil, err
		}
		for _, g := range e.gens {
			if _, err := v.keys.get(g.gen); err != nil {
				return nil, err
			}
		}
	}
	return v.keys.snap.Load().keys, nil
}
