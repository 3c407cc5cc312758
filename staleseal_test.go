package noydb_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// TestStaleHandlesRaceLimitedGrant: three handles of the owner, open
// before bob is limited to notes (by a grant, or by narrowing his notes
// and payroll to notes), write payroll records (new ones, and again one
// of their own) while the owner makes the change on a fourth, and go on
// writing after it returned. Afterwards every record is sealed by the
// change's generation or a later one, and bob's keys, unwrapped by hand
// from his raw keyring entry, open none of the payroll records. On
// memstore, badger and PostgreSQL (under scripts/with-postgres).
func TestStaleHandlesRaceLimitedGrant(t *testing.T) {
	const writers, after = 3, 4
	all := memAndBadger()
	all["postgresql"] = func(t testing.TB) stores.Store { return pgtest.Open(t, nil) }
	for name, newStore := range all {
		for _, change := range []string{"grant", "narrow"} {
			t.Run(name+"/"+change, func(t *testing.T) {
				ctx := context.Background()
				st := newStore(t)
				owner := openPerson(t, personCfg(st, "olga", "o"))
				require.NoError(t, vault.CollectionOf[Note](owner, "payroll").Put(ctx, "p-0", Note{Text: "salary"}))
				require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "n-0", Note{Text: "note"}))
				if change == "narrow" {
					require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
				}
				stale := make([]*vault.Vault, writers)
				for i := range stale {
					stale[i] = openPerson(t, personCfg(st, "olga", "o"))
				}

				var changed atomic.Bool
				var wg sync.WaitGroup
				errs := make([]error, writers)
				written := make([]int, writers)
				for w, v := range stale {
					wg.Add(1)
					go func() {
						defer wg.Done()
						payroll := vault.CollectionOf[Note](v, "payroll")
						left := after
						for i := 0; left > 0; i++ {
							seen := changed.Load()
							id := fmt.Sprintf("w%d-%04d", w, i)
							if err := payroll.Put(ctx, id, Note{Text: "secret " + id}); err != nil {
								errs[w] = err
								return
							}
							if err := payroll.Put(ctx, fmt.Sprintf("w%d-again", w), Note{Text: "again " + id}); err != nil {
								errs[w] = err
								return
							}
							written[w] = i + 1
							if seen {
								left--
							}
						}
					}()
				}
				if change == "narrow" {
					require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
				} else {
					require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
				}
				changed.Store(true)
				wg.Wait()
				for w, err := range errs {
					require.NoError(t, err, "writer %d", w)
				}

				// The change's generation: what the owner seals with now.
				require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "n-after", Note{Text: "after"}))
				top := envelopeGen(t, st, "v/team/notes/n-after")
				require.GreaterOrEqual(t, top, uint64(2))
				want := 1
				for _, n := range written {
					want += n + 1
				}
				for _, coll := range []string{"payroll", "notes"} {
					for it, err := range stores.ListUnder(ctx, st, "v/team/"+coll+"/") {
						require.NoError(t, err)
						assert.Equal(t, top, envelopeGen(t, st, it.Key), "%s sealed below the change's generation", it.Key)
					}
				}
				opened, total := rawOpens(t, st, "payroll", entryKeys(t, st, "bob", "b"))
				require.Equal(t, want, total)
				assert.Zero(t, opened, "payroll records open with bob's keys")
				notes, _ := rawOpens(t, st, "notes", entryKeys(t, st, "bob", "b"))
				assert.Equal(t, 2, notes, "bob opens the notes")
				verified(t, owner)
			})
		}
	}
}

// envelopeGen returns the generation the record envelope stored at key
// names (1 for a version 1 envelope).
func envelopeGen(t testing.TB, st stores.Store, key string) uint64 {
	t.Helper()
	it, err := st.Get(context.Background(), key)
	require.NoError(t, err)
	gen, err := crypto.RecordGeneration(it.Value)
	require.NoError(t, err)
	return max(gen, 1)
}

// TestStaleDevicePutNumberedAfterLimitedGrant: olga's second device,
// synced before bob was limited to notes on her first, takes a numbered
// payroll record (committed on the hub first) without syncing again. The
// record on the hub must not open with bob's keys: the device learns the
// generation from the hub's keyring and seals with it.
func TestStaleDevicePutNumberedAfterLimitedGrant(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "salary"}))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	mustSync(t, b)
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	mustSync(t, a)

	q, err := b.Sequence("payslip", sequence.Options{})
	require.NoError(t, err)
	got, err := vault.CollectionOf[Invoice](b, "payroll").PutNumbered(ctx, "p-2", q,
		func(s sequence.Serial) (Invoice, error) { return Invoice{Number: s.Formatted, Notes: "secret"}, nil })
	require.NoError(t, err)
	assert.Equal(t, "1", got.Number)

	opened, total := rawOpens(t, hub, "payroll", entryKeys(t, hub, "bob", "b"))
	require.Equal(t, 2, total)
	assert.Zero(t, opened, "a numbered payroll record of a stale device opens with bob's keys on the hub")
	mustSync(t, b)
	mustSync(t, a)
	opened, total = rawOpens(t, hub, "payroll", entryKeys(t, hub, "bob", "b"))
	require.Equal(t, 2, total)
	assert.Zero(t, opened, "after both synced")
	verified(t, a)
	verified(t, b)
}

// TestStaleSecondHandleOnDeviceAfterSync: olga's device B has two
// handles on its store, both open before bob was limited to notes on
// device A. Once one of them synced (bringing the grant's generation),
// a payroll record the other writes is sealed with it on B's store, not
// with the first generation's key bob holds.
func TestStaleSecondHandleOnDeviceAfterSync(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "salary"}))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	mustSync(t, b)
	other := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	mustSync(t, a)
	mustSync(t, b)

	require.NoError(t, vault.CollectionOf[Note](other, "payroll").Put(ctx, "p-2", Note{Text: "secret"}))
	assert.GreaterOrEqual(t, envelopeGen(t, devB, "v/team/payroll/p-2"), uint64(2))
	opened, total := rawOpens(t, devB, "payroll", entryKeys(t, devB, "bob", "b"))
	require.Equal(t, 2, total)
	assert.Zero(t, opened, "a payroll record of the device's other handle opens with bob's keys")
}
