package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// recoverCfg is personCfg opening with a recovery code and a new secret.
func recoverCfg(st stores.Store, user, code, newSecret string) vault.Config {
	cfg := personCfg(st, user, "")
	cfg.RecoveryCode, cfg.NewSecret = code, []byte(newSecret)
	return cfg
}

// recoveryKinds lists the recovery entries of v's ledger as "kind actor id".
func recoveryKinds(t testing.TB, v *vault.Vault) []string {
	t.Helper()
	var out []string
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		switch e.Kind {
		case ledger.RecoveryCodesIssued, ledger.RecoveryCodeUsed, ledger.RecoveryCodesRevoked:
			out = append(out, e.Kind.String()+" "+e.Actor+" "+e.ID)
		}
	}
	return out
}

// TestRecoveryCodesEachWorksOnce: every code of a set opens once, replaces
// the secret (the old one fails, the new one opens), and is refused after.
func TestRecoveryCodesEachWorksOnce(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "n1", Note{Text: "kept"}))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b0")), vault.RoleReader))
			bob := openPerson(t, personCfg(st, "bob", "b0"))
			codes, err := bob.RecoveryCodes(ctx, 3)
			require.NoError(t, err)
			require.Len(t, codes, 3)
			require.NoError(t, bob.Close())

			secret := "b0"
			for i, code := range codes {
				next := "b" + string(rune('1'+i))
				v, err := vault.Open(ctx, recoverCfg(st, "bob", code, next))
				require.NoError(t, err, "code %d", i)
				assert.Equal(t, vault.RoleReader, v.Role())
				got, err := vault.CollectionOf[Note](v, "notes").Get(ctx, "n1")
				require.NoError(t, err)
				assert.Equal(t, "kept", got.Text)
				require.NoError(t, v.Close())

				_, err = vault.Open(ctx, personCfg(st, "bob", secret))
				assert.ErrorIs(t, err, vault.ErrWrongSecret, "old secret after code %d", i)
				_, err = vault.Open(ctx, recoverCfg(st, "bob", code, "again"))
				assert.ErrorIs(t, err, vault.ErrRecoveryCodeUsed, "code %d again", i)
				v = openPerson(t, personCfg(st, "bob", next))
				require.NoError(t, v.Close())
				secret = next
			}
			verified(t, owner)
			assert.Equal(t, []string{
				"recovery-codes-issued bob bob", "recovery-code-used bob bob",
				"recovery-code-used bob bob", "recovery-code-used bob bob",
			}, recoveryKinds(t, owner))
		})
	}
}

