package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// sealCounter is the tests' sealer, counting the seals of each key.
type sealCounter struct {
	sealer
	mu   sync.Mutex
	seen map[string]int
}

func (s *sealCounter) Seal(key string, plaintext []byte) ([]byte, error) {
	s.mu.Lock()
	s.seen[key]++
	s.mu.Unlock()
	return s.sealer.Seal(key, plaintext)
}

// entrySeals returns the most seals of one entry key.
func (s *sealCounter) entrySeals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	most := 0
	for k, n := range s.seen {
		if strings.HasPrefix(k, prefix) && !strings.HasSuffix(k, "head") && n > most {
			most = n
		}
	}
	return most
}

// A signed commit seals each of its entries once: the last one is built
// Covered, then signed, and only the signed one is sealed and written, for
// an Append and for an Update alone in its batch.
func TestSignedCommitSealsEachEntryOnce(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	sc := &sealCounter{sealer: newSealer(t), seen: map[string]int{}}
	l := ledger.New(st, sc, macer{macKey}, prefix, ledger.Options{
		Actor: "olga", Now: func() time.Time { return fixedNow }, Signer: olga,
		People: func(context.Context) (map[string]wire.LedgerPerson, error) { return nil, nil },
	})
	_, err := l.Append(ctx, fact(1))
	require.NoError(t, err)
	_, err = l.Append(ctx, fact(2), fact(3))
	require.NoError(t, err)
	require.NoError(t, l.Update(ctx, func(tx stores.Tx) error {
		if _, err := l.AppendTx(ctx, tx, fact(4)); err != nil {
			return err
		}
		_, err := l.AppendTx(ctx, tx, fact(5), fact(6))
		return err
	}))
	assert.Equal(t, 1, sc.entrySeals(), "an entry sealed more than once")
	rep := verifyClean(t, l, 6)
	assert.Equal(t, uint64(6), rep.Head.Seq)
	signed := 0
	for _, e := range readAll(t, l, 1) {
		if len(e.Signature) > 0 {
			signed++
		}
	}
	assert.Equal(t, 3, signed, "one signature per commit")
}

// In a signed batch that mixes appends with Update closures that fail after
// appending (their overlay dropped), each commit still ends on a signed
// entry and Verify accepts the ledger: an append's last entry, kept
// unwritten, is written when a closure appends after it, and signed when
// it ends the commit.
func TestSignedBatchWithDroppedUpdatesVerifies(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		if _, ok := st.(stores.Transactor); !ok || !st.Capabilities().Transactions {
			t.Skip("Update needs transactions")
		}
		l := signedOn(st, "olga", olga, nil)
		ctx := context.Background()
		errFail := errors.New("closure fails after appending")
		const n = 30
		errs := runTogether(t, l, n, nil, func(i int) error {
			switch i % 3 {
			case 0:
				_, err := l.Append(ctx, fact(i+1), fact(1000+i))
				return err
			case 1:
				return l.Update(ctx, writeFact(l, fmt.Sprintf("k%d", i), i+1, errFail))
			default:
				return l.Update(ctx, writeFact(l, fmt.Sprintf("k%d", i), i+1, nil))
			}
		})
		total := uint64(0)
		for i := range n {
			switch i % 3 {
			case 0:
				require.NoError(t, errs[i])
				total += 2
			case 1:
				require.ErrorIs(t, errs[i], errFail)
			default:
				require.NoError(t, errs[i])
				total++
			}
		}
		verifyClean(t, l, total)
		entries := readAll(t, l, 1)
		require.Len(t, entries, int(total))
		last := entries[len(entries)-1]
		assert.NotEmpty(t, last.Signature, "the ledger ends on a signed entry")
	})
}
