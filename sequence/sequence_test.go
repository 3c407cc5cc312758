package sequence_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

func TestNextCountsFromOne(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "invoice-2026")
			n, err := q.Peek(ctx)
			require.NoError(t, err)
			assert.Zero(t, n, "Peek of an unused series")
			for want := uint64(1); want <= 5; want++ {
				got, err := q.Next(ctx)
				require.NoError(t, err)
				assert.Equal(t, want, got)
			}
			n, err = q.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(5), n)

			// Another handle on the same series shares the counter.
			again := mustSequence(t, svc, "invoice-2026")
			got, err := again.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(6), got)

		})
	}
}

func TestRestartContinues(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			inner := newMem()
			sealer := newSealer()
			first := sequence.NewService(kind.new(inner, faultstore.Options{}), sealer, "v/", sequence.Config{})
			q := mustSequence(t, first, "s")
			for range 3 {
				_, err := q.Next(ctx)
				require.NoError(t, err)
			}
			second := sequence.NewService(kind.new(inner, faultstore.Options{}), sealer, "v/", sequence.Config{})
			n, err := mustSequence(t, second, "s").Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(4), n)
			// The first Service's cache is stale now; it must notice.
			n, err = q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(5), n)
		})
	}
}

func TestKeysAndPrefix(t *testing.T) {
	store := newMem()
	svc := newService(t, store, sequence.Config{})
	q := mustSequence(t, svc, "invoice")
	assert.Equal(t, "v/_sequences/invoice", q.Key())
	assert.Equal(t, "invoice", q.Series())
	assert.Nil(t, q.Partition())

	p := mustSequence(t, svc, "invoice", sequence.Options{Partition: []any{2026, "EU"}})
	assert.Equal(t, "v/_sequences/invoice\x002026/EU", p.Key())
	assert.Equal(t, []string{"2026", "EU"}, p.Partition())
	p.Partition()[0] = "changed"
	assert.Equal(t, []string{"2026", "EU"}, p.Partition(), "Partition returns a copy")

	ctx := context.Background()
	_, err := q.Next(ctx)
	require.NoError(t, err)
	_, err = p.Next(ctx)
	require.NoError(t, err)
	keys := listing(t, store)
	assert.Len(t, keys, 2)
	for k, v := range keys {
		assert.True(t, strings.HasPrefix(k, "v/_sequences/invoice"), k)
		assert.Greater(t, len(v), 24+16, "sealed: nonce, record, tag")
	}
}

func TestSeriesNames(t *testing.T) {
	svc := newService(t, newMem(), sequence.Config{})
	for _, name := range []string{"", "a\x00b", "\x00", "tab\there", "bell\x01", strings.Repeat("x", sequence.MaxSeriesLen+1), "bad\xff"} {
		_, err := svc.Sequence(name, sequence.Options{})
		var ve *sequence.ValidationError
		require.ErrorAs(t, err, &ve, "%q", name)
		assert.Equal(t, "series", ve.Field)
		assert.ErrorIs(t, err, sequence.ErrInvalid)
	}
	for _, name := range []string{"x", "invoice-2026", "fatture/2026", "номер", strings.Repeat("x", sequence.MaxSeriesLen)} {
		_, err := svc.Sequence(name, sequence.Options{})
		assert.NoError(t, err, "%q", name)
	}
	_, err := svc.Sequence("a\x00b", sequence.Options{})
	assert.EqualError(t, err, `sequence: invalid series "a\x00b": contains a NUL byte`)
}

type year int

