package noydb_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// hubPerson is personCfg on a device of hub.
func hubPerson(device, hub stores.Store, user, secret string) vault.Config {
	cfg := personCfg(device, user, secret)
	cfg.Hub = hub
	return cfg
}

// TestPeopleThroughHub: a grant, a secret change and a revocation made on
// one device reach the others through the hub with Sync.
func TestPeopleThroughHub(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b1")), vault.RoleWriter))
	mustSync(t, a)

	b, err := vault.Open(ctx, hubPerson(devB, hub, "bob", "b1"))
	require.NoError(t, err)
	assert.Equal(t, vault.RoleWriter, b.Role())
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "from-b", Note{Text: "hi"}))
	require.NoError(t, b.ChangeSecret(ctx, []byte("b1"), []byte("b2")))
	mustSync(t, b)
	require.NoError(t, b.Close())

	// On device A, bob's new secret opens and the old one no longer does.
	_, err = vault.Open(ctx, hubPerson(devA, hub, "bob", "b1"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	ba := openPerson(t, hubPerson(devA, hub, "bob", "b2"))
	assert.Equal(t, vault.RoleWriter, ba.Role())

	require.NoError(t, a.Revoke(ctx, "bob"))
	mustSync(t, a)
	_, err = vault.Open(ctx, hubPerson(devB, hub, "bob", "b2"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)

	verified(t, a)
	assert.Equal(t, []string{"person-granted olga bob", "person-revoked olga bob"}, peopleKinds(t, a))
	// Bob's secret change is in the ledger of device B, where he made it.
	bcfg := hubPerson(devB, hub, "olga", "o")
	bcfg.Hub = nil
	onB := openPerson(t, bcfg)
	verified(t, onB)
	assert.Equal(t, []string{"secret-changed bob bob"}, peopleKinds(t, onB))
}

// TestDeviceVerifiesAPersonGrantedAgainElsewhere: a person granted on
// device A, then revoked and granted again on device B, reaches A with
// Sync with a new signing key. A's own ledger, which recorded only the
// first grant, records the revocation and the new grant as the hub's
// ledger vouches for them, so A's Verify holds the keyring's key against
// the ledger's (it said "keyring signing key differs") and the person's
// entries written on A with the new key verify; so do B's and the hub's.
func TestDeviceVerifiesAPersonGrantedAgainElsewhere(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub, devA, devB := newStore(t), newStore(t), newStore(t)
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
			mustSync(t, b)
			guestWrites := func(id string) {
				g := openPerson(t, hubPerson(devA, hub, "guest", "g"))
				require.NoError(t, vault.CollectionOf[Note](g, "notes").Put(ctx, id, Note{Text: id}))
				mustSync(t, g)
				require.NoError(t, g.Close())
			}
			require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, a)
			guestWrites("first grant")
			mustSync(t, b)
			require.NoError(t, b.Revoke(ctx, "guest"))
			mustSync(t, b)
			require.NoError(t, b.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, b)
			mustSync(t, a)
			verified(t, a)
			guestWrites("second grant")
			mustSync(t, a)
			mustSync(t, b)
			for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
				t.Run(dev, func(t *testing.T) { verified(t, v) })
			}
			n, err := vault.CollectionOf[Note](b, "notes").Get(ctx, "second grant")
			require.NoError(t, err)
			assert.Equal(t, "second grant", n.Text)
			assert.Equal(t, []string{"person-granted olga guest", "person-revoked olga guest", "person-granted olga guest"},
				peopleKinds(t, a), "A's ledger")
		})
	}
}

