package ledger_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestSignedVerifyParallelAgrees: Verify checks the signatures of a long
// ledger on GOMAXPROCS workers while it walks the chain in order. Whatever
// the number of workers (1: one worker, the sequential walk; 2; 8), it
// reports the same outcome, and that outcome is the earliest failing
// entry: a bad signature found by a worker after a later entry already
// failed the in-order checks, or two bad signatures found by different
// workers in either order, still report the first one by position.
func TestSignedVerifyParallelAgrees(t *testing.T) {
	ctx := context.Background()
	const size = 3000
	// forgery is what is written at a position: a commit of n entries by
	// olga's name signed with mal's key (a bad signature, reported at its
	// first entry), a record by rita (a reader: not permitted), or an
	// entry whose stored bytes are garbage (tampered).
	type forgery struct {
		kind string // "badsig", "reader", "tamper"
		n    int
	}
	cases := []struct {
		name    string
		forge   map[int]forgery // by position of the forgery's first entry
		at      uint64
		problem ledger.SignatureProblem // 0: a tampered entry
	}{
		{"two bad signatures", map[int]forgery{900: {"badsig", 1}, 2000: {"badsig", 1}}, 900, ledger.BadSignature},
		{"bad signatures in neighbouring batches", map[int]forgery{1300: {"badsig", 1}, 1310: {"badsig", 2}, 1400: {"badsig", 1}}, 1300, ledger.BadSignature},
		{"a bad commit of three", map[int]forgery{1200: {"badsig", 3}}, 1200, ledger.BadSignature},
		{"a bad signature before a reader's entry", map[int]forgery{1500: {"badsig", 1}, 1520: {"reader", 1}}, 1500, ledger.BadSignature},
		{"a reader's entry before a bad signature", map[int]forgery{700: {"reader", 1}, 2000: {"badsig", 1}}, 700, ledger.NotPermitted},
		{"a bad signature before a tampered entry", map[int]forgery{1800: {"badsig", 1}, 1830: {"tamper", 1}}, 1800, ledger.BadSignature},
		{"a tampered entry before a bad signature", map[int]forgery{800: {"tamper", 1}, 2000: {"badsig", 1}}, 800, 0},
		{"the last entry", map[int]forgery{size: {"badsig", 1}}, size, ledger.BadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := memstore.New()
			owner, _ := peopleSetup(t, st) // entries 1 to 4
			var tampered []uint64
			pos := 5
			for pos <= size {
				if f, ok := c.forge[pos]; ok {
					batch := make([]ledger.Entry, f.n)
					for i := range batch {
						batch[i] = fact(pos + i)
					}
					var err error
					switch f.kind {
					case "badsig":
						_, err = signedOn(st, "olga", mal, nil).Append(ctx, batch...)
					case "reader":
						_, err = signedOn(st, "rita", rita, nil).Append(ctx, batch...)
					case "tamper":
						_, err = owner.Append(ctx, batch...)
						tampered = append(tampered, uint64(pos))
					}
					require.NoError(t, err)
					pos += f.n
					continue
				}
				// Honest commits of 1 to 3 entries, up to the next forgery.
				n := 1 + pos%3
				for i := 1; i < n; i++ {
					if _, ok := c.forge[pos+i]; ok || pos+i > size {
						n = i
						break
					}
				}
				batch := make([]ledger.Entry, n)
				for i := range batch {
					batch[i] = fact(pos + i)
				}
				_, err := owner.Append(ctx, batch...)
				require.NoError(t, err)
				pos += n
			}
			for _, seq := range tampered {
				put(t, st, entryKey(seq), []byte("not a sealed entry"))
			}

			type outcome struct {
				rep ledger.Report
				err string
			}
			var first *outcome
			for _, procs := range []int{1, 2, 8} {
				old := runtime.GOMAXPROCS(procs)
				rep, err := owner.Verify(ctx)
				runtime.GOMAXPROCS(old)
				require.Error(t, err, "GOMAXPROCS=%d", procs)
				assert.ErrorIs(t, err, ledger.ErrTampered)
				assert.Equal(t, c.at, rep.FirstBad, "GOMAXPROCS=%d", procs)
				assert.Equal(t, c.at-1, rep.Entries, "GOMAXPROCS=%d", procs)
				var se *ledger.SignatureError
				if c.problem == 0 {
					assert.False(t, errors.As(err, &se), "GOMAXPROCS=%d: %v", procs, err)
					assert.NotErrorIs(t, err, ledger.ErrBadSignature)
				} else if assert.True(t, errors.As(err, &se), "GOMAXPROCS=%d: %v", procs, err) {
					assert.Equal(t, c.problem, se.Problem, "GOMAXPROCS=%d", procs)
					assert.Equal(t, c.at, se.Seq, "GOMAXPROCS=%d", procs)
				}
				o := &outcome{rep: rep, err: err.Error()}
				o.rep.Problem = nil // compared through err
				if first == nil {
					first = o
				} else {
					assert.Equal(t, *first, *o, "GOMAXPROCS=%d gives another outcome than GOMAXPROCS=1", procs)
				}
			}
		})
	}
}

// TestSignedVerifyHonestParallel: an honest ledger long enough for many
// batches of signatures verifies alike with 1, 2 and 8 workers.
func TestSignedVerifyHonestParallel(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, _ := peopleSetup(t, st)
		for i := 5; i <= 2000; i++ {
			_, err := owner.Append(ctx, fact(i))
			require.NoError(t, err)
		}
		for _, procs := range []int{1, 2, 8} {
			old := runtime.GOMAXPROCS(procs)
			rep, err := owner.Verify(ctx)
			runtime.GOMAXPROCS(old)
			require.NoError(t, err, "GOMAXPROCS=%d", procs)
			assert.Equal(t, uint64(2000), rep.Entries)
			assert.True(t, rep.OK())
		}
	})
}
