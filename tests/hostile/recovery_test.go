package hostile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
)

// recoveryKey is where a person's recovery codes are stored.
func recoveryKey(user string) string { return "v/" + vaultName + "/_recovery/" + user }

// unlockWithCode unwraps, from a raw recovery entry of user (layout
// version 1, vault/recovery.go), the person's X25519 key with the
// recovery code text, as someone who kept both would.
func unlockWithCode(t testing.TB, hdr []byte, user, text string, raw []byte) *crypto.Identity {
	t.Helper()
	code, err := crypto.ParseRecoveryCode(text)
	require.NoError(t, err)
	require.Equal(t, "NOYR", string(raw[:4]))
	r := codec.NewReader(raw[4:])
	r.Version(1)
	r.String(1 << 10)
	r.Uvarint()
	r.Bytes(64)
	id := recoveryIDOf(code)
	for range r.Count(1<<16, 2) {
		sid, used := r.Bytes(16), r.Bool()
		if used {
			continue
		}
		salt := r.Bytes(64)
		kdf := crypto.KDFParams{Time: uint32(r.Uvarint()), MemoryKiB: uint32(r.Uvarint()), Threads: uint8(r.Uvarint())}
		box := r.Bytes(256)
		if string(sid) != string(id) {
			continue
		}
		kek, err := crypto.DeriveUserKey(code, salt, kdf)
		require.NoError(t, err)
		k, err := crypto.UnwrapKey(kek, box, wrapAD(user, hdr, "recovery/"+hex.EncodeToString(sid)))
		require.NoError(t, err)
		return crypto.IdentityFromKey(k)
	}
	require.NoError(t, r.Err())
	t.Fatalf("no unused slot of the code in the entry")
	return nil
}

// recoveryIDOf is the id of a code in its entry (vault/recovery.go).
func recoveryIDOf(code []byte) []byte {
	h := sha256.Sum256(append([]byte("noydb recovery id v1\x00"), code...))
	return h[:16]
}

// gensOf unwraps, from the raw keyring entry of user, every data key
// generation with the person's X25519 key box.
func gensOf(t testing.TB, hdr []byte, user string, box *crypto.Identity, raw []byte) map[uint64]*crypto.Key {
	t.Helper()
	out := map[uint64]*crypto.Key{}
	for _, g := range decodeEntry(t, raw).gens {
		if k, err := crypto.UnwrapKeyWith(box, g.key, wrapAD(user, hdr, genPurpose(g.gen))); err == nil {
			out[g.gen] = k
		}
	}
	return out
}

// TestHostileRevokedRecoveryCode (the limit of issue case 6): will issues
// recovery codes, and someone keeps one code and the store's recovery
// entry of then. Will revokes his codes and changes his secret, and an
// owner's rotation makes a new generation. The kept code, with the kept
// entry, still unwraps will's X25519 key, which is the one the new
// generation is wrapped for: it opens a record written after the
// rotation. A secret change (or a recovery) keeps the person's key pair;
// a new key pair on each, re-wrapping what they hold, is what would close
// this (see the README's threat table).
func TestHostileRevokedRecoveryCode(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			w := open(t, cfg(p.st, "will", "w"))
			codes, err := w.RecoveryCodes(ctx, 2)
			require.NoError(t, err)
			kept, err := p.st.Get(ctx, recoveryKey("will"))
			require.NoError(t, err)
			require.NoError(t, w.RevokeRecoveryCodes(ctx))
			require.NoError(t, w.ChangeSecret(ctx, []byte("w"), []byte("w2")))
			rot, err := p.olga.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			put(t, p.olga, "notes", "after", "written after the revocation of the codes")

			hdr := header(t, p.st)
			box := unlockWithCode(t, hdr, "will", codes[0], kept.Value)
			now, err := p.st.Get(ctx, keyringKey("will"))
			require.NoError(t, err)
			gens := gensOf(t, hdr, "will", box, now.Value)
			assert.Contains(t, gens, uint64(4), "the limit: the new generation is wrapped for the key the revoked code unwraps")
			assert.True(t, opensAny(t, p.st, "notes", "after", gens), "the limit: a record written afterwards opens")
		})
	}
}
