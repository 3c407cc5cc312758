package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// soleOn is signedOn for a vault that says, through alone, whether its
// keyring holds no one but actor.
func soleOn(st stores.Store, actor string, s *edSigner, alone *atomic.Bool) *ledger.Ledger {
	return ledger.New(st, newSealer(nil), macer{macKey}, prefix, ledger.Options{
		Actor: actor, Now: func() time.Time { return fixedNow }, Signer: s, Alone: alone.Load,
		People: func(context.Context) (map[string]wire.LedgerPerson, error) { return nil, nil },
	})
}

// isAlone returns a flag set to v.
func isAlone(v bool) *atomic.Bool {
	var b atomic.Bool
	b.Store(v)
	return &b
}

// kinds says, per entry of l, how it is vouched for: 'c' Chained, 'v'
// Covered, 's' signed.
func kinds(t *testing.T, l *ledger.Ledger) string {
	t.Helper()
	var b []byte
	for _, e := range readAll(t, l, 1) {
		switch {
		case e.Chained:
			b = append(b, 'c')
		case e.Covered:
			b = append(b, 'v')
		case len(e.Signature) > 0:
			b = append(b, 's')
		default:
			b = append(b, '-')
		}
	}
	return string(b)
}

// grantWill is olga's grant of will as a writer.
var grantWill = ledger.Entry{Kind: ledger.PersonGranted, ID: "will", Reason: "writer", SigningKey: will.Public()}

// TestChainedWhileAlone: a vault of one person writes its entries
// Chained from the first on, which carries the person's key; the grant
// of a second person is signed, and its signature covers the chain before
// it; every commit after it is signed, though the vault still says alone;
// Verify accepts the whole, and the second person's own entries.
func TestChainedWhileAlone(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := soleOn(st, "olga", olga, isAlone(true))
		appendN(t, l, 3)
		_, err := l.Append(ctx, fact(4), fact(5))
		require.NoError(t, err)
		assert.Equal(t, "ccccc", kinds(t, l))
		first := readAll(t, l, 1)[0]
		assert.Equal(t, olga.Public(), first.SigningKey, "the genesis carries its author's key")
		owner, err := ledger.HeadAlone(ctx, l)
		require.NoError(t, err)
		assert.Equal(t, "olga", owner)
		verifyClean(t, l, 5)

		// The grant commit: a fact before it stays Chained, the grant and
		// what follows it in the commit are signed.
		_, err = l.Append(ctx, fact(6), grantWill, fact(7))
		require.NoError(t, err)
		_, err = l.Append(ctx, fact(8))
		require.NoError(t, err)
		_, err = soleOn(st, "will", will, isAlone(false)).Append(ctx, fact(9))
		require.NoError(t, err)
		assert.Equal(t, "cccccc"+"vs"+"s"+"s", kinds(t, l))
		owner, err = ledger.HeadAlone(ctx, l)
		require.NoError(t, err)
		assert.Empty(t, owner, "once shared, always signed")
		verifyClean(t, l, 10)
	})
}

// TestChainedForgedAfterSecondPerson: once a second person is granted,
// an entry that someone holding the data key appends Chained, in the
// owner's name or the new person's, fails Verify at its position; so
// does one in another person's name inside the window.
func TestChainedForgedAfterSecondPerson(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := soleOn(st, "olga", olga, isAlone(true))
		appendN(t, l, 2)
		// Inside the window, in someone else's name.
		forged := fact(3)
		forged.Actor = "mal"
		require.NoError(t, ledger.ForgeChained(ctx, l, forged))
		sigProblem(t, l, 3, ledger.Unsigned)
	})
	for _, actor := range []string{"olga", "will"} {
		eachStore(t, func(t *testing.T, st stores.Store) {
			l := soleOn(st, "olga", olga, isAlone(true))
			appendN(t, l, 2)
			_, err := l.Append(ctx, grantWill)
			require.NoError(t, err)
			verifyClean(t, l, 3)
			forged := fact(4)
			forged.Actor = actor
			require.NoError(t, ledger.ForgeChained(ctx, l, forged))
			sigProblem(t, l, 4, ledger.Unsigned)
			// The owner's handle goes on signing after the forgery.
			_, err = l.Append(ctx, fact(5))
			require.NoError(t, err)
			sigProblem(t, l, 4, ledger.Unsigned)
		})
	}
}

// TestChainedHeadTurnedBack: someone holding the seal key who turns the
// head back to "alone" after a second person was granted makes an honest
// handle write a Chained entry: Verify reports it, at its position.
func TestChainedHeadTurnedBack(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := soleOn(st, "olga", olga, isAlone(true))
		appendN(t, l, 1)
		_, err := l.Append(ctx, grantWill)
		require.NoError(t, err)
		require.NoError(t, ledger.TurnHeadAlone(ctx, l, "olga"))
		fresh := soleOn(st, "olga", olga, isAlone(true))
		_, err = fresh.Append(ctx, fact(3))
		require.NoError(t, err)
		sigProblem(t, fresh, 3, ledger.Unsigned)
	})
}

