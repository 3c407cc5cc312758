package vault

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// beforeGetStore is a hub as one device sees it: the first Get of key
// runs fn first, a write another device commits between two reads of
// that device's pull.
type beforeGetStore struct {
	stores.Store
	tr   stores.Transactor
	key  string
	once sync.Once
	fn   func()
}

func (s *beforeGetStore) Get(ctx context.Context, key string) (stores.Item, error) {
	if key == s.key && s.fn != nil {
		s.once.Do(s.fn)
	}
	return s.Store.Get(ctx, key)
}

func (s *beforeGetStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.tr.Update(ctx, fn)
}

// TestSyncPullWaitsForAStampSealedWithANewerGeneration: a numbering pass
// on the hub stamps a record (a new revision, sealed with the hub's
// current data key generation) before it appends the stamp's feed entry.
// When another device rotated the keys just before, a device whose pull
// took its keyring step before the rotation meets the record sealed with
// a generation it does not hold yet, after a feed entry naming the
// revision before the stamp. The hub is honest: the pull takes the
// keyring step again, finds the record ahead of its entry (the stamp in
// flight) and leaves it for the next sync, with no alarm.
func TestSyncPullWaitsForAStampSealedWithANewerGeneration(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	seen := &beforeGetStore{Store: hub, tr: hub}
	open := func(st, h stores.Store) *Vault {
		v, err := Open(ctx, Config{Store: st, Hub: h, Name: "shop", User: "alice", Secret: []byte("s3cret"),
			KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = v.Close() })
		return v
	}
	a, b := open(memstore.New(), hub), open(memstore.New(), seen)
	_, err := b.Sync(ctx)
	require.NoError(t, err)
	require.NoError(t, CollectionOf[string](a, "notes").Put(ctx, "n1", "first"))
	_, err = a.Sync(ctx)
	require.NoError(t, err)

	seen.key = b.hub.recordKey("notes", "n1")
	var stamped deferred.Stamp
	seen.fn = func() {
		r, err := a.RotateKeys(ctx)
		require.NoError(t, err)
		require.NoError(t, r.Wait(ctx))
		// The pass's stamp, its feed entry not appended yet.
		keep := func(body []byte, _ sequence.Serial) ([]byte, error) { return body, nil }
		stamped, err = stampRecords{v: a.hub, apply: keep}.Stamp(ctx, "notes", "n1", deferred.Mark{Series: "rcpt", N: 1, Formatted: "1"})
		require.NoError(t, err)
	}
	rep, err := b.Sync(ctx)
	require.NoError(t, err)
	require.True(t, stamped.Stamped)
	assert.Equal(t, uint64(2), stamped.Revision)
	gen, err := recordGeneration(mustGet(t, hub, seen.key))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), gen, "the stamp is sealed with the rotated generation")
	require.Len(t, rep.Rejected, 1, "the record ahead of its entry waits for the next sync")
	assert.Equal(t, "n1", rep.Rejected[0].ID)
}

func mustGet(t *testing.T, st stores.Store, key string) []byte {
	t.Helper()
	it, err := st.Get(context.Background(), key)
	require.NoError(t, err)
	return it.Value
}

// TestSyncPullStillDetectsARecordUnderANewerGenerationBehindItsEntry: the
// keyring step a pull takes again for a record sealed with a generation it
// does not hold excuses nothing: a hub record at the revision its entry
// names with another value, sealed with the new generation (no honest
// writer makes it), is ErrHubTampered once the pull can open it.
func TestSyncPullStillDetectsARecordUnderANewerGenerationBehindItsEntry(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	seen := &beforeGetStore{Store: hub, tr: hub}
	open := func(st, h stores.Store) *Vault {
		v, err := Open(ctx, Config{Store: st, Hub: h, Name: "shop", User: "alice", Secret: []byte("s3cret"),
			KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = v.Close() })
		return v
	}
	a, b := open(memstore.New(), hub), open(memstore.New(), seen)
	_, err := b.Sync(ctx)
	require.NoError(t, err)
	require.NoError(t, CollectionOf[string](a, "notes").Put(ctx, "n1", "first"))
	_, err = a.Sync(ctx)
	require.NoError(t, err)

	seen.key = b.hub.recordKey("notes", "n1")
	seen.fn = func() {
		r, err := a.RotateKeys(ctx)
		require.NoError(t, err)
		require.NoError(t, r.Wait(ctx))
		it, err := hub.Get(ctx, seen.key)
		require.NoError(t, err)
		st, err := a.hub.openStored("notes", "n1", it, true)
		require.NoError(t, err)
		// Revision 1 again, another value, sealed with generation 2.
		sealed, err := a.hub.sealRecord("notes", "n1", joinRecord(st.marks, []byte(`"forged"`)), 1)
		require.NoError(t, err)
		gen, err := recordGeneration(sealed)
		require.NoError(t, err)
		require.Equal(t, uint64(2), gen)
		_, err = hub.Put(ctx, seen.key, sealed)
		require.NoError(t, err)
	}
	_, err = b.Sync(ctx)
	require.ErrorIs(t, err, ErrHubTampered)
	assert.Contains(t, err.Error(), "is not the revision 1")
}
