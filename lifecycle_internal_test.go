package noydb

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// gatedStore makes the first read of a vault's header wait until the
// test lets it go: the moment an OpenVault is inside its unlock.
type gatedStore struct {
	stores.Store
	reads   map[string]*atomic.Int64 // header reads per vault name
	entered map[string]chan struct{} // closed when the first read of that vault starts
	release map[string]chan struct{} // the first read of that vault waits for it
	once    map[string]*sync.Once
}

func newGatedStore(t *testing.T, names ...string) *gatedStore {
	t.Helper()
	g := &gatedStore{
		reads:   map[string]*atomic.Int64{},
		entered: map[string]chan struct{}{},
		release: map[string]chan struct{}{},
		once:    map[string]*sync.Once{},
	}
	for _, n := range names {
		g.reads[n] = new(atomic.Int64)
		g.entered[n] = make(chan struct{})
		g.release[n] = make(chan struct{})
		g.once[n] = new(sync.Once)
	}
	g.Store = faultstore.New(memstore.New(), faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if op != faultstore.OpGet {
				return nil
			}
			for n := range g.reads {
				if key == "v/"+n+"/_header" {
					g.reads[n].Add(1)
					first := false
					g.once[n].Do(func() { first = true })
					if first {
						close(g.entered[n])
						<-g.release[n]
					}
				}
			}
			return nil
		},
	})
	return g
}

