package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// rootVouch vouches for olga as the vault's first owner (who granted
// herself), and for nobody else.
func rootVouch(name string) (ledger.Vouched, bool) {
	if name == "olga" {
		return ledger.Vouched{Key: olga.Public(), Role: "owner", Root: true}, true
	}
	return ledger.Vouched{}, false
}

// replay replays l's people from st (nil: from nothing) and returns the
// state, or the error.
func replay(t *testing.T, l *ledger.Ledger, st *ledger.PeopleState) (*ledger.PeopleState, error) {
	t.Helper()
	if st == nil {
		st = &ledger.PeopleState{}
	}
	err := l.ReplayPeople(context.Background(), st, rootVouch)
	return st, err
}

// peopleProblem asserts that the replay of l fails at seq with problem.
func peopleProblem(t *testing.T, l *ledger.Ledger, seq uint64, problem ledger.SignatureProblem) {
	t.Helper()
	_, err := replay(t, l, nil)
	require.ErrorIs(t, err, ledger.ErrTampered)
	var se *ledger.SignatureError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, seq, se.Seq)
	assert.Equal(t, problem, se.Problem, "%v", err)
}

// TestReplayPeople: the replay of an honest ledger gives each person the
// role, key and collections of their latest grant, by whom and where;
// olga, the root who signed the first people commit, is its genesis; a
// revocation ends a grant, and a later grant to a new key holds again.
// It continues from where it stopped, and starts over on a ledger that
// no longer holds what it replayed.
func TestReplayPeople(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, _ := peopleSetup(t, st)
		got, err := replay(t, owner, nil)
		require.NoError(t, err)
		assert.Equal(t, "olga", got.Genesis())
		assert.False(t, got.Legacy())
		w, ok := got.Person("will")
		require.True(t, ok)
		assert.Equal(t, ledger.PersonState{Key: will.Public(), Role: "writer", GrantedBy: "olga", GranterKey: olga.Public(),
			Seq: 2, Held: []ledger.HeldKey{{Key: will.Public(), Role: "writer"}},
			Spans: []ledger.GrantSpan{{Key: will.Public(), Role: "writer", From: 3}}}, w)
		assert.Equal(t, []string{"olga", "rita", "will"}, got.Names())
		assert.Equal(t, uint64(5), got.Next())
		before := snapshotAll(t, st)

		_, err = owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "will", SigningKey: will.Public()},
			ledger.Entry{Kind: ledger.PersonGranted, ID: "will", Reason: "reader", SigningKey: mal.Public(), Partition: []string{"notes"}})
		require.NoError(t, err)
		again, err := replay(t, owner, got)
		require.NoError(t, err)
		w, _ = again.Person("will")
		assert.Equal(t, mal.Public(), w.Key)
		assert.Equal(t, "reader", w.Role)
		assert.Equal(t, []string{"notes"}, w.Collections)
		assert.False(t, w.Revoked)
		assert.Equal(t, [][]byte{will.Public()}, w.RevokedKeys)
		full, err := replay(t, owner, nil)
		require.NoError(t, err)
		assert.Equal(t, full.String(), again.String(), "an incremental replay is a whole one")

		// A store that rolls the ledger back to before the revocation:
		// the replay follows the ledger it is given.
		restoreAll(t, st, before)
		back, err := replay(t, signedOn(st, "olga", olga, nil), again)
		require.NoError(t, err)
		w, _ = back.Person("will")
		assert.Equal(t, will.Public(), w.Key)
		assert.Equal(t, "writer", w.Role)
	})
}

// snapshotAll returns every key and value of st.
func snapshotAll(t *testing.T, st stores.Store) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for it, err := range st.List(context.Background(), "") {
		require.NoError(t, err)
		m[it.Key] = it.Value
	}
	return m
}

