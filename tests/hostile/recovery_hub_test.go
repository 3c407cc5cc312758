package hostile_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// recoveredOnHub: will, a writer on devices of hub, issues recovery codes
// and loses his secret; he opens a new device of the hub with a code and
// a new secret. Before that device syncs, the hub holds the recovery: its
// keyring entry opens with the new secret (the old one is refused), its
// recovery entry refuses the code as used, and its ledger records the
// code's use and the renewal of will's signing key (RecoveryCodeUsed,
// KeysRenewed), so an entry his old key signs there afterwards fails
// Verify. The new device writes, syncs, and everything verifies.
func recoveredOnHub(t *testing.T, hub stores.Store, newDevice func(testing.TB) stores.Store) {
	ctx := context.Background()
	olga := open(t, onHub(newDevice(t), hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, olga)
	w := open(t, onHub(newDevice(t), hub, "will", "w"))
	codes, err := w.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	mustSync(t, w)
	old := keep(t, hub, "will", "w")
	onHubOlga := open(t, cfg(hub, "olga", "o"))
	before, err := onHubOlga.Audit().Head(ctx)
	require.NoError(t, err)

	rc := onHub(newDevice(t), hub, "will", "")
	rc.Secret, rc.RecoveryCode, rc.NewSecret = nil, codes[0], []byte("w2")
	again := open(t, rc)

	// The hub holds the recovery before the device syncs.
	open(t, cfg(hub, "will", "w2"))
	_, err = vault.Open(ctx, cfg(hub, "will", "w"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret, "the lost secret, on the hub")
	used := cfg(hub, "will", "")
	used.Secret, used.RecoveryCode, used.NewSecret = nil, codes[0], []byte("w3")
	_, err = vault.Open(ctx, used)
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeUsed, "the code, on the hub")
	var kinds []ledger.Kind
	for e, err := range onHubOlga.Audit().Read(ctx, before.Seq+1) {
		require.NoError(t, err)
		if e.ID == "will" {
			kinds = append(kinds, e.Kind)
		}
	}
	assert.Equal(t, []ledger.Kind{ledger.RecoveryCodeUsed, ledger.KeysRenewed}, kinds, "the hub's ledger records the recovery")
	verified(t, onHubOlga)

	put(t, again, "notes", "after", "written after the recovery")
	mustSync(t, again)
	mustSync(t, olga)
	verified(t, again)
	verified(t, olga)
	verified(t, onHubOlga)
	assert.Equal(t, "written after the recovery", noteText(t, olga, "notes", "after"))

	// The old signing key signs nothing valid on the hub any more.
	head, err := onHubOlga.Audit().Head(ctx)
	require.NoError(t, err)
	_, err = forger(t, hub, old, "will").Append(ctx, ledger.Entry{Kind: ledger.AppEvent, Reason: "after the recovery"})
	require.NoError(t, err)
	badEntryAt(t, onHubOlga, head.Seq+1, ledger.BadSignature)
}

// TestHubRecoveryWrittenOnTheHubFirst runs recoveredOnHub on memstore and
// badger devices, with a memstore hub.
func TestHubRecoveryWrittenOnTheHubFirst(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { recoveredOnHub(t, memstore.New(), newStore) })
	}
}

// TestHubRecoveryWrittenOnTheHubFirstPostgresHub is the same with a
// PostgreSQL hub (run under scripts/with-postgres).
func TestHubRecoveryWrittenOnTheHubFirstPostgresHub(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { recoveredOnHub(t, pgtest.Open(t, nil), newStore) })
	}
}

