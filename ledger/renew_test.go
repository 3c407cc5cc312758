package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// ritaNew is rita's signing key after her renewal.
var ritaNew = newSigner(5)

// renewed is peopleSetup followed by rita's renewal to ritaNew (entry 5,
// signed by her key of before), and an entry she signs with the new key
// (6).
func renewed(t *testing.T, st stores.Store) (owner *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	owner, _ = peopleSetup(t, st)
	_, err := signedOn(st, "rita", rita, nil).Append(ctx,
		ledger.Entry{Kind: ledger.KeysRenewed, ID: "rita", SigningKey: ritaNew.Public()})
	require.NoError(t, err)
	_, err = signedOn(st, "rita", ritaNew, nil).Append(ctx, ledger.Entry{Kind: ledger.SecretChanged, ID: "rita"})
	require.NoError(t, err)
	return owner
}

// renewalRefused asserts that Verify, the people replay and the verified
// read of l all fail at seq with problem.
func renewalRefused(t *testing.T, l *ledger.Ledger, seq uint64, problem ledger.SignatureProblem) {
	t.Helper()
	sigProblem(t, l, seq, problem)
	peopleProblem(t, l, seq, problem)
	st := &ledger.PeopleState{}
	var err error
	for _, err = range l.ReadVerified(context.Background(), 1, st, rootVouch) {
		if err != nil {
			break
		}
	}
	// The read checks what the replay accepted: a people state that
	// stops before the forgery reads up to it, and fails there.
	var se *ledger.SignatureError
	if err != nil {
		require.True(t, errors.As(err, &se), "%v", err)
		assert.Equal(t, seq, se.Seq)
	}
}

// TestSignedKeysRenewed: a person of any role (rita, a reader) records
// the renewal of their own signing key, signed by the key it replaces;
// from the next entry on the new key signs for them, in Verify, the
// people replay and the verified read alike.
func TestSignedKeysRenewed(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) { signedKeysRenewed(t, st) })
}

// TestSignedKeysRenewedOnPostgres is TestSignedKeysRenewed on PostgreSQL
// (skipped without NOYDB_PG_URL, failing under CI=true).
func TestSignedKeysRenewedOnPostgres(t *testing.T) {
	signedKeysRenewed(t, pgtest.Open(t, nil))
}

func signedKeysRenewed(t *testing.T, st stores.Store) {
	owner := renewed(t, st)
	verifyClean(t, owner, 6)
	got, err := replay(t, owner, nil)
	require.NoError(t, err)
	r, ok := got.Person("rita")
	require.True(t, ok)
	assert.Equal(t, ritaNew.Public(), r.Key)
	assert.Equal(t, "reader", r.Role)
	assert.Equal(t, uint64(5), r.RenewedSeq)
	assert.Equal(t, uint64(3), r.Seq, "the grant stays the one of entry 3")
	assert.Equal(t, []ledger.GrantSpan{
		{Key: rita.Public(), Role: "reader", From: 4, To: 6},
		{Key: ritaNew.Public(), Role: "reader", From: 6},
	}, r.Spans)
	seqs, err := readVerified(t, owner, 1, rootVouch)
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, seqs)
}