// restoreAll puts st back as snap holds it.
func restoreAll(t *testing.T, st stores.Store, snap map[string][]byte) {
	t.Helper()
	for k := range snapshotAll(t, st) {
		if _, ok := snap[k]; !ok {
			del(t, st, k)
		}
	}
	for k, v := range snap {
		put(t, st, k, v)
	}
}

// TestReplayPeopleForgeries: people entries written by someone holding
// the chain key are refused unless an owner who held that role at their
// position signed them: a writer's grant, a grant in the owner's name
// signed by another key, a grant by a revoked owner, an unsigned grant, a
// second root's grant, a self-made upgrade in a vault that began signed.
func TestReplayPeopleForgeries(t *testing.T) {
	ctx := context.Background()
	grant := func(id string, key *edSigner) ledger.Entry {
		return ledger.Entry{Kind: ledger.PersonGranted, ID: id, Reason: "owner", SigningKey: key.Public()}
	}
	cases := []struct {
		name    string
		forge   func(t *testing.T, st stores.Store) *ledger.Ledger
		seq     uint64
		problem ledger.SignatureProblem
	}{
		{"a writer's grant", func(t *testing.T, st stores.Store) *ledger.Ledger {
			return signedOn(st, "will", will, nil)
		}, 5, ledger.NotPermitted},
		{"in the owner's name", func(t *testing.T, st stores.Store) *ledger.Ledger {
			return signedOn(st, "olga", mal, nil)
		}, 5, ledger.BadSignature},
		{"unsigned", func(t *testing.T, st stores.Store) *ledger.Ledger {
			return signedOn(st, "olga", nil, nil)
		}, 5, ledger.Unsigned},
		{"a revoked owner", func(t *testing.T, st stores.Store) *ledger.Ledger {
			owner := signedOn(st, "olga", olga, nil)
			_, err := owner.Append(ctx, grant("otto", mal))
			require.NoError(t, err)
			_, err = owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "otto", SigningKey: mal.Public()})
			require.NoError(t, err)
			return signedOn(st, "otto", mal, nil)
		}, 7, ledger.Revoked},
		{"an author nobody vouches for", func(t *testing.T, st stores.Store) *ledger.Ledger {
			return signedOn(st, "mal", mal, nil)
		}, 5, ledger.UnknownSigner},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st stores.Store) {
				peopleSetup(t, st)
				forger := c.forge(t, st)
				_, err := forger.Append(ctx, grant("eve", rita))
				require.NoError(t, err)
				peopleProblem(t, forger, c.seq, c.problem)
			})
		})
	}
	t.Run("a second root", func(t *testing.T) {
		eachStore(t, func(t *testing.T, st stores.Store) {
			peopleSetup(t, st)
			forger := signedOn(st, "mal", mal, nil)
			_, err := forger.Append(ctx, grant("eve", rita))
			require.NoError(t, err)
			err = forger.ReplayPeople(ctx, &ledger.PeopleState{}, func(name string) (ledger.Vouched, bool) {
				if name == "mal" {
					return ledger.Vouched{Key: mal.Public(), Role: "owner", Root: true}, true
				}
				return rootVouch(name)
			})
			var se *ledger.SignatureError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, ledger.UnknownSigner, se.Problem)
			assert.Equal(t, uint64(5), se.Seq)
		})
	})
	t.Run("an upgrade in a vault that began signed", func(t *testing.T) {
		eachStore(t, func(t *testing.T, st stores.Store) {
			peopleSetup(t, st)
			forger := signedOn(st, "mal", mal, nil)
			_, err := forger.Append(ctx, ledger.Entry{Kind: ledger.KeyringUpgraded, ID: "mal", Reason: "owner", SigningKey: mal.Public()})
			require.NoError(t, err)
			peopleProblem(t, forger, 5, ledger.NotPermitted)
		})
	})
}

