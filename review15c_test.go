package noydb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReview15cSelfRevokeVerifies: an owner revoking themselves (with
// another owner left) made the ledger fail Verify: the rotation's entries,
// and anything the handle wrote afterwards, with or without rotation, were
// signed by a person revoked before them. Self-revocation is refused now
// (ErrNotPermitted, nothing written); the other owner revokes, and the
// ledger verifies.
func TestReview15cSelfRevokeVerifies(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	olga := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "otto", vault.Secret([]byte("t")), vault.RoleOwner))
	notes := vault.CollectionOf[Note](olga, "notes")
	for i := range 5 {
		require.NoError(t, notes.Put(ctx, fmt.Sprintf("n%d", i), Note{Text: "x"}))
	}
	before := snapshot(t, st)
	assert.ErrorIs(t, olga.Revoke(ctx, "olga"), vault.ErrNotPermitted)
	assert.ErrorIs(t, olga.Revoke(ctx, "olga", vault.RevokeWithoutRotation()), vault.ErrNotPermitted)
	assert.Nil(t, olga.Rotation())
	assert.Equal(t, before, snapshot(t, st), "nothing written")
	require.NoError(t, notes.Put(ctx, "still-owner", Note{Text: "x"}))
	verified(t, olga)

	otto := openPerson(t, personCfg(st, "otto", "t"))
	require.NoError(t, otto.Revoke(ctx, "olga"))
	require.NoError(t, otto.Rotation().Wait(ctx))
	_, err := vault.Open(ctx, personCfg(st, "olga", "o"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)
	for i := range 5 {
		_, err := vault.CollectionOf[Note](otto, "notes").Get(ctx, fmt.Sprintf("n%d", i))
		assert.NoError(t, err)
	}
	verified(t, otto)
	assert.Equal(t, []string{"person-granted olga otto", "person-revoked otto olga"}, peopleKinds(t, otto))
}

// TestReview15cClosedVault: every call on people, keys and recovery codes
// of a closed vault fails with ErrClosed and writes nothing.
func TestReview15cClosedVault(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
	require.NoError(t, err)
	require.NoError(t, v.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	require.NoError(t, v.Close())
	before := snapshot(t, st)

	_, codesErr := v.RecoveryCodes(ctx, 2)
	_, peopleErr := v.People(ctx)
	_, rotErr := v.RotateKeys(ctx)
	_, resumeErr := v.ResumeRotation(ctx)
	for name, err := range map[string]error{
		"grant":         v.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter),
		"limited grant": v.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"),
		"revoke":        v.Revoke(ctx, "rita"),
		"revoke no rot": v.Revoke(ctx, "rita", vault.RevokeWithoutRotation()),
		"set":           v.SetCollections(ctx, "rita", "notes"),
		"change":        v.ChangeSecret(ctx, []byte("o"), []byte("n")),
		"codes":         codesErr,
		"revoke codes":  v.RevokeRecoveryCodes(ctx),
		"people":        peopleErr,
		"rotate":        rotErr,
		"resume":        resumeErr,
	} {
		assert.ErrorIs(t, err, vault.ErrClosed, name)
	}
	assert.Equal(t, before, snapshot(t, st), "nothing written")
}