// TestSyncPullsTheWritesOfAPersonGrantedAgainBeforeTheHubLearnsIt: an
// owner's device revokes a person and grants them again, and the person
// writes through the hub (their handle's link copies the new keyring
// entry there) before the owner's next Sync records the new grant on the
// hub's ledger. The person's entries, signed with a key the hub's ledger
// has not named yet, are those of a grant it has not recorded, as for a
// person it never named: every device pulls them and every ledger
// verifies, whether the revocation reached the hub at once (with its
// rotation) or travels with that Sync (RevokeWithoutRotation), also when
// another device syncs in between.
func TestSyncPullsTheWritesOfAPersonGrantedAgainBeforeTheHubLearnsIt(t *testing.T) {
	ctx := context.Background()
	for _, rotate := range []bool{true, false} {
		for name, newStore := range memAndBadger() {
			t.Run(fmt.Sprintf("%s/rotation=%v", name, rotate), func(t *testing.T) {
				hub, devA, devB := newStore(t), newStore(t), newStore(t)
				a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
				mustSync(t, a)
				b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
				require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
				mustSync(t, a)
				guestTicks := func() {
					g := openPerson(t, hubPerson(devA, hub, "guest", "g"))
					q, err := g.Sequence("tick", sequence.Options{})
					require.NoError(t, err)
					_, err = q.Next(ctx)
					require.NoError(t, err)
					require.NoError(t, g.Close())
				}
				guestTicks()
				var opts []vault.RevokeOption
				if !rotate {
					opts = append(opts, vault.RevokeWithoutRotation())
				}
				require.NoError(t, a.Revoke(ctx, "guest", opts...))
				mustSync(t, b)
				require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
				guestTicks()
				// B holds the entry the hub's ledger agrees with (the first
				// grant, or its revocation): its copy must not put it back
				// over the newer one the guest's handle brought.
				mustSync(t, b)
				mustSync(t, a)
				guestTicks()
				mustSync(t, a)
				mustSync(t, b)
				for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
					t.Run(dev, func(t *testing.T) { verified(t, v) })
				}
			})
		}
	}
}

// TestSyncPullsTheWritesOfAPersonWhoWroteBeforeTheirGrantSynced: a person
// granted on an owner's device writes through the hub (their handle's link
// brings their keyring entry there) before that device's Sync records the
// grant on the hub's ledger, and is then revoked and granted again: their
// first entries are signed with a key the hub's keyring no longer names,
// which the hub's ledger records later (their grant, then its
// revocation). Every device pulls them and every ledger verifies.
func TestSyncPullsTheWritesOfAPersonWhoWroteBeforeTheirGrantSynced(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub, devA, devB := newStore(t), newStore(t), newStore(t)
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
			guestTicks := func() {
				g := openPerson(t, hubPerson(devA, hub, "guest", "g"))
				q, err := g.Sequence("tick", sequence.Options{})
				require.NoError(t, err)
				_, err = q.Next(ctx)
				require.NoError(t, err)
				require.NoError(t, g.Close())
			}
			q, err := a.Sequence("tick", sequence.Options{})
			require.NoError(t, err)
			_, err = q.Next(ctx) // the hub's ledger begins with the owner's entry
			require.NoError(t, err)
			require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			guestTicks()
			mustSync(t, a)
			mustSync(t, b)
			require.NoError(t, a.Revoke(ctx, "guest"))
			require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, a)
			guestTicks()
			mustSync(t, b)
			mustSync(t, a)
			for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
				t.Run(dev, func(t *testing.T) { verified(t, v) })
			}
		})
	}
}

// TestTwoOwnerDevicesVerifyAGrantAgain: a person revoked and granted again
// on one of an owner's devices writes there; after syncs in both orders,
// both of the owner's devices verify (the simulation's "author revoked"
// false alarm, seen from a second device of the granter).
func TestTwoOwnerDevicesVerifyAGrantAgain(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
	require.NoError(t, a.Close())
	a = openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Revoke(ctx, "guest"))
	require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
	g := openPerson(t, hubPerson(devA, hub, "guest", "g"))
	q, err := g.Sequence("tick", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	mustSync(t, b)
	mustSync(t, a)
	mustSync(t, b)
	verified(t, a)
	verified(t, b)
}

