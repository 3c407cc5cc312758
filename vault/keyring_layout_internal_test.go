package vault

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/codec/codectest"
)

// The keyring entry layout of keyring.go (version 2), pinned to
// testdata/keyring_layouts.json both ways, and its fuzz target.

// normalized returns e with empty byte and list fields as nil, as the
// vectors write them.
func normalized(e *keyringEntry) keyringEntry {
	n := *e
	nb := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		return b
	}
	n.boxPub, n.signPub, n.salt, n.boxPriv, n.signPriv, n.grantSig, n.mac =
		nb(n.boxPub), nb(n.signPub), nb(n.salt), nb(n.boxPriv), nb(n.signPriv), nb(n.grantSig), nb(n.mac)
	n.grantBox, n.renewSig, n.grantSign = nb(n.grantBox), nb(n.renewSig), nb(n.grantSign)
	if len(n.prev) == 0 {
		n.prev = nil
	}
	if len(n.signRenewals) == 0 {
		n.signRenewals = nil
	}
	if len(n.collections) == 0 {
		n.collections = nil
	}
	if len(n.gens) == 0 {
		n.gens = nil
	}
	for i := range n.gens {
		n.gens[i].key = nb(n.gens[i].key)
	}
	if len(n.colKeys) == 0 {
		n.colKeys = nil
	}
	for i := range n.colKeys {
		n.colKeys[i].key = nb(n.colKeys[i].key)
	}
	return n
}

func keyringLayout() codectest.Layout {
	return codectest.Layout{
		Seeds: "testdata/keyring_layouts.json", Prefix: "keyring/", Err: codec.ErrCorrupt,
		Decode: func(b []byte) (any, error) {
			e, err := decodeKeyring(b)
			if err != nil {
				return nil, err
			}
			return normalized(e), nil
		},
		Encode: func(v any) ([]byte, error) { e := v.(keyringEntry); return e.encode(), nil },
	}
}

// TestKeyringLayoutVectors pins the keyring entry layout.
func TestKeyringLayoutVectors(t *testing.T) {
	l := keyringLayout()
	cs := func(name string, e keyringEntry) codectest.Case {
		return codectest.Case{
			Name: l.Prefix + name, Value: e, Err: codec.ErrCorrupt,
			Encode: func() ([]byte, error) { return l.Encode(e) },
			Decode: l.Decode,
		}
	}
	b := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	secret := keyringEntry{
		user: "olga", serial: 1, role: RoleOwner, grantedBy: "olga", grantedAt: 1764547200123456789,
		boxPub: b(32, 1), signPub: b(32, 2), lock: lockSecret, salt: b(16, 3),
		kdf: crypto.KDFParams{Time: 3, MemoryKiB: 65536, Threads: 4}, boxPriv: b(73, 4),
		gens: []wrappedGen{{gen: 1, key: b(105, 5)}}, signPriv: b(105, 6), grantSig: b(64, 7),
		macGen: 1, mac: b(32, 8),
	}
	identity := keyringEntry{
		user: "rex", serial: 2, role: RoleReader, grantedBy: "olga", grantedAt: -5,
		boxPub: b(32, 9), signPub: b(32, 10), lock: lockIdentity,
		gens:     []wrappedGen{{gen: 1, key: b(105, 11)}, {gen: 2, key: b(105, 12)}},
		colKeys:  []wrappedCol{{name: "notes", gen: 2, key: b(105, 13)}},
		signPriv: b(105, 14), grantSig: b(64, 15), macGen: 2, mac: b(32, 16), collections: []string{"notes", "orders"},
	}
	revoked := keyringEntry{user: "wanda", serial: 3, role: RoleWriter, revoked: true, grantedBy: "olga",
		boxPub: b(32, 17), signPub: b(32, 18), grantSig: b(64, 19), macGen: 1, mac: b(32, 20)}
	legacyRevoked := keyringEntry{user: "otto", serial: 1, role: RoleOwner, revoked: true, macGen: 1, mac: b(32, 21)}
	extremes := secret
	extremes.user, extremes.serial, extremes.grantedBy = strings.Repeat("u", maxKeyringName), math.MaxUint64, strings.Repeat("g", 200)
	extremes.grantedAt = math.MinInt64
	extremes.kdf = crypto.KDFParams{Time: math.MaxUint32, MemoryKiB: math.MaxUint32, Threads: math.MaxUint8}
	extremes.gens = []wrappedGen{{gen: 0, key: nil}, {gen: math.MaxUint64, key: b(maxKeyringWrapped, 22)}}
	extremes.macGen = math.MaxUint64
	renewed := secret
	renewed.user, renewed.grantBox, renewed.renewSig = "will", b(32, 23), b(64, 24)
	renewed.prev = []prevBox{{pub: b(32, 23), key: b(105, 27)}, {pub: b(32, 28), key: b(105, 29)}}
	regranted := secret // renewed, then granted again by an owner: earlier key pairs only
	regranted.user, regranted.prev = "lena", []prevBox{{pub: b(32, 30), key: b(105, 31)}}
	renewedRevoked := revoked
	renewedRevoked.grantBox, renewedRevoked.renewSig = b(32, 25), b(64, 26)
	signRenewed := renewed // renewed twice since the grant, signing key included
	signRenewed.user, signRenewed.grantSign, signRenewed.signPub = "rosa", b(32, 32), b(32, 35)
	signRenewed.signRenewals = []signRenewal{{pub: b(32, 33), sig: b(64, 34)}, {pub: b(32, 35), sig: b(64, 36)}}
	signRenewedRevoked := revoked // a revocation keeps the chain, to the key the ledger revokes
	signRenewedRevoked.user, signRenewedRevoked.grantSign, signRenewedRevoked.signPub = "remy", b(32, 37), b(32, 38)
	signRenewedRevoked.signRenewals = []signRenewal{{pub: b(32, 38), sig: b(64, 39)}}
	codectest.Check(t, "testdata/keyring_layouts.json", []codectest.Case{
		cs("signing key renewed (version 4)", signRenewed),
		cs("signing key renewed, revoked (version 4)", signRenewedRevoked),
		cs("renewed (version 3)", renewed),
		cs("renewed, revoked (version 3)", renewedRevoked),
		cs("granted again after a renewal (version 3)", regranted),
		cs("secret owner", secret),
		cs("identity reader", identity),
		cs("revoked", revoked),
		cs("revoked version 1", legacyRevoked),
		cs("extremes", extremes),
	})
}

