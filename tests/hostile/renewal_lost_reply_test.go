package hostile_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// lastKind returns the kind of the last entry of v's ledger.
func lastKind(t *testing.T, v *vault.Vault) ledger.Kind {
	t.Helper()
	var last ledger.Kind
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		last = e.Kind
	}
	return last
}

// TestRenewalWhoseHubReplyWasLostFinishesOnTheDevice: will renews his
// keys on a device of a hub (a secret change, a recovery); the hub
// commits the renewal but its reply is lost (a timeout after the commit).
// The renewal fails, and the device has not written it. Opened again with
// the new secret (the hub's entry), the device's ledger must record the
// renewal as the cut write would have (an entry the old signing key signs
// there afterwards fails Verify): the journal of the renewal is kept when
// the hub's answer is not a refusal.
func TestRenewalWhoseHubReplyWasLostFinishesOnTheDevice(t *testing.T) {
	renewals := map[string]func(t *testing.T, lose *atomic.Bool, dev, hub stores.Store) string{
		"secret change": func(t *testing.T, lose *atomic.Bool, dev, hub stores.Store) string {
			w := open(t, onHub(dev, hub, "will", "w"))
			lose.Store(true)
			err := w.ChangeSecret(context.Background(), []byte("w"), []byte("w2"))
			require.Error(t, err, "the hub's reply was lost")
			assert.NotErrorIs(t, err, vault.ErrTampered)
			require.NoError(t, w.Close())
			return "w2"
		},
		"recovery": func(t *testing.T, lose *atomic.Bool, dev, hub stores.Store) string {
			w := open(t, onHub(dev, hub, "will", "w"))
			codes, err := w.RecoveryCodes(context.Background(), 1)
			require.NoError(t, err)
			mustSync(t, w)
			require.NoError(t, w.Close())
			rc := onHub(dev, hub, "will", "")
			rc.Secret, rc.RecoveryCode, rc.NewSecret = nil, codes[0], []byte("w3")
			lose.Store(true)
			_, err = vault.Open(context.Background(), rc)
			require.Error(t, err, "the hub's reply was lost")
			assert.NotErrorIs(t, err, vault.ErrTampered)
			return "w3"
		},
	}
	for kind, renew := range renewals {
		t.Run(kind, func(t *testing.T) { lostReplyRenewal(t, renew) })
	}
}

func lostReplyRenewal(t *testing.T, renew func(t *testing.T, lose *atomic.Bool, dev, hub stores.Store) string) {
	ctx := context.Background()
	var lose atomic.Bool
	hub := faultstore.New(memstore.New(), faultstore.Options{After: func(op faultstore.Op, _ string) error {
		if op == faultstore.OpUpdate && lose.CompareAndSwap(true, false) {
			return fmt.Errorf("read tcp: i/o timeout: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	olga := open(t, onHub(memstore.New(), hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, olga)
	dev := memstore.New()
	w := open(t, onHub(dev, hub, "will", "w"))
	put(t, w, "notes", "before", "written before the renewal")
	mustSync(t, w)
	require.NoError(t, w.Close())
	before, err := hub.Get(ctx, keyringKey("will"))
	require.NoError(t, err)
	old := keep(t, hub, "will", "w")

	secret := renew(t, &lose, dev, hub)
	require.False(t, lose.Load(), "the renewal's hub commit ran")
	after, err := hub.Get(ctx, keyringKey("will"))
	require.NoError(t, err)
	require.NotEqual(t, before.Value, after.Value, "the hub took the renewal")

	again := open(t, onHub(dev, hub, "will", secret))
	assert.Equal(t, ledger.KeysRenewed, lastKind(t, again), "the device's ledger records the renewal")
	verified(t, again)
	head, err := again.Audit().Head(ctx)
	require.NoError(t, err)
	_, err = forger(t, dev, old, "will").Append(ctx, ledger.Entry{Kind: ledger.AppEvent, Reason: "after the renewal"})
	require.NoError(t, err)
	badEntryAt(t, again, head.Seq+1, ledger.BadSignature)
}

// TestRenewalCutThenOpenedOfflineWithTheOldSecretFinishesLater: will's
// secret change is cut after the hub's write (the device's commit
// fails), so he takes the change for failed, and opens the device with
// his old secret while the hub is out of reach. That open cannot tell
// whether the hub took the renewal, and must keep its journal: back in
// reach, opened with the new secret (the hub's entry), the device's ledger
// records the renewal, and an entry the old signing key signs there
// afterwards fails Verify.
func TestRenewalCutThenOpenedOfflineWithTheOldSecretFinishesLater(t *testing.T) {
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
	dev := newCutStore(memstore.New())
	w := open(t, onHub(dev, hub, "will", "w"))
	put(t, w, "notes", "before", "written before the renewal")
	mustSync(t, w)
	old := keep(t, hub, "will", "w")
	err := w.ChangeSecret(context.WithValue(ctx, cutKey{}, true), []byte("w"), []byte("w2"))
	require.ErrorIs(t, err, errCut)
	require.NoError(t, w.Close())

	down.Store(true)
	offline := open(t, onHub(dev, hub, "will", "w"))
	require.NoError(t, offline.Close())
	down.Store(false)

	again := open(t, onHub(dev, hub, "will", "w2"))
	assert.Equal(t, ledger.KeysRenewed, lastKind(t, again), "the device's ledger records the renewal")
	head, err := again.Audit().Head(ctx)
	require.NoError(t, err)
	_, err = forger(t, dev, old, "will").Append(ctx, ledger.Entry{Kind: ledger.AppEvent, Reason: "after the renewal"})
	require.NoError(t, err)
	badEntryAt(t, again, head.Seq+1, ledger.BadSignature)
}
