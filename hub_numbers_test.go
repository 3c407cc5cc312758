package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// deviceOpts says how openOnHub opens a device's vault.
type deviceOpts struct {
	stateDir string
	timeout  time.Duration
}

// openOnHub opens the vault "shop" as alice on device, a device of hub.
func openOnHub(t testing.TB, device, hub stores.Store, o deviceOpts) *vault.Vault {
	t.Helper()
	v, err := openOnHubErr(device, hub, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func openOnHubErr(device, hub stores.Store, o deviceOpts) (*vault.Vault, error) {
	return vault.Open(context.Background(), vault.Config{
		Store: device, Hub: hub, Name: "shop", User: "alice", Secret: []byte("s3cret"),
		KDF: cheapKDF, InsecureAllowWeakKDF: true, StateDir: o.stateDir, HubTimeout: o.timeout,
	})
}

// openHubDirect opens the vault "shop" on the hub store itself, as a plain
// vault, to look at what the hub holds.
func openHubDirect(t testing.TB, hub stores.Store) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), vault.Config{
		Store: hub, Name: "shop", User: "alice", Secret: []byte("s3cret"),
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// seq1toN returns 1..n.
func seq1toN(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// keysUnder lists the keys of st under prefix.
func keysUnder(t testing.TB, st stores.Store, prefix string) []string {
	t.Helper()
	var out []string
	for it, err := range st.List(context.Background(), prefix) {
		require.NoError(t, err)
		out = append(out, it.Key)
	}
	return out
}

// TestHubNumbersAcrossDevices: two devices, eight goroutines each, take
// numbers of one series at once: together they get exactly 1..16N, each
// once. The counter lives on the hub (no device holds one), and the hub's
// ledger, which verifies, accounts for every number.
func TestHubNumbersAcrossDevices(t *testing.T) {
	const workers, perWorker = 8, 20
	for name, mk := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub := mk(t)
			devs := []stores.Store{memstore.New(), memstore.New()}
			var vs []*vault.Vault
			for _, d := range devs {
				vs = append(vs, openOnHub(t, d, hub, deviceOpts{stateDir: t.TempDir()}))
			}
			var mu sync.Mutex
			var got []uint64
			var wg sync.WaitGroup
			for _, v := range vs {
				q, err := v.Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				for range workers {
					wg.Go(func() {
						for range perWorker {
							s, err := q.Next(ctx)
							if !assert.NoError(t, err) {
								return
							}
							mu.Lock()
							got = append(got, s)
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			slices.Sort(got)
			assert.Equal(t, seq1toN(2*workers*perWorker), got)

			for i, d := range devs {
				assert.Empty(t, keysUnder(t, d, "v/shop/_sequences/"), "device %d holds a counter", i)
			}
			assert.NotEmpty(t, keysUnder(t, hub, "v/shop/_sequences/"))
			for _, v := range vs {
				require.NoError(t, v.Close())
			}
			h := openHubDirect(t, hub)
			_, err := h.Audit().Verify(ctx)
			require.NoError(t, err)
			rep, err := mustSeq(t, h, "invoice").Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2*workers*perWorker), rep.Head)
			assert.Zero(t, rep.Missing)
		})
	}
}

// snapshotStore copies every item of st.
func snapshotStore(t testing.TB, st stores.Store) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for it, err := range st.List(context.Background(), "") {
		require.NoError(t, err)
		m[it.Key] = slices.Clone(it.Value)
	}
	return m
}

// restoreStore makes st hold exactly snap again (a hub restored from a
// backup).
func restoreStore(t testing.TB, st stores.Store, snap map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keysUnder(t, st, "") {
		if _, ok := snap[k]; !ok {
			require.NoError(t, st.Delete(ctx, k))
		}
	}
	for k, v := range snap {
		_, err := st.Put(ctx, k, v)
		require.NoError(t, err)
	}
}

// TestHubCounterRollbackCaughtByTheDevice: the rollback pins of the hub's
// counters live in the device's state folder, so a hub restored to an older
// state after the device took numbers is caught when the device opens again
// (in a new process, as far as the pins know): ErrRollback, and no number
// is handed out twice.
func TestHubCounterRollbackCaughtByTheDevice(t *testing.T) {
	ctx := context.Background()
	hub, dev := memstore.New(), memstore.New()
	dir := t.TempDir()
	v := openOnHub(t, dev, hub, deviceOpts{stateDir: dir})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	nextN(t, q, 3)
	old := snapshotStore(t, hub)
	nextN(t, q, 2) // numbers 4 and 5
	require.NoError(t, v.Close())

	restoreStore(t, hub, old)
	v2, err := openOnHubErr(dev, hub, deviceOpts{stateDir: dir})
	if err == nil {
		t.Cleanup(func() { _ = v2.Close() })
		var q2 *sequence.Sequence
		q2, err = v2.Sequence("invoice", sequence.Options{})
		require.NoError(t, err)
		var n uint64
		n, err = q2.Next(ctx)
		require.Error(t, err, "the rolled-back hub handed out %d again", n)
	}
	require.ErrorIs(t, err, vault.ErrRollback)
	if v2 != nil {
		require.NoError(t, v2.Close())
	}

	// Forget accepts the restored hub: its pins go with the device's.
	require.NoError(t, vault.Forget(dir, "shop"))
	v3 := openOnHub(t, dev, hub, deviceOpts{stateDir: dir})
	q3, err := v3.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	n, err := q3.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), n)
}

