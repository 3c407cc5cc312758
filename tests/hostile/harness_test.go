package hostile_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// The hostile-member harness. In one vault: olga, its owner; will, a
// writer; rita, a reader; lena, a writer limited to "public"; carol, a
// writer revoked (with a rotation) after she wrote. Each member keeps the
// raw store and every key their keyring entry held, and tries what the
// threat table's "hostile member" column lists. Each attempt is refused or
// detected; where the column names a limit, the test pins today's
// behaviour of that limit (a change shows here first).

// party is the vault of the harness and what each member kept.
type party struct {
	st                      stores.Store
	olga                    *vault.Vault
	will, rita, lena, carol *member
}

// setUp builds the harness's vault on st. Generations: 1 at creation, 2
// from lena's limited grant, 3 from carol's revocation; every record is
// re-sealed with 3 when it returns.
func setUp(t *testing.T, st stores.Store) *party {
	t.Helper()
	ctx := context.Background()
	p := &party{st: st, olga: open(t, cfg(st, "olga", "o"))}
	put(t, p.olga, "notes", "n0", "before")
	put(t, p.olga, "hr", "salary", "100")
	put(t, p.olga, "public", "p0", "hello")
	require.NoError(t, p.olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	require.NoError(t, p.olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	require.NoError(t, p.olga.Grant(ctx, "lena", vault.Secret([]byte("l")), vault.RoleWriter, "public"))
	require.NoError(t, p.olga.Grant(ctx, "carol", vault.Secret([]byte("c")), vault.RoleWriter))
	carol := open(t, cfg(st, "carol", "c"))
	put(t, carol, "notes", "c1", "carol's")
	p.carol = keep(t, st, "carol", "c")
	require.NoError(t, p.olga.Revoke(ctx, "carol"))
	resealed(t, p.olga)
	p.will, p.rita, p.lena = keep(t, st, "will", "w"), keep(t, st, "rita", "r"), keep(t, st, "lena", "l")
	return p
}

// refusedAndSkipped asserts that name's entry is refused on open and by
// People (ErrTampered), and that a rotation gives it no key: a record
// written after it opens with no key the entry (opened with secret) or
// attacker holds.
func (p *party) refusedAndSkipped(t *testing.T, attacker *member, name, secret string) {
	t.Helper()
	ctx := context.Background()
	_, err := vault.Open(ctx, cfg(p.st, name, secret))
	require.ErrorIs(t, err, vault.ErrTampered, "open")
	_, err = p.olga.People(ctx)
	require.ErrorIs(t, err, vault.ErrTampered, "People")
	p.skipped(t, attacker, name, secret)
}

// revokedAndSkipped is refusedAndSkipped for an entry whose grant the
// ledger revoked: its person is revoked (ErrNoAccess on open, listed as
// revoked by People), and a rotation gives it no key.
func (p *party) revokedAndSkipped(t *testing.T, attacker *member, name, secret string) {
	t.Helper()
	ctx := context.Background()
	_, err := vault.Open(ctx, cfg(p.st, name, secret))
	require.ErrorIs(t, err, vault.ErrNoAccess, "open")
	require.NotErrorIs(t, err, vault.ErrTampered, "open")
	ps, err := p.olga.People(ctx)
	require.NoError(t, err, "People")
	for _, q := range ps {
		if q.Name == name {
			assert.True(t, q.Revoked, "People lists %s as not revoked", name)
		}
	}
	p.skipped(t, attacker, name, secret)
}

// skipped asserts that a rotation gives name's entry no key, and that an
// owner clears the entry with Revoke.
func (p *party) skipped(t *testing.T, attacker *member, name, secret string) {
	t.Helper()
	ctx := context.Background()
	rot, err := p.olga.RotateKeys(ctx)
	require.NoError(t, err, "rotation")
	assert.Contains(t, rot.Skipped(), name)
	resealed(t, p.olga)
	put(t, p.olga, "hr", "after", "secret")
	now := keep(t, p.st, name, secret)
	assert.False(t, opensAny(t, p.st, "hr", "after", now.gens, attacker.gens), "a key of the new generation")
	assert.False(t, opensAny(t, p.st, "hr", "salary", now.gens, attacker.gens), "a re-sealed record")
	// An owner clears the entry.
	require.NoError(t, p.olga.Revoke(ctx, name, vault.RevokeWithoutRotation()))
	_, err = p.olga.People(ctx)
	require.NoError(t, err)
	verified(t, p.olga)
}

// TestHostileRaiseRole: each member rewrites their own keyring entry as an
// owner granted by themselves (a revoked one, over their revoked entry),
// with the first generation's key for the MAC and a signing key of their
// own for the grant; lena also lifts her collection limit, keeping olga's
// grant signature. Refused on open, reported by People, given no key.
func TestHostileRaiseRole(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			t.Run("granted by themselves", func(t *testing.T) {
				for _, who := range []string{"will", "rita", "lena", "carol"} {
					t.Run(who, func(t *testing.T) {
						p := setUp(t, newStore(t))
						m := p.member(who)
						selfOwner(t, p.st, m)
						p.refusedAndSkipped(t, m, m.name, m.secret)
					})
				}
			})
			t.Run("limit lifted", func(t *testing.T) {
				p := setUp(t, newStore(t))
				e := *p.lena.entry
				e.serial++
				e.collections, e.colKeys = nil, nil
				e.seal(p.lena.gens[1], p.lena.header)
				plant(t, p.st, &e)
				p.refusedAndSkipped(t, p.lena, "lena", "l")
			})
		})
	}
}