// TestReplayPeopleLegacy: a vault of layout version 1 (its ledger began
// unsigned) accepts the upgrade of each holder the first upgrade named,
// once, and no one else's.
func TestReplayPeopleLegacy(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		_, err := signedOn(st, "olga", nil, nil).Append(ctx, fact(1))
		require.NoError(t, err)
		up := func(name string, s *edSigner, holders ...string) error {
			_, err := signedOn(st, name, s, nil).Append(ctx, ledger.Entry{Kind: ledger.KeyringUpgraded, ID: name,
				Reason: "owner", SigningKey: s.Public(), Partition: holders})
			return err
		}
		require.NoError(t, up("olga", olga, "olga", "otto"))
		require.NoError(t, up("otto", will))
		got, err := replay(t, signedOn(st, "olga", olga, nil), nil)
		require.NoError(t, err)
		assert.True(t, got.Legacy())
		assert.Equal(t, []string{"olga", "otto"}, got.Holders())
		o, _ := got.Person("otto")
		assert.True(t, o.Legacy)
		assert.Equal(t, "owner", o.Role)

		require.NoError(t, up("mal", mal))
		peopleProblem(t, signedOn(st, "olga", olga, nil), 4, ledger.NotPermitted)
	})
}

// TestReplayPeopleFloor: a KeysResealed entry raises the replay's floor
// to its generation (never lowers it) when an owner who held that role at
// its position signed it. A writer's is ignored: a writer holding the
// chain key could otherwise write one with a huge generation and make
// every record of the store ErrTampered (writers' handles wrote them once,
// so they are not refused). A reader's, or a revoked writer's, is refused
// at its position. A replay that reads only the people entries finds it
// (it is linked with them).
func TestReplayPeopleFloor(t *testing.T) {
	ctx := context.Background()
	resealed := func(gen uint64) ledger.Entry { return ledger.Entry{Kind: ledger.KeysResealed, Number: gen} }
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, writer := peopleSetup(t, st)
		got, err := replay(t, owner, nil)
		require.NoError(t, err)
		assert.Zero(t, got.Floor())
		_, err = owner.Append(ctx, resealed(3), fact(3))
		require.NoError(t, err)
		_, err = writer.Append(ctx, resealed(2))
		require.NoError(t, err)
		got, err = replay(t, owner, got)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), got.Floor())
		_, err = writer.Append(ctx, resealed(1<<62))
		require.NoError(t, err)
		got, err = replay(t, owner, got)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), got.Floor(), "a writer's entry raised the floor")
		_, err = owner.Append(ctx, resealed(4))
		require.NoError(t, err)
		got, err = replay(t, owner, got)
		require.NoError(t, err)
		assert.Equal(t, uint64(4), got.Floor())
		_, err = owner.Append(ctx, resealed(1<<50))
		require.NoError(t, err)
		got, err = replay(t, owner, got)
		require.NoError(t, err)
		assert.Equal(t, uint64(1<<50), got.Floor())
		assert.Equal(t, uint64(4), got.FloorAtMost(5), "the floor below a generation the caller holds")
		assert.Equal(t, uint64(3), got.FloorAtMost(3))
		assert.Zero(t, got.FloorAtMost(2))

		_, err = signedOn(st, "rita", rita, nil).Append(ctx, resealed(9))
		require.NoError(t, err)
		peopleProblem(t, owner, 11, ledger.NotPermitted)
	})
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, writer := peopleSetup(t, st)
		_, err := owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "will", SigningKey: will.Public()})
		require.NoError(t, err)
		_, err = writer.Append(ctx, resealed(9))
		require.NoError(t, err)
		peopleProblem(t, owner, 6, ledger.Revoked)
	})
}

// countingStore counts the reads of the store it wraps.
type countingStore struct {
	stores.Store
	gets, listed atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string) (stores.Item, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *countingStore) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for it, err := range c.Store.List(ctx, prefix) {
			c.listed.Add(1)
			if !yield(it, err) {
				return
			}
		}
	}
}

