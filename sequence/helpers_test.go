package sequence_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// storeKinds are the two allocation paths: a transactional store, and the same
// store with its Transactor hidden (compare-and-swap only).
var storeKinds = []struct {
	name string
	new  func(inner stores.Store, opts faultstore.Options) stores.Store
}{
	{"tx", func(inner stores.Store, opts faultstore.Options) stores.Store {
		return faultstore.New(inner, opts)
	}},
	{"cas", func(inner stores.Store, opts faultstore.Options) stores.Store {
		opts.HideTransactor = true
		return faultstore.New(inner, opts)
	}},
}

func newService(tb testing.TB, store stores.Store, cfg sequence.Config) *sequence.Service {
	tb.Helper()
	tb.Cleanup(func() { _ = store.Close() })
	return sequence.NewService(store, newSealer(), "v/", cfg)
}

func mustSequence(tb testing.TB, svc *sequence.Service, series string, opts ...sequence.Options) *sequence.Sequence {
	tb.Helper()
	var o sequence.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	q, err := svc.Sequence(series, o)
	require.NoError(tb, err)
	return q
}

// listing returns every key and value of a store.
func listing(tb testing.TB, s stores.Store) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for it, err := range s.List(context.Background(), "") {
		require.NoError(tb, err)
		out[it.Key] = string(it.Value)
	}
	return out
}

// requireExactly checks that got holds each of 1..n exactly once.
func requireExactly(tb testing.TB, got []uint64, n int) {
	tb.Helper()
	seen := make([]bool, n+1)
	var bad []string
	for _, v := range got {
		switch {
		case v == 0 || v > uint64(n):
			bad = append(bad, fmt.Sprintf("out of range %d", v))
		case seen[v]:
			bad = append(bad, fmt.Sprintf("duplicate %d", v))
		default:
			seen[v] = true
		}
		if len(bad) > 10 {
			break
		}
	}
	for v := 1; v <= n && len(bad) <= 10; v++ {
		if !seen[v] {
			bad = append(bad, fmt.Sprintf("missing %d", v))
		}
	}
	require.Empty(tb, bad, "want each of 1..%d exactly once (got %d values)", n, len(got))
	require.Len(tb, got, n)
}

// journal is a sequence.Journal that writes each event as a key in the
// transaction it is given (so rolled-back events vanish), or in memory when
// there is none, and can be told to fail.
type journal struct {
	mu     sync.Mutex
	fail   error
	events []sequence.Event // events recorded without a transaction
}

func (j *journal) Record(_ context.Context, tx stores.Tx, events []sequence.Event) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail != nil {
		return j.fail
	}
	if tx == nil {
		j.events = append(j.events, events...)
		return nil
	}
	for _, e := range events {
		key := fmt.Sprintf("journal/%s/%s/%s/%d", e.Series, strings.Join(e.Partition, ","), e.Kind, e.Number)
		if err := tx.Put(key, []byte(fmt.Sprintf("from=%d id=%s reason=%s", e.From, e.RequestID, e.Reason))); err != nil {
			return err
		}
	}
	return nil
}

func (j *journal) setFail(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.fail = err
}

// journalKeys returns the journal entries written through transactions.
func journalKeys(tb testing.TB, s stores.Store) []string {
	tb.Helper()
	var keys []string
	for it, err := range s.List(context.Background(), "journal/") {
		require.NoError(tb, err)
		keys = append(keys, it.Key)
	}
	return keys
}

var _ sequence.Journal = (*journal)(nil)

func newMem() *memstore.Store { return memstore.New() }
