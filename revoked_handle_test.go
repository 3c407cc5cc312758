package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// revokeOpts are the options of a revocation on st: a store without
// transactions cannot rotate the keys.
func revokeOpts(st stores.Store) []vault.RevokeOption {
	if st.Capabilities().Transactions {
		return nil
	}
	return []vault.RevokeOption{vault.RevokeWithoutRotation()}
}

// staleWrites runs every kind of write of a writer's handle: a number, a
// numbered record (numbered at once, or handed to a pass and settled), a
// record and an application event. It returns each call's error by name.
func staleWrites(ctx context.Context, t *testing.T, v *vault.Vault, tag string) map[string]error {
	t.Helper()
	errs := map[string]error{}
	_, h := stubsOf(t, v)
	if h.Online() { // bare numbers need a store with atomic compare-and-swap
		seq, err := v.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		_, errs["Next"] = seq.Next(ctx)
	}
	_, errs["numbered Put"] = h.Put(ctx, "t-"+tag, Stub{})
	if !h.Online() {
		_, errs["Settle"] = h.Settle(ctx)
	}
	errs["Put"] = vault.CollectionOf[Note](v, "notes").Put(ctx, "n-"+tag, Note{Text: tag})
	_, errs["Record"] = v.Record(ctx, "event-"+tag, nil)
	return errs
}

// TestRevokedHandleWritesNothing: a writer's handle opened before the
// writer was revoked by an owner (with the keys rotated, without, and
// revoked then granted again with a new secret and signing key) is
// refused every write with ErrNoAccess: numbers, numbered records (and
// their pass, on a store that numbers by passes), records and events. The
// store is left byte for byte as it was; the ledger verifies; the owner's
// numbers go on from where bob's stopped, with no gap; after a re-grant,
// bob's new handle writes again. Before the ledger's guard, numbers and
// events were taken and appended by the revoked author, and Verify then
// refused the ledger from that entry on.
func TestRevokedHandleWritesNothing(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range numberedStores() {
		for _, mode := range []string{"revoked", "revoked and granted again"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				st := newStore(t)
				olga := openPerson(t, personCfg(st, "olga", "o"))
				require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
				bob := openPerson(t, personCfg(st, "bob", "b"))
				for what, err := range staleWrites(ctx, t, bob, "before") {
					require.NoError(t, err, "bob's %s before his revocation", what)
				}

				require.NoError(t, olga.Revoke(ctx, "bob", revokeOpts(st)...))
				if r := olga.Rotation(); r != nil {
					require.NoError(t, r.Wait(ctx))
				}
				if mode == "revoked and granted again" {
					require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
				}
				before := faultstore.Snapshot(snapshotStore(t, st))
				for what, err := range staleWrites(ctx, t, bob, "after") {
					assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's stale handle: %s", what)
				}
				assert.Empty(t, changedKeys(before, snapshotStore(t, st)), "the refused calls wrote nothing")
				verified(t, olga)

				// olga's numbered record follows bob's only one: no number
				// was taken by the refused calls.
				_, h := stubsOf(t, olga)
				_, err := h.Put(ctx, "t-olga", Stub{})
				require.NoError(t, err)
				if !h.Online() {
					_, err = h.Settle(ctx)
					require.NoError(t, err)
				}
				rec, err := h.Get(ctx, "t-olga")
				require.NoError(t, err)
				assert.Equal(t, uint64(2), rec.Serial.N, "olga's ticket")
				if mode == "revoked and granted again" {
					bob2 := openPerson(t, personCfg(st, "bob", "b2"))
					for what, err := range staleWrites(ctx, t, bob2, "again") {
						require.NoError(t, err, "bob's new handle: %s", what)
					}
				}
				verified(t, olga)
			})
		}
	}
}