// TestKeyringRefusals: fields that contradict one another are refused.
func TestKeyringRefusals(t *testing.T) {
	good := keyringEntry{user: "a", serial: 1, role: RoleReader, lock: lockIdentity, boxPub: make([]byte, 32), macGen: 1}
	_, err := decodeKeyring(good.encode())
	require.NoError(t, err)
	for name, mut := range map[string]func(e *keyringEntry){
		"role 0":                 func(e *keyringEntry) { e.role = 0 },
		"role 4":                 func(e *keyringEntry) { e.role = 4 },
		"revoked with a lock":    func(e *keyringEntry) { e.revoked = true },
		"no lock, not revoked":   func(e *keyringEntry) { e.lock = lockNone },
		"unknown lock":           func(e *keyringEntry) { e.lock = 7 },
		"short salt":             func(e *keyringEntry) { e.lock, e.salt = lockSecret, []byte{1} },
		"collections unsorted":   func(e *keyringEntry) { e.collections = []string{"b", "a"} },
		"collections duplicated": func(e *keyringEntry) { e.collections = []string{"a", "a"} },
		"generations unsorted":   func(e *keyringEntry) { e.gens = []wrappedGen{{gen: 2}, {gen: 1}} },
		"key of another collection": func(e *keyringEntry) {
			e.collections, e.colKeys = []string{"a"}, []wrappedCol{{name: "b", gen: 2}}
		},
		"collection key, no limit": func(e *keyringEntry) { e.colKeys = []wrappedCol{{name: "a", gen: 2}} },
		"renewal of an identity": func(e *keyringEntry) {
			e.grantBox, e.renewSig = bytes.Repeat([]byte{1}, 32), make([]byte, 64)
		},
		"earlier key pairs of an identity": func(e *keyringEntry) {
			e.prev = []prevBox{{pub: make([]byte, 32), key: make([]byte, 8)}}
		},
		"renewal of the signing key of an identity": func(e *keyringEntry) {
			e.grantSign, e.signPub = make([]byte, 32), bytes.Repeat([]byte{2}, 32)
			e.signRenewals = []signRenewal{{pub: bytes.Repeat([]byte{2}, 32), sig: make([]byte, 64)}}
		},
		"signing renewals not ending at the current key": func(e *keyringEntry) {
			e.lock, e.salt, e.grantSign, e.signPub = lockSecret, make([]byte, 16), make([]byte, 32), bytes.Repeat([]byte{2}, 32)
			e.signRenewals = []signRenewal{{pub: bytes.Repeat([]byte{3}, 32), sig: make([]byte, 64)}}
		},
		"renewal to the same key": func(e *keyringEntry) {
			e.lock, e.salt, e.grantBox, e.renewSig = lockSecret, make([]byte, 16), make([]byte, 32), make([]byte, 64)
		},
	} {
		e := good
		mut(&e)
		_, err := decodeKeyring(e.encode())
		assert.ErrorIs(t, err, codec.ErrCorrupt, name)
	}
	_, err = decodeKeyring([]byte{1, 2, 3})
	assert.ErrorIs(t, err, codec.ErrCorrupt)
	assert.Equal(t, uint64(0), keyringSerial([]byte{1, 2, 3}))
	assert.True(t, keyringNewer(good.encode(), []byte{1}))
	assert.False(t, keyringNewer([]byte{1}, good.encode()))
}

func FuzzKeyringEntry(f *testing.F) { codectest.Fuzz(f, keyringLayout()) }
