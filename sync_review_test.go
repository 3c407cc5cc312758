package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// putXTimes puts x n times (so its revision climbs by n).
func putXTimes(text string, n int) func(*vault.Collection[Note]) error {
	return func(c *vault.Collection[Note]) error {
		for i := 0; i < n; i++ {
			if err := c.Put(context.Background(), "x", Note{text}); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestSyncHeldConflictWonLaterIsPushed: a conflict kept on a device holds
// its side back from the push (the push cursor moves past it). When a
// later hub change is decided for the device without sealing it again
// (its revision already above the hub's), the device's side must still
// reach the hub: else the device and the hub diverge for good.
func TestSyncHeldConflictWonLaterIsPushed(t *testing.T) {
	ctx := context.Background()
	t.Run("merge failed, then the hub deleted", func(t *testing.T) {
		failing := func(b *vault.Vault) {
			require.NoError(t, vault.MergeWith(b, "notes", func(local, hub Note) (Note, error) {
				return Note{}, errors.New("cannot merge")
			}))
		}
		hub, da, db, a, b := conflictSetup(t, putX("A"), putXTimes("B", 3), failing)
		rep := mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		require.True(t, rep.Conflicts[0].Kept)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Delete(ctx, "x"))
		mustSync(t, a)
		// The hub deleted revision 2 (counts as 3); the device holds 4:
		// HigherRevisionWins decides for the device.
		rep = mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		assert.False(t, rep.Conflicts[0].HubWon)
		mustSync(t, b)
		mustSync(t, a)
		assert.Equal(t, map[string]string{"x": "B@5"}, notes(t, b))
		assertConverged(t, hub, []stores.Store{da, db}, a, b)
	})
	t.Run("manual, then the policy changed and the hub moved", func(t *testing.T) {
		manual := func(b *vault.Vault) { require.NoError(t, b.SetConflictPolicy("notes", vault.Manual)) }
		hub, da, db, a, b := conflictSetup(t, putX("A"), putXTimes("B", 4), manual)
		rep := mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		require.True(t, rep.Conflicts[0].Kept)
		require.NoError(t, b.SetConflictPolicy("notes", vault.DeviceWins))
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"A2"}))
		mustSync(t, a)
		rep = mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		assert.False(t, rep.Conflicts[0].HubWon)
		mustSync(t, a)
		got := assertConverged(t, hub, []stores.Store{da, db}, a, b)
		assert.Equal(t, "B", got["x"][:1])
	})
	t.Run("manual deletion, then the policy changed and the hub moved", func(t *testing.T) {
		manual := func(b *vault.Vault) { require.NoError(t, b.SetConflictPolicy("notes", vault.Manual)) }
		hub, da, db, a, b := conflictSetup(t, putX("A"), deleteX, manual)
		rep := mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		require.True(t, rep.Conflicts[0].Kept)
		require.NoError(t, b.SetConflictPolicy("notes", vault.DeviceWins))
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"A2"}))
		mustSync(t, a)
		rep = mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		assert.False(t, rep.Conflicts[0].HubWon)
		mustSync(t, a)
		assert.Equal(t, map[string]string{}, assertConverged(t, hub, []stores.Store{da, db}, a, b))
	})
}

// TestSyncMergeThatPanics: a merge function that panics is a merge that
// failed: the conflict is kept (in Rejected), the sync returns, and the
// vault keeps working (a background Syncer must not take the app down).
func TestSyncMergeThatPanics(t *testing.T) {
	ctx := context.Background()
	panicking := func(b *vault.Vault) {
		require.NoError(t, vault.MergeWith(b, "notes", func(local, hub Note) (Note, error) {
			panic("merge bug")
		}))
	}
	_, _, _, _, b := conflictSetup(t, putX("A"), putX("B"), panicking)
	var rep vault.SyncReport
	var err error
	require.NotPanics(t, func() { rep, err = b.Sync(ctx) })
	require.NoError(t, err)
	require.Len(t, rep.Conflicts, 1)
	assert.True(t, rep.Conflicts[0].Kept)
	require.Len(t, rep.Rejected, 1)
	assert.Contains(t, rep.Rejected[0].Reason, "merge bug")
	pending, err := b.Conflicts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.PendingConflict{{Collection: "notes", ID: "x", HubRevision: 2}}, pending)
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "y", Note{"still writes"}))
}

// droppingHub acknowledges its transactions without committing them
// while drop is set: a hub that loses what it accepted.
type droppingHub struct {
	*memstore.Store
	drop bool
}

var errDropped = errors.New("dropped")

