package hostile_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/stores"
)

// The attacker's toolkit: what a person of the vault can compute with the
// raw store and every key their keyring entry held, from the documented
// layouts alone (vault/keyring.go), without the SDK's help.

const vaultName = "team"

func keyringKey(user string) string { return "v/" + vaultName + "/_keyring/" + user }

// wrapped is a data key of one generation, wrapped for a person.
type wrapped struct {
	gen uint64
	key []byte
}

// wrappedCol is a collection's key of one generation, wrapped for a person.
type wrappedCol struct {
	name string
	gen  uint64
	key  []byte
}

// entry is a keyring entry of layout version 2, field by field.
type entry struct {
	user        string
	serial      uint64
	role        byte
	revoked     bool
	grantedBy   string
	grantedAt   int64
	collections []string
	boxPub      []byte
	signPub     []byte
	lock        byte
	salt        []byte
	kdf         crypto.KDFParams
	boxPriv     []byte
	gens        []wrapped
	colKeys     []wrappedCol
	signPriv    []byte
	grantSig    []byte
	// Layout version 3 (a renewed box key pair, vault/renew.go): the
	// grant's box key, the person's signature of the renewal, and the
	// earlier key pairs (public key, private key wrapped for boxPub).
	grantBox []byte
	renewSig []byte
	prev     [][2][]byte
	// Layout version 4 (a renewed signing key): the grant's signing key
	// and the renewals (new key, signature by the key before it).
	grantSign    []byte
	signRenewals [][2][]byte
	macGen       uint64
	mac          []byte
}

const (
	roleOwner  byte = 1
	roleWriter byte = 2
	roleReader byte = 3

	lockSecret byte = 1
)

func decodeEntry(t testing.TB, b []byte) *entry {
	t.Helper()
	require.Equal(t, "NOYK", string(b[:4]))
	r := codec.NewReader(b[4:])
	version := r.Byte()
	require.Contains(t, []byte{2, 3, 4}, version, "layout version")
	e := &entry{}
	e.user = r.String(1 << 10)
	e.serial = r.Uvarint()
	e.role = r.Byte()
	e.revoked = r.Bool()
	e.grantedBy = r.String(1 << 10)
	e.grantedAt = r.Varint()
	for range r.Count(1<<12, 1) {
		e.collections = append(e.collections, r.String(1<<10))
	}
	e.boxPub = r.Bytes(64)
	e.signPub = r.Bytes(64)
	e.lock = r.Byte()
	if e.lock == lockSecret {
		e.salt = r.Bytes(64)
		e.kdf = crypto.KDFParams{Time: uint32(r.Uvarint()), MemoryKiB: uint32(r.Uvarint()), Threads: uint8(r.Uvarint())}
		e.boxPriv = r.Bytes(256)
	}
	for range r.Count(1<<12, 2) {
		e.gens = append(e.gens, wrapped{gen: r.Uvarint(), key: r.Bytes(256)})
	}
	for range r.Count(1<<12, 3) {
		e.colKeys = append(e.colKeys, wrappedCol{name: r.String(1 << 10), gen: r.Uvarint(), key: r.Bytes(256)})
	}
	e.signPriv = r.Bytes(256)
	e.grantSig = r.Bytes(64)
	if version >= 3 {
		e.grantBox, e.renewSig = r.Bytes(64), r.Bytes(64)
		if len(e.grantBox) == 0 {
			e.grantBox, e.renewSig = nil, nil
		}
		for range r.Count(1<<12, 2) {
			e.prev = append(e.prev, [2][]byte{r.Bytes(64), r.Bytes(256)})
		}
	}
	if version >= 4 {
		e.grantSign = r.Bytes(64)
		for range r.Count(1<<12, 2) {
			e.signRenewals = append(e.signRenewals, [2][]byte{r.Bytes(64), r.Bytes(64)})
		}
	}
	e.macGen = r.Uvarint()
	e.mac = r.Bytes(64)
	require.NoError(t, r.End())
	return e
}