// member returns the member of p named name.
func (p *party) member(name string) *member {
	for _, m := range []*member{p.will, p.rita, p.lena, p.carol} {
		if m.name == name {
			return m
		}
	}
	return nil
}

// TestHostilePlantPerson: each member plants eve, an owner whose secret
// they chose: granted by herself, or "granted by olga" and signed by the
// member's own key. Refused, reported, given no key.
func TestHostilePlantPerson(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			for _, by := range []string{"eve", "olga"} {
				t.Run("granted by "+by, func(t *testing.T) {
					for _, who := range []string{"will", "rita", "lena", "carol"} {
						t.Run(who, func(t *testing.T) {
							p := setUp(t, newStore(t))
							m := p.member(who)
							var signer *crypto.Key
							if by != "eve" {
								signer = m.seed
							}
							eve, _ := forge(t, m.header, m.gens[1], m.gens, "eve", "e", roleOwner, by, signer)
							plant(t, p.st, eve)
							p.refusedAndSkipped(t, m, "eve", "e")
						})
					}
				})
			}
		})
	}
}

// TestHostileReadAfterRevocation: carol, revoked with a rotation, and
// lena, limited to "public", open with every key they kept no record
// written or re-sealed since (carol), and no record of another collection
// (lena). What the column names as a limit: both still open the ledger's
// entries, sealed by the first generation (its metadata).
func TestHostileReadAfterRevocation(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			put(t, p.olga, "notes", "late", "after carol")
			for _, id := range []string{"n0", "c1", "late"} {
				assert.False(t, opensAny(t, p.st, "notes", id, p.carol.gens), "carol opens notes/%s", id)
				assert.False(t, opensAny(t, p.st, "notes", id, p.lena.gens, colKeys(p.lena)), "lena opens notes/%s", id)
			}
			assert.False(t, opensAny(t, p.st, "hr", "salary", p.carol.gens), "carol opens hr/salary")
			assert.True(t, opensAny(t, p.st, "public", "p0", colKeys(p.lena)), "lena opens her own collection (control)")
			assert.True(t, opensAny(t, p.st, "notes", "late", p.will.gens), "will opens notes/late (control)")

			// The limit: the ledger's entries are sealed by generation 1.
			assert.True(t, opensLedgerEntry(t, p.st, p.carol.gens[1], 1), "carol reads a ledger entry")
		})
	}
}

// colKeys returns the collection keys m holds, as a map opensAny takes.
func colKeys(m *member) map[uint64]*crypto.Key {
	out := map[uint64]*crypto.Key{}
	i := uint64(1000)
	for _, k := range m.cols {
		out[i] = k
		i++
	}
	return out
}

// opensLedgerEntry reports whether the ledger entry at seq opens with gen1.
func opensLedgerEntry(t *testing.T, st stores.Store, gen1 *crypto.Key, seq uint64) bool {
	t.Helper()
	key := ledgerKey(seq)
	it, err := st.Get(context.Background(), key)
	require.NoError(t, err)
	_, err = crypto.OpenAt(gen1, it.Value, vaultName, key)
	return err == nil
}

func ledgerKey(seq uint64) string {
	b := []byte("v/" + vaultName + "/_ledger/")
	d := make([]byte, 20)
	for i := 19; i >= 0; i-- {
		d[i] = byte('0' + seq%10)
		seq /= 10
	}
	return string(append(b, d...))
}