// TestReview15cSetCollectionsBadInput: SetCollections refuses bad input
// with a typed error and writes nothing.
func TestReview15cSetCollectionsBadInput(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader, "notes"))
	require.NoError(t, owner.Grant(ctx, "otto", vault.Secret([]byte("t")), vault.RoleOwner))
	require.NoError(t, owner.Grant(ctx, "wim", vault.Secret([]byte("w")), vault.RoleWriter))
	require.NoError(t, owner.Grant(ctx, "gone", vault.Secret([]byte("g")), vault.RoleWriter))
	require.NoError(t, owner.Revoke(ctx, "gone", vault.RevokeWithoutRotation()))
	wim := openPerson(t, personCfg(st, "wim", "w"))
	before := snapshot(t, st)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("c%02d", i)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"empty user", owner.SetCollections(ctx, "", "notes"), vault.ErrInvalidName},
		{"reserved user", owner.SetCollections(ctx, "_keyring", "notes"), vault.ErrReservedName},
		{"unknown user", owner.SetCollections(ctx, "nobody", "notes"), vault.ErrNotFound},
		{"revoked user", owner.SetCollections(ctx, "gone", "notes"), vault.ErrNotFound},
		{"an owner", owner.SetCollections(ctx, "otto", "notes"), vault.ErrInvalidArgument},
		{"oneself", owner.SetCollections(ctx, "olga", "notes"), vault.ErrInvalidArgument},
		{"empty collection", owner.SetCollections(ctx, "rita", "notes", ""), vault.ErrInvalidName},
		{"reserved collection", owner.SetCollections(ctx, "rita", "_ledger"), vault.ErrReservedName},
		{"too many", owner.SetCollections(ctx, "rita", many...), vault.ErrInvalidArgument},
		{"by a writer", wim.SetCollections(ctx, "rita", "memos"), vault.ErrNotPermitted},
		{"cancelled", owner.SetCollections(cancelled, "rita", "memos"), context.Canceled},
		{"grant too many", owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleReader, many...), vault.ErrInvalidArgument},
		{"grant slash", owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleReader, "a/b"), vault.ErrInvalidName},
		{"grant slash user", owner.Grant(ctx, "a/b", vault.Secret([]byte("b")), vault.RoleReader), vault.ErrInvalidName},
		{"revoke reserved", owner.Revoke(ctx, "_x"), vault.ErrReservedName},
		{"revoke revoked", owner.Revoke(ctx, "gone"), vault.ErrNotFound},
		{"writer revokes self", wim.Revoke(ctx, "wim"), vault.ErrNotPermitted},
	} {
		assert.ErrorIs(t, c.err, c.want, c.name)
	}
	assert.Equal(t, before, snapshot(t, st), "nothing written")
}

// TestReview15cRevokedHandleChangesNothing: handles opened before their
// person's revocation by another owner acted on their stale role: a
// revoked writer's handle issued recovery codes, and a revoked owner's
// handle granted a new owner (who then opened the vault) and rotated the
// keys; each wrote entries by a revoked author, which Verify refused. Now
// every such call fails with ErrNoAccess and writes nothing; the person's
// secrets, old or new, and any code stay refused, and the ledger verifies.
func TestReview15cRevokedHandleChangesNothing(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	olga := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	require.NoError(t, olga.Grant(ctx, "otto", vault.Secret([]byte("t")), vault.RoleOwner))
	bob := openPerson(t, personCfg(st, "bob", "b"))
	otto := openPerson(t, personCfg(st, "otto", "t"))
	require.NoError(t, olga.Revoke(ctx, "bob"))
	require.NoError(t, olga.Rotation().Wait(ctx))
	require.NoError(t, olga.Revoke(ctx, "otto"))
	require.NoError(t, olga.Rotation().Wait(ctx))
	before := snapshot(t, st)

	assert.ErrorIs(t, bob.ChangeSecret(ctx, []byte("b"), []byte("b2")), vault.ErrNoAccess, "bob's secret change")
	codes, err := bob.RecoveryCodes(ctx, 2)
	assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's recovery codes")
	assert.ErrorIs(t, bob.RevokeRecoveryCodes(ctx), vault.ErrNoAccess, "bob's code revocation")
	assert.ErrorIs(t, otto.Grant(ctx, "eve", vault.Secret([]byte("e")), vault.RoleOwner), vault.ErrNoAccess, "otto's grant")
	assert.ErrorIs(t, otto.Grant(ctx, "eve", vault.Secret([]byte("e")), vault.RoleWriter, "notes"), vault.ErrNoAccess, "otto's limited grant")
	assert.ErrorIs(t, otto.Revoke(ctx, "olga"), vault.ErrNoAccess, "otto's revocation")
	assert.ErrorIs(t, otto.SetCollections(ctx, "bob", "notes"), vault.ErrNoAccess, "otto's narrowing")
	_, err = otto.RotateKeys(ctx)
	assert.ErrorIs(t, err, vault.ErrNoAccess, "otto's rotation")
	assert.Equal(t, before, snapshot(t, st), "nothing written")

	for _, c := range []vault.Config{personCfg(st, "bob", "b"), personCfg(st, "bob", "b2"), personCfg(st, "eve", "e")} {
		_, err := vault.Open(ctx, c)
		assert.ErrorIs(t, err, vault.ErrNoAccess, c.User)
	}
	for _, code := range codes {
		_, err := vault.Open(ctx, recoverCfg(st, "bob", code, "b3"))
		assert.Error(t, err)
	}
	verified(t, olga)
}