func (e *entry) body() []byte {
	version := byte(2)
	switch {
	case len(e.signRenewals) > 0:
		version = 4
	case e.renewSig != nil || len(e.prev) > 0:
		version = 3
	}
	b := append([]byte("NOYK"), version)
	b = codec.AppendString(b, e.user)
	b = codec.AppendUvarint(b, e.serial)
	b = append(b, e.role)
	b = codec.AppendBool(b, e.revoked)
	b = codec.AppendString(b, e.grantedBy)
	b = codec.AppendVarint(b, e.grantedAt)
	b = codec.AppendUvarint(b, uint64(len(e.collections)))
	for _, c := range e.collections {
		b = codec.AppendString(b, c)
	}
	b = codec.AppendBytes(b, e.boxPub)
	b = codec.AppendBytes(b, e.signPub)
	b = append(b, e.lock)
	if e.lock == lockSecret {
		b = codec.AppendBytes(b, e.salt)
		b = codec.AppendUvarint(b, uint64(e.kdf.Time))
		b = codec.AppendUvarint(b, uint64(e.kdf.MemoryKiB))
		b = codec.AppendUvarint(b, uint64(e.kdf.Threads))
		b = codec.AppendBytes(b, e.boxPriv)
	}
	b = codec.AppendUvarint(b, uint64(len(e.gens)))
	for _, g := range e.gens {
		b = codec.AppendUvarint(b, g.gen)
		b = codec.AppendBytes(b, g.key)
	}
	b = codec.AppendUvarint(b, uint64(len(e.colKeys)))
	for _, c := range e.colKeys {
		b = codec.AppendString(b, c.name)
		b = codec.AppendUvarint(b, c.gen)
		b = codec.AppendBytes(b, c.key)
	}
	b = codec.AppendBytes(b, e.signPriv)
	b = codec.AppendBytes(b, e.grantSig)
	if version >= 3 {
		b = codec.AppendBytes(b, e.grantBox)
		b = codec.AppendBytes(b, e.renewSig)
		b = codec.AppendUvarint(b, uint64(len(e.prev)))
		for _, p := range e.prev {
			b = codec.AppendBytes(b, p[0])
			b = codec.AppendBytes(b, p[1])
		}
	}
	if version >= 4 {
		b = codec.AppendBytes(b, e.grantSign)
		b = codec.AppendUvarint(b, uint64(len(e.signRenewals)))
		for _, r := range e.signRenewals {
			b = codec.AppendBytes(b, r[0])
			b = codec.AppendBytes(b, r[1])
		}
	}
	return codec.AppendUvarint(b, e.macGen)
}

func (e *entry) encode() []byte { return codec.AppendBytes(e.body(), e.mac) }

// grantStatement is what a granter signs.
func (e *entry) grantStatement(header []byte) []byte {
	b := codec.AppendString(nil, "noydb grant v1")
	b = codec.AppendString(b, vaultName)
	b = codec.AppendBytes(b, header)
	b = codec.AppendString(b, e.user)
	b = append(b, e.role)
	b = codec.AppendString(b, e.grantedBy)
	b = codec.AppendVarint(b, e.grantedAt)
	b = codec.AppendUvarint(b, uint64(len(e.collections)))
	for _, c := range e.collections {
		b = codec.AppendString(b, c)
	}
	if e.grantBox != nil {
		b = codec.AppendBytes(b, e.grantBox)
	} else {
		b = codec.AppendBytes(b, e.boxPub)
	}
	if e.grantSign != nil {
		return codec.AppendBytes(b, e.grantSign)
	}
	return codec.AppendBytes(b, e.signPub)
}

// seal sets the entry's MAC, keyed by the first generation's data key,
// which every person of the vault ever held.
func (e *entry) seal(gen1 *crypto.Key, header []byte) {
	mk := gen1.Derive("noydb keyring v2")
	e.mac = mk.MAC([]byte(vaultName), header, e.body())
}

func wrapAD(user string, header []byte, purpose string) []byte {
	return crypto.KeyAD(vaultName, "_keyring/"+user+"\x00"+string(header)+"\x00"+purpose)
}

func genPurpose(gen uint64) string { return "gen/" + strconv.FormatUint(gen, 10) }

// member is what a person holds: their entry as last stored, and every key
// it wraps for them, unwrapped with their secret.
type member struct {
	name   string
	secret string
	header []byte
	entry  *entry
	box    *crypto.Identity
	seed   *crypto.Key
	gens   map[uint64]*crypto.Key
	cols   map[string]*crypto.Key // "gen/collection"
}

func header(t testing.TB, st stores.Store) []byte {
	t.Helper()
	it, err := st.Get(context.Background(), "v/"+vaultName+"/_header")
	require.NoError(t, err)
	return it.Value
}

// keep unwraps, from the person's current raw entry, every key it holds:
// what they keep after they are revoked or narrowed.
func keep(t testing.TB, st stores.Store, name, secret string) *member {
	t.Helper()
	it, err := st.Get(context.Background(), keyringKey(name))
	require.NoError(t, err)
	return unlock(t, header(t, st), name, secret, it.Value)
}

