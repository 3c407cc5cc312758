package sequence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// ledgerStub is a Journal and a History over one store, as the vault's
// ledger is: events are written in the counter's transaction at dense
// positions, and read back as facts. It counts what it reads.
type ledgerStub struct {
	st     stores.Store
	sealer sequence.Sealer // shared by every Service of the stub, as a vault's key is
	walks  atomic.Int64    // Facts calls
	read   atomic.Int64    // entries read by them
}

const stubDir, stubHead = "hist/", "hist/head"

func (l *ledgerStub) Record(_ context.Context, tx stores.Tx, events []sequence.Event) error {
	if tx == nil {
		return errors.New("ledgerStub: needs a transaction")
	}
	var head uint64
	if it, err := tx.Get(stubHead); err == nil {
		head, _ = strconv.ParseUint(string(it.Value), 10, 64)
	} else if !errors.Is(err, stores.ErrNotFound) {
		return err
	}
	for _, e := range events {
		head++
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := tx.Put(fmt.Sprintf("%s%020d", stubDir, head), b); err != nil {
			return err
		}
	}
	return tx.Put(stubHead, []byte(strconv.FormatUint(head, 10)))
}

func (l *ledgerStub) Facts(ctx context.Context, series string, partition []string, after uint64, fn func(sequence.Fact) error) (uint64, error) {
	l.walks.Add(1)
	through := after
	for it, err := range l.st.List(ctx, stubDir) {
		if err != nil {
			return after, err
		}
		if it.Key == stubHead {
			continue
		}
		seq, err := strconv.ParseUint(it.Key[len(stubDir):], 10, 64)
		if err != nil || seq <= after {
			continue
		}
		l.read.Add(1)
		through = seq
		var e sequence.Event
		if err := json.Unmarshal(it.Value, &e); err != nil {
			return after, err
		}
		if e.Series != series || !slices.Equal(e.Partition, partition) {
			continue
		}
		f := sequence.Fact{Seq: seq, Number: e.Number, From: e.From, RequestID: e.RequestID, Reason: e.Reason}
		switch e.Kind {
		case sequence.Allocated:
			f.Kind = sequence.FactAllocated
		case sequence.Seeded:
			f.Kind = sequence.FactSeeded
		case sequence.Voided:
			f.Kind = sequence.FactVoided
		}
		if err := fn(f); err != nil {
			return after, err
		}
	}
	return through, nil
}

func (l *ledgerStub) counts() (walks, read int64) { return l.walks.Load(), l.read.Load() }

func stubService(t *testing.T, st stores.Store, l *ledgerStub) *sequence.Service {
	t.Helper()
	if l.sealer == nil {
		l.sealer = newSealer()
	}
	return sequence.NewService(st, l.sealer, "v/", sequence.Config{Journal: l, History: l})
}

// A counter reads the history once per Service, on its first write, and
// then only what other writers recorded since; its own Next, Claim and SeedTo
// need no read. The claims index costs one more read of the whole history,
// the first time a claim record is missing.
func TestHistoryIsReadIncrementally(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	t.Cleanup(func() { _ = st.Close() })
	l := &ledgerStub{st: st}
	first := mustSequence(t, stubService(t, st, l), "inv")
	for range 10 {
		_, err := first.Next(ctx)
		require.NoError(t, err)
	}
	_, err := first.Claim(ctx, "a") // 11: the claims index reads 10 entries
	require.NoError(t, err)
	walks, read := l.counts()
	assert.Equal(t, int64(2), walks)
	assert.Equal(t, int64(10), read)

	// A restart: the first write reads the 11 entries; its own writes then
	// read nothing, and a claim of a known id after its record was lost
	// reads the history once more, from the start, to build the index.
	q := mustSequence(t, stubService(t, st, l), "inv")
	for range 5 {
		_, err := q.Next(ctx) // 12..16
		require.NoError(t, err)
	}
	require.NoError(t, q.SeedTo(ctx, 20))
	for i := range 5 {
		n, err := q.Claim(ctx, fmt.Sprint("id-", i)) // 21..25
		require.NoError(t, err)
		assert.Equal(t, uint64(21+i), n)
	}
	walks, read = l.counts()
	assert.Equal(t, int64(2+2), walks, "first write, then the claims index")
	assert.Equal(t, int64(10+11+17), read)
	for range 5 {
		_, err := q.Claim(ctx, fmt.Sprint("new-", 1)) // 26, then the same
		require.NoError(t, err)
	}
	walks, _ = l.counts()
	assert.Equal(t, int64(4), walks, "its own claims need no read")

	// Another writer takes numbers: the next claim reads what was recorded
	// since the last read (this Service's 6 claims and the other's 3 Nexts).
	for range 3 {
		_, err := first.Next(ctx) // 27..29
		require.NoError(t, err)
	}
	walks, read = l.counts()
	n, err := q.Claim(ctx, "after")
	require.NoError(t, err)
	assert.Equal(t, uint64(30), n)
	walks2, read2 := l.counts()
	assert.Equal(t, walks+1, walks2)
	assert.Equal(t, read+9, read2)

	// A void of a number the view covers reads nothing.
	require.NoError(t, q.Void(ctx, 30, "spoiled"))
	assert.ErrorIs(t, q.Void(ctx, 18, "spoiled"), sequence.ErrSkipped)
	walks3, _ := l.counts()
	assert.Equal(t, walks2, walks3)
}

// A claim record lost by the store is found in the history: the claim gets
// its number back and its record is written again.
func TestClaimFoundInHistory(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	t.Cleanup(func() { _ = st.Close() })
	l := &ledgerStub{st: st}
	svc := stubService(t, st, l)
	q := mustSequence(t, svc, "orders")
	n, err := q.Claim(ctx, "order-77")
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
	key := q.Key() + "\x01c\x00order-77"
	_, err = st.Get(ctx, key)
	require.NoError(t, err, "without a ClaimMAC the record is keyed by the id")
	require.NoError(t, st.Delete(ctx, key))

	for _, svc := range []*sequence.Service{svc, stubService(t, st, l)} {
		q := mustSequence(t, svc, "orders")
		n, err = q.Claim(ctx, "order-77")
		require.NoError(t, err)
		assert.Equal(t, uint64(1), n)
		_, err = st.Get(ctx, key)
		assert.NoError(t, err, "the record is written again")
		require.NoError(t, st.Delete(ctx, key))
	}
	n, err = q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
}

// A first write that is a claim reads the history once, claims included.
func TestFirstClaimReadsHistoryOnce(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	t.Cleanup(func() { _ = st.Close() })
	l := &ledgerStub{st: st}
	q := mustSequence(t, stubService(t, st, l), "orders")
	for i := range 4 {
		_, err := q.Claim(ctx, fmt.Sprint("order-", i))
		require.NoError(t, err)
	}
	q = mustSequence(t, stubService(t, st, l), "orders")
	walks, read := l.counts()
	n, err := q.Claim(ctx, "order-9")
	require.NoError(t, err)
	assert.Equal(t, uint64(5), n)
	walks2, read2 := l.counts()
	assert.Equal(t, walks+1, walks2)
	assert.Equal(t, read+4, read2)
}