// TestHubPutNumberedOnDevice: PutNumbered on a device commits the record
// and its number on the hub (a hub ledger entry carries the number) and
// copies the record, the same sealed bytes at the same revision, to the
// device with a device ledger entry, so the device reads it at once. A
// retry takes no second number. Two devices numbering at once get 1..K.
func TestHubPutNumberedOnDevice(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	va := openOnHub(t, devA, hub, deviceOpts{})
	vb := openOnHub(t, devB, hub, deviceOpts{})

	build := func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted, Customer: "ACME", Total: 10}, nil
	}
	const perDevice = 12
	var wg sync.WaitGroup
	for d, v := range []*vault.Vault{va, vb} {
		q, err := v.Sequence("invoice", sequence.Options{})
		require.NoError(t, err)
		inv := vault.CollectionOf[Invoice](v, "invoices")
		for i := range perDevice {
			wg.Go(func() {
				_, err := inv.PutNumbered(ctx, fmt.Sprintf("d%d-%02d", d, i), q, build)
				assert.NoError(t, err)
			})
		}
	}
	wg.Wait()

	var numbers []uint64
	for d, dev := range []stores.Store{devA, devB} {
		v := []*vault.Vault{va, vb}[d]
		for i := range perDevice {
			id := fmt.Sprintf("d%d-%02d", d, i)
			key := "v/shop/invoices/" + id
			hit, err := hub.Get(ctx, key)
			require.NoError(t, err, id)
			dit, err := dev.Get(ctx, key)
			require.NoError(t, err, "%s is not on its device", id)
			assert.Equal(t, hit.Value, dit.Value, "%s: the device's bytes differ from the hub's", id)
			rec, err := vault.CollectionOf[Invoice](v, "invoices").GetRecord(ctx, id)
			require.NoError(t, err)
			var n uint64
			_, err = fmt.Sscan(rec.Value.Number, &n)
			require.NoError(t, err)
			numbers = append(numbers, n)
		}
	}
	slices.Sort(numbers)
	assert.Equal(t, seq1toN(2*perDevice), numbers)

	// A retry keeps the number and takes none.
	q, err := va.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](va, "invoices")
	again, err := inv.PutNumbered(ctx, "d0-00", q, build)
	require.NoError(t, err)
	first, err := inv.Get(ctx, "d0-00")
	require.NoError(t, err)
	assert.Equal(t, first.Number, again.Number)
	s, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2*perDevice+1), s)

	// Each device's ledger records its copies as pulled, at the hub's feed
	// position of the commit (so no push carries them back); both ledgers
	// verify.
	var copies []ledger.Entry
	for _, v := range []*vault.Vault{va, vb} {
		_, err := v.Audit().Verify(ctx)
		require.NoError(t, err)
		puts, pulled := 0, 0
		for e, err := range v.Audit().Read(ctx, 1) {
			require.NoError(t, err)
			switch {
			case e.Kind == ledger.RecordPut && e.Collection == "invoices":
				puts++
			case e.Kind == ledger.RecordPulled && e.Collection == "invoices":
				pulled++
				copies = append(copies, e)
			}
		}
		assert.Zero(t, puts)
		assert.Equal(t, perDevice, pulled)
	}
	// A sync then has nothing to push, and pulls only the other device's.
	for _, v := range []*vault.Vault{va, vb} {
		rep := mustSync(t, v)
		assert.Equal(t, vault.SyncReport{Pulled: perDevice}, rep)
	}
	require.NoError(t, va.Close())
	require.NoError(t, vb.Close())
	h := openHubDirect(t, hub)
	_, err = h.Audit().Verify(ctx)
	require.NoError(t, err)
	for _, c := range copies {
		var at ledger.Entry
		for e, err := range h.Audit().Read(ctx, c.Number) {
			require.NoError(t, err)
			at = e
			break
		}
		assert.Equal(t, c.Number, at.Seq)
		assert.Equal(t, ledger.RecordPut, at.Kind, c.ID)
		assert.Equal(t, []any{c.Collection, c.ID, c.Revision, c.CipherHash}, []any{at.Collection, at.ID, at.Revision, at.CipherHash})
	}
	rep, err := mustSeq(t, h, "invoice").Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*perDevice, rep.Bound)
	assert.Zero(t, rep.Missing)
}

