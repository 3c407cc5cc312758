package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// putNotes writes n notes "n-00000"... whose text is their index.
func putNotes(t testing.TB, v *vault.Vault, n int) {
	t.Helper()
	ctx := context.Background()
	notes := vault.CollectionOf[Note](v, "notes")
	items := make(map[string]Note, 500)
	for i := range n {
		items[fmt.Sprintf("n-%05d", i)] = Note{Text: strconv.Itoa(i)}
		if len(items) == 500 || i == n-1 {
			require.NoError(t, notes.PutMany(ctx, items))
			clear(items)
		}
	}
}

// generations counts the records of vault "team" on st by the generation
// their envelope names.
func generations(t testing.TB, st stores.Store) map[uint64]int {
	t.Helper()
	out := map[uint64]int{}
	for it, err := range stores.ListUnder(context.Background(), st, "v/team/notes/") {
		require.NoError(t, err)
		g, err := crypto.RecordGeneration(it.Value)
		require.NoError(t, err)
		out[g]++
	}
	return out
}

// TestRotateReadsNeverFail: while a rotation re-seals 3,000 records, 8
// goroutines read them (Get, each checking the value) and a writer keeps
// changing some: no read fails, and afterwards every record is sealed by
// generation 2 and holds what was last written.
func TestRotateReadsNeverFail(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openPerson(t, personCfg(st, "olga", "o"))
			const n = 3000
			putNotes(t, v, n)
			assert.Equal(t, map[uint64]int{1: n}, generations(t, st), "new records name generation 1 in the version 2 envelope")

			var progress []vault.RotationProgress
			var mu sync.Mutex
			rot, err := v.RotateKeys(ctx, vault.WithRotationProgress(func(p vault.RotationProgress) {
				mu.Lock()
				progress = append(progress, p)
				mu.Unlock()
			}))
			require.NoError(t, err)
			notes := vault.CollectionOf[Note](v, "notes")
			var reads atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := g; ; i = (i + 97) % n {
						select {
						case <-rot.Done():
							return
						default:
						}
						id := fmt.Sprintf("n-%05d", i)
						got, err := notes.Get(ctx, id)
						if !assert.NoError(t, err, id) {
							return
						}
						if i >= 100 {
							assert.Equal(t, strconv.Itoa(i), got.Text, id)
						}
						reads.Add(1)
					}
				}()
			}
			// A writer changes the first 100 records meanwhile.
			for i := range 100 {
				require.NoError(t, notes.Put(ctx, fmt.Sprintf("n-%05d", i), Note{Text: "changed"}))
			}
			require.NoError(t, rot.Wait(ctx))
			wg.Wait()
			assert.Positive(t, reads.Load())
			assert.Equal(t, map[uint64]int{2: n}, generations(t, st))
			for i := range n {
				got, err := notes.Get(ctx, fmt.Sprintf("n-%05d", i))
				require.NoError(t, err)
				want := strconv.Itoa(i)
				if i < 100 {
					want = "changed"
				}
				require.Equal(t, want, got.Text)
			}
			mu.Lock()
			last := progress[len(progress)-1]
			mu.Unlock()
			assert.True(t, last.Finished)
			assert.Equal(t, uint64(2), last.Generation)
			assert.Equal(t, last.Total, last.Done)
			assert.LessOrEqual(t, last.Total, uint64(n), "records written with generation 2 meanwhile are not counted")
			verified(t, v)
		})
	}
}

