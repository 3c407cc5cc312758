package noydb_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// setReceiptNumber is the setter of the receipts' deferred numbering.
func setReceiptNumber(r *Receipt, s sequence.Serial) { r.Number = s.N }

// copyRecords copies the sealed bytes of the records of collection from
// src to dst, byte for byte: those dst lacks (a sync's push of new records,
// device to hub), or, with newer, every one that differs (a pull of the
// hub's newer revisions, hub to device, with nothing changed locally).
func copyRecords(t testing.TB, src, dst stores.Store, collection string, newer bool) {
	t.Helper()
	ctx := context.Background()
	prefix := "v/shop/" + collection + "/"
	for it, err := range src.List(ctx, prefix) {
		require.NoError(t, err)
		if strings.Contains(it.Key[len(prefix):], "/") {
			continue
		}
		if cur, err := dst.Get(ctx, it.Key); err == nil && (!newer || string(cur.Value) == string(it.Value)) {
			continue
		}
		_, err := dst.Put(ctx, it.Key, it.Value)
		require.NoError(t, err)
	}
}

// TestHubDeferredNumberingAcrossDevices: two devices write receipts
// through NumberingOf, one of them offline: each is written locally with a
// provisional id. Once the receipts are on the hub (copied there as a sync
// would push them), passes run from both devices at once against the hub's
// copy, under the hub's lock: the receipts of both devices get exactly
// 1..K, each once, stamped on the hub. A receipt not pushed yet waits on
// its device and is numbered by a later pass. Copied back (as a sync would
// pull them), the device shows the numbers.
func TestHubDeferredNumberingAcrossDevices(t *testing.T) {
	const perDevice = 10
	ctx := context.Background()
	hub := newSwitchedHub()
	devs := []stores.Store{memstore.New(), memstore.New()}
	var handles []*vault.Numbered[Receipt]
	for _, d := range devs {
		v := openOnHub(t, d, hub, deviceOpts{})
		nr, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
		require.NoError(t, err)
		handles = append(handles, nr)
	}

	hub.down.Store(true) // device 1 writes its receipts offline
	for d, nr := range handles {
		if d == 1 {
			hub.down.Store(false)
		}
		for i := range perDevice {
			r, err := nr.Put(ctx, fmt.Sprintf("d%d-%02d", d, i), Receipt{Total: 10*d + i})
			require.NoError(t, err)
			require.True(t, r.Pending)
		}
	}
	// The last receipt of device 0 has not been pushed yet.
	late := fmt.Sprintf("d0-%02d", perDevice-1)
	for _, d := range devs {
		copyRecords(t, d, hub, "receipts", false)
	}
	require.NoError(t, hub.Delete(ctx, "v/shop/receipts/"+late))

	var wg sync.WaitGroup
	for _, nr := range handles {
		wg.Go(func() {
			_, err := nr.Settle(ctx)
			if err != nil {
				assert.ErrorIs(t, err, numbering.ErrPassRunning)
			}
		})
	}
	wg.Wait()
	for _, nr := range handles { // whichever was kept out runs now
		_, err := nr.Settle(ctx)
		require.NoError(t, err)
	}

	h := openHubDirect(t, hub)
	onHub, err := vault.NumberingOf(vault.CollectionOf[Receipt](h, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	numbers := func() []uint64 {
		var out []uint64
		for d := range devs {
			for i := range perDevice {
				id := fmt.Sprintf("d%d-%02d", d, i)
				r, err := onHub.Get(ctx, id)
				if id == late && err != nil {
					require.ErrorIs(t, err, vault.ErrNotFound)
					continue
				}
				require.NoError(t, err, id)
				require.False(t, r.Pending, id)
				assert.Equal(t, r.Serial.N, r.Value.Number, id)
				out = append(out, r.Serial.N)
			}
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, seq1toN(2*perDevice-1), numbers())
	// Device 0 keeps the handoff entry of the receipt the hub lacks, only.
	pending := keysUnder(t, devs[0], "v/shop/_numbering/receipt/pending/")
	require.Len(t, pending, 1)
	assert.True(t, strings.HasSuffix(pending[0], "/"+late), pending[0])
	assert.Empty(t, keysUnder(t, devs[1], "v/shop/_numbering/receipt/pending/"))

	// The late receipt arrives and a later pass numbers it K.
	copyRecords(t, devs[0], hub, "receipts", false)
	rep, err := handles[0].Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Assigned)
	assert.Equal(t, seq1toN(2*perDevice), numbers())
	assert.Empty(t, keysUnder(t, devs[0], "v/shop/_numbering/receipt/pending/"))

	// Pulled back, the devices show the hub's numbers.
	for d, dev := range devs {
		copyRecords(t, hub, dev, "receipts", true)
		for i := range perDevice {
			id := fmt.Sprintf("d%d-%02d", d, i)
			local, err := handles[d].Get(ctx, id)
			require.NoError(t, err, id)
			remote, err := onHub.Get(ctx, id)
			require.NoError(t, err, id)
			assert.False(t, local.Pending, id)
			assert.Equal(t, remote.Serial, local.Serial, id)
			assert.Equal(t, remote.Value, local.Value, id)
		}
	}
	audit, err := handles[0].Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*perDevice, audit.Numbered())
	assert.True(t, audit.Clean(), "%+v", audit)
}