func (h *droppingHub) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if !h.drop {
		return h.Store.Update(ctx, fn)
	}
	err := h.Store.Update(ctx, func(tx stores.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errDropped
	})
	if errors.Is(err, errDropped) {
		return nil
	}
	return err
}

// TestSyncHubAcknowledgesThenDropsAPush: the README's row "acknowledges
// changes, then loses them": the pushing device sees it in the same sync,
// reading its push back (ErrRollback: the feed head is behind what it
// appended), and on every sync after; the other device cannot tell
// (withholding).
func TestSyncHubAcknowledgesThenDropsAPush(t *testing.T) {
	ctx := context.Background()
	hub := &droppingHub{Store: memstore.New()}
	a, b := syncDevice(t, memstore.New(), hub), syncDevice(t, memstore.New(), hub)
	na := vault.CollectionOf[Note](a, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"xylophone"}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, na.Put(ctx, "x", Note{"xenon"}))
	hub.drop = true
	_, err := a.Sync(ctx) // read back from the feed in the same sync
	hub.drop = false
	assert.ErrorIs(t, err, vault.ErrRollback)
	_, err = a.Sync(ctx)
	assert.ErrorIs(t, err, vault.ErrRollback)
	assert.Equal(t, vault.SyncReport{}, mustSync(t, b))
	assert.Equal(t, map[string]string{"x": "xylophone@1"}, notes(t, b))
}

// TestSyncDevicesWithDifferentPolicies: three devices, each deciding
// conflicts by its own policy, edit or delete the same record, then sync
// in some order: after two more rounds they all hold what the hub holds.
// (Which side wins depends on who syncs when; that they converge does
// not.)
func TestSyncDevicesWithDifferentPolicies(t *testing.T) {
	ctx := context.Background()
	policies := []vault.SyncPolicy{vault.HigherRevisionWins, vault.DeviceWins, vault.HubWins,
		vault.LastWriterWins, vault.FirstWriterWins, vault.Merge}
	rng := rand.New(rand.NewPCG(13, 13))
	for round := 0; round < 60; round++ {
		hub := memstore.New()
		devs := make([]stores.Store, 3)
		vs := make([]*vault.Vault, 3)
		var desc []string
		for i := range vs {
			devs[i] = memstore.New()
			vs[i] = syncDevice(t, devs[i], hub)
			p := policies[rng.IntN(len(policies))]
			if p == vault.Merge {
				require.NoError(t, vault.MergeWith(vs[i], "notes", func(l, h Note) (Note, error) {
					return Note{max(l.Text, h.Text)}, nil
				}))
			} else {
				require.NoError(t, vs[i].SetConflictPolicy("notes", p))
			}
			desc = append(desc, p.String())
		}
		require.NoError(t, vault.CollectionOf[Note](vs[0], "notes").Put(ctx, "x", Note{"base"}))
		for _, v := range vs {
			mustSync(t, v)
		}
		for i, v := range vs {
			c := vault.CollectionOf[Note](v, "notes")
			switch rng.IntN(3) {
			case 0:
				require.NoError(t, c.Delete(ctx, "x"))
				desc = append(desc, fmt.Sprintf("%d deletes", i))
			default:
				n := 1 + rng.IntN(3)
				require.NoError(t, putXTimes(fmt.Sprintf("d%d", i), n)(c))
				desc = append(desc, fmt.Sprintf("%d puts %d", i, n))
			}
		}
		order := rng.Perm(3)
		for r := 0; r < 3; r++ {
			for _, i := range order {
				_, err := vs[i].Sync(ctx)
				require.NoError(t, err, "%v", desc)
			}
		}
		t.Run(strings.Join(desc, ","), func(t *testing.T) {
			assertConverged(t, hub, devs, vs...)
		})
	}
}

