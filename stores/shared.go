package stores

// Shared values. A store hands out copies of its values and keeps copies of
// the values it is given (the conformance suite checks that no value is
// aliased), so a caller may do what it likes with its bytes. An in-memory
// store pays for that with two copies per value on a hot path where nobody
// modifies anything: a commit seals fresh bytes, writes them and keeps them
// to compare with what it reads next time. A Tx that can skip the copies
// implements TxSharer; GetShared and PutShared use it when the Tx has it
// and fall back on Get and Put otherwise, so callers need not care.
//
// A Tx that wraps another (an overlay, a ledger's batch) keeps the fast
// path by implementing TxSharer with these functions on the Tx it wraps.

// TxSharer is implemented by a Tx (memstore's) whose reads and writes can
// share their bytes with the caller instead of copying them.
type TxSharer interface {
	// GetShared is Get whose Value may be the store's own bytes: the
	// caller must never modify them.
	GetShared(key string) (Item, error)
	// PutShared is Put that may keep value itself: the caller must never
	// modify it afterwards.
	PutShared(key string, value []byte) error
}

// GetShared reads key in tx, sharing the bytes where tx can (TxSharer):
// the caller must never modify the Value it returns.
func GetShared(tx Tx, key string) (Item, error) {
	if s, ok := tx.(TxSharer); ok {
		return s.GetShared(key)
	}
	return tx.Get(key)
}

// PutShared writes value at key in tx, which may keep value itself where
// it can (TxSharer): the caller must never modify value afterwards.
func PutShared(tx Tx, key string, value []byte) error {
	if s, ok := tx.(TxSharer); ok {
		return s.PutShared(key, value)
	}
	return tx.Put(key, value)
}
