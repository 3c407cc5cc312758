package noydb_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// replayStore is a store without transactions that, once armed, serves
// one key as it was at a snapshot, version included, and takes a
// compare-and-swap against that version: a store put back from a backup
// of that key (a file folder restored by a backup tool keeps each file's
// version in the file).
type replayStore struct {
	stores.Store
	mu   sync.Mutex
	item *stores.Item
}

func (s *replayStore) arm(it stores.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.item = &it
}

func (s *replayStore) Get(ctx context.Context, key string) (stores.Item, error) {
	s.mu.Lock()
	it := s.item
	s.mu.Unlock()
	if it != nil && it.Key == key {
		return *it, nil
	}
	return s.Store.Get(ctx, key)
}

func (s *replayStore) CompareAndSwap(ctx context.Context, key string, version uint64, value []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it := s.item; it != nil && it.Key == key {
		if version != it.Version {
			return 0, stores.ErrConflict
		}
		s.item = nil
		return s.Store.Put(ctx, key, value)
	}
	return s.Store.CompareAndSwap(ctx, key, version, value)
}

// On a store without transactions, two processes take numbers of one
// series; then the store puts the counter back as the first process left
// it, its version included (a backup of that key put back), keeping the
// ledger. The first process's cache matches the store in every way, but
// another writer moved the ledger since its check: ErrRollback, no
// number (README threat table: a counter put back to the very bytes this
// process last wrote).
func TestCounterPutBackWithItsVersionOnAStoreWithoutTransactionsIsRollback(t *testing.T) {
	t.Skip("not detected yet (README threat table, limit of the put-back counter row): a process " +
		"whose cache is valid compares-and-swaps on its cached version without reading, and the " +
		"ledger's ForeignThrough is noted only by transactions; it gives 3 a second time")
	const key = "v/books/_sequences/invoice"
	ctx := context.Background()
	inner := faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true})
	st := &replayStore{Store: inner}
	_, v1 := openSession(t, st, "")
	q1 := mustSeq(t, v1, "invoice")
	nextN(t, q1, 2)
	left, err := inner.Get(ctx, key)
	require.NoError(t, err)
	_, v2 := openSession(t, st, "")
	nextN(t, mustSeq(t, v2, "invoice"), 3) // 3, 4, 5
	st.arm(left)

	n, err := q1.Next(ctx)
	assert.ErrorIs(t, err, noydb.ErrRollback)
	assert.Zero(t, n, "3 was given already")
}
