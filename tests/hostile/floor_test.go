package hostile_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
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

// TestHostileForgedFloorBlocksNothing: a KeysResealed entry with a huge
// generation, signed and chained with the keys its author holds, would
// make every record of the store ErrTampered (a denial of service). A
// writer's (will's) is ignored: only an owner's sets the floor. An owner's
// naming a generation no keyring entry holds (written here with olga's own
// kept key, as a bug or a lost race could) is ignored too: no rotation of
// the vault finished one. Handles opened afterwards read every record, and
// the floor the vault did reach still refuses carol's forgery.
func TestHostileForgedFloorBlocksNothing(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		for _, who := range []string{"will", "olga"} {
			t.Run(name+"/"+who, func(t *testing.T) {
				p := setUp(t, newStore(t))
				m := p.member(who)
				if m == nil {
					m = keep(t, p.st, "olga", "o")
				}
				_, err := forger(t, p.st, m, who).Append(ctx, ledger.Entry{Kind: ledger.KeysResealed, Number: 1 << 40})
				require.NoError(t, err)
				for _, user := range []struct{ name, secret string }{{"olga", "o"}, {"will", "w"}} {
					v := open(t, cfg(p.st, user.name, user.secret))
					readsAll(t, v, map[string]string{"n0": "before", "c1": "carol's"})
					n, err := vault.CollectionOf[Note](v, "hr").Get(ctx, "salary")
					require.NoError(t, err, user.name)
					assert.Equal(t, "100", n.Text)
				}
				forgeBelowFloor(t, p)
				_, err = vault.CollectionOf[Note](open(t, cfg(p.st, "olga", "o")), "hr").Get(ctx, "salary")
				require.ErrorIs(t, err, vault.ErrTampered, "the floor the vault reached")
				verified(t, p.olga)
			})
		}
	}
}

// forgeBelowFloor writes, as carol (revoked), hr/salary sealed with the
// first generation: below the floor of p's vault.
func forgeBelowFloor(t testing.TB, p *party) {
	t.Helper()
	b, err := crypto.SealRecord(p.carol.gens[1], []byte(`{"text":"forged"}`),
		crypto.RecordRef{Vault: vaultName, Collection: "hr", ID: "salary", Revision: 9, Generation: 1})
	require.NoError(t, err)
	_, err = p.st.Put(context.Background(), "v/"+vaultName+"/hr/salary", b)
	require.NoError(t, err)
}

// TestOwnerReplacesARecordBelowTheFloor: a record below the generation
// floor (carol's forgery) is ErrTampered to read, and to a writer's Put
// or Delete; an owner's Put replaces it (sealed with the current
// generation, its revision above the forgery's) and an owner's Delete
// removes it, so the owner can clear it; the rotation it kept pending then
// finishes, and the ledger verifies.
func TestOwnerReplacesARecordBelowTheFloor(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			forgeBelowFloor(t, p)
			will := open(t, cfg(p.st, "will", "w"))
			err := vault.CollectionOf[Note](will, "hr").Put(ctx, "salary", Note{Text: "will's"})
			require.ErrorIs(t, err, vault.ErrTampered, "a writer's Put")
			err = vault.CollectionOf[Note](will, "hr").Delete(ctx, "salary")
			require.ErrorIs(t, err, vault.ErrTampered, "a writer's Delete")

			hr := vault.CollectionOf[Note](p.olga, "hr")
			require.NoError(t, hr.Put(ctx, "salary", Note{Text: "200"}), "an owner's Put")
			for _, v := range []*vault.Vault{p.olga, will, open(t, cfg(p.st, "olga", "o"))} {
				n, err := vault.CollectionOf[Note](v, "hr").Get(ctx, "salary")
				require.NoError(t, err)
				assert.Equal(t, "200", n.Text)
			}
			it, err := p.st.Get(ctx, "v/"+vaultName+"/hr/salary")
			require.NoError(t, err)
			gen, err := crypto.RecordGeneration(it.Value)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), gen)

			forgeBelowFloor(t, p)
			require.NoError(t, hr.Delete(ctx, "salary"), "an owner's Delete")
			_, err = hr.Get(ctx, "salary")
			require.ErrorIs(t, err, vault.ErrNotFound)
			rot, err := p.olga.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			verified(t, p.olga)
		})
	}
}
