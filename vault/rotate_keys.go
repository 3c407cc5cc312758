package vault

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/crypto"
)

// genKeys holds the data keys, by generation, that a vault's person holds,
// the collections' keys of generations 2 and later (which seal records,
// see sealKey), and the generation new records are sealed with (the
// highest known). A device vault and its hub-side vault share one. Reads
// take a snapshot without locking; adding a key copies it.
//
// A person limited to some collections (limited not nil) holds the data
// key of generation 1 only (for the vault's internal values) and the
// collection keys of their collections from the generation of their grant
// on; every other person holds the data key of every generation and
// derives a collection's key from it when first needed.
type genKeys struct {
	snap atomic.Pointer[genSnap]
	mu   sync.Mutex // serialises add and load
	// load fetches a generation this handle does not hold from the
	// person's keyring entry (written by a rotation made elsewhere); nil
	// when it cannot (a version 1 entry).
	load func(ctx context.Context, gen uint64) (*crypto.Key, error)
	// limited lists the collections of a person limited to some (sorted);
	// nil: all.
	limited []string
	// loadCol fetches the key of a collection of a limited person, of a
	// generation this handle does not hold, from their keyring entry.
	loadCol func(ctx context.Context, gen uint64, coll string) (*crypto.Key, error)
}

// colGen names a collection's key of one generation.
type colGen struct {
	gen  uint64
	coll string
}

type genSnap struct {
	cur  uint64
	keys map[uint64]*crypto.Key
	cols map[colGen]*crypto.Key
}

// newGenKeys returns the keys of a member: its generations (at least the
// first) and, for a limited person, its collections' keys.
func newGenKeys(keys map[uint64]*crypto.Key, cols map[colGen]*crypto.Key) *genKeys {
	g := &genKeys{}
	s := &genSnap{keys: keys, cols: cols}
	for n := range keys {
		s.cur = max(s.cur, n)
	}
	for c := range cols {
		s.cur = max(s.cur, c.gen)
	}
	g.snap.Store(s)
	return g
}

// permits reports whether the person may read and write collection: nil,
// or an error matching ErrNotPermitted.
func (g *genKeys) permits(collection string) error {
	if g == nil || g.limited == nil {
		return nil
	}
	if _, ok := slices.BinarySearch(g.limited, collection); ok {
		return nil
	}
	return fmt.Errorf("collection %q is not among those the person may use: %w", collection, ErrNotPermitted)
}

// sealKey returns the key a record of collection written now is sealed
// with: the generation's data key for generation 1, else the collection's
// key of the current generation (perCol), so that a person limited to
// other collections cannot open it.
func (g *genKeys) sealKey(collection string) (gen uint64, k *crypto.Key, perCol bool, err error) {
	gen, k = g.current()
	if gen <= 1 && g.limited == nil {
		return gen, k, false, nil
	}
	k, err = g.colKey(gen, collection)
	return gen, k, true, err
}

// openKey returns the key that opens a record of collection sealed as
// the envelope says (crypto.RecordKeyOf).
func (g *genKeys) openKey(collection string, sealed []byte) (*crypto.Key, error) {
	gen, perCol, err := crypto.RecordKeyOf(sealed)
	if err != nil {
		return nil, err
	}
	if gen == 0 {
		gen = 1 // a version 1 envelope
	}
	if perCol {
		return g.colKey(gen, collection)
	}
	return g.get(gen)
}

// colKey returns the key of collection of generation gen (2 or more):
// held, derived from the generation's data key, or, for a limited person,
// loaded from their keyring entry.
func (g *genKeys) colKey(gen uint64, collection string) (*crypto.Key, error) {
	id := colGen{gen, collection}
	if k := g.snap.Load().cols[id]; k != nil {
		return k, nil
	}
	if err := g.permits(collection); err != nil {
		return nil, err
	}
	var k *crypto.Key
	if g.limited == nil {
		dk, err := g.get(gen)
		if err != nil {
			return nil, err
		}
		k = crypto.CollectionKey(dk, collection)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if have := g.snap.Load().cols[id]; have != nil {
		k.Wipe()
		return have, nil
	}
	if k == nil {
		if g.loadCol == nil {
			return nil, fmt.Errorf("key of collection %q, generation %d: %w", collection, gen, ErrNoAccess)
		}
		var err error
		if k, err = g.loadCol(context.Background(), gen, collection); err != nil {
			return nil, err
		}
	}
	old := g.snap.Load()
	s := &genSnap{cur: max(old.cur, gen), keys: old.keys, cols: make(map[colGen]*crypto.Key, len(old.cols)+1)}
	maps.Copy(s.cols, old.cols)
	s.cols[id] = k
	g.snap.Store(s)
	return k, nil
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
	s := &genSnap{cur: max(old.cur, gen), keys: make(map[uint64]*crypto.Key, len(old.keys)+1), cols: old.cols}
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
	for _, k := range g.snap.Load().cols {
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
		return newGenKeys(map[uint64]*crypto.Key{1: m.dk}, nil)
	}
	g := newGenKeys(m.gens, m.cols)
	if m.entry != nil && len(m.entry.collections) > 0 {
		g.limited = slices.Clone(m.entry.collections)
	}
	name, user, header, st, box, dk := cfg.Name, cfg.User, m.header, cfg.Store, m.box, m.dk
	entry := func(ctx context.Context, what string) (*keyringEntry, error) {
		it, err := st.Get(ctx, prefix+keyringPrefix+user)
		if err != nil {
			return nil, fmt.Errorf("%s: keyring entry: %w", what, err)
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
		return e, nil
	}
	g.loadCol = func(ctx context.Context, gen uint64, coll string) (*crypto.Key, error) {
		e, err := entry(ctx, "key of collection "+coll)
		if err != nil {
			return nil, err
		}
		for _, w := range e.colKeys {
			if w.gen == gen && w.name == coll {
				k, err := crypto.UnwrapKeyWith(box, w.key, wrapAD(name, user, header, colPurpose(gen, coll)))
				if err != nil {
					return nil, fmt.Errorf("keyring entry of %q: key of collection %q, generation %d: %w", user, coll, gen, ErrTampered)
				}
				return k, nil
			}
		}
		return nil, fmt.Errorf("user %q holds no key of collection %q, generation %d: %w", user, coll, gen, ErrNoAccess)
	}
	g.load = func(ctx context.Context, gen uint64) (*crypto.Key, error) {
		e, err := entry(ctx, fmt.Sprintf("data key generation %d", gen))
		if err != nil {
			return nil, err
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
		for _, c := range e.colKeys {
			if _, err := v.keys.colKey(c.gen, c.name); err != nil {
				return nil, err
			}
		}
	}
	return v.keys.snap.Load().keys, nil
}
