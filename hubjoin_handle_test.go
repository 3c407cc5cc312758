package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestHandleOpenedBeforeAJoinTakesNoNumber: a handle opened without a hub
// and kept open while another handle of the process joins the vault to a
// hub takes no number afterwards (ErrHubJoined, which also matches
// sequence.ErrOffline): the hub's series continue the device's counters,
// and a number from those counters would be one the hub hands out again.
// Plain records still write; the handle opened with the hub numbers on,
// 1..N with none twice.
func TestHandleOpenedBeforeAJoinTakesNoNumber(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			device, hub, state := newStore(t), memstore.New(), t.TempDir()
			cfg := vault.Config{Store: device, Name: "shop", User: "alice", Secret: []byte("s3cret"),
				KDF: cheapKDF, InsecureAllowWeakKDF: true, StateDir: state}
			before, err := vault.Open(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = before.Close() })
			q, err := before.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			n, err := q.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(1), n)

			jcfg := cfg
			jcfg.Hub = hub
			joined, err := vault.Open(ctx, jcfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = joined.Close() })

			_, err = q.Next(ctx)
			assert.ErrorIs(t, err, vault.ErrHubJoined)
			assert.ErrorIs(t, err, sequence.ErrOffline)
			_, err = q.NextN(ctx, 3)
			assert.ErrorIs(t, err, vault.ErrHubJoined)
			require.NoError(t, vault.CollectionOf[Note](before, "notes").Put(ctx, "n1", Note{Text: "plain"}))

			got := takeFrom(t, joined, "inv", sequence.Options{}, 3)
			assert.Equal(t, []uint64{2, 3, 4}, got)
			_, err = q.Next(ctx)
			assert.ErrorIs(t, err, vault.ErrHubJoined)
		})
	}
}
