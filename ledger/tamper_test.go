package ledger_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// tampered builds a ledger of 10 entries, lets tamper change the raw store,
// and returns the ledger and the Verify outcome.
func tampered(t *testing.T, st stores.Store, tamper func(st stores.Store)) (*ledger.Ledger, ledger.Report, error) {
	t.Helper()
	l := newLedger(t, st)
	appendN(t, l, 10)
	verifyClean(t, l, 10)
	tamper(st)
	rep, err := l.Verify(context.Background())
	require.Error(t, err)
	assert.Same(t, rep.Problem, err, "an integrity problem is the error and the report's Problem")
	assert.False(t, rep.OK())
	return l, rep, err
}

// requireStopsAt checks that Read yields exactly the entries before bad and
// then the error.
func requireStopsAt(t *testing.T, l *ledger.Ledger, bad uint64, want error) {
	t.Helper()
	got, err := readErr(l, 1)
	require.Error(t, err)
	assert.Equal(t, want, err)
	require.Len(t, got, int(bad)-1)
	for i, e := range got {
		assert.Equal(t, uint64(i+1), e.Seq)
	}
}

func TestDeletedEntryIsAGapAtItsPosition(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l, rep, err := tampered(t, st, func(st stores.Store) { del(t, st, entryKey(5)) })
		var gap *ledger.GapError
		require.ErrorAs(t, err, &gap)
		assert.Equal(t, ledger.GapError{Want: 5, Got: 6}, *gap)
		assert.Equal(t, uint64(5), rep.FirstBad)
		assert.Equal(t, uint64(4), rep.Entries)
		assert.Equal(t, uint64(10), rep.Head.Seq)
		requireStopsAt(t, l, 5, err)

		// Reading from after the hole needs the hole's MAC.
		_, err = readErr(l, 6)
		require.ErrorAs(t, err, &gap)
		assert.Equal(t, uint64(5), gap.Want)
	})
}

func TestDeletedTailIsAGap(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l, rep, err := tampered(t, st, func(st stores.Store) {
			del(t, st, entryKey(9))
			del(t, st, entryKey(10))
		})
		assert.Equal(t, &ledger.GapError{Want: 9}, err)
		assert.Equal(t, uint64(9), rep.FirstBad)
		assert.Equal(t, uint64(8), rep.Entries)
		requireStopsAt(t, l, 9, err)
	})
}

func TestSwappedEntriesAreTamperedAtTheFirst(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l, rep, err := tampered(t, st, func(st stores.Store) {
			a, b := raw(t, st, entryKey(3)), raw(t, st, entryKey(7))
			put(t, st, entryKey(3), b)
			put(t, st, entryKey(7), a)
		})
		require.ErrorIs(t, err, ledger.ErrTampered)
		require.ErrorIs(t, err, errOpen, "the sealer's failure is wrapped")
		assert.Equal(t, uint64(3), rep.FirstBad)
		var te *ledger.TamperError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, uint64(3), te.Seq)
		requireStopsAt(t, l, 3, err)
	})
}

func TestDuplicatedEntryIsTamperedAtTheCopy(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l, rep, err := tampered(t, st, func(st stores.Store) {
			put(t, st, entryKey(6), raw(t, st, entryKey(5)))
		})
		require.ErrorIs(t, err, ledger.ErrTampered)
		assert.Equal(t, uint64(6), rep.FirstBad)
		assert.Equal(t, uint64(5), rep.Entries)
		requireStopsAt(t, l, 6, err)
	})
}

func TestFlippedBitIsTampered(t *testing.T) {
	for _, k := range storeKinds {
		for _, bit := range []int{0, 8 * 30, -1} {
			st := k.make()
			l, rep, err := tampered(t, st, func(st stores.Store) {
				v := raw(t, st, entryKey(4))
				i := bit
				if i < 0 {
					i = 8*len(v) - 1
				}
				v[i/8] ^= 1 << (i % 8)
				put(t, st, entryKey(4), v)
			})
			require.ErrorIs(t, err, ledger.ErrTampered)
			assert.Equal(t, uint64(4), rep.FirstBad)
			requireStopsAt(t, l, 4, err)
		}
	}
}