// TestReplayPeopleReadsOnlyPeople: the people entries are linked (each
// names the one before, the head the last), so a replay reads the people
// commits and not the thousands of entries between them, and continues
// from where it stopped reading only what is new; it agrees with a replay
// that reads every entry.
func TestReplayPeopleReadsOnlyPeople(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, _ := peopleSetup(t, st)
		for i := range 20 {
			var batch []ledger.Entry
			for j := range 100 {
				batch = append(batch, fact(1000*i+j))
			}
			_, err := owner.Append(ctx, batch...)
			require.NoError(t, err)
		}
		_, err := owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "rita", SigningKey: rita.Public()})
		require.NoError(t, err)
		for i := range 10 {
			_, err := owner.Append(ctx, fact(50000+i))
			require.NoError(t, err)
		}

		cs := &countingStore{Store: st}
		l := signedOn(cs, "olga", olga, nil)
		got, err := replay(t, l, nil)
		require.NoError(t, err)
		assert.Zero(t, cs.listed.Load(), "the replay listed the ledger")
		assert.LessOrEqual(t, cs.gets.Load(), int64(12), "reads of a replay by links")
		r, _ := got.Person("rita")
		assert.True(t, r.Revoked)

		all := &ledger.PeopleState{}
		require.NoError(t, l.ReplayAllPeople(ctx, all, rootVouch))
		assert.Equal(t, all.String(), got.String())

		_, err = owner.Append(ctx, ledger.Entry{Kind: ledger.PersonGranted, ID: "otto", Reason: "owner", SigningKey: mal.Public()})
		require.NoError(t, err)
		cs.gets.Store(0)
		got, err = replay(t, l, got)
		require.NoError(t, err)
		assert.LessOrEqual(t, cs.gets.Load(), int64(6), "reads of a replay continued")
		o, _ := got.Person("otto")
		assert.Equal(t, "owner", o.Role)
	})
}

// TestReplayPeopleLinkTurnedBack: someone holding the chain key rewrites
// the head so that its people link names an older people entry than the
// last (hiding a revocation from a replay by links). A replay continued
// from the later state, a replay reading every entry, and Verify all
// refuse it (ErrTampered); a fresh replay by links cannot tell, which is
// why a rotation reads every entry.
func TestReplayPeopleLinkTurnedBack(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, _ := peopleSetup(t, st)
		_, err := owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "rita", SigningKey: rita.Public()})
		require.NoError(t, err)
		_, err = owner.Append(ctx, fact(9))
		require.NoError(t, err)
		seen, err := replay(t, owner, nil)
		require.NoError(t, err)

		require.NoError(t, ledger.TurnHeadPeople(ctx, owner, 3)) // rita's grant, before her revocation at 5
		_, err = replay(t, owner, seen)
		assert.ErrorIs(t, err, ledger.ErrTampered)
		err = owner.ReplayAllPeople(ctx, &ledger.PeopleState{}, rootVouch)
		assert.ErrorIs(t, err, ledger.ErrTampered)
		_, err = owner.Verify(ctx)
		assert.ErrorIs(t, err, ledger.ErrTampered)
		fresh, err := replay(t, owner, nil)
		require.NoError(t, err)
		r, _ := fresh.Person("rita")
		assert.False(t, r.Revoked, "a fresh replay by links follows the head it is given")
	})
}

// TestReplayPeopleAfterUpgrade: a ledger whose head was written before
// people entries were linked (layout version 1) is read whole up to its
// first append by a release that links them, and by links after it; the
// state is the one a replay of every entry gives.
func TestReplayPeopleAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, _ := peopleSetup(t, st)
		require.NoError(t, ledger.WriteHeadV1(ctx, owner))
		old, err := replay(t, owner, nil)
		require.NoError(t, err)
		_, err = owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "will", SigningKey: will.Public()})
		require.NoError(t, err)
		_, err = owner.Append(ctx, fact(10), ledger.Entry{Kind: ledger.PersonGranted, ID: "otto", Reason: "owner", SigningKey: mal.Public()})
		require.NoError(t, err)
		got, err := replay(t, owner, nil)
		require.NoError(t, err)
		all := &ledger.PeopleState{}
		require.NoError(t, owner.ReplayAllPeople(ctx, all, rootVouch))
		assert.Equal(t, all.String(), got.String())
		cont, err := replay(t, owner, old)
		require.NoError(t, err)
		assert.Equal(t, all.String(), cont.String())
		w, _ := got.Person("will")
		assert.True(t, w.Revoked)
		verifyClean(t, owner, 7)
	})
}