// TestHubPutNumberedDeviceWriteFails: the hub commits the record with its
// number, the device's write fails: the record comes back with an error
// wrapping ErrNotOnDevice, the hub holds it, and a retry takes no second
// number and copies it.
func TestHubPutNumberedDeviceWriteFails(t *testing.T) {
	ctx := context.Background()
	var broken atomic.Bool
	injected := errors.New("disk full")
	hub := memstore.New()
	dev := faultstore.New(memstore.New(), faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if broken.Load() && op != faultstore.OpGet && op != faultstore.OpList {
			return injected
		}
		return nil
	}})
	v := openOnHub(t, dev, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")
	build := func(s sequence.Serial) (Invoice, error) { return Invoice{Number: s.Formatted}, nil }

	broken.Store(true)
	got, err := inv.PutNumbered(ctx, "a", q, build)
	require.ErrorIs(t, err, vault.ErrNotOnDevice)
	assert.ErrorIs(t, err, injected)
	assert.Equal(t, "1", got.Number, "the record comes back with the error")
	_, err = hub.Get(ctx, "v/shop/invoices/a")
	require.NoError(t, err, "the hub holds the record")
	_, err = inv.Get(ctx, "a")
	assert.ErrorIs(t, err, vault.ErrNotFound)

	broken.Store(false)
	got, err = inv.PutNumbered(ctx, "a", q, build)
	require.NoError(t, err)
	assert.Equal(t, "1", got.Number)
	local, err := inv.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "1", local.Number)
	s, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s, "the retry took no number")
}

// TestHubDeviceUpdateRefusesNext: a device's Update cannot take a number:
// ErrNumbersOnHub, and nothing is taken or written.
func TestHubDeviceUpdateRefusesNext(t *testing.T) {
	ctx := context.Background()
	hub, dev := memstore.New(), memstore.New()
	v := openOnHub(t, dev, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")
	err = v.Update(ctx, func(tx *vault.Tx) error {
		if err := inv.In(tx).Put("a", Invoice{Customer: "ACME"}); err != nil {
			return err
		}
		_, err := tx.Next(q)
		return err
	})
	require.ErrorIs(t, err, vault.ErrNumbersOnHub)
	_, err = inv.Get(ctx, "a")
	assert.ErrorIs(t, err, vault.ErrNotFound)
	s, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), s)

	// An Update of records alone works on the device.
	require.NoError(t, v.Update(ctx, func(tx *vault.Tx) error {
		return inv.In(tx).Put("b", Invoice{Customer: "ACME"})
	}))
}

// TestHubPutNumberedDeviceAhead: a device holding its own revision of the
// record (written locally, not synced) is not overwritten by PutNumbered's
// copy: the number is taken on the hub, the error wraps ErrNotOnDevice, and
// the device keeps its revision for the next sync to settle.
func TestHubPutNumberedDeviceAhead(t *testing.T) {
	ctx := context.Background()
	hub, dev := memstore.New(), memstore.New()
	v := openOnHub(t, dev, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")
	require.NoError(t, inv.Put(ctx, "a", Invoice{Customer: "local"}))
	before, err := dev.Get(ctx, "v/shop/invoices/a")
	require.NoError(t, err)

	got, err := inv.PutNumbered(ctx, "a", q, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted, Customer: "hub"}, nil
	})
	require.ErrorIs(t, err, vault.ErrNotOnDevice)
	assert.Equal(t, "1", got.Number)
	after, err := dev.Get(ctx, "v/shop/invoices/a")
	require.NoError(t, err)
	assert.Equal(t, before.Value, after.Value, "the device's revision was overwritten")
	h := openHubDirect(t, hub)
	onHub, err := vault.CollectionOf[Invoice](h, "invoices").Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, Invoice{Number: "1", Customer: "hub"}, onHub)
}
