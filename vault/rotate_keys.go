package vault

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
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
//
// A handle opened for a person given every collection becomes limited
// when it loads their keyring entry and finds it names some (an owner
// narrowed them on another handle or device: see narrow); from then on it
// holds and loads keys as a handle opened after the narrowing would. One
// whose entry gives it collections it lacked, or all again (a widening),
// follows it the same way (follow), and asks the entry again before
// refusing a collection (permitsNow).
type genKeys struct {
	snap atomic.Pointer[genSnap]
	mu   sync.Mutex // serialises add and wipe (not load: see get)
	// load fetches a generation this handle does not hold from the
	// person's keyring entry (written by a rotation made elsewhere),
	// reading it through tx when not nil; nil when it cannot (a version 1
	// entry).
	load func(ctx context.Context, gen uint64, tx stores.Tx) (*crypto.Key, error)
	// limited lists the collections of a person limited to some (sorted,
	// never empty); nil: all. Read it with limitedTo.
	limited atomic.Pointer[[]string]
	// given lists the collections the person's keyring entry gave them
	// when this handle last read it (nil: all, or not read yet): a
	// collection the handle's list still names but the entry no longer
	// gives is one the person was narrowed out of (see errNarrowedSince).
	given atomic.Pointer[[]string]
	// loadCol fetches the keys of a limited person's collections of a
	// generation this handle does not hold, from their keyring entry
	// (through tx when not nil, as load does); every collection of theirs
	// of that generation at once, so that a write after a read of a new
	// generation finds its key held.
	loadCol func(ctx context.Context, gen uint64, tx stores.Tx) (map[string]*crypto.Key, error)
	// recheck reads the person's keyring entry again, outside any
	// transaction, and follows its collections (see follow): permitsNow
	// asks it before refusing a collection. Nil when there is no entry to
	// read (a version 1 entry).
	recheck func(ctx context.Context) error
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

// limitedTo returns the collections of a person limited to some (sorted;
// the caller must not change it), nil for one given all.
func (g *genKeys) limitedTo() []string {
	if p := g.limited.Load(); p != nil {
		return *p
	}
	return nil
}

// narrow records that the person's keyring entry gives them cols (sorted,
// unique, not empty). A handle given all collections becomes limited to
// cols: it holds no data key of the generations made since it was
// narrowed, only its collections' keys of them. A limited handle adds
// those of cols it did not name (given to it since it opened); it keeps
// the others in its list, whose records sealed since it lost them it
// cannot open (it holds no key of them), as before.
func (g *genKeys) narrow(cols []string) {
	if len(cols) == 0 {
		return
	}
	for {
		old := g.limited.Load()
		var next []string
		if old == nil {
			next = slices.Clone(cols)
		} else {
			next = slices.Clone(*old)
			for _, c := range cols {
				if _, ok := slices.BinarySearch(next, c); !ok {
					next = append(next, c)
				}
			}
			if len(next) == len(*old) {
				return
			}
			slices.Sort(next)
		}
		if g.limited.CompareAndSwap(old, &next) {
			return
		}
	}
}

// follow records the collections cols (sorted, unique) that the person's
// keyring entry, as last read, gives them: none means all, and a handle
// limited until then is no longer (an owner widened them: their entry
// holds every generation's data key again, wrapped to their box key, which
// the handle holds); else narrow. A wider entry read before a narrower one
// is harmless: the narrower one limits the handle again.
func (g *genKeys) follow(cols []string) {
	if len(cols) == 0 {
		g.given.Store(nil)
		g.limited.Store(nil)
		return
	}
	given := slices.Clone(cols)
	g.given.Store(&given)
	g.narrow(cols)
}

// errNarrowedSince is the ErrNoAccess of a handle whose person's keyring
// entry, checked under its MAC, no longer gives them a collection the
// handle's list still names: an owner narrowed them since (SetCollections),
// so a record of it sealed since is out of their reach, not altered by
// the store.
var errNarrowedSince = fmt.Errorf("%w", ErrNoAccess)

// narrowedOut reports whether the person's keyring entry, as this handle
// last read it, no longer gives them collection.
func (g *genKeys) narrowedOut(collection string) bool {
	p := g.given.Load()
	if p == nil {
		return false
	}
	_, ok := slices.BinarySearch(*p, collection)
	return !ok
}

// permitsNow is permits for a call that may read the store (outside any
// transaction): a collection the handle's list does not name is asked once
// more after reading the person's keyring entry again (recheck), since an
// owner may have given it to them since the handle last read it, as a
// narrowing is seen at the next key load. When the entry cannot be read
// (or says the person was revoked), the refusal stands.
func (g *genKeys) permitsNow(ctx context.Context, collection string) error {
	err := g.permits(collection)
	if err == nil || g == nil || g.recheck == nil {
		return err
	}
	if g.recheck(ctx) != nil {
		return err
	}
	return g.permits(collection)
}

// permits reports whether the person may read and write collection: nil,
// or an error matching ErrNotPermitted.
func (g *genKeys) permits(collection string) error {
	if g == nil {
		return nil
	}
	lim := g.limitedTo()
	if lim == nil {
		return nil
	}
	if _, ok := slices.BinarySearch(lim, collection); ok {
		return nil
	}
	return fmt.Errorf("collection %q is not among those the person may use: %w", collection, ErrNotPermitted)
}

// sealKey returns the key a record of collection written now is sealed
// with: the generation's data key for generation 1, else the collection's
// key of the current generation (perCol), so that a person limited to
// other collections cannot open it.
//
// tx is nil, or a transaction the caller holds on the device's store, as
// for get: a key not held yet loads through it (loading outside it would
// wait for ever on a store whose transaction holds its lock).
func (g *genKeys) sealKey(collection string, tx stores.Tx) (gen uint64, k *crypto.Key, perCol bool, err error) {
	gen, k = g.current()
	if gen <= 1 && g.limitedTo() == nil {
		return gen, k, false, nil
	}
	k, err = g.colKey(gen, collection, tx)
	return gen, k, true, err
}

// openKey returns the key that opens a record of collection sealed as
// the envelope says (crypto.RecordKeyOf); tx as for get.
func (g *genKeys) openKey(collection string, sealed []byte, tx stores.Tx) (*crypto.Key, error) {
	gen, perCol, err := crypto.RecordKeyOf(sealed)
	if err != nil {
		return nil, err
	}
	if gen == 0 {
		gen = 1 // a version 1 envelope
	}
	if perCol {
		return g.colKey(gen, collection, tx)
	}
	return g.get(gen, tx)
}

// colKey returns the key of collection of generation gen (2 or more):
// held, derived from the generation's data key, or, for a limited person,
// loaded from their keyring entry; tx as for get.
func (g *genKeys) colKey(gen uint64, collection string, tx stores.Tx) (*crypto.Key, error) {
	id := colGen{gen, collection}
	if k := g.snap.Load().cols[id]; k != nil {
		return k, nil
	}
	if err := g.permits(collection); err != nil {
		return nil, err
	}
	// The load runs without g.mu, as in get.
	var loaded map[string]*crypto.Key
	if g.limitedTo() == nil {
		dk, err := g.get(gen, tx)
		switch {
		case err == nil:
			loaded = map[string]*crypto.Key{collection: crypto.CollectionKey(dk, collection)}
		case g.limitedTo() == nil:
			return nil, err
		default:
			// Loading the entry found the person narrowed (narrow): on as
			// a limited handle.
			if err := g.permits(collection); err != nil {
				return nil, err
			}
		}
	}
	if loaded == nil {
		if g.loadCol == nil {
			return nil, fmt.Errorf("key of collection %q, generation %d: %w", collection, gen, ErrNoAccess)
		}
		var err error
		if loaded, err = g.loadCol(context.Background(), gen, tx); err != nil {
			return nil, err
		}
		if loaded[collection] == nil && g.limitedTo() == nil {
			// Loading the entry found the person given every collection
			// again (follow): the key derives from the generation's.
			for _, k := range loaded {
				k.Wipe()
			}
			dk, err := g.get(gen, tx)
			if err != nil {
				return nil, err
			}
			loaded = map[string]*crypto.Key{collection: crypto.CollectionKey(dk, collection)}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.snap.Load()
	s := &genSnap{cur: old.cur, keys: old.keys, cols: make(map[colGen]*crypto.Key, len(old.cols)+len(loaded))}
	maps.Copy(s.cols, old.cols)
	for c, k := range loaded {
		if s.cols[colGen{gen, c}] != nil {
			k.Wipe() // loaded by a racing call meanwhile
			continue
		}
		s.cols[colGen{gen, c}] = k
		s.cur = max(s.cur, gen)
	}
	g.snap.Store(s)
	if k := s.cols[id]; k != nil {
		return k, nil
	}
	if g.narrowedOut(collection) {
		return nil, fmt.Errorf("collection %q was taken from the person (generation %d): %w", collection, gen, errNarrowedSince)
	}
	return nil, fmt.Errorf("user holds no key of collection %q, generation %d: %w", collection, gen, ErrNoAccess)
}

// current returns the generation and key new records are sealed with.
func (g *genKeys) current() (uint64, *crypto.Key) {
	s := g.snap.Load()
	return s.cur, s.keys[s.cur]
}

// get returns the key of generation gen, loading it from the person's
// keyring entry when this handle does not hold it yet; nil (and an
// error) when the person holds no such generation.
//
// tx is nil, or a transaction the caller holds on the store the keys load
// from (the device's store, Config.Store): the entry is then read through
// it. A store's own transaction may hold a lock its plain Get waits for
// (memstore holds its write lock, badgerstore its close lock for reading),
// so a load inside one that read the store directly could wait for ever.
// For the same reason the load runs without g.mu: a caller outside any
// transaction, waiting for the store, must never hold back one inside.
func (g *genKeys) get(gen uint64, tx stores.Tx) (*crypto.Key, error) {
	if k := g.snap.Load().keys[gen]; k != nil {
		return k, nil
	}
	if g.load == nil {
		return nil, fmt.Errorf("data key generation %d: %w", gen, ErrNoAccess)
	}
	k, err := g.load(context.Background(), gen, tx)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addLocked(gen, k), nil
}

// add installs the key of generation gen; a generation above the current
// one becomes current.
func (g *genKeys) add(gen uint64, k *crypto.Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.addLocked(gen, k)
}

// addLocked installs k as generation gen and returns it, unless the
// generation is held already (loaded by a racing get): k is wiped then, and
// the held key returned.
func (g *genKeys) addLocked(gen uint64, k *crypto.Key) *crypto.Key {
	old := g.snap.Load()
	if held := old.keys[gen]; held != nil {
		k.Wipe()
		return held
	}
	s := &genSnap{cur: max(old.cur, gen), keys: make(map[uint64]*crypto.Key, len(old.keys)+1), cols: old.cols}
	for n, key := range old.keys {
		s.keys[n] = key
	}
	s.keys[gen] = k
	g.snap.Store(s)
	return k
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
	if m.entry != nil {
		g.narrow(m.entry.collections)
	}
	name, user, header, st, dk := cfg.Name, cfg.User, m.header, cfg.Store, m.dk
	entry := func(ctx context.Context, what string, tx stores.Tx) (*keyringEntry, error) {
		var it stores.Item
		var err error
		if tx != nil {
			it, err = tx.Get(prefix + keyringPrefix + user)
		} else {
			it, err = st.Get(ctx, prefix+keyringPrefix+user)
		}
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
		if e.revoked || !m.holds(e.signPub) {
			// A revocation since the handle opened raised the entry's
			// serial above the one it opened with: an entry below it is
			// an older one the store serves again (a revocation undone
			// by a grant since), which must not pass a record that names
			// a generation the person does not hold for a revocation.
			m.mu.Lock()
			opened := m.entry
			m.mu.Unlock()
			if opened != nil && e.serial < opened.serial {
				return nil, fmt.Errorf("keyring entry of %q: serial %d, below the %d this handle opened with: %w", user, e.serial, opened.serial, ErrTampered)
			}
		}
		if e.revoked {
			return nil, fmt.Errorf("user %q was revoked: %w", user, errRevokedSince)
		}
		if !m.holds(e.signPub) {
			return nil, fmt.Errorf("user %q was revoked and granted again since this handle opened: %w", user, errRevokedSince)
		}
		g.follow(e.collections)
		return e, nil
	}
	// box is the identity that unwraps what e holds: the person's key pair
	// renewed elsewhere since the handle opened leaves it none.
	box := func(e *keyringEntry) (*crypto.Identity, error) {
		id, ok := m.boxFor(e.boxPub)
		if !ok {
			return nil, fmt.Errorf("user %q renewed their key pair (a secret change or a recovery) since this handle opened: "+
				"open the vault again: %w", user, errRevokedSince)
		}
		return id, nil
	}
	g.recheck = func(ctx context.Context) error {
		_, err := entry(ctx, "collections", nil)
		return err
	}
	g.loadCol = func(ctx context.Context, gen uint64, tx stores.Tx) (map[string]*crypto.Key, error) {
		e, err := entry(ctx, fmt.Sprintf("collection keys of generation %d", gen), tx)
		if err != nil {
			return nil, err
		}
		box, err := box(e)
		if err != nil {
			return nil, err
		}
		out := map[string]*crypto.Key{}
		for _, w := range e.colKeys {
			if w.gen != gen {
				continue
			}
			k, err := e.unwrap(name, header, box, w.key, colPurpose(gen, w.name))
			if err != nil {
				for _, k := range out {
					k.Wipe()
				}
				return nil, fmt.Errorf("keyring entry of %q: key of collection %q, generation %d: %w", user, w.name, gen, ErrTampered)
			}
			out[w.name] = k
		}
		return out, nil
	}
	g.load = func(ctx context.Context, gen uint64, tx stores.Tx) (*crypto.Key, error) {
		e, err := entry(ctx, fmt.Sprintf("data key generation %d", gen), tx)
		if err != nil {
			return nil, err
		}
		box, err := box(e)
		if err != nil {
			return nil, err
		}
		for _, w := range e.gens {
			if w.gen == gen {
				k, err := e.unwrap(name, header, box, w.key, genPurpose(gen))
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
		v.keys.follow(e.collections) // narrowed or widened elsewhere since this handle opened
		for _, g := range e.gens {
			if _, err := v.keys.get(g.gen, nil); err != nil {
				return nil, err
			}
		}
		for _, c := range e.colKeys {
			if _, err := v.keys.colKey(c.gen, c.name, nil); err != nil {
				return nil, err
			}
		}
	}
	return v.keys.snap.Load().keys, nil
}

// keyTx returns tx, a transaction on v's store, when data keys load from
// that store (see genKeys.get), else nil. They do for a device vault and
// a reader's pull view (over the device's store); not for a hub-side vault
// (the only one without a member of its own), whose transactions are on
// the hub while its keys, the device vault's, load from the device.
func (v *Vault) keyTx(tx stores.Tx) stores.Tx {
	if v.me == nil {
		return nil
	}
	return tx
}