func TestTruncatedEntryIsTampered(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		_, rep, err := tampered(t, st, func(st stores.Store) {
			put(t, st, entryKey(2), raw(t, st, entryKey(2))[:10])
		})
		require.ErrorIs(t, err, ledger.ErrTampered)
		assert.Equal(t, uint64(2), rep.FirstBad)
	})
}

// switchingMACer uses the real MAC key for the first n MACs and then forge,
// so a forger can rebuild a ledger identical up to n and re-chained after.
type switchingMACer struct {
	mu    sync.Mutex
	n     int
	forge ledger.MACer
}

func (m *switchingMACer) MAC(parts ...[]byte) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n > 0 {
		m.n--
		return macer{macKey}.MAC(parts...)
	}
	return m.forge.MAC(parts...)
}

// unkeyed is a plain SHA-256 of the parts: what a store could compute.
type unkeyed struct{}

func (unkeyed) MAC(parts ...[]byte) []byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// TestRechainedSurvivorsBreakTheChain: a forger who can seal but does not
// have the MAC key drops entry 5 and re-chains 6..10 into 5..9, with an
// unkeyed hash or another key, rewriting the head to match.
func TestRechainedSurvivorsBreakTheChain(t *testing.T) {
	forges := map[string]ledger.MACer{"unkeyed hash": unkeyed{}, "other key": macer{otherMAC}}
	for name, forge := range forges {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st stores.Store) {
				l, rep, err := tampered(t, st, func(st stores.Store) {
					victim := readAll(t, newLedger(t, st), 1)
					scratch := memstore.New()
					forger := ledger.New(scratch, newSealer(t), &switchingMACer{n: 4, forge: forge}, prefix, ledger.Options{})
					for i, e := range victim {
						if i == 4 {
							continue // drop entry 5
						}
						_, err := forger.Append(context.Background(), e)
						require.NoError(t, err)
					}
					for seq := uint64(1); seq <= 9; seq++ {
						put(t, st, entryKey(seq), raw(t, scratch, entryKey(seq)))
					}
					del(t, st, entryKey(10))
					put(t, st, headKey, raw(t, scratch, headKey))
				})
				assert.Equal(t, &ledger.ChainError{Seq: 5}, err)
				assert.Equal(t, uint64(5), rep.FirstBad)
				assert.Equal(t, uint64(4), rep.Entries)
				assert.Equal(t, uint64(9), rep.Head.Seq)
				requireStopsAt(t, l, 5, err)
			})
		})
	}
}

// TestTruncatedTailWithForgedHead: the last 3 entries are dropped and the
// head rewritten to the new end by a store that can seal but not MAC.
func TestTruncatedTailWithForgedHead(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l, rep, err := tampered(t, st, func(st stores.Store) {
			victim := readAll(t, newLedger(t, st), 1)
			scratch := memstore.New()
			forger := ledger.New(scratch, newSealer(t), macer{otherMAC}, prefix, ledger.Options{})
			_, err := forger.Append(context.Background(), victim[:7]...)
			require.NoError(t, err)
			for seq := uint64(8); seq <= 10; seq++ {
				del(t, st, entryKey(seq))
			}
			put(t, st, headKey, raw(t, scratch, headKey))
		})
		assert.Equal(t, &ledger.ChainError{Seq: 7, Head: true}, err)
		assert.Equal(t, uint64(7), rep.FirstBad)
		assert.Equal(t, uint64(7), rep.Entries, "the entries themselves are intact")
		assert.Equal(t, uint64(7), rep.Head.Seq)

		got, err := readErr(l, 1)
		assert.Len(t, got, 7)
		assert.Equal(t, &ledger.ChainError{Seq: 7, Head: true}, err)
	})
}

func TestTamperedHead(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l, rep, err := tampered(t, st, func(st stores.Store) {
			v := raw(t, st, headKey)
			v[len(v)-1] ^= 1
			put(t, st, headKey, v)
		})
		var te *ledger.TamperError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, uint64(0), te.Seq, "0 names the head record")
		assert.Equal(t, uint64(0), rep.FirstBad)
		assert.Equal(t, uint64(0), rep.Entries)

		_, err = l.Head(context.Background())
		require.ErrorIs(t, err, ledger.ErrTampered)
		_, err = l.Append(context.Background(), fact(11))
		require.ErrorIs(t, err, ledger.ErrTampered, "no append on a head that does not open")
	})
}