// keySealer seals as the vault does its internal values: the first
// generation's key, bound to the vault and the store key.
type keySealer struct{ k *crypto.Key }

func (s keySealer) Seal(key string, p []byte) ([]byte, error) {
	return crypto.SealAt(s.k, p, vaultName, key)
}
func (s keySealer) Open(key string, b []byte) ([]byte, error) {
	return crypto.OpenAt(s.k, b, vaultName, key)
}

// signer signs with a member's kept signing key.
type signer struct{ s *crypto.Signer }

func (s signer) Public() []byte                  { return s.s.Public() }
func (s signer) Sign(msg []byte) ([]byte, error) { return s.s.Sign(msg) }

// forger returns a ledger on st written by actor, signed by m's kept key:
// what m computes with the first generation's key (seal and chain MAC).
func forger(t testing.TB, st stores.Store, m *member, actor string) wire.Ledger[ledger.Entry, ledger.Head, ledger.Report] {
	t.Helper()
	s, err := crypto.NewSigner(m.seed)
	require.NoError(t, err)
	mk := m.gens[1].Derive("noydb ledger v1")
	newLedger := wire.NewLedger.(func(stores.Store, seal.Sealer, seal.MACer, string, wire.LedgerOptions) wire.Ledger[ledger.Entry, ledger.Head, ledger.Report])
	return newLedger(st, keySealer{m.gens[1]}, crypto.NewMACer(mk), "v/"+vaultName+"/", wire.LedgerOptions{Actor: actor, Signer: signer{s}})
}

// badEntryAt asserts that v's Verify fails at seq with problem.
func badEntryAt(t *testing.T, v *vault.Vault, seq uint64, problem ledger.SignatureProblem) {
	t.Helper()
	_, err := v.Audit().Verify(context.Background())
	var se *ledger.SignatureError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, seq, se.Seq)
	assert.Equal(t, problem, se.Problem, "%v", err)
}

// TestHostileForgeLedgerEntry: members append signed entries with the
// chain key they hold: a reader's record and grant, an entry in the
// owner's name, a revoked person's event. Verify names each at its
// position; a forged people entry also stops People and rotations
// (ErrTampered) and never grants anyone.
func TestHostileForgeLedgerEntry(t *testing.T) {
	ctx := context.Background()
	record := ledger.Entry{Kind: ledger.RecordPut, Collection: "notes", ID: "forged", Revision: 1, CipherHash: bytes.Repeat([]byte{1}, 32)}
	cases := []struct {
		name    string
		who     string
		actor   string
		entry   ledger.Entry
		problem ledger.SignatureProblem
	}{
		{"a reader's record", "rita", "rita", record, ledger.NotPermitted},
		{"in the owner's name", "will", "olga", record, ledger.BadSignature},
		{"a revoked person's event", "carol", "carol", ledger.Entry{Kind: ledger.AppEvent, Reason: "late"}, ledger.Revoked},
		{"a limited person's other collection", "lena", "lena", record, ledger.OutsideCollections},
		{"a writer's grant", "will", "will", ledger.Entry{Kind: ledger.PersonGranted, ID: "eve", Reason: "owner",
			SigningKey: bytes.Repeat([]byte{7}, 32)}, ledger.NotPermitted},
	}
	for name, newStore := range memAndBadger() {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				p := setUp(t, newStore(t))
				rep, err := p.olga.Audit().Verify(ctx)
				require.NoError(t, err)
				_, err = forger(t, p.st, p.member(c.who), c.actor).Append(ctx, c.entry)
				require.NoError(t, err)
				put(t, p.olga, "notes", "after", "an honest entry after the forgery")
				badEntryAt(t, p.olga, rep.Head.Seq+1, c.problem)
				if c.entry.Kind == ledger.PersonGranted {
					_, err := p.olga.People(ctx)
					assert.ErrorIs(t, err, vault.ErrTampered)
					_, err = p.olga.RotateKeys(ctx)
					assert.ErrorIs(t, err, vault.ErrTampered)
				}
			})
		}
	}
}