// readVerified reads l from from with the people of l at its head, and
// returns the positions read or the first error.
func readVerified(t *testing.T, l *ledger.Ledger, from uint64, vouch ledger.PeopleVouch) ([]uint64, error) {
	t.Helper()
	st := &ledger.PeopleState{}
	require.NoError(t, l.ReplayPeople(context.Background(), st, vouch))
	var got []uint64
	for e, err := range l.ReadVerified(context.Background(), from, st, vouch) {
		if err != nil {
			return got, err
		}
		got = append(got, e.Seq)
	}
	return got, nil
}

// TestReadVerified: a read that checks who wrote each commit yields an
// honest ledger whole, from any position (one inside a commit too), and
// stops at the first commit its author could not sign at its position:
// a reader's record, an entry in the owner's name, a revoked writer's,
// one outside a limited writer's collections. A person the ledger never
// introduced writes as the caller vouches.
func TestReadVerified(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, writer := peopleSetup(t, st)
		_, err := writer.Append(ctx, fact(3), fact(4), fact(5))
		require.NoError(t, err)
		got, err := readVerified(t, owner, 1, rootVouch)
		require.NoError(t, err)
		assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7}, got)
		got, err = readVerified(t, owner, 6, rootVouch)
		require.NoError(t, err)
		assert.Equal(t, []uint64{6, 7}, got, "from inside a commit")
	})
	limited := ledger.Entry{Kind: ledger.PersonGranted, ID: "lena", Reason: "writer", SigningKey: mal.Public(), Partition: []string{"public"}}
	cases := []struct {
		name    string
		before  []ledger.Entry // by olga
		author  string
		key     *edSigner
		problem ledger.SignatureProblem
	}{
		{"a reader's record", nil, "rita", rita, ledger.NotPermitted},
		{"in the owner's name", nil, "olga", will, ledger.BadSignature},
		{"a revoked writer", []ledger.Entry{{Kind: ledger.PersonRevoked, ID: "will", SigningKey: will.Public()}}, "will", will, ledger.Revoked},
		{"outside a limited writer's collections", []ledger.Entry{limited}, "lena", mal, ledger.OutsideCollections},
		{"nobody vouches for", nil, "zed", mal, ledger.UnknownSigner},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st stores.Store) {
				owner, _ := peopleSetup(t, st)
				if c.before != nil {
					_, err := owner.Append(ctx, c.before...)
					require.NoError(t, err)
				}
				head, err := owner.Head(ctx)
				require.NoError(t, err)
				_, err = signedOn(st, c.author, c.key, nil).Append(ctx, fact(9))
				require.NoError(t, err)
				got, err := readVerified(t, owner, 1, rootVouch)
				var se *ledger.SignatureError
				require.True(t, errors.As(err, &se), "%v", err)
				assert.Equal(t, head.Seq+1, se.Seq)
				assert.Equal(t, c.problem, se.Problem, "%v", err)
				assert.NotContains(t, got, head.Seq+1)
				assert.Contains(t, got, head.Seq)
			})
		})
	}
	t.Run("vouched", func(t *testing.T) {
		eachStore(t, func(t *testing.T, st stores.Store) {
			owner, _ := peopleSetup(t, st)
			_, err := signedOn(st, "otto", mal, nil).Append(ctx, fact(9))
			require.NoError(t, err)
			vouch := func(name string) (ledger.Vouched, bool) {
				if name == "otto" {
					return ledger.Vouched{Key: mal.Public(), Role: "writer"}, true
				}
				return rootVouch(name)
			}
			got, err := readVerified(t, owner, 1, vouch)
			require.NoError(t, err)
			assert.Contains(t, got, uint64(5))
			// Revoked by the ledger later: its entries before still read,
			// one after does not.
			_, err = owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "otto", SigningKey: mal.Public()})
			require.NoError(t, err)
			_, err = signedOn(st, "otto", mal, nil).Append(ctx, fact(10))
			require.NoError(t, err)
			got, err = readVerified(t, owner, 1, vouch)
			var se *ledger.SignatureError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, uint64(7), se.Seq)
			assert.Equal(t, ledger.Revoked, se.Problem)
			assert.Contains(t, got, uint64(5))
		})
	})
}

