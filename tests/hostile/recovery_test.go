package hostile_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// recoveryKey is where a person's recovery codes are stored.
func recoveryKey(user string) string { return "v/" + vaultName + "/_recovery/" + user }

// unlockWithCode unwraps, from a raw recovery entry of user (layout
// version 1 or 2, vault/recovery.go), the person's X25519 key with the
// recovery code text, as someone who kept both would: the code's key
// unwraps the code's own private key, for which the person's is wrapped
// (or, for a code of layout version 1, the person's directly).
func unlockWithCode(t testing.TB, hdr []byte, user, text string, raw []byte) *crypto.Identity {
	t.Helper()
	code, err := crypto.ParseRecoveryCode(text)
	require.NoError(t, err)
	require.Equal(t, "NOYR", string(raw[:4]))
	r := codec.NewReader(raw[4:])
	version := r.Byte()
	require.Contains(t, []byte{1, 2}, version, "layout version")
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
		form := byte(1)
		if version == 2 {
			form = r.Byte()
		}
		var key []byte
		if form == 2 {
			key = r.Bytes(256)
			r.Bytes(64)
		}
		box := r.Bytes(256)
		if string(sid) != string(id) {
			continue
		}
		kek, err := crypto.DeriveUserKey(code, salt, kdf)
		require.NoError(t, err)
		purpose := "recovery/" + hex.EncodeToString(sid)
		if form == 1 {
			k, err := crypto.UnwrapKey(kek, box, wrapAD(user, hdr, purpose))
			require.NoError(t, err)
			return crypto.IdentityFromKey(k)
		}
		ck, err := crypto.UnwrapKey(kek, key, wrapAD(user, hdr, purpose))
		require.NoError(t, err)
		k, err := crypto.UnwrapKeyWith(crypto.IdentityFromKey(ck), box, wrapAD(user, hdr, "recovery-box/"+hex.EncodeToString(sid)))
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

// TestHostileRevokedRecoveryCode (issue case 6): will issues recovery
// codes, and someone keeps one code, the store's recovery entry of then,
// and will's keyring entry with his old secret. Will revokes his codes
// and changes his secret, and an owner's rotation makes a new generation.
// The kept code with the kept recovery entry, and the old secret with the
// kept keyring entry, unwrap will's old X25519 key only: the secret
// change made a new key pair and re-wrapped what he holds for it, so
// will's entry now holds nothing that key opens, and a record written
// after the rotation opens with no key it leads to. Will's new secret
// opens and reads it.
func TestHostileRevokedRecoveryCode(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			w := open(t, cfg(p.st, "will", "w"))
			codes, err := w.RecoveryCodes(ctx, 2)
			require.NoError(t, err)
			keptCodes, err := p.st.Get(ctx, recoveryKey("will"))
			require.NoError(t, err)
			keptEntry, err := p.st.Get(ctx, keyringKey("will"))
			require.NoError(t, err)
			require.NoError(t, w.RevokeRecoveryCodes(ctx))
			require.NoError(t, w.ChangeSecret(ctx, []byte("w"), []byte("w2")))
			rot, err := p.olga.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			put(t, p.olga, "notes", "after", "written after the revocation of the codes")

			hdr := header(t, p.st)
			now, err := p.st.Get(ctx, keyringKey("will"))
			require.NoError(t, err)
			old := unlock(t, hdr, "will", "w", keptEntry.Value)
			for what, box := range map[string]*crypto.Identity{
				"the revoked code": unlockWithCode(t, hdr, "will", codes[0], keptCodes.Value),
				"the old secret":   old.box,
			} {
				gens := gensOf(t, hdr, "will", box, now.Value)
				assert.Empty(t, gens, "%s unwraps nothing will's entry holds now", what)
				assert.NotContains(t, gens, rot.Generation(), what)
				assert.False(t, opensAny(t, p.st, "notes", "after", gens, old.gens), "%s: a record written afterwards", what)
			}

			again := open(t, cfg(p.st, "will", "w2"))
			assert.Equal(t, "written after the revocation of the codes", noteText(t, again, "notes", "after"))
			_, err = vault.Open(ctx, cfg(p.st, "will", "w"))
			assert.ErrorIs(t, err, vault.ErrWrongSecret)
			verified(t, p.olga)
		})
	}
}