// TestHostileReplayKeyringEntry: a member puts back their own keyring
// entry as it was before a change: carol her entry from before her
// revocation, will his from before an owner narrowed him to "public", and
// from before his own secret change. The vault's ledger records the later
// change: carol is revoked whatever her entry says (ErrNoAccess on open,
// listed as revoked), will's wider entry is refused (ErrTampered), and so
// is his entry of before the secret change, which renewed his signing key
// (a KeysRenewed entry the old key signed): the old secret opens nothing,
// no rotation gives the entry a key, and what the old key signs in his
// name after the renewal fails Verify.
func TestHostileReplayKeyringEntry(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			t.Run("before a revocation", func(t *testing.T) {
				p := setUp(t, newStore(t))
				plant(t, p.st, p.carol.entry)
				p.revokedAndSkipped(t, p.carol, "carol", "c")
			})
			t.Run("before a narrowing", func(t *testing.T) {
				p := setUp(t, newStore(t))
				wide := p.will.entry
				require.NoError(t, p.olga.SetCollections(ctx, "will", "public"))
				plant(t, p.st, wide)
				p.refusedAndSkipped(t, p.will, "will", "w")
			})
			t.Run("before a secret change", func(t *testing.T) {
				p := setUp(t, newStore(t))
				old := p.will.entry
				w := open(t, cfg(p.st, "will", "w"))
				require.NoError(t, w.ChangeSecret(ctx, []byte("w"), []byte("w2")))
				plant(t, p.st, old)
				p.refusedAndSkipped(t, p.will, "will", "w")
			})
			t.Run("signed by the key of before a secret change", func(t *testing.T) {
				p := setUp(t, newStore(t))
				w := open(t, cfg(p.st, "will", "w"))
				require.NoError(t, w.ChangeSecret(ctx, []byte("w"), []byte("w2")))
				head, err := p.olga.Audit().Head(ctx)
				require.NoError(t, err)
				_, err = forger(t, p.st, p.will, "will").Append(ctx, ledger.Entry{Kind: ledger.AppEvent, Reason: "after the renewal"})
				require.NoError(t, err)
				badEntryAt(t, p.olga, head.Seq+1, ledger.BadSignature)
			})
		})
	}
}

// TestHostileForgeRecord: a member who holds a generation's key writes a
// record with the raw store, without a ledger entry. A reader, with the
// current generation: the limit, the SDK reads it (no audit compares the
// records with the ledger yet; Verify, which walks the ledger, does not
// see them). carol, revoked, with the first generation, which every
// record once was sealed by: refused (ErrTampered, not ErrNoAccess), by
// the handle that saw the re-sealing finish and by one opened afterwards,
// since the ledger records that every record was re-sealed with the third
// (the generation floor); the next rotation leaves it as it is and stays
// pending, re-sealing it for nobody.
func TestHostileForgeRecord(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			it, err := p.st.Get(ctx, "v/"+vaultName+"/notes/n0")
			require.NoError(t, err)
			gen, err := crypto.RecordGeneration(it.Value)
			require.NoError(t, err)
			plain, rev, err := crypto.OpenRecord(crypto.CollectionKey(p.rita.gens[gen], "notes"), it.Value,
				crypto.RecordRef{Vault: vaultName, Collection: "notes", ID: "n0"})
			require.NoError(t, err)
			forged := bytes.Replace(plain, []byte(`"before"`), []byte(`"forged"`), 1)

			// rita, a reader, with the current generation's key.
			b, err := crypto.SealRecord(crypto.CollectionKey(p.rita.gens[gen], "notes"), forged,
				crypto.RecordRef{Vault: vaultName, Collection: "notes", ID: "n0", Revision: rev + 1, Generation: gen, PerCollection: true})
			require.NoError(t, err)
			_, err = p.st.Put(ctx, "v/"+vaultName+"/notes/n0", b)
			require.NoError(t, err)
			n, err := vault.CollectionOf[Note](p.olga, "notes").Get(ctx, "n0")
			require.NoError(t, err)
			assert.Equal(t, "forged", n.Text, "the limit: a reader's record is read")

			// carol, revoked, with the first generation's key.
			b, err = crypto.SealRecord(p.carol.gens[1], forged,
				crypto.RecordRef{Vault: vaultName, Collection: "hr", ID: "salary", Revision: 9, Generation: 1})
			require.NoError(t, err)
			_, err = p.st.Put(ctx, "v/"+vaultName+"/hr/salary", b)
			require.NoError(t, err)
			_, err = vault.CollectionOf[Note](p.olga, "hr").Get(ctx, "salary")
			require.ErrorIs(t, err, vault.ErrTampered, "a revoked person's record sealed by generation 1 is read")
			require.NotErrorIs(t, err, vault.ErrNoAccess)
			again := open(t, cfg(p.st, "olga", "o"))
			_, err = vault.CollectionOf[Note](again, "hr").Get(ctx, "salary")
			require.ErrorIs(t, err, vault.ErrTampered, "read by a handle opened after the re-sealing")
			rot, err := again.RotateKeys(ctx)
			require.NoError(t, err)
			require.ErrorIs(t, rot.Wait(ctx), vault.ErrTampered, "the rotation re-seals the forged record")
			_, err = vault.CollectionOf[Note](again, "hr").Get(ctx, "salary")
			require.ErrorIs(t, err, vault.ErrTampered, "read after a rotation")
			n, err = vault.CollectionOf[Note](again, "notes").Get(ctx, "c1")
			require.NoError(t, err, "carol's record of before her revocation, re-sealed")
			assert.Equal(t, "carol's", n.Text)
			verified(t, p.olga)
		})
	}
}