// TestStaleHonestHandleWrites: handles opened before changes that leave
// their person in place (another person granted and revoked, a rotation,
// recovery codes issued) keep writing every kind of entry, and the ledger
// verifies: the guard raises no false refusal. The person's own secret
// change on another handle renews their keys, the signing key included:
// a handle opened before it signs nothing more (ErrNoAccess, never
// ErrTampered: open again), while the handle that changed it, and one
// opened with the new secret, write on.
func TestStaleHonestHandleWrites(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range numberedStores() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			bobAgain := openPerson(t, personCfg(st, "bob", "b"))

			require.NoError(t, olga.Grant(ctx, "eve", vault.Secret([]byte("e")), vault.RoleWriter))
			require.NoError(t, olga.Revoke(ctx, "eve", revokeOpts(st)...))
			if r := olga.Rotation(); r != nil {
				require.NoError(t, r.Wait(ctx))
			}
			_, err := bobAgain.RecoveryCodes(ctx, 1)
			require.NoError(t, err)
			rotate := func() {
				if st.Capabilities().Transactions {
					r, err := olga.RotateKeys(ctx)
					require.NoError(t, err)
					require.NoError(t, r.Wait(ctx))
				}
			}
			rotate()
			for what, err := range staleWrites(ctx, t, bob, "stale") {
				assert.NoError(t, err, "bob's stale handle: %s", what)
			}
			for what, err := range staleWrites(ctx, t, olga, "olga") {
				assert.NoError(t, err, "olga: %s", what)
			}
			require.NoError(t, bobAgain.ChangeSecret(ctx, []byte("b"), []byte("b2")))
			for what, err := range staleWrites(ctx, t, bob, "renewed") {
				assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's stale handle after his secret change: %s", what)
				assert.NotErrorIs(t, err, vault.ErrTampered, "bob's stale handle after his secret change: %s", what)
			}
			rotate()
			err = vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-rotated", Note{Text: "after"})
			assert.ErrorIs(t, err, vault.ErrNoAccess, "after the renewal and a rotation")
			assert.NotErrorIs(t, err, vault.ErrTampered)
			for what, err := range staleWrites(ctx, t, bobAgain, "again") {
				assert.NoError(t, err, "bob's handle that changed the secret: %s", what)
			}
			for what, err := range staleWrites(ctx, t, openPerson(t, personCfg(st, "bob", "b2")), "new") {
				assert.NoError(t, err, "bob's handle opened with the new secret: %s", what)
			}
			verified(t, olga)
		})
	}
}

// TestRevokedHandleRacesRevocation: bob's handle takes numbers from
// several goroutines while olga revokes him. Every number bob was given
// was taken before the revocation committed, every call of his after
// Revoke returned is refused, the numbers given (bob's, then olga's) are
// exactly 1..N, and the ledger verifies throughout, checked while bob's
// writers run.
func TestRevokedHandleRacesRevocation(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			seq, err := bob.Sequence("inv", sequence.Options{})
			require.NoError(t, err)

			const workers = 4
			var (
				mu       sync.Mutex
				got      []uint64
				refused  int
				revoked  = make(chan struct{})
				wg       sync.WaitGroup
				verifies sync.WaitGroup
			)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					afterRevoke := 0
					for i := 0; afterRevoke < 3; i++ {
						select {
						case <-revoked:
							afterRevoke++
						default:
						}
						n, err := seq.Next(ctx)
						mu.Lock()
						switch {
						case err == nil:
							if afterRevoke > 0 {
								t.Errorf("worker %d: number %d given after Revoke returned", w, n)
							}
							got = append(got, n)
						case errors.Is(err, vault.ErrNoAccess):
							refused++
						default:
							t.Errorf("worker %d: %v", w, err)
						}
						mu.Unlock()
						if err != nil && afterRevoke == 0 {
							<-revoked // refused: the revocation committed
						}
					}
				}()
			}
			verifies.Add(1)
			go func() {
				defer verifies.Done()
				for range 3 {
					if _, err := olga.Audit().Verify(ctx); err != nil {
						t.Errorf("verify next to bob's writers: %v", err)
					}
				}
			}()
			for {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				if n >= 20 {
					break
				}
				_, err := olga.Audit().Head(ctx) // let the writers run
				require.NoError(t, err)
			}
			require.NoError(t, olga.Revoke(ctx, "bob"))
			close(revoked)
			wg.Wait()
			verifies.Wait()
			require.NoError(t, olga.Rotation().Wait(ctx))

			assert.Positive(t, refused)
			own, err := olga.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			n, err := own.Next(ctx)
			require.NoError(t, err)
			all := append(slices.Clone(got), n)
			slices.Sort(all)
			want := make([]uint64, len(all))
			for i := range want {
				want[i] = uint64(i + 1)
			}
			assert.Equal(t, want, all, "bob's numbers and olga's next: exactly 1..N")
			verified(t, olga)
			issued := 0
			for e, err := range olga.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				if e.Kind == ledger.NumberAllocated {
					issued++
				}
			}
			assert.Equal(t, len(all), issued, fmt.Sprintf("one %s entry per number", ledger.NumberAllocated))
		})
	}
}