// TestHostileUsedRecoveryCode: will issues three codes and changes his
// secret; the codes still open (each holds a key pair of its own, for
// which the secret change re-wrapped will's new private key). He recovers
// with the first after a rotation and reads what it made. Someone who
// kept the recovery entry of before that recovery, and the first code,
// unwraps the key pair of then only: after the next rotation will's entry
// holds nothing it opens, nor does a record written then. The second
// code still recovers, and reads that record.
func TestHostileUsedRecoveryCode(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			w := open(t, cfg(p.st, "will", "w"))
			codes, err := w.RecoveryCodes(ctx, 3)
			require.NoError(t, err)
			require.NoError(t, w.ChangeSecret(ctx, []byte("w"), []byte("w2")))
			rot, err := p.olga.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			put(t, p.olga, "notes", "first", "after the secret change")
			require.NoError(t, w.Close())
			kept, err := p.st.Get(ctx, recoveryKey("will"))
			require.NoError(t, err)

			recoverWith := func(code, secret string) *vault.Vault {
				c := cfg(p.st, "will", "")
				c.Secret, c.RecoveryCode, c.NewSecret = nil, code, []byte(secret)
				return open(t, c)
			}
			r := recoverWith(codes[0], "w3")
			assert.Equal(t, "after the secret change", noteText(t, r, "notes", "first"), "a code issued before the secret change recovers")
			require.NoError(t, r.Close())

			rot, err = p.olga.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			put(t, p.olga, "notes", "second", "after the recovery")
			hdr := header(t, p.st)
			box := unlockWithCode(t, hdr, "will", codes[0], kept.Value)
			now, err := p.st.Get(ctx, keyringKey("will"))
			require.NoError(t, err)
			gens := gensOf(t, hdr, "will", box, now.Value)
			assert.Empty(t, gens, "the used code, with the entry of before its use")
			assert.False(t, opensAny(t, p.st, "notes", "second", gens))

			r = recoverWith(codes[1], "w4")
			assert.Equal(t, "after the recovery", noteText(t, r, "notes", "second"), "a code left after a recovery recovers")
			verified(t, p.olga)
		})
	}
}

// TestHostileRenewalNotByThePerson: rita, a reader, holds the first
// generation's key (the keyring MAC's) and writes will's keyring entry
// renewed to a box key pair of her own (vault/renew.go): the grant kept,
// the renewal signed by her key, not will's. Every read refuses it
// (ErrTampered), and the next rotation wraps it nothing.
func TestHostileRenewalNotByThePerson(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			hdr := header(t, p.st)
			it, err := p.st.Get(ctx, keyringKey("will"))
			require.NoError(t, err)
			e := decodeEntry(t, it.Value)
			id, err := crypto.GenerateIdentity()
			require.NoError(t, err)
			pub, err := id.PublicKey()
			require.NoError(t, err)
			e.grantBox, e.boxPub = e.boxPub, pub
			e.serial++
			kek, err := crypto.DeriveUserKey([]byte("r-as-w"), e.salt, e.kdf)
			require.NoError(t, err)
			e.boxPriv, err = crypto.WrapKey(kek, id.Key(), wrapAD("will", hdr, "box"))
			require.NoError(t, err)
			e.gens = nil
			for _, g := range []uint64{1, 2, 3} {
				w, err := crypto.WrapKeyTo(pub, p.rita.gens[g], wrapAD("will", hdr, genPurpose(g)))
				require.NoError(t, err)
				e.gens = append(e.gens, wrapped{gen: g, key: w})
			}
			e.signPriv, err = crypto.WrapKeyTo(pub, p.rita.seed, wrapAD("will", hdr, "sign"))
			require.NoError(t, err)
			stmt := codec.AppendString(nil, "noydb box renewal v1")
			stmt = codec.AppendBytes(stmt, e.grantStatement(hdr))
			stmt = codec.AppendBytes(stmt, e.grantSig)
			stmt = codec.AppendBytes(stmt, e.boxPub)
			e.renewSig, err = crypto.Sign(p.rita.seed, stmt)
			require.NoError(t, err)
			e.seal(p.rita.gens[1], hdr)
			plant(t, p.st, e)
			p.refusedAndSkipped(t, p.rita, "will", "r-as-w")
		})
	}
}

