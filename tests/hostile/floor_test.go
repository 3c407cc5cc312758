package hostile_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// The generation floor's other side: the honest writers it must never
// accuse (TestHostileForgeRecord is the revoked person it refuses).

// resealedFloors returns the generations of the KeysResealed entries of
// v's ledger, in order.
func resealedFloors(t testing.TB, v *vault.Vault) []uint64 {
	t.Helper()
	var out []uint64
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		if e.Kind == ledger.KeysResealed {
			out = append(out, e.Number)
		}
	}
	return out
}

// readsAll asserts that v reads every note of want, as want says.
func readsAll(t testing.TB, v *vault.Vault, want map[string]string) {
	t.Helper()
	for id, text := range want {
		n, err := vault.CollectionOf[Note](v, "notes").Get(context.Background(), id)
		require.NoError(t, err, id)
		assert.Equal(t, text, n.Text, id)
	}
}

// TestGenerationFloorSparesAHandleThatDidNotHear: olga's handle B, opened
// before the rotation olga's handle A makes and never told of it, writes
// before the rotation, while its records are re-sealed, and after the
// re-sealing finished (the ledger's KeysResealed entry, and A's floor, say
// every record is sealed with generation 2 or later). Every handle reads
// every record, B's included (B's commits re-seal what it sealed with
// generation 1 with the store's current generation), and so does one
// opened after a second rotation; the ledger verifies.
func TestGenerationFloorSparesAHandleThatDidNotHear(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			a := open(t, cfg(st, "olga", "o"))
			want := map[string]string{}
			write := func(v *vault.Vault, id string) {
				put(t, v, "notes", id, "text of "+id)
				want[id] = "text of " + id
			}
			for i := range 20 {
				write(a, fmt.Sprintf("a-%d", i))
			}
			b := open(t, cfg(st, "olga", "o"))
			write(b, "b-before")

			rot, err := a.RotateKeys(ctx)
			require.NoError(t, err)
			write(b, "b-during")
			require.NoError(t, rot.Wait(ctx))
			assert.Equal(t, []uint64{2}, resealedFloors(t, a))
			write(b, "b-after")
			write(a, "a-after")

			readsAll(t, a, want)
			readsAll(t, b, want)
			readsAll(t, open(t, cfg(st, "olga", "o")), want)

			rot, err = a.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			write(b, "b-third")
			assert.Equal(t, []uint64{2, 3}, resealedFloors(t, a))
			readsAll(t, open(t, cfg(st, "olga", "o")), want)
			readsAll(t, a, want)
			verified(t, a)
		})
	}
}

// TestGenerationFloorSparesAnOfflineDevice: olga's device B writes with
// generation 1 while out of touch; device A rotates on the hub and
// re-seals. A device keeps no floor and writes no KeysResealed entry (the
// ledger is the hub's, to which devices that had not heard push records):
// after Sync both devices, and a handle opened on the hub's store itself,
// read every record; both ledgers verify.
func TestGenerationFloorSparesAnOfflineDevice(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub := memstore.New()
			devA, devB := newStore(t), memstore.New()
			a := open(t, onHub(devA, hub, "olga", "o"))
			want := map[string]string{}
			write := func(v *vault.Vault, id string) {
				put(t, v, "notes", id, "text of "+id)
				want[id] = "text of " + id
			}
			write(a, "a-0")
			mustSync(t, a)
			b := open(t, onHub(devB, hub, "olga", "o"))
			mustSync(t, b)
			write(b, "b-offline")

			rot, err := a.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			write(a, "a-after")
			mustSync(t, a)
			mustSync(t, b)
			mustSync(t, a)

			for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": open(t, cfg(hub, "olga", "o"))} {
				t.Run(dev, func(t *testing.T) {
					readsAll(t, v, want)
					assert.Empty(t, resealedFloors(t, v))
					verified(t, v)
				})
			}
		})
	}
}