// TestSyncManualResolvedDifferentlyOnTwoDevices: B and C keep the same
// conflict and resolve it differently. The first resolution to reach the
// hub wins there; the second is not written over it silently: it is a
// new conflict on its device, with the first resolution as the hub's side.
func TestSyncManualResolvedDifferentlyOnTwoDevices(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	devs := []stores.Store{memstore.New(), memstore.New(), memstore.New()}
	a, b, c := syncDevice(t, devs[0], hub), syncDevice(t, devs[1], hub), syncDevice(t, devs[2], hub)
	require.NoError(t, b.SetConflictPolicy("notes", vault.Manual))
	require.NoError(t, c.SetConflictPolicy("notes", vault.Manual))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"base"}))
	for _, v := range []*vault.Vault{a, b, c} {
		mustSync(t, v)
	}
	for _, v := range []*vault.Vault{b, c} {
		require.NoError(t, putX("edit")(vault.CollectionOf[Note](v, "notes")))
	}
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"A"}))
	mustSync(t, a)
	for _, v := range []*vault.Vault{b, c} {
		rep := mustSync(t, v)
		require.Len(t, rep.Conflicts, 1)
		require.True(t, rep.Conflicts[0].Kept)
	}
	nb, nc := vault.CollectionOf[Note](b, "notes"), vault.CollectionOf[Note](c, "notes")
	require.NoError(t, nb.Resolve(ctx, "x", &Note{"B-res"}))
	require.NoError(t, nc.Resolve(ctx, "x", &Note{"C-res"}))
	assert.Equal(t, 1, mustSync(t, b).Pushed)
	rep := mustSync(t, c)
	assert.Equal(t, 0, rep.Pushed)
	require.Len(t, rep.Conflicts, 1)
	assert.True(t, rep.Conflicts[0].Kept)
	dev, hubSide, err := nc.ConflictSides(ctx, "x")
	require.NoError(t, err)
	assert.Equal(t, "C-res", dev.Value.Text)
	assert.Equal(t, "B-res", hubSide.Value.Text)
	require.NoError(t, nc.Resolve(ctx, "x", &Note{"final"}))
	for _, v := range []*vault.Vault{c, a, b} {
		mustSync(t, v)
	}
	got := assertConverged(t, hub, devs, a, b, c)
	assert.Equal(t, "final", strings.Split(got["x"], "@")[0])
}

// TestSyncPullsARecordChangedAgainFarLater: a record's feed entry is
// followed, more than a batch of entries later, by the record's next
// change. A device pulling the first entry finds the hub's record ahead of
// it (at the later revision): that is no hub write in flight, the later
// entry is in the feed, and the pull must go on, not stop there at every
// sync.
func TestSyncPullsARecordChangedAgainFarLater(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	da, db := memstore.New(), memstore.New()
	a := syncDevice(t, da, hub)
	na := vault.CollectionOf[Note](a, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"first"}))
	mustSync(t, a)
	for i := range 600 {
		require.NoError(t, na.Put(ctx, fmt.Sprintf("n%03d", i), Note{"filler"}))
	}
	require.NoError(t, na.Put(ctx, "x", Note{"second"}))
	mustSync(t, a)

	b := syncDevice(t, db, hub)
	rep := mustSync(t, b)
	assert.Empty(t, rep.Rejected)
	assert.Equal(t, 601, rep.Pulled)
	got := assertConverged(t, hub, []stores.Store{da, db}, a, b)
	assert.Equal(t, "second@2", got["x"])
}

// TestSyncHubHeaderSwappedAfterPairing: the hub replaces the vault's
// header (another vault's, say) after devices paired with it: the next
// sync is ErrHubMismatch and carries nothing either way.
func TestSyncHubHeaderSwappedAfterPairing(t *testing.T) {
	ctx := context.Background()
	hub, da, _, a, _ := hostileSetup(t)
	other := memstore.New()
	openVault(t, openDB(t, other, "alice", "s3cret"), "shop")
	oh, err := other.Get(ctx, "v/shop/_header")
	require.NoError(t, err)
	_, err = hub.Put(ctx, "v/shop/_header", oh.Value)
	require.NoError(t, err)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "z", Note{"zebra"}))
	before := snapshot(t, hub)
	beforeDev := sealedRecords(t, da)
	_, err = a.Sync(ctx)
	require.ErrorIs(t, err, vault.ErrHubMismatch)
	assert.Equal(t, before, snapshot(t, hub))
	assert.Equal(t, beforeDev, sealedRecords(t, da))
}