// TestHostileSigningRenewalNotByThePerson: rita, a reader, writes will's
// keyring entry renewed to her own signing key (and a box key pair of her
// own): the grant kept, the renewal of the signing key signed by her key,
// not will's. Every read refuses it (ErrTampered): a renewal counts only
// signed by the key it replaces; and the next rotation wraps it nothing.
func TestHostileSigningRenewalNotByThePerson(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			hdr := header(t, p.st)
			it, err := p.st.Get(ctx, keyringKey("will"))
			require.NoError(t, err)
			e := decodeEntry(t, it.Value)
			id, err := crypto.GenerateIdentity()
			require.NoError(t, err)
			pub, err := id.PublicKey()
			require.NoError(t, err)
			e.grantBox, e.boxPub = e.boxPub, pub
			e.serial++
			kek, err := crypto.DeriveUserKey([]byte("r-as-w"), e.salt, e.kdf)
			require.NoError(t, err)
			e.boxPriv, err = crypto.WrapKey(kek, id.Key(), wrapAD("will", hdr, "box"))
			require.NoError(t, err)
			e.gens = nil
			for _, g := range []uint64{1, 2, 3} {
				w, err := crypto.WrapKeyTo(pub, p.rita.gens[g], wrapAD("will", hdr, genPurpose(g)))
				require.NoError(t, err)
				e.gens = append(e.gens, wrapped{gen: g, key: w})
			}
			e.signPriv, err = crypto.WrapKeyTo(pub, p.rita.seed, wrapAD("will", hdr, "sign"))
			require.NoError(t, err)
			ritaPub, err := crypto.SigningPublicKey(p.rita.seed)
			require.NoError(t, err)
			e.grantSign, e.signPub = e.signPub, ritaPub
			stmt := codec.AppendString(nil, "noydb signing key renewal v1")
			stmt = codec.AppendBytes(stmt, e.grantStatement(hdr))
			stmt = codec.AppendBytes(stmt, e.grantSig)
			stmt = codec.AppendUvarint(stmt, 0)
			stmt = codec.AppendBytes(stmt, ritaPub)
			sig, err := crypto.Sign(p.rita.seed, stmt)
			require.NoError(t, err)
			e.signRenewals = [][2][]byte{{ritaPub, sig}}
			stmt = codec.AppendString(nil, "noydb box renewal v1")
			stmt = codec.AppendBytes(stmt, e.grantStatement(hdr))
			stmt = codec.AppendBytes(stmt, e.grantSig)
			stmt = codec.AppendBytes(stmt, e.boxPub)
			e.renewSig, err = crypto.Sign(p.rita.seed, stmt)
			require.NoError(t, err)
			e.seal(p.rita.gens[1], hdr)
			plant(t, p.st, e)
			p.refusedAndSkipped(t, p.rita, "will", "r-as-w")
		})
	}
}

// renewedOnHub is TestHostileRevokedRecoveryCode on devices of hub: will
// changes his secret on his device and syncs; olga's rotation, on hers,
// reaches the hub. The code and the old secret, with the hub's entries of
// before, open nothing the hub's entry of will holds now, nor the record
// written after the rotation; the new secret opens on a new device. The
// renewal reached the hub's ledger first: an entry the old signing key
// signs there afterwards fails Verify, and will's entry of before, put
// back on the hub, is refused.
func renewedOnHub(t *testing.T, hub stores.Store, newDevice func(testing.TB) stores.Store) {
	ctx := context.Background()
	olga := open(t, onHub(newDevice(t), hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, olga)
	w := open(t, onHub(newDevice(t), hub, "will", "w"))
	codes, err := w.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	mustSync(t, w)
	keptCodes, err := hub.Get(ctx, recoveryKey("will"))
	require.NoError(t, err)
	keptEntry, err := hub.Get(ctx, keyringKey("will"))
	require.NoError(t, err)
	require.NoError(t, w.RevokeRecoveryCodes(ctx))
	require.NoError(t, w.ChangeSecret(ctx, []byte("w"), []byte("w2")))
	mustSync(t, w)
	rot, err := olga.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	put(t, olga, "notes", "after", "written after the secret change")
	mustSync(t, olga)

	hdr := header(t, hub)
	now, err := hub.Get(ctx, keyringKey("will"))
	require.NoError(t, err)
	old := unlock(t, hdr, "will", "w", keptEntry.Value)
	for what, box := range map[string]*crypto.Identity{
		"the revoked code": unlockWithCode(t, hdr, "will", codes[0], keptCodes.Value),
		"the old secret":   old.box,
	} {
		gens := gensOf(t, hdr, "will", box, now.Value)
		assert.Empty(t, gens, "%s unwraps nothing will's entry on the hub holds now", what)
		assert.False(t, opensAny(t, hub, "notes", "after", gens, old.gens), "%s: a record written afterwards", what)
	}
	again := open(t, onHub(newDevice(t), hub, "will", "w2"))
	mustSync(t, again)
	assert.Equal(t, "written after the secret change", noteText(t, again, "notes", "after"))
	_, err = vault.Open(ctx, onHub(newDevice(t), hub, "will", "w"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	onHubOlga := open(t, cfg(hub, "olga", "o"))
	verified(t, onHubOlga)

	// The renewal reached the hub's ledger first: the old signing key
	// signs nothing valid there, and will's entry of before, put back on
	// the hub, is refused.
	head, err := onHubOlga.Audit().Head(ctx)
	require.NoError(t, err)
	_, err = forger(t, hub, old, "will").Append(ctx, ledger.Entry{Kind: ledger.AppEvent, Reason: "after the renewal"})
	require.NoError(t, err)
	badEntryAt(t, onHubOlga, head.Seq+1, ledger.BadSignature)
	_, err = hub.Put(ctx, keyringKey("will"), keptEntry.Value)
	require.NoError(t, err)
	_, err = vault.Open(ctx, cfg(hub, "will", "w"))
	assert.ErrorIs(t, err, vault.ErrTampered, "will's entry of before the renewal, put back on the hub")
}

// TestHubRenewalOpensNothingNew runs renewedOnHub on memstore and badger
// devices, with a memstore hub.
func TestHubRenewalOpensNothingNew(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { renewedOnHub(t, memstore.New(), newStore) })
	}
}

// TestHubRenewalOpensNothingNewPostgresHub is the same with a PostgreSQL
// hub (run under scripts/with-postgres).
func TestHubRenewalOpensNothingNewPostgresHub(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { renewedOnHub(t, pgtest.Open(t, nil), newStore) })
	}
}