func TestValuesFromAnotherVaultAreTampered(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		other := ledger.New(st, newSealer(t), macer{macKey}, "v/other/", ledger.Options{Actor: "tester"})
		appendN(t, other, 10)
		otherKey := func(seq uint64) string { return "v/other/" + entryKey(seq)[len(prefix):] }

		_, rep, err := tampered(t, st, func(st stores.Store) {
			put(t, st, entryKey(3), raw(t, st, otherKey(3)))
		})
		require.ErrorIs(t, err, ledger.ErrTampered)
		assert.Equal(t, uint64(3), rep.FirstBad)

		put(t, st, headKey, raw(t, st, "v/other/_ledger/head"))
		_, err = newLedger(t, st).Head(context.Background())
		require.ErrorIs(t, err, ledger.ErrTampered)
		require.True(t, errors.Is(err, errOpen))
	})
}

// TestLargeLedgerProblemsArePinpointed checks a ledger long enough to be
// verified in parallel chunks, with problems at chunk boundaries and inside
// chunks: each is reported at its exact position, after exactly the entries
// before it.
func TestLargeLedgerProblemsArePinpointed(t *testing.T) {
	// The chunking does not depend on the store; memstore keeps it quick.
	for _, k := range storeKinds[:2] {
		t.Run(k.name, func(t *testing.T) { largeLedgerProblems(t, k.make()) })
	}
}

func largeLedgerProblems(t *testing.T, st stores.Store) {
	const size = 1300 // over 1024: verified in parallel chunks of 256
	{
		ctx := context.Background()
		l := newLedger(t, st)
		entries := make([]ledger.Entry, size)
		for i := range entries {
			entries[i] = fact(i + 1)
		}
		_, err := l.Append(ctx, entries...)
		require.NoError(t, err)
		clean := map[string][]byte{}
		for it, err := range st.List(ctx, prefix) {
			require.NoError(t, err)
			clean[it.Key] = it.Value
		}
		restore := func() {
			for k, v := range clean {
				put(t, st, k, v)
			}
		}

		for _, seq := range []uint64{1, 256, 257, 513, 1299, 1300} {
			check := func(what string, want error) {
				t.Helper()
				rep, err := l.Verify(ctx)
				assert.Equal(t, want, err, "%s %d", what, seq)
				assert.Equal(t, seq, rep.FirstBad, "%s %d", what, seq)
				assert.Equal(t, seq-1, rep.Entries, "%s %d", what, seq)
				restore()
			}

			del(t, st, entryKey(seq))
			gap := &ledger.GapError{Want: seq, Got: seq + 1}
			if seq == size {
				gap.Got = 0
			}
			check("delete", gap)

			v := append([]byte(nil), clean[entryKey(seq)]...)
			v[len(v)/2] ^= 0x10
			put(t, st, entryKey(seq), v)
			rep, err := l.Verify(ctx)
			require.ErrorIs(t, err, ledger.ErrTampered)
			assert.Equal(t, seq, rep.FirstBad)
			assert.Equal(t, seq-1, rep.Entries)
			restore()

			if seq > 1 {
				put(t, st, entryKey(seq), clean[entryKey(seq-1)])
				rep, err := l.Verify(ctx)
				require.ErrorIs(t, err, ledger.ErrTampered)
				assert.Equal(t, seq, rep.FirstBad)
				restore()
			}

			// Re-chain from seq on with another key.
			scratch := memstore.New()
			forger := ledger.New(scratch, newSealer(t), &switchingMACer{n: int(seq) - 1, forge: macer{otherMAC}}, prefix, ledger.Options{Actor: "tester", Now: func() time.Time { return fixedNow }})
			_, err = forger.Append(ctx, entries...)
			require.NoError(t, err)
			for it, err := range scratch.List(ctx, prefix) {
				require.NoError(t, err)
				put(t, st, it.Key, it.Value)
			}
			check("re-chain", &ledger.ChainError{Seq: seq})
		}
		verifyClean(t, l, size)

		// A reader that stops early, from inside and outside the first chunk.
		for _, stopAt := range []int{1, 700, 1299} {
			n := 0
			for _, err := range l.Read(ctx, 1) {
				require.NoError(t, err)
				if n++; n == stopAt {
					break
				}
			}
			assert.Equal(t, stopAt, n)
		}
		assert.Len(t, readAll(t, l, 234), size-233)
	}
}