func unlock(t testing.TB, hdr []byte, name, secret string, raw []byte) *member {
	t.Helper()
	e := decodeEntry(t, raw)
	require.Equal(t, lockSecret, e.lock, "a secret lock")
	kek, err := crypto.DeriveUserKey([]byte(secret), e.salt, e.kdf)
	require.NoError(t, err)
	bk, err := crypto.UnwrapKey(kek, e.boxPriv, wrapAD(name, hdr, "box"))
	require.NoError(t, err)
	m := &member{name: name, secret: secret, header: hdr, entry: e, box: crypto.IdentityFromKey(bk),
		gens: map[uint64]*crypto.Key{}, cols: map[string]*crypto.Key{}}
	for _, g := range e.gens {
		k, err := crypto.UnwrapKeyWith(m.box, g.key, wrapAD(name, hdr, genPurpose(g.gen)))
		require.NoError(t, err)
		m.gens[g.gen] = k
	}
	for _, c := range e.colKeys {
		k, err := crypto.UnwrapKeyWith(m.box, c.key, wrapAD(name, hdr, "col/"+strconv.FormatUint(c.gen, 10)+"/"+c.name))
		require.NoError(t, err)
		m.cols[strconv.FormatUint(c.gen, 10)+"/"+c.name] = k
	}
	m.seed, err = crypto.UnwrapKeyWith(m.box, e.signPriv, wrapAD(name, hdr, "sign"))
	require.NoError(t, err)
	return m
}

// forge builds a keyring entry of user with role, opening with secret, on
// a fresh box key, wrapping the data keys the attacker holds (gens), and
// granted by grantedBy: signed by signer (nil: the entry's own new signing
// key, a self-grant), MAC'd with the first generation's key.
func forge(t testing.TB, hdr []byte, gen1 *crypto.Key, gens map[uint64]*crypto.Key, user, secret string, role byte,
	grantedBy string, signer *crypto.Key) (*entry, *crypto.Key) {
	t.Helper()
	id, err := crypto.GenerateIdentity()
	require.NoError(t, err)
	e := &entry{user: user, serial: 1, role: role, grantedBy: grantedBy, grantedAt: time.Now().UnixNano(),
		lock: lockSecret, salt: make([]byte, crypto.SaltSize), kdf: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, macGen: 1}
	for i := range e.salt {
		e.salt[i] = byte(i + 1)
	}
	e.boxPub, err = id.PublicKey()
	require.NoError(t, err)
	kek, err := crypto.DeriveUserKey([]byte(secret), e.salt, e.kdf)
	require.NoError(t, err)
	e.boxPriv, err = crypto.WrapKey(kek, id.Key(), wrapAD(user, hdr, "box"))
	require.NoError(t, err)
	seed, err := crypto.GenerateKey()
	require.NoError(t, err)
	e.signPub, err = crypto.SigningPublicKey(seed)
	require.NoError(t, err)
	e.signPriv, err = crypto.WrapKeyTo(e.boxPub, seed, wrapAD(user, hdr, "sign"))
	require.NoError(t, err)
	for _, g := range slices.Sorted(maps.Keys(gens)) {
		k := gens[g]
		w, err := crypto.WrapKeyTo(e.boxPub, k, wrapAD(user, hdr, genPurpose(g)))
		require.NoError(t, err)
		e.gens = append(e.gens, wrapped{gen: g, key: w})
	}
	if signer == nil {
		signer = seed
	}
	e.grantSig, err = crypto.Sign(signer, e.grantStatement(hdr))
	require.NoError(t, err)
	e.seal(gen1, hdr)
	return e, seed
}

// plant writes e at its person's keyring key, as the raw store allows.
func plant(t testing.TB, st stores.Store, e *entry) {
	t.Helper()
	_, err := st.Put(context.Background(), keyringKey(e.user), e.encode())
	require.NoError(t, err)
}

// opensAny reports whether the raw record coll/id opens with one of keys
// (a data key, or a collection key derived from it), whatever generation
// its envelope names.
func opensAny(t testing.TB, st stores.Store, coll, id string, keys ...map[uint64]*crypto.Key) bool {
	t.Helper()
	it, err := st.Get(context.Background(), "v/"+vaultName+"/"+coll+"/"+id)
	require.NoError(t, err)
	ref := crypto.RecordRef{Vault: vaultName, Collection: coll, ID: id}
	for _, ks := range keys {
		for _, k := range ks {
			for _, k := range []*crypto.Key{k, crypto.CollectionKey(k, coll)} {
				if _, _, err := crypto.OpenRecord(k, it.Value, ref); err == nil {
					return true
				}
			}
		}
	}
	return false
}