// TestHostileForgePulledChange: a reader of a vault on a hub appends to
// the hub's ledger, signed by her own key, the change of a record and
// writes that record on the hub (as a device's push would). A device's
// Sync checks who signed each change before it applies it: it refuses the
// feed (ErrHubTampered, a *ledger.SignatureError at the entry) and applies
// nothing of it; the hub's Verify names the same entry.
func TestHostileForgePulledChange(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub := memstore.New()
			olga := open(t, onHub(newStore(t), hub, "olga", "o"))
			put(t, olga, "notes", "n0", "before")
			require.NoError(t, olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
			mustSync(t, olga)
			rita := keep(t, hub, "rita", "r")
			it, err := hub.Get(ctx, "v/"+vaultName+"/notes/n0")
			require.NoError(t, err)
			plain, rev, err := crypto.OpenRecord(rita.gens[1], it.Value, crypto.RecordRef{Vault: vaultName, Collection: "notes", ID: "n0"})
			require.NoError(t, err)
			forged := bytes.Replace(plain, []byte(`"before"`), []byte(`"forged"`), 1)
			b, err := crypto.SealRecord(rita.gens[1], forged, crypto.RecordRef{Vault: vaultName, Collection: "notes", ID: "n0", Revision: rev + 1, Generation: 1})
			require.NoError(t, err)
			sum := sha256.Sum256(b)
			h := sum[:]
			_, err = hub.Put(ctx, "v/"+vaultName+"/notes/n0", b)
			require.NoError(t, err)
			hl := forger(t, hub, rita, "rita")
			hrep, err := hl.Head(ctx)
			require.NoError(t, err)
			_, err = hl.Append(ctx, ledger.Entry{Kind: ledger.RecordPut, Collection: "notes", ID: "n0", Revision: rev + 1, CipherHash: h})
			require.NoError(t, err)

			_, err = olga.Sync(ctx)
			require.ErrorIs(t, err, vault.ErrHubTampered, "the forged change is pulled")
			var se *ledger.SignatureError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, hrep.Seq+1, se.Seq)
			assert.Equal(t, ledger.NotPermitted, se.Problem)
			n, err := vault.CollectionOf[Note](olga, "notes").Get(ctx, "n0")
			require.NoError(t, err)
			assert.Equal(t, "before", n.Text, "the forged record was applied")
			onTheHub := open(t, cfg(hub, "olga", "o"))
			badEntryAt(t, onTheHub, hrep.Seq+1, ledger.NotPermitted)
		})
	}
}

// TestRevokeOfAPlantedEntryRevokesTheGrant: rita, a reader, plants over
// her own keyring entry one granted by herself (refused on every read);
// the owner, seeing her listed as tampered, revokes her. The revocation
// ends the grant the ledger records, not the planted entry's key: rita's
// genuine entry put back afterwards is revoked (ErrNoAccess), and the
// ledger verifies.
func TestRevokeOfAPlantedEntryRevokesTheGrant(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			p := setUp(t, newStore(t))
			hdr := header(t, p.st)
			planted, _ := forge(t, hdr, p.rita.gens[1], p.rita.gens, "rita", "r2", roleReader, "rita", nil)
			plant(t, p.st, planted)
			_, err := p.olga.People(ctx)
			require.ErrorIs(t, err, vault.ErrTampered)
			require.NoError(t, p.olga.Revoke(ctx, "rita", vault.RevokeWithoutRotation()))
			plant(t, p.st, p.rita.entry)
			_, err = vault.Open(ctx, cfg(p.st, "rita", "r"))
			require.ErrorIs(t, err, vault.ErrNoAccess, "rita's genuine entry after her revocation")
			verified(t, p.olga)
		})
	}
}