// TestChainedLearnsSecondPerson: a vault that learns of a second person
// its ledger does not record (granted on another device) signs its next
// commit, which closes the window: a Chained entry after it fails, though
// no grant precedes it in this ledger.
func TestChainedLearnsSecondPerson(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		alone := isAlone(true)
		l := soleOn(st, "olga", olga, alone)
		appendN(t, l, 2)
		alone.Store(false)
		_, err := l.Append(ctx, fact(3))
		require.NoError(t, err)
		alone.Store(true) // even if it said so again, the window stays closed
		_, err = l.Append(ctx, fact(4))
		require.NoError(t, err)
		assert.Equal(t, "ccss", kinds(t, l))
		verifyClean(t, l, 4)
		require.NoError(t, ledger.ForgeChained(ctx, l, fact(5)))
		sigProblem(t, l, 5, ledger.Unsigned)
	})
}

// TestChainedRevokedThenAlone: a vault whose second person was granted and
// revoked again is never alone again: the revoked person knows the chain
// key, so every commit stays signed.
func TestChainedRevokedThenAlone(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := soleOn(st, "olga", olga, isAlone(true))
		appendN(t, l, 1)
		_, err := l.Append(ctx, grantWill)
		require.NoError(t, err)
		_, err = l.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "will", SigningKey: will.Public()})
		require.NoError(t, err)
		_, err = l.Append(ctx, fact(4))
		require.NoError(t, err)
		assert.Equal(t, "csss", kinds(t, l))
		verifyClean(t, l, 4)
	})
}

// TestChainedRotationKeepsWindow: a one-person vault's own change of
// people (the end of a rotation, KeysResealed) is signed and leaves the
// window open; entries after it are Chained again, and verify.
func TestChainedRotationKeepsWindow(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := soleOn(st, "olga", olga, isAlone(true))
		appendN(t, l, 2)
		_, err := l.Append(ctx, ledger.Entry{Kind: ledger.KeysResealed, Number: 2}, fact(3))
		require.NoError(t, err)
		appendN(t, l, 1)
		assert.Equal(t, "cc"+"vs"+"c", kinds(t, l))
		verifyClean(t, l, 5)
	})
}

// TestChainedTailAfterCrash: a one-person vault's ledger ends with
// Chained entries that no signature covers (the process was killed after
// them): it verifies, and a handle opened afterwards goes on Chained.
func TestChainedTailAfterCrash(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		appendN(t, soleOn(st, "olga", olga, isAlone(true)), 3)
		// No Close: the handle is dropped as a killed process drops it.
		again := soleOn(st, "olga", olga, isAlone(true))
		verifyClean(t, again, 3)
		appendN(t, again, 2)
		assert.Equal(t, "ccccc", kinds(t, again))
		verifyClean(t, again, 5)
	})
}

// failingSigner is olga's key that fails to sign.
type failingSigner struct{ *edSigner }

func (failingSigner) Sign([]byte) ([]byte, error) { return nil, errors.New("signer gone") }

// TestChainedGrantKilledBeforeSigned: the commit that grants a second
// person fails as a whole when its signature cannot be made (a handle
// stopped before it signed): nothing of it is written, the window stays
// open, and the ledger verifies.
func TestChainedGrantKilledBeforeSigned(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		appendN(t, soleOn(st, "olga", olga, isAlone(true)), 2)
		broken := ledger.New(st, newSealer(nil), macer{macKey}, prefix, ledger.Options{
			Actor: "olga", Now: func() time.Time { return fixedNow }, Signer: failingSigner{olga},
			Alone: isAlone(true).Load})
		_, err := broken.Append(ctx, fact(3), grantWill)
		require.Error(t, err)
		l := soleOn(st, "olga", olga, isAlone(true))
		verifyClean(t, l, 2)
		owner, err := ledger.HeadAlone(ctx, l)
		require.NoError(t, err)
		assert.Equal(t, "olga", owner)
		appendN(t, l, 1)
		assert.Equal(t, "ccc", kinds(t, l))
	})
}

// TestChainedNotInSignedLedger: a ledger written while every commit was
// signed (a release before the window, its head of layout version 1)
// stays signed when a handle that says alone appends to it; its old
// entries verify as they did.
func TestChainedNotInSignedLedger(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		old := signedOn(st, "olga", olga, nil)
		appendN(t, old, 3)
		require.NoError(t, ledger.WriteHeadV1(ctx, old))
		l := soleOn(st, "olga", olga, isAlone(true))
		appendN(t, l, 2)
		assert.Equal(t, "sssss", kinds(t, l))
		verifyClean(t, l, 5)
		require.NoError(t, ledger.ForgeChained(ctx, l, fact(6)))
		sigProblem(t, l, 6, ledger.Unsigned)
	})
}

// TestChainedPeopleNeverChained: a change of people in a one-person
// vault is signed even when it comes alone; a Chained one that someone
// appends fails Verify.
func TestChainedPeopleNeverChained(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := soleOn(st, "olga", olga, isAlone(true))
		appendN(t, l, 1)
		require.NoError(t, ledger.ForgeChained(ctx, l, grantWill))
		sigProblem(t, l, 2, ledger.Unsigned)
	})
}