// TestRecoveryCodeTypoIsCaughtFirst: a mistyped code (one symbol changed,
// two swapped, a character outside the alphabet, a wrong length) is
// ErrBadRecoveryCode from Open before the store is touched (and so before
// any key derivation); the right code still opens afterwards.
func TestRecoveryCodeTypoIsCaughtFirst(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openPerson(t, personCfg(st, "olga", "o"))
	codes, err := v.RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	code := codes[0]

	var touched int
	spy := faultstore.New(st, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		touched++
		return nil
	}})
	sub := []byte(code)
	sub[0] = map[bool]byte{true: 'B', false: 'A'}[sub[0] == 'A']
	swap := []byte(code)
	for i := 0; i+1 < len(swap); i++ {
		if swap[i] != swap[i+1] && swap[i] != '-' && swap[i+1] != '-' {
			swap[i], swap[i+1] = swap[i+1], swap[i]
			break
		}
	}
	for name, typed := range map[string]string{
		"substitution": string(sub),
		"swap":         string(swap),
		"alphabet":     "U" + code[1:],
		"short":        code[:len(code)-1],
		"long":         code + "7",
		"empty-ish":    "----",
	} {
		_, err := vault.Open(ctx, recoverCfg(spy, "olga", typed, "new"))
		require.ErrorIs(t, err, vault.ErrBadRecoveryCode, name)
		assert.ErrorIs(t, err, crypto.ErrBadRecoveryCode, name)
	}
	assert.Zero(t, touched, "a mistyped code reads nothing")

	// Lower case and spaces are the same code.
	w, err := vault.Open(ctx, recoverCfg(st, "olga", strings.ToLower(strings.ReplaceAll(code, "-", " ")), "new"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

// TestRecoveryCodesRevokedAndReplaced: RevokeRecoveryCodes makes every
// unused code refused; a new set replaces the previous one.
func TestRecoveryCodesRevokedAndReplaced(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openPerson(t, personCfg(st, "olga", "o"))
	first, err := v.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	second, err := v.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	for _, c := range first {
		_, err := vault.Open(ctx, recoverCfg(st, "olga", c, "new"))
		assert.ErrorIs(t, err, vault.ErrRecoveryCodeRefused)
	}
	require.NoError(t, v.RevokeRecoveryCodes(ctx))
	for _, c := range second {
		_, err := vault.Open(ctx, recoverCfg(st, "olga", c, "new"))
		assert.ErrorIs(t, err, vault.ErrRecoveryCodeRefused)
	}
	assert.ErrorIs(t, v.RevokeRecoveryCodes(ctx), vault.ErrNotFound)
	// A code never issued, well formed.
	other, err := crypto.NewRecoveryCode()
	require.NoError(t, err)
	_, err = vault.Open(ctx, recoverCfg(st, "olga", other, "new"))
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeRefused)
	// The secret is unchanged by all that.
	openPerson(t, personCfg(st, "olga", "o"))
	assert.Equal(t, []string{
		"recovery-codes-issued olga olga", "recovery-codes-issued olga olga", "recovery-codes-revoked olga olga",
	}, recoveryKinds(t, v))
}

// TestRecoveryCodesBadInput: bad input is a typed error and writes nothing.
func TestRecoveryCodesBadInput(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openPerson(t, personCfg(st, "olga", "o"))
	code := func() string {
		c, err := crypto.NewRecoveryCode()
		require.NoError(t, err)
		return c
	}()
	before := snapshot(t, st)
	for _, n := range []int{0, -1, vault.MaxRecoveryCodes + 1} {
		_, err := v.RecoveryCodes(ctx, n)
		assert.ErrorIs(t, err, vault.ErrInvalidArgument, "n=%d", n)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := v.RecoveryCodes(cancelled, 2)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, v.RevokeRecoveryCodes(cancelled), context.Canceled)

	// Opening: a code with a secret, without a new secret, a new secret without a code.
	cfg := recoverCfg(st, "olga", code, "new")
	cfg.Secret = []byte("o")
	_, err = vault.Open(ctx, cfg)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	_, err = vault.Open(ctx, recoverCfg(st, "olga", code, ""))
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	cfg = personCfg(st, "olga", "o")
	cfg.NewSecret = []byte("x")
	_, err = vault.Open(ctx, cfg)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	// A person without codes, a person without access, a vault that does not exist.
	_, err = vault.Open(ctx, recoverCfg(st, "olga", code, "new"))
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeRefused)
	_, err = vault.Open(ctx, recoverCfg(st, "nobody", code, "new"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)
	cfg = recoverCfg(st, "olga", code, "new")
	cfg.Name = "other"
	_, err = vault.Open(ctx, cfg)
	assert.ErrorIs(t, err, vault.ErrNoAccess)
	assert.Equal(t, before, snapshot(t, st), "nothing written")

	// A person who opens with an identity has no codes.
	id, pub := newIdentity(t)
	require.NoError(t, v.Grant(ctx, "ida", vault.PublicKey(pub), vault.RoleWriter))
	icfg := personCfg(st, "ida", "")
	icfg.Identity = id
	iv := openPerson(t, icfg)
	_, err = iv.RecoveryCodes(ctx, 1)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
}

// TestRecoveryCodeKDFCeiling: the code's derivation respects the opener's
// MaxKDF: a ceiling below the vault's cost refuses before deriving. Neither
// that nor a cancelled open uses the code up.
func TestRecoveryCodeKDFCeiling(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openPerson(t, personCfg(st, "olga", "o"))
	codes, err := v.RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	cfg := recoverCfg(st, "olga", codes[0], "new")
	cfg.MaxKDF = crypto.KDFParams{Time: 1, MemoryKiB: 32, Threads: 1}
	_, err = vault.Open(ctx, cfg)
	assert.ErrorIs(t, err, vault.ErrKDFTooCostly)
	// A cancelled open: its context's error, nothing written.
	before := snapshot(t, st)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = vault.Open(cancelled, recoverCfg(st, "olga", codes[0], "new"))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, before, snapshot(t, st))
	// The code was not used by the refused opens.
	w, err := vault.Open(ctx, recoverCfg(st, "olga", codes[0], "new"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
}

// TestRecoveryThroughHub: codes issued on device A work on device B after
// Sync; a code used on A is refused on B after Sync, and B's recovery
// reaches A.
func TestRecoveryThroughHub(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b0")), vault.RoleWriter))
	bobA := openPerson(t, hubPerson(devA, hub, "bob", "b0"))
	codes, err := bobA.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, bobA.Close())
	mustSync(t, a)

	// B, which never held the vault, recovers with code 0.
	rb := recoverCfg(devB, "bob", codes[0], "b1")
	rb.Hub = hub
	b, err := vault.Open(ctx, rb)
	require.NoError(t, err)
	mustSync(t, b)
	require.NoError(t, b.Close())

	// On A after Sync: code 0 is used, b0 fails, b1 opens.
	mustSync(t, a)
	ra := recoverCfg(devA, "bob", codes[0], "b2")
	ra.Hub = hub
	_, err = vault.Open(ctx, ra)
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeUsed)
	_, err = vault.Open(ctx, hubPerson(devA, hub, "bob", "b0"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	openPerson(t, hubPerson(devA, hub, "bob", "b1"))

	// Code 1, used on A, is refused on B after B syncs.
	ra = recoverCfg(devA, "bob", codes[1], "b3")
	ra.Hub = hub
	bobA, err = vault.Open(ctx, ra)
	require.NoError(t, err)
	mustSync(t, bobA)
	require.NoError(t, bobA.Close())
	olgaB := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	mustSync(t, olgaB)
	require.NoError(t, olgaB.Close())
	rb = recoverCfg(devB, "bob", codes[1], "b4")
	rb.Hub = hub
	_, err = vault.Open(ctx, rb)
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeUsed)
	openPerson(t, hubPerson(devB, hub, "bob", "b3"))
}

// TestRecoveryReplayedEntryIsCaught: a store that serves the recovery entry
// as it was before a code was used does not make the code open again, and
// nothing is written: its codes hold the key pair the recovery replaced
// (ErrRecoveryCodeRefused); served with the keyring entry of then too,
// the ledger records the use (ErrRecoveryCodeUsed and ErrTampered).
func TestRecoveryReplayedEntryIsCaught(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openPerson(t, personCfg(st, "olga", "o"))
	codes, err := v.RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	const key, keyring = "v/team/_recovery/olga", "v/team/_keyring/olga"
	before, err := st.Get(ctx, key)
	require.NoError(t, err)
	entryBefore, err := st.Get(ctx, keyring)
	require.NoError(t, err)
	w, err := vault.Open(ctx, recoverCfg(st, "olga", codes[0], "new"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	entryAfter, err := st.Get(ctx, keyring)
	require.NoError(t, err)

	_, err = st.Put(ctx, key, before.Value) // the replay
	require.NoError(t, err)
	snap := snapshot(t, st)
	_, err = vault.Open(ctx, recoverCfg(st, "olga", codes[0], "newer"))
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeRefused)
	assert.Equal(t, snap, snapshot(t, st), "nothing written")

	_, err = st.Put(ctx, keyring, entryBefore.Value) // both replayed
	require.NoError(t, err)
	snap = snapshot(t, st)
	_, err = vault.Open(ctx, recoverCfg(st, "olga", codes[0], "newer"))
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeUsed)
	assert.ErrorIs(t, err, vault.ErrTampered)
	assert.Equal(t, snap, snapshot(t, st), "nothing written")
	_, err = st.Put(ctx, keyring, entryAfter.Value)
	require.NoError(t, err)
	openPerson(t, personCfg(st, "olga", "new"))
}

// TestRecoveryCodesAfterARenewalElsewhere: a handle opened before its
// person's secret changed on another handle holds the key pair the change
// replaced: it issues no codes for it (ErrNoAccess, nothing written: open
// again), and a handle opened with the new secret does, whose codes open.
func TestRecoveryCodesAfterARenewalElsewhere(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	stale := openPerson(t, personCfg(st, "olga", "o"))
	other := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, other.ChangeSecret(ctx, []byte("o"), []byte("o2")))
	snap := snapshot(t, st)
	_, err := stale.RecoveryCodes(ctx, 1)
	require.ErrorIs(t, err, vault.ErrNoAccess)
	assert.Equal(t, snap, snapshot(t, st), "nothing written")
	codes, err := openPerson(t, personCfg(st, "olga", "o2")).RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	openPerson(t, recoverCfg(st, "olga", codes[0], "o3"))
}