// TestSyncKeepsARevocationCommittedDuringItsKeyringStep: an owner's device
// revokes a person on the hub (the revocation's rotation commits the
// revoked entry and its ledger entry there) while another owner device's
// Sync is under way, at each of that Sync's calls to the hub in turn. The
// Sync never copies the person's older entry back over the revoked one:
// the person, opening afterwards on that device, takes no number through
// the hub (ErrNoAccess), and every device then syncs and verifies. Before,
// the Sync decided the copy by the hub's ledger as read at its start, and
// an entry revoked after that read lost to the older one: the person's
// next number, written after the revocation on the hub's ledger, made
// every device's pull fail with "author revoked" on an honest hub.
func TestSyncKeepsARevocationCommittedDuringItsKeyringStep(t *testing.T) {
	ctx := context.Background()
	for at := int64(1); ; at++ {
		hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
		a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
		require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
		mustSync(t, a)
		var (
			armed    atomic.Bool
			calls    atomic.Int64
			fired    atomic.Bool
			revokeMu sync.Mutex
			revoked  error
		)
		// B reaches the hub through this: the at-th call of its Sync
		// waits for A's revocation first.
		viaB := faultstore.New(hub, faultstore.Options{Before: func(faultstore.Op, string) error {
			if armed.Load() && calls.Add(1) == at && fired.CompareAndSwap(false, true) {
				err := a.Revoke(ctx, "guest")
				revokeMu.Lock()
				revoked = err
				revokeMu.Unlock()
			}
			return nil
		}})
		b := openPerson(t, hubPerson(devB, viaB, "olga", "o"))
		mustSync(t, b) // B holds the guest's entry
		armed.Store(true)
		_, err := b.Sync(ctx)
		armed.Store(false)
		if !fired.Load() {
			break // B's Sync made fewer calls than at
		}
		require.NoError(t, err, "revoked at B's hub call %d", at)
		revokeMu.Lock()
		require.NoError(t, revoked, "revoked at B's hub call %d", at)
		revokeMu.Unlock()
		g, err := vault.Open(ctx, hubPerson(devB, hub, "guest", "g"))
		if err == nil {
			var q *sequence.Sequence
			if q, err = g.Sequence("tick", sequence.Options{}); err == nil {
				_, err = q.Next(ctx)
			}
			_ = g.Close()
		}
		require.ErrorIs(t, err, vault.ErrNoAccess, "revoked at B's hub call %d", at)
		mustSync(t, a)
		mustSync(t, b)
		for dev, v := range map[string]*vault.Vault{"A": a, "B": b} {
			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err, "%s, revoked at B's hub call %d", dev, at)
			require.NoError(t, rep.Problem, "%s, revoked at B's hub call %d", dev, at)
		}
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
	}
}

// TestTwoDevicesGrantOnePersonBeforeTheySync: two owner devices each grant
// the same person (each grant makes a signing key of its own) before
// either syncs. The grant the hub's ledger records first wins: the other
// device, once its Sync brings the winner, records in its own ledger its
// grant as revoked and the winner's as granted, so its Verify holds the
// keyring's key against the ledger's (it said "keyring signing key
// differs from the ledger's"). The person ends with one key on every
// device: what they wrote with the losing key on its device stays valid
// there, and a handle holding it takes nothing more (ErrNoAccess, a
// refusal, never an alarm). The same when the winner was revoked before
// the losing device synced: the person is revoked everywhere.
func TestTwoDevicesGrantOnePersonBeforeTheySync(t *testing.T) {
	ctx := context.Background()
	for _, revoke := range []bool{false, true} {
		for name, newStore := range memAndBadger() {
			t.Run(fmt.Sprintf("%s/revoked=%v", name, revoke), func(t *testing.T) {
				hub, devA, devB := newStore(t), newStore(t), newStore(t)
				a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
				mustSync(t, a)
				b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
				mustSync(t, b)
				require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
				require.NoError(t, b.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
				mustSync(t, a) // A's grant reaches the hub first
				// The guest writes on B with B's grant.
				onB := openPerson(t, hubPerson(devB, hub, "guest", "g"))
				require.NoError(t, vault.CollectionOf[Note](onB, "notes").Put(ctx, "on B", Note{Text: "on B"}))
				if revoke {
					require.NoError(t, a.Revoke(ctx, "guest"))
				}
				mustSync(t, b)
				mustSync(t, a)
				mustSync(t, b)
				err := vault.CollectionOf[Note](onB, "notes").Put(ctx, "on B again", Note{Text: "again"})
				require.ErrorIs(t, err, vault.ErrNoAccess, "a handle holding the losing key")
				assert.NotErrorIs(t, err, vault.ErrTampered)
				for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
					t.Run(dev, func(t *testing.T) { verified(t, v) })
				}
				oneGuestKey(t, revoke, a, b)
				g, err := vault.Open(ctx, hubPerson(devB, hub, "guest", "g"))
				if revoke {
					require.ErrorIs(t, err, vault.ErrNoAccess)
					return
				}
				require.NoError(t, err)
				defer g.Close()
				q, err := g.Sequence("tick", sequence.Options{})
				require.NoError(t, err)
				_, err = q.Next(ctx)
				require.NoError(t, err)
				mustSync(t, a)
				mustSync(t, b)
				verified(t, a)
				verified(t, b)
			})
		}
	}
}