// opened counts the wraps of the raw keyring entry of user (data keys,
// collection keys, the signing key) that box unwraps.
func opened(t testing.TB, hdr []byte, user string, box *crypto.Identity, raw []byte) int {
	t.Helper()
	e := decodeEntry(t, raw)
	n := 0
	try := func(w []byte, purpose string) {
		if _, err := crypto.UnwrapKeyWith(box, w, wrapAD(user, hdr, purpose)); err == nil {
			n++
		}
	}
	for _, g := range e.gens {
		try(g.key, genPurpose(g.gen))
	}
	for _, c := range e.colKeys {
		try(c.key, "col/"+strconv.FormatUint(c.gen, 10)+"/"+c.name)
	}
	try(e.signPriv, "sign")
	return n
}

// TestHostileRenewalForEveryRole: a reader (rita) and a writer limited to
// one collection (lena), who write no change of people, change their own
// secrets too, and their old secret with their keyring entry of before
// opens none of the wraps of their entry afterwards (data keys, collection
// keys, signing key), nor a record written after the next rotation; the
// new secret reads it, and the ledger verifies.
func TestHostileRenewalForEveryRole(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			kept := map[string]stores.Item{}
			for _, who := range []string{"rita", "lena"} {
				it, err := p.st.Get(ctx, keyringKey(who))
				require.NoError(t, err)
				kept[who] = it
				v := open(t, cfg(p.st, who, who[:1]))
				require.NoError(t, v.ChangeSecret(ctx, []byte(who[:1]), []byte(who+"2")))
			}
			rot, err := p.olga.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			put(t, p.olga, "public", "after", "written after the secret changes")

			hdr := header(t, p.st)
			for _, who := range []string{"rita", "lena"} {
				old := unlock(t, hdr, who, who[:1], kept[who].Value)
				now, err := p.st.Get(ctx, keyringKey(who))
				require.NoError(t, err)
				assert.Zero(t, opened(t, hdr, who, old.box, now.Value), "%s's old key opens a wrap of the entry now", who)
				cols := map[uint64]*crypto.Key{} // lena's keys of "public", by generation
				for i, name := range slices.Collect(maps.Keys(old.cols)) {
					cols[uint64(i)] = old.cols[name]
				}
				assert.False(t, opensAny(t, p.st, "public", "after", old.gens, cols, gensOf(t, hdr, who, old.box, now.Value)), who)
				v := open(t, cfg(p.st, who, who+"2"))
				assert.Equal(t, "written after the secret changes", noteText(t, v, "public", "after"), who)
			}
			verified(t, p.olga)
		})
	}
}

// noteText reads the note id of coll through v, which must open it.
func noteText(t testing.TB, v *vault.Vault, coll, id string) string {
	t.Helper()
	n, err := vault.CollectionOf[Note](v, coll).Get(context.Background(), id)
	require.NoError(t, err, "%s/%s", coll, id)
	return n.Text
}
