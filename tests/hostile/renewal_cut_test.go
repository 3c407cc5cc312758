package hostile_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// journalKey is where a device keeps the journal of a renewal of user's
// keys in progress (vault/renew_journal.go).
func journalKey(user string) string { return "v/" + vaultName + "/_renewing/" + user }

// cutKey marks the context of the call whose transactions cutStore cuts.
type cutKey struct{}

// errCut is the failure of a cut transaction: the device died before its
// write of the renewal reached its disk.
var errCut = errors.New("device cut off before its commit")

// cutStore is a device store whose transactions under a context marked
// with cutKey fail before they write anything.
type cutStore struct {
	stores.Store
	tr stores.Transactor
}

func newCutStore(st stores.Store) cutStore { return cutStore{Store: st, tr: st.(stores.Transactor)} }

func (s cutStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if ctx.Value(cutKey{}) != nil {
		return errCut
	}
	return s.tr.Update(ctx, fn)
}

// cutRenewal: will, a writer on a device of hub, renews his keys (by
// renew, a secret change or a recovery, giving his new secret) and the
// device's write of it fails after the hub's succeeded. The handle writes
// nothing more on the hub (ErrNoAccess, never ErrTampered); opened again
// with the new secret, the device takes the hub's entry, writes, syncs,
// and every ledger verifies; the old secret is refused, and an entry the
// old signing key signs afterwards fails Verify on the hub and on the
// device.
func cutRenewal(t *testing.T, newDevice func(testing.TB) stores.Store, renew func(t *testing.T, ctx context.Context, dev stores.Store, hub stores.Store) (*vault.Vault, string)) {
	ctx := context.Background()
	hub := memstore.New()
	olga := open(t, onHub(newDevice(t), hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, olga)
	dev := newCutStore(newDevice(t))
	w := open(t, onHub(dev, hub, "will", "w"))
	put(t, w, "notes", "before", "written before the renewal")
	mustSync(t, w)
	old := keep(t, hub, "will", "w")

	left, secret := renew(t, context.WithValue(ctx, cutKey{}, true), dev, hub)
	if left != nil {
		// The handle whose renewal was cut writes nothing on the hub.
		_, err := left.Sync(ctx)
		assert.NotErrorIs(t, err, vault.ErrTampered)
		require.NoError(t, left.Close())
	}
	journal, err := dev.Get(ctx, journalKey("will"))
	require.NoError(t, err, "the device kept a journal of the renewal")
	_, err = vault.Open(ctx, onHub(dev, hub, "will", "w"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret, "the old secret, on the device")
	again := open(t, onHub(dev, hub, "will", secret))
	// The device's ledger records the renewal, as the cut write would
	// have, and the journal is gone.
	var kinds []ledger.Kind
	for e, err := range again.Audit().Read(ctx, 1) {
		require.NoError(t, err)
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, ledger.KeysRenewed, kinds[len(kinds)-1])
	_, err = dev.Get(ctx, journalKey("will"))
	assert.ErrorIs(t, err, stores.ErrNotFound)
	// The journal put back by the store writes nothing more.
	_, err = dev.Put(ctx, journalKey("will"), journal.Value)
	require.NoError(t, err)
	verified(t, open(t, onHub(dev, hub, "will", secret)))
	head, err := again.Audit().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(len(kinds)), head.Seq, "a journal put back writes nothing")
	put(t, again, "notes", "after", "written after the renewal")
	mustSync(t, again)
	mustSync(t, olga)
	verified(t, again)
	verified(t, olga)
	onHubOlga := open(t, cfg(hub, "olga", "o"))
	verified(t, onHubOlga)
	assert.Equal(t, "written after the renewal", noteText(t, olga, "notes", "after"))

	// The old signing key signs nothing valid afterwards, on the hub and
	// on the device.
	for where, st := range map[string]stores.Store{"hub": hub, "device": dev} {
		v := open(t, cfg(st, "olga", "o"))
		if where == "device" {
			v = open(t, cfg(st, "will", secret))
		}
		head, err := v.Audit().Head(ctx)
		require.NoError(t, err)
		_, err = forger(t, st, old, "will").Append(ctx, ledger.Entry{Kind: ledger.AppEvent, Reason: "after the renewal"})
		require.NoError(t, err)
		t.Run(where, func(t *testing.T) { badEntryAt(t, v, head.Seq+1, ledger.BadSignature) })
	}
}

// TestRenewalCutAfterTheHubsWrite runs cutRenewal for a secret change and
// a recovery, on memstore and badger devices.
func TestRenewalCutAfterTheHubsWrite(t *testing.T) {
	renewals := map[string]func(t *testing.T, ctx context.Context, dev, hub stores.Store) (*vault.Vault, string){
		"secret change": func(t *testing.T, ctx context.Context, dev, hub stores.Store) (*vault.Vault, string) {
			w := open(t, onHub(dev, hub, "will", "w"))
			err := w.ChangeSecret(ctx, []byte("w"), []byte("w2"))
			require.ErrorIs(t, err, errCut)
			assert.NotErrorIs(t, err, vault.ErrTampered)
			return w, "w2"
		},
		"recovery": func(t *testing.T, ctx context.Context, dev, hub stores.Store) (*vault.Vault, string) {
			w := open(t, onHub(dev, hub, "will", "w"))
			codes, err := w.RecoveryCodes(context.Background(), 1)
			require.NoError(t, err)
			mustSync(t, w)
			require.NoError(t, w.Close())
			rc := onHub(dev, hub, "will", "")
			rc.Secret, rc.RecoveryCode, rc.NewSecret = nil, codes[0], []byte("w3")
			_, err = vault.Open(ctx, rc)
			require.ErrorIs(t, err, errCut)
			assert.NotErrorIs(t, err, vault.ErrTampered)
			return nil, "w3"
		},
	}
	for name, newStore := range memAndBadger() {
		for kind, renew := range renewals {
			t.Run(kind+"/"+name, func(t *testing.T) { cutRenewal(t, newStore, renew) })
		}
	}
}

// TestHostileRenewalJournal: will renews his keys on one device of a hub;
// on another, whose ledger does not record that renewal, someone who kept
// his old secret (so his old signing key) plants a journal of a renewal
// (the box key it is wrapped for is public) whose entries grant mallory
// the owner role. Will's next open there writes none of it, drops the
// journal, and reports no alarm; the device's ledger verifies.
func TestHostileRenewalJournal(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	olga := open(t, onHub(memstore.New(), hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, olga)
	a := open(t, onHub(memstore.New(), hub, "will", "w"))
	mustSync(t, a)
	old := keep(t, hub, "will", "w")
	devB := memstore.New()
	b := open(t, onHub(devB, hub, "will", "w"))
	put(t, b, "notes", "on-b", "written on b")
	mustSync(t, b)
	require.NoError(t, b.Close())
	require.NoError(t, a.ChangeSecret(ctx, []byte("w"), []byte("w2")))
	mustSync(t, a)
	hdr := header(t, hub)
	renewed, err := hub.Get(ctx, keyringKey("will"))
	require.NoError(t, err)
	boxPub := decodeEntry(t, renewed.Value).boxPub
	newSign := decodeEntry(t, renewed.Value).signPub

	w, err := crypto.WrapKeyTo(boxPub, old.seed, wrapAD("will", hdr, "renewal/sign"))
	require.NoError(t, err)
	plain := codec.AppendString(nil, "noydb renewal journal v1")
	plain = codec.AppendBytes(plain, boxPub)
	plain = codec.AppendBytes(plain, w)
	es := []ledger.Entry{
		{Kind: ledger.PersonGranted, ID: "mallory", Reason: "owner", SigningKey: newSign},
		{Kind: ledger.KeysRenewed, ID: "will", SigningKey: newSign},
	}
	plain = codec.AppendUvarint(plain, uint64(len(es)))
	for _, e := range es {
		enc, err := e.MarshalBinary()
		require.NoError(t, err)
		plain = codec.AppendBytes(plain, enc)
	}
	sealed, err := keySealer{old.gens[1]}.Seal(journalKey("will"), plain)
	require.NoError(t, err)
	_, err = devB.Put(ctx, journalKey("will"), sealed)
	require.NoError(t, err)

	before := open(t, cfg(devB, "olga", "o"))
	head, err := before.Audit().Head(ctx)
	require.NoError(t, err)
	again := open(t, onHub(devB, hub, "will", "w2"))
	after, err := again.Audit().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head.Seq, after.Seq, "the planted journal wrote nothing")
	_, err = devB.Get(ctx, journalKey("will"))
	assert.ErrorIs(t, err, stores.ErrNotFound, "and is dropped")
	verified(t, again)
	people, err := again.People(ctx)
	require.NoError(t, err)
	for _, p := range people {
		assert.NotEqual(t, "mallory", p.Name)
	}
}