// TestTwoDevicesGrantAPersonAgainBeforeTheySync: a person revoked on the
// hub is granted again on two owner devices before either syncs, and
// writes through the hub with the grant of one of them (B's) before any
// Sync records it. The grant the hub holds first wins on every device,
// whichever device syncs first: A's Sync does not put its own grant over
// it (the person's number on the hub, signed with B's key, failed A's pull
// with "bad signature" on an honest hub), and A's ledger records its own
// grant as revoked. Every device verifies and the person holds one key.
func TestTwoDevicesGrantAPersonAgainBeforeTheySync(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub, devA, devB := newStore(t), newStore(t), newStore(t)
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, a)
			require.NoError(t, a.Revoke(ctx, "guest"))
			mustSync(t, b)
			require.NoError(t, b.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			g := openPerson(t, hubPerson(devB, hub, "guest", "g"))
			q, err := g.Sequence("tick", sequence.Options{})
			require.NoError(t, err)
			_, err = q.Next(ctx)
			require.NoError(t, err)
			require.NoError(t, g.Close())
			require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, a)
			mustSync(t, b)
			mustSync(t, a)
			for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
				t.Run(dev, func(t *testing.T) { verified(t, v) })
			}
			oneGuestKey(t, false, a, b)
		})
	}
}

// TestDeviceVerifiesAPersonRevokedGrantedAndRevokedElsewhere: a person
// granted on device A is revoked, granted again and revoked again on
// device B while A does not sync. A's Sync brings the last revocation,
// of a key A's ledger never named: A's ledger records the revocation of
// the grant it holds, and its Verify passes (it said "keyring signing key
// differs from the ledger's").
func TestDeviceVerifiesAPersonRevokedGrantedAndRevokedElsewhere(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub, devA, devB := newStore(t), newStore(t), newStore(t)
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
			mustSync(t, b)
			require.NoError(t, b.Revoke(ctx, "guest"))
			mustSync(t, b)
			require.NoError(t, b.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, b)
			require.NoError(t, b.Revoke(ctx, "guest"))
			mustSync(t, b)
			mustSync(t, a)
			for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
				t.Run(dev, func(t *testing.T) { verified(t, v) })
			}
			_, err := vault.Open(ctx, hubPerson(devA, hub, "guest", "g"))
			require.ErrorIs(t, err, vault.ErrNoAccess)
		})
	}
}

// oneGuestKey asserts that every device lists the guest with one signing
// key, revoked or not as said.
func oneGuestKey(t *testing.T, revoked bool, devices ...*vault.Vault) {
	t.Helper()
	var keys [][]byte
	for _, v := range devices {
		ps, err := v.People(context.Background())
		require.NoError(t, err)
		for _, p := range ps {
			if p.Name == "guest" {
				assert.Equal(t, revoked, p.Revoked)
				keys = append(keys, p.SigningKey)
			}
		}
	}
	require.Len(t, keys, len(devices))
	for _, k := range keys[1:] {
		assert.Equal(t, keys[0], k, "one key for the guest on every device")
	}
}