// TestReview15cRevokedHandleNumbersAndEvents: a writer's handle opened
// before their revocation took numbers and appended application events
// (both sealed by the first generation, which needs no new key); each
// entry was by a revoked author and Verify refused the ledger. The
// ledger's guard (vault/people_guard.go) now refuses both with
// ErrNoAccess, writing nothing; revoked_handle_test.go covers every store
// and every kind of write.
func TestReview15cRevokedHandleNumbersAndEvents(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	olga := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	bob := openPerson(t, personCfg(st, "bob", "b"))
	require.NoError(t, olga.Revoke(ctx, "bob"))
	require.NoError(t, olga.Rotation().Wait(ctx))
	before := snapshot(t, st)
	seq, err := bob.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = seq.Next(ctx)
	assert.ErrorIs(t, err, vault.ErrNoAccess, "number")
	_, err = bob.Record(ctx, "hello", nil)
	assert.ErrorIs(t, err, vault.ErrNoAccess, "event")
	assert.Equal(t, before, snapshot(t, st), "nothing written")
	verified(t, olga)
}

// TestReview15cCodesDieWithRevocation: recovery codes issued before a
// person's revocation open nothing after it, nor after the person is
// granted again with a new secret; the new secret opens, and the ledger
// verifies.
func TestReview15cCodesDieWithRevocation(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	olga := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	bob := openPerson(t, personCfg(st, "bob", "b"))
	codes, err := bob.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, bob.Close())
	require.NoError(t, olga.Revoke(ctx, "bob"))
	require.NoError(t, olga.Rotation().Wait(ctx))
	_, err = vault.Open(ctx, recoverCfg(st, "bob", codes[0], "b2"))
	assert.ErrorIs(t, err, vault.ErrNoAccess, "revoked")

	require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b3")), vault.RoleWriter))
	before := snapshot(t, st)
	_, err = vault.Open(ctx, recoverCfg(st, "bob", codes[1], "b4"))
	assert.Error(t, err, "granted again: an old code opens nothing")
	assert.Equal(t, before, snapshot(t, st), "nothing written")
	_, err = vault.Open(ctx, personCfg(st, "bob", "b4"))
	assert.Error(t, err)
	openPerson(t, personCfg(st, "bob", "b3"))
	verified(t, olga)
}

// TestReview15cCancelledRotation: RotateKeys and ResumeRotation with an
// ended context fail with its error and write nothing.
func TestReview15cCancelledRotation(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](v, "notes").Put(ctx, "n", Note{Text: "x"}))
	before := snapshot(t, st)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := v.RotateKeys(cancelled)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = v.ResumeRotation(cancelled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, v.Rotation())
	assert.Equal(t, before, snapshot(t, st), "nothing written")
}

// TestReview15cDemotedOwnerHandle: an owner's handle opened before they
// were revoked and granted again as a writer no longer changes people
// (ErrNotPermitted, nothing written).
func TestReview15cDemotedOwnerHandle(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	olga := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "otto", vault.Secret([]byte("t")), vault.RoleOwner))
	otto := openPerson(t, personCfg(st, "otto", "t"))
	require.NoError(t, olga.Revoke(ctx, "otto"))
	require.NoError(t, olga.Rotation().Wait(ctx))
	require.NoError(t, olga.Grant(ctx, "otto", vault.Secret([]byte("t2")), vault.RoleWriter))
	before := snapshot(t, st)
	assert.ErrorIs(t, otto.Grant(ctx, "eve", vault.Secret([]byte("e")), vault.RoleOwner), vault.ErrNotPermitted)
	assert.ErrorIs(t, otto.Revoke(ctx, "olga"), vault.ErrNotPermitted)
	_, err := otto.RotateKeys(ctx)
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	assert.Equal(t, before, snapshot(t, st), "nothing written")
	verified(t, olga)
}