// TestForgedKeysRenewed: a renewal that the person's current key did not
// sign fails at its position: signed by their key of before a renewal
// (someone who kept it), by another person about them, by an outsider in
// their name; so does an entry of the old key after the renewal, a
// renewal that does not end its commit, and a revoked person's.
func TestForgedKeysRenewed(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		forge   func(t *testing.T, st stores.Store)
		at      uint64
		problem ledger.SignatureProblem
	}{
		{"by the old key after the renewal", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "rita", rita, nil).Append(ctx,
				ledger.Entry{Kind: ledger.KeysRenewed, ID: "rita", SigningKey: mal.Public()})
			require.NoError(t, err)
		}, 7, ledger.BadSignature},
		{"by another person", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "will", will, nil).Append(ctx,
				ledger.Entry{Kind: ledger.KeysRenewed, ID: "rita", SigningKey: mal.Public()})
			require.NoError(t, err)
		}, 7, ledger.NotPermitted},
		{"by an outsider in the person's name", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "rita", mal, nil).Append(ctx,
				ledger.Entry{Kind: ledger.KeysRenewed, ID: "rita", SigningKey: mal.Public()})
			require.NoError(t, err)
		}, 7, ledger.BadSignature},
		{"not ending its commit", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "rita", ritaNew, nil).Append(ctx,
				ledger.Entry{Kind: ledger.KeysRenewed, ID: "rita", SigningKey: mal.Public()},
				ledger.Entry{Kind: ledger.SecretChanged, ID: "rita"})
			require.NoError(t, err)
		}, 7, ledger.NotPermitted},
		{"by a revoked person", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "olga", olga, nil).Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "rita"})
			require.NoError(t, err)
			_, err = signedOn(st, "rita", ritaNew, nil).Append(ctx,
				ledger.Entry{Kind: ledger.KeysRenewed, ID: "rita", SigningKey: mal.Public()})
			require.NoError(t, err)
		}, 8, ledger.Revoked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st stores.Store) {
				owner := renewed(t, st)
				c.forge(t, st)
				// An honest entry after the forgery does not hide it.
				_, err := owner.Append(ctx, fact(10))
				require.NoError(t, err)
				renewalRefused(t, owner, c.at, c.problem)
			})
		})
	}

	// An entry of the old key after the renewal, not a change of people:
	// Verify and the verified read refuse it.
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner := renewed(t, st)
		_, err := signedOn(st, "rita", rita, nil).Append(ctx, ledger.Entry{Kind: ledger.SecretChanged, ID: "rita"})
		require.NoError(t, err)
		sigProblem(t, owner, 7, ledger.BadSignature)
		_, err = readVerified(t, owner, 1, rootVouch)
		var se *ledger.SignatureError
		require.True(t, errors.As(err, &se), "%v", err)
		assert.Equal(t, uint64(7), se.Seq)
		assert.Equal(t, ledger.BadSignature, se.Problem)
	})
}

// TestKeysRenewedReplayedByLinks: a renewal is a change of people the
// head links: a replay that continues from before it, by the links, gives
// what a whole replay gives; and a keyring that still holds the key of
// before the renewal (an entry put back) differs from the ledger's at the
// renewal.
func TestKeysRenewedReplayedByLinks(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, _ := peopleSetup(t, st)
		before, err := replay(t, owner, nil)
		require.NoError(t, err)
		_, err = signedOn(st, "rita", rita, nil).Append(ctx,
			ledger.Entry{Kind: ledger.KeysRenewed, ID: "rita", SigningKey: ritaNew.Public()})
		require.NoError(t, err)
		appendN(t, owner, 3)
		cont, err := replay(t, owner, before)
		require.NoError(t, err)
		whole := &ledger.PeopleState{}
		require.NoError(t, owner.ReplayAllPeople(ctx, whole, rootVouch))
		r, _ := cont.Person("rita")
		assert.Equal(t, ritaNew.Public(), r.Key)
		w, _ := whole.Person("rita")
		assert.Equal(t, w, r)
		es := readAll(t, owner, 5)
		assert.Equal(t, uint64(3), es[0].From, "linked to the grant of rita")

		// Verify with the keyring: its key for rita must be the renewed one.
		dir := map[string]wire.LedgerPerson{
			"olga": {SigningKey: olga.Public(), Role: "owner", Root: true},
			"will": {SigningKey: will.Public(), Role: "writer", GrantedBy: "olga"},
			"rita": {SigningKey: ritaNew.Public(), Role: "reader", GrantedBy: "olga"},
		}
		verifyClean(t, signedOn(st, "olga", olga, dir), 8)
		dir["rita"] = wire.LedgerPerson{SigningKey: rita.Public(), Role: "reader", GrantedBy: "olga"}
		_, err = signedOn(st, "olga", olga, dir).Verify(ctx)
		var se *ledger.SignatureError
		require.True(t, errors.As(err, &se), "%v", err)
		assert.Equal(t, ledger.SignatureError{Seq: 5, Actor: "rita", Problem: ledger.KeyMismatch}, *se)
	})
}
