package noydb_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// tillDevice opens a device of hub with the monthly tills handle.
func tillDevice(t *testing.T, dev, hub stores.Store, loc *time.Location) (*vault.Vault, *vault.Numbered[Till]) {
	t.Helper()
	v := openOnHub(t, dev, hub, deviceOpts{})
	return v, monthly(t, v, loc)
}

// Two devices sell offline around the new year; their receipts reach the
// hub with a sync, and a pass on the hub, run in January, numbers each in
// the month of its date: the receipt one device dated 31 December and
// pushed late takes December's next number, written-time numbers taken on
// the hub (Sequence.At) share the period's head, and the devices pull the
// same numbers and texts. Each period's numbers are exactly 1..N.
func TestNumberingOfDatedOnDevicesNumbersByPeriodOnTheHub(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			loc := rome(t)
			hub := newStore(t)
			va, ha := tillDevice(t, newStore(t), hub, loc)
			vb, hb := tillDevice(t, newStore(t), hub, loc)
			dec := time.Date(2026, time.December, 31, 20, 0, 0, 0, loc)
			jan := time.Date(2027, time.January, 2, 9, 0, 0, 0, loc)

			const each = 6
			var wg sync.WaitGroup
			for d, h := range []*vault.Numbered[Till]{ha, hb} {
				wg.Go(func() {
					for i := range each {
						date := dec
						if i%2 == 1 {
							date = jan
						}
						r, err := h.Put(ctx, fmt.Sprintf("d%d-%d", d, i), Till{Date: date, Amount: i})
						if assert.NoError(t, err) {
							assert.True(t, r.Pending)
						}
					}
				})
			}
			wg.Wait()
			mustSync(t, va)
			rep, err := va.SyncAndSettle(ctx) // b's receipts are not on the hub yet
			require.NoError(t, err)
			assert.Equal(t, each, rep.Settled["tills"].Assigned)

			// On the hub, a receipt numbered at write time in December.
			hv := openHubDirect(t, hub)
			hr, err := monthly(t, hv, loc).Put(ctx, "hub-1", Till{Date: dec})
			require.NoError(t, err)
			s := hr.Serial
			assert.Equal(t, "T202612-004", s.Formatted, "after a's three December receipts")

			rep, err = vb.SyncAndSettle(ctx) // b's, late: December's after the hub's own
			require.NoError(t, err)
			assert.Equal(t, each, rep.Settled["tills"].Assigned)
			mustSync(t, va)

			got := map[string][]uint64{}
			for d, h := range []*vault.Numbered[Till]{ha, hb} {
				for i := range each {
					id := fmt.Sprintf("d%d-%d", d, i)
					g, err := h.Get(ctx, id)
					require.NoError(t, err, id)
					require.False(t, g.Pending, id)
					want := "2026-12"
					if i%2 == 1 {
						want = "2027-01"
					}
					assert.Equal(t, want, g.Serial.Period, id)
					assert.Equal(t, g.Serial.Formatted, g.Value.No, id)
					got[want] = append(got[want], g.Serial.N)
					if d == 1 && want == "2026-12" {
						assert.Greater(t, g.Serial.N, uint64(4), id)
					}
					other, err := []*vault.Numbered[Till]{ha, hb}[1-d].Get(ctx, id)
					require.NoError(t, err, id)
					assert.Equal(t, g.Serial, other.Serial, id)
				}
			}
			got["2026-12"] = append(got["2026-12"], s.N)
			exactlyOneToN(t, got["2026-12"], each+1)
			exactlyOneToN(t, got["2027-01"], each)
			audit, err := ha.AuditAt(ctx, dec)
			require.NoError(t, err)
			assert.True(t, audit.Clean(), "%+v", audit)
			assert.Equal(t, each+1, audit.Numbered())
		})
	}
}

// A device puts a record again after its Settle had the hub number it and
// before a sync brought the stamped record: the device's handoff entry is
// gone (the hub's pass numbered the record), so the record is neither
// pending here nor numbered yet. The Put is refused with ErrConflict
// (sync first), not as a move to another period, and writes nothing; a
// move to another period is still ErrInvalidArgument. After a sync the
// Put keeps the record's number.
func TestNumberingOfDatedDevicePutOfARecordTheHubNumberedSaysSyncFirst(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			loc := rome(t)
			hub := newStore(t)
			v, h := tillDevice(t, newStore(t), hub, loc)
			dec := time.Date(2026, time.December, 31, 20, 0, 0, 0, loc)
			_, err := h.Put(ctx, "a", Till{Date: dec, Amount: 1})
			require.NoError(t, err)
			mustSync(t, v)
			_, err = h.Settle(ctx)
			require.NoError(t, err)

			_, err = h.Put(ctx, "a", Till{Date: dec.Add(-time.Hour), Amount: 2})
			require.ErrorIs(t, err, vault.ErrConflict)
			assert.NotErrorIs(t, err, vault.ErrInvalidArgument)
			_, err = h.Put(ctx, "a", Till{Date: dec.AddDate(0, 0, 1), Amount: 3})
			require.ErrorIs(t, err, vault.ErrInvalidArgument, "a move to January")
			g, err := h.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, 1, g.Value.Amount, "written")

			mustSync(t, v)
			r, err := h.Put(ctx, "a", Till{Date: dec.Add(-time.Hour), Amount: 2})
			require.NoError(t, err)
			assert.Equal(t, "T202612-001", r.Value.No)
			mustSync(t, v)
			g, err = h.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, 2, g.Value.Amount)
			assert.Equal(t, "T202612-001", g.Value.No)
		})
	}
}
