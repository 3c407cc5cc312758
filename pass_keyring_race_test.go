package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// TestPassNextToKeyringChanges: on badger, one handle runs the deferred
// numbering passes of a series (the only pass there is) while another
// handle of the owner rotates the keys and grants and revokes people. The
// keyring writes conflict with the passes' transactions (the pass's guard
// reads the person's keyring entry, which a rotation rewrites), and a pass
// must take that for what it is: it retries, or reports a conflict, but
// never ErrPassRunning, since no other pass runs. At the end the records
// carry exactly the numbers 1..N, each once.
func TestPassNextToKeyringChanges(t *testing.T) {
	ctx := context.Background()
	st, err := badgerstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	v := openPerson(t, personCfg(st, "olga", "o"))
	owner := openPerson(t, personCfg(st, "olga", "o"))
	slips := vault.CollectionOf[Slip](v, "slips")
	//lint:ignore SA1019 on a store with compare-and-swap only Numbering defers: its passes run here
	ns, err := v.Numbering("slip", numbering.Options{Collection: "slips", Field: "No"})
	require.NoError(t, err)

	// retried runs op again while it reports a conflict, which the
	// concurrent keyring changes may cause and which calls for a retry.
	retried := func(op func() error) error {
		for {
			err := op()
			if err == nil || !errors.Is(err, stores.ErrConflict) {
				return err
			}
		}
	}

	var stop atomic.Bool
	var changes atomic.Int64
	var wg sync.WaitGroup
	changerErr := make(chan error, 1)
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			err := retried(func() error {
				switch i % 3 {
				case 0:
					rot, err := owner.RotateKeys(ctx)
					if err != nil {
						return err
					}
					return rot.Wait(ctx)
				case 1:
					return owner.Grant(ctx, fmt.Sprintf("p%d", i), vault.Secret([]byte("s")), vault.RoleWriter)
				default:
					return owner.Revoke(ctx, fmt.Sprintf("p%d", i-1))
				}
			})
			if err != nil {
				changerErr <- fmt.Errorf("change %d: %w", i, err)
				return
			}
			changes.Add(1)
		}
	})

	const rounds, each = 50, 4
	var running []error
	total, conflicts := 0, 0
	for r := range rounds {
		for i := range each {
			id := fmt.Sprintf("s-%02d-%d", r, i)
			require.NoError(t, retried(func() error { return slips.Put(ctx, id, Slip{Text: id}) }))
			require.NoError(t, retried(func() error { _, err := ns.Enqueue(ctx, id); return err }))
			total++
		}
		for {
			_, err := ns.RunPass(ctx)
			if errors.Is(err, numbering.ErrPassRunning) {
				running = append(running, err)
			}
			if err == nil {
				break
			}
			if !errors.Is(err, numbering.ErrPassRunning) && !errors.Is(err, stores.ErrConflict) {
				require.NoError(t, err, "round %d", r)
			}
			conflicts++
		}
	}
	stop.Store(true)
	wg.Wait()
	close(changerErr)
	require.NoError(t, <-changerErr)
	t.Logf("%d keyring changes next to %d passes, %d of which were run again", changes.Load(), rounds, conflicts)
	assert.Empty(t, running, "a pass alone reported another pass running")

	// Every record carries exactly one of 1..total, each given once.
	seen := make(map[uint64]string, total)
	for rec, err := range slips.List(ctx) {
		require.NoError(t, err)
		no, id := rec.Value.No, rec.ID
		require.NotZero(t, no, "%s has no number", id)
		prev, dup := seen[no]
		require.False(t, dup, "number %d given to %s and %s", no, prev, id)
		seen[no] = id
	}
	require.Len(t, seen, total)
	for n := uint64(1); n <= uint64(total); n++ {
		assert.Contains(t, seen, n, "number %d missing", n)
	}
	a, err := ns.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(total), a.Last)
	assert.Equal(t, total, a.Assigned)
	assert.Zero(t, a.Voided+a.Missing, "audit: %+v", a)
	verified(t, owner)
}