func TestPartitions(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, newMem(), sequence.Config{})

	t.Run("invalid", func(t *testing.T) {
		for _, p := range [][]any{{""}, {nil}, {1.5}, {true}, {"a", ""}, {[]byte("x")}, {struct{}{}}, {"bad\xff"}, {strings.Repeat("x", sequence.MaxPartitionLen+1)}} {
			_, err := svc.Sequence("s", sequence.Options{Partition: p})
			var ve *sequence.ValidationError
			require.ErrorAs(t, err, &ve, "%#v", p)
			assert.Equal(t, "partition", ve.Field)
		}
	})

	t.Run("integers equal their decimal text", func(t *testing.T) {
		base := mustSequence(t, svc, "ints", sequence.Options{Partition: []any{"2026"}})
		for _, p := range []any{2026, int16(2026), int64(2026), uint(2026), uint32(2026), uint64(2026), year(2026)} {
			q := mustSequence(t, svc, "ints", sequence.Options{Partition: []any{p}})
			assert.Equal(t, base.Key(), q.Key(), "%T", p)
		}
		neg := mustSequence(t, svc, "ints", sequence.Options{Partition: []any{-7}})
		assert.Equal(t, []string{"-7"}, neg.Partition())
	})

	t.Run("encoding is unambiguous", func(t *testing.T) {
		tuples := [][]any{{"a/b"}, {"a", "b"}, {"a%2Fb"}, {"a%", "b"}, {"a", "%b"}, {"a\x00b"}, {"a\x01b"}, {"a", "b", "c"}, {"a/b/c"}, {"a", "b/c"}}
		keys := map[string][]any{}
		for _, p := range tuples {
			q := mustSequence(t, svc, "enc", sequence.Options{Partition: p})
			if prev, dup := keys[q.Key()]; dup {
				t.Errorf("%#v and %#v share key %q", prev, p, q.Key())
			}
			keys[q.Key()] = p
			enc := strings.TrimPrefix(q.Key(), "v/_sequences/enc\x00")
			assert.NotContains(t, enc, "\x00")
			assert.NotContains(t, enc, "\x01")
		}
		ab := mustSequence(t, svc, "enc", sequence.Options{Partition: []any{"a/b"}})
		a := mustSequence(t, svc, "enc", sequence.Options{Partition: []any{"a", "b"}})
		n, err := ab.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), n)
		n, err = a.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), n, `["a/b"] and ["a","b"] are different counters`)
	})

	t.Run("each partition starts at 1", func(t *testing.T) {
		unpartitioned := mustSequence(t, svc, "fatture")
		for range 3 {
			_, err := unpartitioned.Next(ctx)
			require.NoError(t, err)
		}
		for _, p := range [][]any{{2026, "EU"}, {2026, "US"}, {2027, "EU"}} {
			q := mustSequence(t, svc, "fatture", sequence.Options{Partition: p})
			n, err := q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n, "%v", p)
		}
		empty := mustSequence(t, svc, "fatture", sequence.Options{Partition: []any{}})
		assert.Equal(t, unpartitioned.Key(), empty.Key(), "an empty tuple is no partition")
	})
}

func TestFormat(t *testing.T) {
	svc := newService(t, newMem(), sequence.Config{})
	p := []any{2026, "EU"}
	for _, tc := range []struct {
		format string
		n      uint64
		want   string
	}{
		{"{seq}", 7, "7"},
		{"{seq:04}", 1, "0001"},
		{"{seq:04}", 12345, "12345"},
		{"{seq:01}", 0, "0"},
		{"{seq:020}", math.MaxUint64, "18446744073709551615"},
		{"{seq:020}", 42, "00000000000000000042"},
		{"INV-{seq:06}", 42, "INV-000042"},
		{"{partition.0}/{partition.1}/{seq:04}", 3, "2026/EU/0003"},
		{"{seq}-{seq:03}", 5, "5-005"},
		{"{partition.1}{seq}{partition.1}", 9, "EU9EU"},
		{"№ {seq} ✓", 1, "№ 1 ✓"},
	} {
		q, err := svc.Sequence("f", sequence.Options{Partition: p, Format: tc.format})
		require.NoError(t, err, tc.format)
		assert.Equal(t, tc.want, q.Format(tc.n), "%s with %d", tc.format, tc.n)
	}
	plain := mustSequence(t, svc, "plain")
	assert.Equal(t, "123", plain.Format(123))
}

func TestFormatErrorsAreEager(t *testing.T) {
	svc := newService(t, newMem(), sequence.Config{})
	for _, f := range []string{
		"{seq", "seq}", "{seq}}", "{{seq}", "{seq}{", "}{seq}", "{}", "{unknown}{seq}", "{SEQ}",
		"{seq:4}", "{seq:00}", "{seq:021}", "{seq:0}", "{seq:0x}", "{seq:004}", "{seq:}",
		"{partition.2}{seq}", "{partition.}{seq}", "{partition.-1}{seq}", "{partition.01}{seq}", "{partition.a}{seq}",
		"no token", "{partition.0}", "bad\xff{seq}", strings.Repeat("x", sequence.MaxFormatLen) + "{seq}",
	} {
		_, err := svc.Sequence("f", sequence.Options{Partition: []any{2026, "EU"}, Format: f})
		var ve *sequence.ValidationError
		if assert.ErrorAs(t, err, &ve, "%q", f) {
			assert.Equal(t, "format", ve.Field)
		}
	}
	_, err := svc.Sequence("f", sequence.Options{Format: "{partition.0}{seq}"})
	assert.ErrorIs(t, err, sequence.ErrInvalid, "no partition, no partition token")
}

