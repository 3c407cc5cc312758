package numbering_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// pgHooked is a pgstore.Store (its Locker included) that calls beforeList
// before listing, and after commits after each committed transaction.
type pgHooked struct {
	*pgstore.Store
	beforeList func(prefix string)
	afterTx    func()
}

func (p pgHooked) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	if p.beforeList != nil {
		p.beforeList(prefix)
	}
	return p.Store.List(ctx, prefix)
}

func (p pgHooked) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	err := p.Store.Update(ctx, fn)
	if err == nil && p.afterTx != nil {
		p.afterTx()
	}
	return err
}

// advisoryKey is pgstore's advisory lock key of name on schema.
func advisoryKey(schema, name string) int64 {
	h := sha256.New()
	h.Write([]byte("noydb pgstore lock\x00"))
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// On PostgreSQL, a pass whose advisory lock's session breaks after it
// planned goes on without the lock; another pass takes the lock, commits
// its batch and stops (its ctx ends). The first pass then fails with
// ErrPassRunning without touching the other's batch, and the next pass
// finishes that batch: every record numbered exactly once.
func TestPostgresPassWhoseLockSessionBrokeLeavesTheOtherBatchIntact(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	st, err := pgstore.Open(ctx, url, &pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	var armed, bArmed atomic.Bool
	bCtx, stopB := context.WithCancel(ctx)
	defer stopB()
	var b *device
	var bErr, lockedOut error
	a := openDevice(t, "a", pgHooked{Store: st, beforeList: func(prefix string) {
		if !strings.HasSuffix(prefix, "/batch/") || !armed.CompareAndSwap(true, false) {
			return
		}
		_, lockedOut = b.series.RunPass(ctx) // the lock still holds
		key := advisoryKey(schema, prefix[:len(prefix)-len("batch/")])
		var n int
		err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_locks
			WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 1`,
			uint32(uint64(key)>>32), uint32(uint64(key))).Scan(&n)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the session holding the pass lock")
		bArmed.Store(true)
		_, bErr = b.series.RunPass(bCtx)
	}}, receiptOpts)
	b = openDevice(t, "b", pgHooked{Store: st, afterTx: func() {
		if bArmed.CompareAndSwap(true, false) {
			stopB() // B stops right after its first transaction: its commit
		}
	}}, receiptOpts)

	var ids []string
	for i := range 5 {
		ids = append(ids, fmt.Sprint("r-", i))
		a.write(t, ids[i], i)
	}
	armed.Store(true)
	_, err = a.series.RunPass(ctx)
	require.ErrorIs(t, lockedOut, numbering.ErrPassRunning, "the lock held until its session broke")
	require.ErrorIs(t, bErr, context.Canceled, "B committed its batch and stopped")
	assert.ErrorIs(t, err, numbering.ErrPassRunning, "A may not commit over B")

	rep, err := a.series.RunPass(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{Assigned: 5, Resumed: 5}, rep)
	checkLedger(t, a, checkNumbered(t, a, ids))
}
