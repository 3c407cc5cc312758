package ledger

// MaxGrantCollections is the most collections a PersonGranted entry names:
// the entry holds them in Partition, which has at most this many
// components.
const MaxGrantCollections = maxPartition

// GrantCollections returns the collections a PersonGranted entry limits
// its person to, sorted and unique as the vault writes them (Partition),
// and limited: false for a grant to every collection, and for a grant
// recorded before grant entries named collections (Partition empty).
// ok is false for an entry of any other kind.
func (e Entry) GrantCollections() (collections []string, limited, ok bool) {
	if e.Kind != PersonGranted {
		return nil, false, false
	}
	return e.Partition, len(e.Partition) > 0, true
}