// TestAGrantAgainRecordedLater: a person the ledger revoked, or holds with
// another key, writes with a new key that their keyring entry holds,
// granted by an owner, before the ledger records the new grant (granted
// again on a device that has not synced yet): the verified read and Verify
// take it as a grant the ledger records later, as for a person it never
// named, before and after the ledger records it. A key the ledger revoked
// never holds again, and a new key nobody vouches for is no one's.
func TestAGrantAgainRecordedLater(t *testing.T) {
	ctx := context.Background()
	keyring := map[string]wire.LedgerPerson{
		"olga": {SigningKey: olga.Public(), Role: "owner", Root: true, GrantedBy: "olga"},
		"will": {SigningKey: mal.Public(), Role: "writer", GrantedBy: "olga"},
	}
	vouch := func(name string) (ledger.Vouched, bool) {
		if name == "will" {
			return ledger.Vouched{Key: mal.Public(), Role: "writer"}, true
		}
		return rootVouch(name)
	}
	for _, revoked := range []bool{true, false} {
		t.Run(fmt.Sprintf("revocation recorded=%v", revoked), func(t *testing.T) {
			eachStore(t, func(t *testing.T, st stores.Store) {
				setup, _ := peopleSetup(t, st)
				owner := signedOn(st, "olga", olga, keyring)
				if revoked {
					_, err := setup.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "will", SigningKey: will.Public()})
					require.NoError(t, err)
				}
				_, err := signedOn(st, "will", mal, nil).Append(ctx, fact(9))
				require.NoError(t, err)
				head, err := owner.Head(ctx)
				require.NoError(t, err)
				got, err := readVerified(t, owner, 1, vouch)
				require.NoError(t, err)
				assert.Contains(t, got, head.Seq)
				if revoked {
					verifyClean(t, owner, head.Seq)
				}
				// Nobody vouches for the new key: it is no one's.
				_, err = readVerified(t, owner, 1, rootVouch)
				var se *ledger.SignatureError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, head.Seq, se.Seq)

				_, err = owner.Append(ctx,
					ledger.Entry{Kind: ledger.PersonRevoked, ID: "will", SigningKey: will.Public()},
					ledger.Entry{Kind: ledger.PersonGranted, ID: "will", Reason: "writer", SigningKey: mal.Public()})
				require.NoError(t, err)
				_, err = signedOn(st, "will", mal, nil).Append(ctx, fact(10))
				require.NoError(t, err)
				_, err = readVerified(t, owner, 1, vouch)
				require.NoError(t, err)
				verifyClean(t, owner, head.Seq+3)

				// The revoked key after its revocation.
				_, err = signedOn(st, "will", will, nil).Append(ctx, fact(11))
				require.NoError(t, err)
				_, err = readVerified(t, owner, 1, vouch)
				require.ErrorAs(t, err, &se)
				assert.Equal(t, head.Seq+4, se.Seq)
				sigProblem(t, owner, head.Seq+4, ledger.BadSignature)
			})
		})
	}
}
