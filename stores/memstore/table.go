package memstore

import "hash/maphash"

// table holds the store's entries by key. A Go map keyed by the strings
// themselves rehashes every key each time it grows, reading each key's
// bytes from wherever they lie in memory: in a store that keeps growing (a
// ledger adds a key per number) that was most of the cost of a write. The
// table keys a map by a 64-bit hash of the key instead, which growing
// moves without reading any key; the rare key whose hash another key holds
// already goes to a second map, keyed by the string.
//
// A key is in other only while byHash holds another key of its hash, so a
// lookup that finds its own key in byHash, or no key at all, is done.
type table struct {
	hash   func(key string) uint64
	byHash map[uint64]entry
	other  map[string]entry // nil until a key's hash is taken
}

func newTable() table {
	seed := maphash.MakeSeed()
	return table{
		hash:   func(key string) uint64 { return maphash.String(seed, key) },
		byHash: make(map[uint64]entry),
	}
}

// get returns the entry of key.
func (t *table) get(key string) (entry, bool) {
	e, ok := t.byHash[t.hash(key)]
	switch {
	case !ok:
		return entry{}, false
	case e.key == key:
		return e, true
	}
	e, ok = t.other[key]
	return e, ok
}

// set stores e (whose key is its own) and reports whether its key is new.
func (t *table) set(e entry) (added bool) {
	h := t.hash(e.key)
	held, ok := t.byHash[h]
	if !ok || held.key == e.key {
		t.byHash[h] = e
		return !ok
	}
	if t.other == nil {
		t.other = make(map[string]entry)
	}
	_, had := t.other[e.key]
	t.other[e.key] = e
	return !had
}

// del removes key and reports whether it was there. A key of other with
// the same hash takes the freed place in byHash.
func (t *table) del(key string) bool {
	h := t.hash(key)
	held, ok := t.byHash[h]
	switch {
	case !ok:
		return false
	case held.key != key:
		_, had := t.other[key]
		delete(t.other, key)
		return had
	}
	delete(t.byHash, h)
	for k, e := range t.other {
		if t.hash(k) == h {
			t.byHash[h] = e
			delete(t.other, k)
			break
		}
	}
	return true
}

// len returns the number of keys.
func (t *table) len() int { return len(t.byHash) + len(t.other) }

// keys appends every key to dst, in no order.
func (t *table) keys(dst []string) []string {
	for _, e := range t.byHash {
		dst = append(dst, e.key)
	}
	for k := range t.other {
		dst = append(dst, k)
	}
	return dst
}
