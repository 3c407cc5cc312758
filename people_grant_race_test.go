package noydb_test

import (
	"context"
	"fmt"
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

// TestGrantRecordedOnTheHubWhileTheOtherGrantWrites: two owner devices
// each grant the guest (each grant with a signing key of its own) before
// either syncs. Device B's Sync records its grant on the hub's ledger;
// right before that commit, or right after it (before the Sync copies
// the keyring), the guest opens a handle on device A, with A's grant, and
// takes a number through the hub. Whichever comes first on the hub wins
// on every device: the guest's number stands when it came first, and the
// guest's handle gets ErrNoAccess (a refusal, never an alarm) when B's
// grant came first. Every Sync succeeds and every device, and the hub,
// verifies. B's Sync recorded its grant, then copied the keyring: in
// between, the handle's link found no entry on the hub, put A's there and
// wrote with its key under a ledger recording B's, and every pull then
// failed with "bad signature" on an honest hub.
func TestGrantRecordedOnTheHubWhileTheOtherGrantWrites(t *testing.T) {
	for _, c := range []struct {
		name   string
		before bool // the guest writes before B's commit (else after it)
	}{{"guest first", true}, {"B's grant first", false}} {
		for name, newStore := range memAndBadger() {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				grantRecordedWhileTheOtherGrantWrites(t, newStore(t), newStore(t), newStore(t), c.before)
			})
		}
	}
}

// TestGrantRecordedOnTheHubWhileTheOtherGrantWritesPostgresHub is
// TestGrantRecordedOnTheHubWhileTheOtherGrantWrites with a PostgreSQL hub
// (under scripts/with-postgres).
func TestGrantRecordedOnTheHubWhileTheOtherGrantWritesPostgresHub(t *testing.T) {
	for _, before := range []bool{true, false} {
		t.Run(fmt.Sprintf("guest first=%v", before), func(t *testing.T) {
			grantRecordedWhileTheOtherGrantWrites(t, pgtest.Open(t, nil), memstore.New(), memstore.New(), before)
		})
	}
}

func grantRecordedWhileTheOtherGrantWrites(t *testing.T, hub, devA, devB stores.Store, before bool) {
	ctx := context.Background()
	var armed atomic.Bool
	var guestErr error
	guestWrites := func() {
		g := openPerson(t, hubPerson(devA, hub, "guest", "g"))
		q, err := g.Sequence("tick", sequence.Options{})
		require.NoError(t, err)
		_, guestErr = q.Next(ctx)
		require.NoError(t, g.Close())
	}
	hook := func(op faultstore.Op, _ string) error {
		if op == faultstore.OpUpdate && armed.CompareAndSwap(true, false) {
			guestWrites()
		}
		return nil
	}
	opts := faultstore.Options{After: hook}
	if before {
		opts = faultstore.Options{Before: hook}
	}
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, faultstore.New(hub, opts), "olga", "o"))
	mustSync(t, b)
	require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
	require.NoError(t, b.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))

	armed.Store(true)
	mustSync(t, b) // its first hub commit records its grant
	require.False(t, armed.Load(), "the guest wrote during B's Sync")
	if before {
		require.NoError(t, guestErr, "the guest's grant reached the hub first")
	} else {
		require.ErrorIs(t, guestErr, vault.ErrNoAccess, "B's grant reached the hub first")
		assert.NotErrorIs(t, guestErr, vault.ErrTampered)
	}
	mustSync(t, a)
	mustSync(t, b)
	mustSync(t, a)
	for dev, v := range map[string]*vault.Vault{"A": a, "B": b, "hub": openPerson(t, personCfg(hub, "olga", "o"))} {
		t.Run(dev, func(t *testing.T) { verified(t, v) })
	}
	var keys [][]byte
	for _, v := range []*vault.Vault{a, b} {
		ps, err := v.People(ctx)
		require.NoError(t, err)
		for _, p := range ps {
			if p.Name == "guest" {
				keys = append(keys, p.SigningKey)
			}
		}
	}
	require.Len(t, keys, 2)
	assert.Equal(t, keys[0], keys[1], "one key for the guest on both devices")
}