// TestHubRecoveryOutOfReachWritesNothing: will's device opens with a
// recovery code while its hub is down: the open fails with an error
// matching sequence.ErrOffline, and nothing is written (the device's
// entries are as they were, the code is not burnt); with the hub back,
// the same code recovers, on the hub first.
func TestHubRecoveryOutOfReachWritesNothing(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	hub := faultstore.New(memstore.New(), faultstore.Options{Before: func(faultstore.Op, string) error {
		if down.Load() {
			return fmt.Errorf("dial tcp: connection refused: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	olga := open(t, onHub(memstore.New(), hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, olga)
	dev := memstore.New()
	w := open(t, onHub(dev, hub, "will", "w"))
	codes, err := w.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	mustSync(t, w)
	require.NoError(t, w.Close())
	entry, err := dev.Get(ctx, keyringKey("will"))
	require.NoError(t, err)
	rcodes, err := dev.Get(ctx, recoveryKey("will"))
	require.NoError(t, err)

	rc := onHub(dev, hub, "will", "")
	rc.Secret, rc.RecoveryCode, rc.NewSecret = nil, codes[0], []byte("w2")
	down.Store(true)
	_, err = vault.Open(ctx, rc)
	require.ErrorIs(t, err, sequence.ErrOffline)
	assert.NotErrorIs(t, err, vault.ErrTampered)
	down.Store(false)
	for key, was := range map[string][]byte{keyringKey("will"): entry.Value, recoveryKey("will"): rcodes.Value} {
		now, err := dev.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, was, now.Value, "%s unchanged", key)
	}
	again := open(t, rc)
	verified(t, again)
	open(t, cfg(hub, "will", "w2"))
}

// secretChangedOnHub: will, a writer on a device of hub with recovery
// codes, changes his secret and does not sync. The hub holds both of his
// renewed entries at once: the keyring entry and the recovery entry whose
// codes were given the new key pair, the same bytes as his device's, so
// that a code recovers on a new device of the hub at once.
func secretChangedOnHub(t *testing.T, hub stores.Store, newDevice func(testing.TB) stores.Store) {
	ctx := context.Background()
	olga := open(t, onHub(newDevice(t), hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, olga)
	dev := newDevice(t)
	w := open(t, onHub(dev, hub, "will", "w"))
	codes, err := w.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	mustSync(t, w)
	before, err := hub.Get(ctx, recoveryKey("will"))
	require.NoError(t, err)

	require.NoError(t, w.ChangeSecret(ctx, []byte("w"), []byte("w2")))
	for _, key := range []string{keyringKey("will"), recoveryKey("will")} {
		onDev, err := dev.Get(ctx, key)
		require.NoError(t, err)
		onHub, err := hub.Get(ctx, key)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(onDev.Value, onHub.Value), "%s: the hub holds the device's renewed entry before any Sync", key)
	}
	now, err := hub.Get(ctx, recoveryKey("will"))
	require.NoError(t, err)
	assert.False(t, bytes.Equal(before.Value, now.Value), "the hub's recovery entry was renewed")

	rc := onHub(newDevice(t), hub, "will", "")
	rc.Secret, rc.RecoveryCode, rc.NewSecret = nil, codes[0], []byte("w3")
	again := open(t, rc)
	put(t, again, "notes", "after", "written after the recovery")
	mustSync(t, again)
	verified(t, again)
	verified(t, open(t, cfg(hub, "olga", "o")))
}

// TestHubSecretChangeWritesBothEntriesOnTheHub runs secretChangedOnHub on
// memstore and badger devices, with a memstore hub.
func TestHubSecretChangeWritesBothEntriesOnTheHub(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { secretChangedOnHub(t, memstore.New(), newStore) })
	}
}

// TestHubSecretChangeWritesBothEntriesOnTheHubPostgresHub is the same with
// a PostgreSQL hub (run under scripts/with-postgres).
func TestHubSecretChangeWritesBothEntriesOnTheHubPostgresHub(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { secretChangedOnHub(t, pgtest.Open(t, nil), newStore) })
	}
}

// TestHubSecretChangeAfterCodesIssuedElsewhere: will issues codes on one
// device of the hub and syncs it, then changes his secret on another that
// has not synced since: the change renews the hub's set (the one in
// force), so a code of that set recovers on a new device.
func TestHubSecretChangeAfterCodesIssuedElsewhere(t *testing.T) {
	ctx := context.Background()
	for name, newDevice := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub := memstore.New()
			olga := open(t, onHub(newDevice(t), hub, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
			mustSync(t, olga)
			a := open(t, onHub(newDevice(t), hub, "will", "w"))
			_, err := a.RecoveryCodes(ctx, 2)
			require.NoError(t, err)
			mustSync(t, a)
			b := open(t, onHub(newDevice(t), hub, "will", "w"))
			mustSync(t, b)
			codes, err := a.RecoveryCodes(ctx, 2)
			require.NoError(t, err)
			mustSync(t, a)
			require.NoError(t, a.Close())

			require.NoError(t, b.ChangeSecret(ctx, []byte("w"), []byte("w2")))
			rc := onHub(newDevice(t), hub, "will", "")
			rc.Secret, rc.RecoveryCode, rc.NewSecret = nil, codes[1], []byte("w3")
			again := open(t, rc)
			mustSync(t, again)
			verified(t, again)
		})
	}
}
