package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// TestHubJoinKeepsTheNumbersOfClaims: a vault claims numbers for request
// ids on its own device (r1 -> 1, r2 -> 3, with a plain number between),
// then joins a hub. A claim of the same id afterwards gets the same
// number, on the device that joined and on another device of the hub, and
// still when the hub has lost every claim record (a new process claims
// there: the hub's ledger holds what the join brought); a new id gets the
// next number. Before the fix the hub knew nothing of the device's
// claims: r1 got 4 on the hub, a second number for one request.
func TestHubJoinKeepsTheNumbersOfClaims(t *testing.T) {
	for hubName, newHub := range memAndBadger() {
		for devName, newDev := range memAndBadger() {
			t.Run(devName+"-devices/"+hubName+"-hub", func(t *testing.T) {
				joinKeepsClaims(t, newHub(t), newDev(t), newDev(t), newDev(t))
			})
		}
	}
}

func joinKeepsClaims(t *testing.T, hub, devA, devB, devC stores.Store) {
	ctx := context.Background()
	claim := func(v *vault.Vault, id string) uint64 {
		t.Helper()
		q, err := v.Sequence("tickets", sequence.Options{})
		require.NoError(t, err)
		n, err := q.Claim(ctx, id)
		require.NoError(t, err)
		return n
	}
	solo := openStandalone(t, devA)
	assert.Equal(t, uint64(1), claim(solo, "r1"))
	assert.Equal(t, []uint64{2}, takeFrom(t, solo, "tickets", sequence.Options{}, 1))
	assert.Equal(t, uint64(3), claim(solo, "r2"))
	require.NoError(t, solo.Close())

	a := openOnHub(t, devA, hub, deviceOpts{})
	b := openOnHub(t, devB, hub, deviceOpts{})
	assert.Equal(t, uint64(1), claim(a, "r1"), "the joined device")
	assert.Equal(t, uint64(3), claim(b, "r2"), "another device")
	assert.Equal(t, uint64(4), claim(b, "r3"), "a new request")
	assert.Equal(t, uint64(1), claim(b, "r1"), "another device")

	// The hub loses its claim records: its ledger still answers.
	for _, k := range keysUnder(t, hub, "") {
		if strings.Contains(k, "\x01h\x00") || strings.Contains(k, "\x01c\x00") {
			require.NoError(t, hub.Delete(ctx, k))
		}
	}
	c := openOnHub(t, devC, hub, deviceOpts{})
	assert.Equal(t, uint64(3), claim(c, "r2"), "claim records lost")
	assert.Equal(t, uint64(1), claim(c, "r1"), "claim records lost")
	assert.Equal(t, uint64(4), claim(c, "r3"), "claim records lost")
	assert.Equal(t, uint64(5), claim(c, "r4"), "a new request")
	for _, v := range []*vault.Vault{a, b, c} {
		mustSync(t, v)
		verified(t, v)
	}
	rep, err := openHubDirect(t, hub).Audit().Verify(ctx)
	require.NoError(t, err)
	require.NoError(t, rep.Problem)
}

// TestHubJoinRefusesACopyWhoseClaimTheHubAnswered: a copy of a vault
// answers a claim of request id X with number 2, in room an owner made on
// the hub with a seed (so no number of the copy's was given on the hub),
// while the hub answered X with 6. The copy's join is refused with
// ErrHubDiverged naming number 2, and the hub still answers X with 6: one
// request, one number.
func TestHubJoinRefusesACopyWhoseClaimTheHubAnswered(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := newMem(t), newMem(t), newMem(t)
	require.NoError(t, openStandalone(t, devA).Close())
	copyStoreTo(t, devA, devB)
	a := openOnHub(t, devA, hub, deviceOpts{})
	qa, err := a.Sequence("tickets", sequence.Options{})
	require.NoError(t, err)
	require.NoError(t, qa.SeedTo(ctx, 5))
	n, err := qa.Claim(ctx, "X")
	require.NoError(t, err)
	require.Equal(t, uint64(6), n)

	cp := openStandalone(t, devB)
	qc, err := cp.Sequence("tickets", sequence.Options{})
	require.NoError(t, err)
	for i, id := range []string{"Y", "X"} {
		n, err := qc.Claim(ctx, id)
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), n, id)
	}
	require.NoError(t, cp.Close())
	before := snapshotStore(t, hub)
	_, err = openOnHubErr(devB, hub, deviceOpts{})
	require.ErrorIs(t, err, vault.ErrHubDiverged)
	var de *vault.HubDivergedError
	require.ErrorAs(t, err, &de)
	require.Len(t, de.Series, 1)
	assert.Equal(t, []vault.NumberRange{{From: 2, To: 2}}, de.Series[0].Numbers)
	assert.Equal(t, before, snapshotStore(t, hub), "nothing written on the hub")
	n, err = qa.Claim(ctx, "X")
	require.NoError(t, err)
	assert.Equal(t, uint64(6), n)
}