func TestSeedTo(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "import")
			require.NoError(t, q.SeedTo(ctx, 500))
			require.NoError(t, q.SeedTo(ctx, 500), "idempotent")
			require.NoError(t, q.SeedTo(ctx, 100), "never rewinds")
			require.NoError(t, q.SeedTo(ctx, 0))
			n, err := q.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(500), n)
			n, err = q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(501), n)
			require.NoError(t, q.SeedTo(ctx, 501))
			n, err = q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(502), n)
		})
	}
}

func TestOverflow(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, newMem(), sequence.Config{})
	q := mustSequence(t, svc, "big")
	require.NoError(t, q.SeedTo(ctx, math.MaxUint64-1))
	n, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64), n)
	_, err = q.Next(ctx)
	assert.ErrorIs(t, err, sequence.ErrOverflow)
	_, err = q.Claim(ctx, "r1")
	assert.ErrorIs(t, err, sequence.ErrOverflow)
}

func TestCancelledContextTakesNothing(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "s")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := q.Next(ctx)
			assert.ErrorIs(t, err, context.Canceled)
			_, err = q.NextSerial(ctx)
			assert.ErrorIs(t, err, context.Canceled)
			_, err = q.Claim(ctx, sequence.NewRequestID())
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, q.SeedTo(ctx, 9), context.Canceled)
			n, err := q.Next(context.Background())
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
		})
	}
}

// blocker holds chosen store writes until released, announcing each one it holds.
type blocker struct {
	entered chan struct{}
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blocker) hook(op faultstore.Op, _ string) error {
	if op.IsWrite() {
		b.entered <- struct{}{}
		<-b.release
	}
	return nil
}

// waitQueued spins until n calls wait on q's counter.
func waitQueued(t testing.TB, q *sequence.Sequence, n int) {
	t.Helper()
	for sequence.Queued(q) != n {
		runtime.Gosched()
	}
}

func TestCancelWhileQueued(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := newBlocker()
			svc := newService(t, kind.new(newMem(), faultstore.Options{Before: b.hook}), sequence.Config{})
			q := mustSequence(t, svc, "s")

			first := make(chan uint64)
			go func() {
				n, err := q.Next(context.Background())
				assert.NoError(t, err)
				first <- n
			}()
			<-b.entered // the first write is in flight

			ctx, cancel := context.WithCancel(context.Background())
			queued := make(chan error)
			go func() {
				_, err := q.Next(ctx)
				queued <- err
			}()
			waitQueued(t, q, 1)
			cancel()
			assert.ErrorIs(t, <-queued, context.Canceled)
			assert.Zero(t, sequence.Queued(q), "it left the queue")

			b.release <- struct{}{}
			assert.Equal(t, uint64(1), <-first)
			close(b.release)
			n, err := q.Next(context.Background())
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n, "the cancelled call took nothing")
		})
	}
}

func TestCancelAfterTakenStillGetsNumber(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			b := newBlocker()
			svc := newService(t, kind.new(newMem(), faultstore.Options{Before: b.hook}), sequence.Config{})
			q := mustSequence(t, svc, "s")

			type result struct {
				n   uint64
				err error
			}
			call := func(ctx context.Context) chan result {
				ch := make(chan result, 1)
				go func() {
					n, err := q.Next(ctx)
					ch <- result{n, err}
				}()
				return ch
			}
			a := call(context.Background())
			<-b.entered // write 1 (a alone) in flight
			ctxB, cancelB := context.WithCancel(context.Background())
			defer cancelB()
			rb := call(ctxB)
			waitQueued(t, q, 1)
			rc := call(context.Background())
			waitQueued(t, q, 2)

			b.release <- struct{}{} // write 1 ends; b and c form the next batch
			<-b.entered             // write 2 (b and c) in flight
			cancelB()               // b's turn has come: it must still get its number
			b.release <- struct{}{}

			assert.Equal(t, result{1, nil}, <-a)
			assert.Equal(t, result{2, nil}, <-rb)
			assert.Equal(t, result{3, nil}, <-rc)
			close(b.release)
		})
	}
}