// TestRotateResumeAfterStopAndReopen: a rotation stopped at once (as a
// crash after its commit would leave it) is pending on the store; a new
// handle sees it, reads every record meanwhile, writes with the new
// generation, and ResumeRotation finishes it. Resuming with nothing left
// finishes at once.
func TestRotateResumeAfterStopAndReopen(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
			require.NoError(t, err)
			const n = 2000
			putNotes(t, v, n)
			rot, err := v.RotateKeys(ctx)
			require.NoError(t, err)
			rot.Stop()
			require.NoError(t, v.Close())

			v = openPerson(t, personCfg(st, "olga", "o"))
			gen, pending, err := v.PendingRotation(ctx)
			require.NoError(t, err)
			require.True(t, pending)
			assert.Equal(t, uint64(2), gen)
			notes := vault.CollectionOf[Note](v, "notes")
			require.NoError(t, notes.Put(ctx, "new", Note{Text: "new"}))
			it, err := st.Get(ctx, "v/team/notes/new")
			require.NoError(t, err)
			g, err := crypto.RecordGeneration(it.Value)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), g, "a reopened handle seals with the latest generation")
			for r, err := range notes.List(ctx) {
				require.NoError(t, err, r.ID)
			}

			rot, err = v.ResumeRotation(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			assert.Equal(t, map[uint64]int{2: n + 1}, generations(t, st))
			_, pending, err = v.PendingRotation(ctx)
			require.NoError(t, err)
			assert.False(t, pending)

			rot, err = v.ResumeRotation(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			assert.Equal(t, vault.RotationProgress{Generation: 2, Finished: true}, rot.Progress())
			verified(t, v)
		})
	}
}

// TestRotateCloseEndsReseal: closing the vault ends a re-sealing in
// progress with ErrClosed, leaving it pending; one that had finished
// before Close left nothing pending. Either way a new handle reads every
// record.
func TestRotateCloseEndsReseal(t *testing.T) {
	ctx := context.Background()
	st := newMem(t)
	v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
	require.NoError(t, err)
	putNotes(t, v, 2000)
	rot, err := v.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	werr := rot.Wait(ctx)
	v = openPerson(t, personCfg(st, "olga", "o"))
	_, pending, err := v.PendingRotation(ctx)
	require.NoError(t, err)
	if werr != nil {
		assert.ErrorIs(t, werr, vault.ErrClosed)
		assert.True(t, pending)
	} else {
		assert.False(t, pending)
	}
	n := 0
	for r, err := range vault.CollectionOf[Note](v, "notes").List(ctx) {
		require.NoError(t, err, r.ID)
		n++
	}
	assert.Equal(t, 2000, n)
}

// TestRotateTamperedMark: a rotation mark the store changed, or moved
// from another key, is ErrTampered for PendingRotation and
// ResumeRotation; records still read.
func TestRotateTamperedMark(t *testing.T) {
	ctx := context.Background()
	// Every commit after the rotation's own fails, so the re-sealing
	// cannot finish (and clear the mark) before Stop.
	var armed atomic.Bool
	var commits atomic.Int32
	st := faultstore.New(newMem(t), faultstore.Options{Before: func(op faultstore.Op, _ string) error {
		if op == faultstore.OpUpdate && armed.Load() && commits.Add(1) > 1 {
			return errors.New("re-sealing held back by the test")
		}
		return nil
	}})
	v := openPerson(t, personCfg(st, "olga", "o"))
	putNotes(t, v, 10)
	armed.Store(true)
	rot, err := v.RotateKeys(ctx)
	require.NoError(t, err)
	rot.Stop()
	armed.Store(false)
	mark, err := st.Get(ctx, "v/team/_rotation")
	require.NoError(t, err)
	counter, err := st.Get(ctx, "v/team/_ledger/head")
	require.NoError(t, err)
	for name, bad := range map[string][]byte{
		"flipped": append(append([]byte{}, mark.Value[:len(mark.Value)-1]...), mark.Value[len(mark.Value)-1]^1),
		"moved":   counter.Value,
		"short":   mark.Value[:3],
	} {
		_, err := st.Put(ctx, "v/team/_rotation", bad)
		require.NoError(t, err)
		_, _, err = v.PendingRotation(ctx)
		assert.ErrorIs(t, err, vault.ErrTampered, name)
		_, err = v.ResumeRotation(ctx)
		assert.ErrorIs(t, err, vault.ErrTampered, name)
	}
	assert.Len(t, notesOf(t, v), 10)
}