// TestSyncResumesAfterACutWhileOthersWrite: A's sync cut at its k-th
// store operation (device or hub side), then B edits the same records and
// new ones and syncs before A resumes: every device converges, with B's
// new record, and every ledger verifies.
func TestSyncResumesAfterACutWhileOthersWrite(t *testing.T) {
	ctx := context.Background()
	for _, side := range []string{"device", "hub"} {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/after=%v", side, after), func(t *testing.T) {
				for k := int64(1); ; k++ {
					c := &cutter{k: k, after: after}
					opts := faultstore.Options{Before: c.before, After: c.afterWrite}
					rawHub, rawA, rawB := memstore.New(), memstore.New(), memstore.New()
					var hub, da stores.Store = rawHub, rawA
					if side == "hub" {
						hub = faultstore.New(rawHub, opts)
					} else {
						da = faultstore.New(rawA, opts)
					}
					a, b := syncDevice(t, da, hub), syncDevice(t, rawB, hub)
					na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
					require.NoError(t, na.Put(ctx, "x", Note{"x"}))
					require.NoError(t, na.Put(ctx, "y", Note{"y"}))
					mustSync(t, a)
					mustSync(t, b)
					require.NoError(t, na.Put(ctx, "x", Note{"x-a"}))
					require.NoError(t, na.Delete(ctx, "y"))
					require.NoError(t, na.Put(ctx, "z", Note{"z-a"}))

					c.armed.Store(true)
					_, err := a.Sync(ctx)
					c.armed.Store(false)
					if !c.reached() {
						require.NoError(t, err)
						assert.Greater(t, k, int64(10), "a sync takes more store operations than that")
						return
					}
					require.NoError(t, nb.Put(ctx, "x", Note{"x-b"}))
					require.NoError(t, nb.Put(ctx, "y", Note{"y-b"}))
					require.NoError(t, nb.Put(ctx, "w", Note{"w-b"}))
					mustSync(t, b)
					mustSync(t, a)
					mustSync(t, b)
					mustSync(t, a)
					got := assertConverged(t, rawHub, []stores.Store{rawA, rawB}, a, b)
					if !assert.Equal(t, "w-b@1", got["w"], "cut at %d", k) || !assert.Equal(t, "z-a@1", got["z"], "cut at %d", k) {
						return
					}
				}
			})
		}
	}
}

// TestSyncForgedKeyringSlot: the hub makes key slots of its own, bound to
// the vault's header (it needs no key for that: a slot for a user whose
// secret it chose, wrapping a data key of its own). Such a slot fails the
// keyring's check on a device (its MAC is not under the vault's key), so
// a sync does not copy it there; opened with the hub's chosen secret on a
// device (which fetches it to open) it opens nothing of the vault; and a
// forged slot put at an existing user's name neither replaces that
// user's slot on a device nor opens with the user's secret on a new
// device.
func TestSyncForgedKeyringSlot(t *testing.T) {
	ctx := context.Background()
	hub, da, _, a, _ := hostileSetup(t)
	hh, err := hub.Get(ctx, "v/shop/_header")
	require.NoError(t, err)
	forge := func(user string) []byte {
		scratch := memstore.New()
		_, err := scratch.Put(ctx, "v/shop/_header", hh.Value)
		require.NoError(t, err)
		openVault(t, openDB(t, scratch, user, "hub-chosen"), "shop")
		it, err := scratch.Get(ctx, "v/shop/_keyring/"+user)
		require.NoError(t, err)
		return it.Value
	}
	_, err = hub.Put(ctx, "v/shop/_keyring/mallory", forge("mallory"))
	require.NoError(t, err)
	aliceSlot, err := da.Get(ctx, "v/shop/_keyring/alice")
	require.NoError(t, err)
	_, err = hub.Put(ctx, "v/shop/_keyring/alice", forge("alice"))
	require.NoError(t, err)

	mustSync(t, a)
	got, err := da.Get(ctx, "v/shop/_keyring/alice")
	require.NoError(t, err)
	assert.Equal(t, aliceSlot.Value, got.Value, "the device keeps its own slot")
	_, err = da.Get(ctx, "v/shop/_keyring/mallory")
	require.ErrorIs(t, err, stores.ErrNotFound, "a forged slot does not travel")

	// mallory's key opens none of the vault's records.
	m, err := openDevice(t, da, hub, "mallory", "hub-chosen").OpenVault(ctx, "shop")
	if err == nil {
		_, err = vault.CollectionOf[Note](m, "notes").Get(ctx, "x")
	}
	assert.ErrorIs(t, err, vault.ErrTampered)

	// A new device of alice gets the forged slot from the hub: her
	// secret does not open it.
	_, err = openDevice(t, memstore.New(), hub, "alice", "s3cret").OpenVault(ctx, "shop")
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
}

// TestSyncFileFolderDevice: the README and issue 13 name a file folder
// among a device's stores ("badger on disk, a file folder, memory"); a
// device store without transactions commits a sync in steps
// (vault/sync_staged.go).
func TestSyncFileFolderDevice(t *testing.T) {
	ctx := context.Background()
	fs, err := filestore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer func() { _ = fs.Close() }()
	hub, other := memstore.New(), memstore.New()
	a, b := syncDevice(t, fs, hub), syncDevice(t, other, hub)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"from a folder"}))
	mustSync(t, a)
	mustSync(t, b)
	assert.Equal(t, map[string]string{"x": "from a folder@1"}, notes(t, b))
}
