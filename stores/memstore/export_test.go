package memstore

// NewWithHash returns an empty store whose table hashes keys with hash,
// so that tests can make keys share a hash.
func NewWithHash(hash func(key string) uint64) *Store {
	return &Store{data: table{hash: hash, byHash: make(map[uint64]entry)}}
}
