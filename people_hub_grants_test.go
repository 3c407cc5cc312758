package noydb_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// grantRace is one case of TestGrantRecordedOnTheHubWhileTheOtherGrantActs:
// what device A does with its grant of the guest while device B's Sync
// records B's grant on the hub, right before B's commit (before) or right
// after it.
type grantRace struct {
	name   string
	before bool
	revoke bool // A revokes its grant (else the guest writes with it)
}

func grantRaces() []grantRace {
	return []grantRace{
		{name: "the guest writes before", before: true},
		{name: "the guest writes after"},
		{name: "A revokes before", before: true, revoke: true},
		{name: "A revokes after", revoke: true},
	}
}

// TestGrantRecordedOnTheHubWhileTheOtherGrantActs: two owner devices each
// grant the guest (each grant with a signing key of its own) before either
// syncs. Device B's Sync records its grant on the hub's ledger; right
// before that commit, or right after it (before the Sync copies the
// keyring), A's grant reaches the hub another way: the guest opens a
// handle on device A and takes a number through the hub, or A revokes
// its grant (which writes the revoked entry on the hub). Whichever comes
// first on the hub holds on every device: the guest's number stands when
// it came first, and the guest's handle gets ErrNoAccess (a refusal, never
// an alarm) when B's grant came first. Every Sync succeeds, every device
// and the hub verify, and both devices end with one state of the guest.
// B's Sync recorded its grant, then copied the keyring: in between (or
// between its read of the hub's keyring and its commit), A's entry was
// put on the hub where it found none, and a grant the hub's ledger
// recorded stood beside another entry in the hub's keyring: pulls failed
// with "bad signature" (the guest's number signed with A's key), or
// Verify with "keyring signing key differs from the ledger's", on an
// honest hub.
func TestGrantRecordedOnTheHubWhileTheOtherGrantActs(t *testing.T) {
	for _, c := range grantRaces() {
		for name, newStore := range memAndBadger() {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				grantRecordedWhileTheOtherActs(t, newStore(t), newStore(t), newStore(t), c)
			})
		}
	}
}

// TestGrantRecordedOnTheHubWhileTheOtherGrantActsPostgresHub is
// TestGrantRecordedOnTheHubWhileTheOtherGrantActs with a PostgreSQL hub
// (under scripts/with-postgres).
func TestGrantRecordedOnTheHubWhileTheOtherGrantActsPostgresHub(t *testing.T) {
	for _, c := range grantRaces() {
		t.Run(c.name, func(t *testing.T) {
			grantRecordedWhileTheOtherActs(t, pgtest.Open(t, nil), memstore.New(), memstore.New(), c)
		})
	}
}

func grantRecordedWhileTheOtherActs(t *testing.T, hub, devA, devB stores.Store, c grantRace) {
	ctx := context.Background()
	var armed atomic.Bool
	var a *vault.Vault
	var actErr error
	act := func() {
		if c.revoke {
			actErr = a.Revoke(ctx, "guest")
			return
		}
		g := openPerson(t, hubPerson(devA, hub, "guest", "g"))
		q, err := g.Sequence("tick", sequence.Options{})
		require.NoError(t, err)
		_, actErr = q.Next(ctx)
		require.NoError(t, g.Close())
	}
	hook := func(op faultstore.Op, _ string) error {
		if op == faultstore.OpUpdate && armed.CompareAndSwap(true, false) {
			act()
		}
		return nil
	}
	opts := faultstore.Options{After: hook}
	if c.before {
		opts = faultstore.Options{Before: hook}
	}
	a = openPerson(t, hubPerson(devA, hub, "olga", "o"))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, faultstore.New(hub, opts), "olga", "o"))
	mustSync(t, b)
	require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
	require.NoError(t, b.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))

	armed.Store(true)
	mustSync(t, b) // its first hub commit records its grant
	require.False(t, armed.Load(), "A acted during B's Sync")
	switch {
	case c.revoke || c.before:
		require.NoError(t, actErr)
	default:
		require.ErrorIs(t, actErr, vault.ErrNoAccess, "B's grant reached the hub first")
		assert.NotErrorIs(t, actErr, vault.ErrTampered)
	}
	mustSync(t, a)
	mustSync(t, b)
	mustSync(t, a)
	for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
		t.Run(dev, func(t *testing.T) { verified(t, v) })
	}
	var states []vault.Person
	for _, v := range []*vault.Vault{a, b} {
		ps, err := v.People(ctx)
		require.NoError(t, err)
		for _, p := range ps {
			if p.Name == "guest" {
				states = append(states, p)
			}
		}
	}
	require.Len(t, states, 2)
	assert.Equal(t, states[0].SigningKey, states[1].SigningKey, "one key for the guest on both devices")
	assert.Equal(t, states[0].Revoked, states[1].Revoked, "one state of the guest on both devices")
}

// TestDeviceLearnsARevocationOfItsGrantMadeElsewhere: olga grants the
// guest on device B and syncs; on device A, once it has the grant, she
// revokes the guest. B's next Sync brings the revocation: B's keyring
// holds the guest as revoked, B's ledger records it, and the guest opens
// on B no more (ErrNoAccess). B kept the guest granted for good: its own
// ledger, which records the grant made there, was taken as saying the
// revoked entry was not the guest's latest, so the Sync never copied it
// from the hub.
func TestDeviceLearnsARevocationOfItsGrantMadeElsewhere(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := newStore(t), newStore(t), newStore(t)
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
			mustSync(t, b)
			require.NoError(t, b.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
			mustSync(t, b)
			mustSync(t, a)
			require.NoError(t, a.Revoke(ctx, "guest"))
			mustSync(t, a)
			mustSync(t, b)
			for dev, v := range map[string]*vault.Vault{"A": a, "B": b} {
				ps, err := v.People(ctx)
				require.NoError(t, err)
				for _, p := range ps {
					if p.Name == "guest" {
						assert.True(t, p.Revoked, "device %s: the guest is revoked", dev)
					}
				}
				assert.Equal(t, "person-revoked olga guest", peopleKinds(t, v)[len(peopleKinds(t, v))-1], "device %s", dev)
				verified(t, v)
			}
			_, err := vault.Open(ctx, hubPerson(devB, hub, "guest", "g"))
			require.ErrorIs(t, err, vault.ErrNoAccess)
		})
	}
}