func TestContentionError(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			inner := newMem()
			svc := newService(t, kind.new(inner, faultstore.Options{Conflict: 1}), sequence.Config{MaxAttempts: 3})
			q := mustSequence(t, svc, "hot", sequence.Options{Partition: []any{"EU"}})
			_, err := q.Next(ctx)
			var ce *sequence.ContentionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, 3, ce.Attempts)
			assert.Equal(t, `"hot"["EU"]`, ce.Series)
			assert.ErrorIs(t, err, sequence.ErrContention)
			assert.NotErrorIs(t, err, stores.ErrConflict, "callers must not mistake it for a store conflict")
			assert.Equal(t, `sequence "hot"["EU"]: contention: gave up after 3 attempts`, err.Error())
			assert.Empty(t, listing(t, inner), "nothing written")
		})
	}
}

func TestStoreErrorsTakeNothing(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			inner := newMem()
			fail := true
			boom := errors.New("disk on fire")
			s := kind.new(inner, faultstore.Options{Before: func(op faultstore.Op, _ string) error {
				if fail && op.IsWrite() {
					return boom
				}
				return nil
			}})
			svc := newService(t, s, sequence.Config{})
			q := mustSequence(t, svc, "s")
			_, err := q.Next(ctx)
			assert.ErrorIs(t, err, boom)
			assert.Contains(t, err.Error(), `sequence "s": next: `)
			fail = false
			n, err := q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
		})
	}
}

func TestTamperedCounter(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			inner := newMem()
			svc := newService(t, kind.new(inner, faultstore.Options{}), sequence.Config{})
			a := mustSequence(t, svc, "a")
			b := mustSequence(t, svc, "b")
			_, err := a.Next(ctx)
			require.NoError(t, err)
			for range 5 {
				_, err = b.Next(ctx)
				require.NoError(t, err)
			}
			// Copy b's sealed counter over a's: it is bound to b's key and must not open.
			item, err := inner.Get(ctx, b.Key())
			require.NoError(t, err)
			_, err = inner.Put(ctx, a.Key(), item.Value)
			require.NoError(t, err)
			_, err = a.Peek(ctx)
			assert.Error(t, err)
			fresh := sequence.NewService(kind.new(inner, faultstore.Options{}), newSealer(), "v/", sequence.Config{})
			_, err = mustSequence(t, fresh, "b").Next(ctx)
			assert.Error(t, err, "another key cannot open it")
			_, err = a.Next(ctx)
			assert.Error(t, err, "a stale cache must not hide the tampering")
		})
	}
}

// A panic while writing reaches the caller that was writing; the callers
// queued behind it carry on.
func TestPanicInWriteReleasesQueue(t *testing.T) {
	b := newBlocker()
	var writes atomic.Int64
	hook := func(op faultstore.Op, key string) error {
		if op.IsWrite() && writes.Add(1) == 1 {
			_ = b.hook(op, key)
			panic("store exploded")
		}
		return nil
	}
	svc := newService(t, faultstore.New(newMem(), faultstore.Options{Before: hook}), sequence.Config{})
	q := mustSequence(t, svc, "s")

	panicked := make(chan any)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = q.Next(context.Background())
	}()
	<-b.entered
	queued := make(chan uint64)
	go func() {
		n, err := q.Next(context.Background())
		assert.NoError(t, err)
		queued <- n
	}()
	waitQueued(t, q, 1)
	close(b.release)
	assert.Equal(t, "store exploded", <-panicked)
	assert.Equal(t, uint64(1), <-queued, "the panicked write took nothing")
}

func TestParseFormat(t *testing.T) {
	f, err := sequence.ParseFormat("{partition.0}-{seq:03}", 2026)
	require.NoError(t, err)
	assert.Equal(t, "2026-007", f.Format(7))
	for _, bad := range []string{"", "{seq", "{partition.0}{seq}"} {
		_, err := sequence.ParseFormat(bad)
		assert.ErrorIs(t, err, sequence.ErrInvalid, "%q", bad)
	}
	_, err = sequence.ParseFormat("{seq}", 1.5)
	assert.ErrorIs(t, err, sequence.ErrInvalid)
}