func openTestDB(t *testing.T, st stores.Store) *DB {
	t.Helper()
	db, err := Open(context.Background(), Config{
		User: "u", Secret: []byte("s"), Store: st,
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// waitFor returns once cond holds (checked under db.mu), failing the test
// if ctx ends first.
func waitFor(ctx context.Context, t *testing.T, db *DB, cond func() bool) {
	t.Helper()
	for {
		db.mu.Lock()
		ok := cond()
		db.mu.Unlock()
		if ok {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("condition never held")
		}
		runtime.Gosched()
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Callers asking for one vault while it is being unlocked wait for that
// unlock and share its handle: the header is read once, not once per caller.
func TestConcurrentOpensShareOneUnlock(t *testing.T) {
	ctx := testCtx(t)
	g := newGatedStore(t, "books")
	db := openTestDB(t, g)

	const callers = 16
	got := make([]*vault.Vault, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); got[0], errs[0] = db.OpenVault(ctx, "books") }()
	<-g.entered["books"]
	for i := 1; i < callers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], errs[i] = db.OpenVault(ctx, "books") }()
	}
	waitFor(ctx, t, db, func() bool { return db.opening["books"] != nil && db.opening["books"].waiting == callers-1 })
	close(g.release["books"])
	wg.Wait()

	for i := range callers {
		require.NoError(t, errs[i])
		assert.Same(t, got[0], got[i])
	}
	assert.Equal(t, int64(1), g.reads["books"].Load(), "one unlock for all callers")
}

// The DB is not held while a vault is unlocked: a second vault opens while
// the first one's unlock is stuck.
func TestOpensOfDifferentVaultsRunInParallel(t *testing.T) {
	ctx := testCtx(t)
	g := newGatedStore(t, "slow")
	db := openTestDB(t, g)

	slowErr := make(chan error, 1)
	go func() { _, err := db.OpenVault(ctx, "slow"); slowErr <- err }()
	<-g.entered["slow"]
	other, err := db.OpenVault(ctx, "other")
	require.NoError(t, err, "a second vault opens while the first is stuck in its unlock")
	assert.False(t, other.Closed())
	close(g.release["slow"])
	require.NoError(t, <-slowErr)
}

// Close does not wait behind the DB's lock for an unlock: it cancels the
// opens in flight, which report ErrClosed, and leaves no vault open.
func TestCloseDuringOpen(t *testing.T) {
	ctx := testCtx(t)
	g := newGatedStore(t, "books")
	db := openTestDB(t, g)

	openErr := make(chan error, 1)
	var opened *vault.Vault
	go func() {
		var err error
		opened, err = db.OpenVault(ctx, "books")
		openErr <- err
	}()
	<-g.entered["books"]
	closeErr := make(chan error, 1)
	go func() { closeErr <- db.Close() }()
	waitFor(ctx, t, db, func() bool { return db.closed })
	close(g.release["books"])

	err := <-openErr
	assert.ErrorIs(t, err, ErrClosed)
	assert.Nil(t, opened)
	require.NoError(t, <-closeErr)
	assert.Empty(t, db.vaults)
	assert.Empty(t, db.opening)
	_, err = db.OpenVault(ctx, "books")
	assert.ErrorIs(t, err, ErrClosed)
}

// When the caller leading an open gives up, the callers waiting for it do
// not inherit its cancellation: one of them opens the vault.
func TestLeaderGivingUpDoesNotFailWaiters(t *testing.T) {
	ctx := testCtx(t)
	g := newGatedStore(t, "books")
	db := openTestDB(t, g)

	leaderCtx, cancelLeader := context.WithCancel(ctx)
	leaderErr := make(chan error, 1)
	go func() { _, err := db.OpenVault(leaderCtx, "books"); leaderErr <- err }()
	<-g.entered["books"]

	waiterDone := make(chan struct{})
	var got *vault.Vault
	var waitErr error
	go func() { defer close(waiterDone); got, waitErr = db.OpenVault(ctx, "books") }()
	waitFor(ctx, t, db, func() bool { return db.opening["books"].waiting == 1 })
	cancelLeader()
	close(g.release["books"])

	assert.ErrorIs(t, <-leaderErr, context.Canceled)
	<-waiterDone
	require.NoError(t, waitErr)
	assert.False(t, got.Closed())
}

// A waiting caller whose own context ends leaves at once; the open it was
// waiting for goes on.
func TestWaiterGivingUp(t *testing.T) {
	ctx := testCtx(t)
	g := newGatedStore(t, "books")
	db := openTestDB(t, g)

	leaderErr := make(chan error, 1)
	go func() { _, err := db.OpenVault(ctx, "books"); leaderErr <- err }()
	<-g.entered["books"]

	waitCtx, cancelWait := context.WithCancel(ctx)
	waitErr := make(chan error, 1)
	go func() { _, err := db.OpenVault(waitCtx, "books"); waitErr <- err }()
	waitFor(ctx, t, db, func() bool { return db.opening["books"].waiting == 1 })
	cancelWait()
	assert.ErrorIs(t, <-waitErr, context.Canceled)
	db.mu.Lock()
	assert.Equal(t, 0, db.opening["books"].waiting)
	db.mu.Unlock()

	close(g.release["books"])
	require.NoError(t, <-leaderErr)
}

// A vault closed with its own Close leaves the DB: the next OpenVault gives
// a new, open handle, and the DB keeps only that one.
func TestClosedVaultLeavesTheDB(t *testing.T) {
	ctx := testCtx(t)
	db := openTestDB(t, memstore.New())
	v, err := db.OpenVault(ctx, "books")
	require.NoError(t, err)
	require.NoError(t, v.Close())

	v2, err := db.OpenVault(ctx, "books")
	require.NoError(t, err)
	assert.NotSame(t, v, v2)
	assert.False(t, v2.Closed())
	db.mu.Lock()
	assert.Len(t, db.vaults, 1)
	assert.Same(t, v2, db.vaults["books"])
	db.mu.Unlock()

	// Another name's open sweeps a closed one out.
	require.NoError(t, v2.Close())
	_, err = db.OpenVault(ctx, "other")
	require.NoError(t, err)
	db.mu.Lock()
	_, kept := db.vaults["books"]
	db.mu.Unlock()
	assert.False(t, kept)
	assert.False(t, errors.Is(db.ForgetVault(ctx, "books"), ErrClosed))
}
