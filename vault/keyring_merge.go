package vault

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/noydb-go/noydb/crypto"
)

// Two devices can change one person's keyring entry without seeing each
// other's change: a rotation on one wraps a new data key generation into
// the entry, a recovery or a secret change on the other (offline) locks it
// with a new secret. Each raises the serial from the same value, so the
// rule "the higher serial wins" keeps neither: the hub keeps one, the
// device the other, and the person either loses the new generation or
// the new secret. Sync merges such entries instead (mergeKeyring), with
// the vault's data key (the MAC's), on either side of a copy: the result
// is the same bytes whichever device makes it, so both converge.

// keyringMerger returns the merge copyKeyringWith applies, for a vault
// whose data key (generation 1, the keyring MAC's) is dk and header
// header.
func keyringMerger(dk *crypto.Key, vaultName string, header []byte) func(src, dst []byte) []byte {
	return func(src, dst []byte) []byte { return mergeKeyring(dk, vaultName, header, src, dst) }
}

// mergeKeyring returns the merge of a and b, two stored keyring entries
// of one person, or nil when they are not to be merged (the serial rule
// applies: keyringNewer). It merges two entries of the same grant (the
// same role, granter, time, collections and public keys, so the granter's
// signature holds for the merge), neither revoked, both with a good MAC
// under dk, when neither supersedes the other: the one with the higher
// serial lacks a generation or a collection key the other holds, or, with
// equal serials, they differ. The merge takes the lock (and everything but the keys) of:
//
//   - the entry with the higher serial;
//   - with equal serials, the one whose generations the other's strictly
//     contain (a secret changed or recovered there while the other took a
//     rotation);
//   - else the one whose encoding sorts first (two secret changes racing:
//     one of the two secrets wins on every device);
//
// and every data key generation and collection key of both (from the lock
// donor where both hold one), with a serial above both, sealed with dk.
// The result depends only on the pair, not on its order, so two devices
// that merge it make the same bytes. A store that forged either entry
// gets no merge (its MAC fails), so the merge never launders a forgery.
func mergeKeyring(dk *crypto.Key, vaultName string, header []byte, a, b []byte) []byte {
	if !isKeyringV2(a) || !isKeyringV2(b) || bytes.Equal(a, b) {
		return nil
	}
	ea, err := decodeKeyring(a)
	if err != nil {
		return nil
	}
	eb, err := decodeKeyring(b)
	if err != nil {
		return nil
	}
	if !sameGrant(ea, eb) || ea.revoked || eb.revoked {
		return nil
	}
	if ea.verify(dk, vaultName, ea.user, header) != nil || eb.verify(dk, vaultName, eb.user, header) != nil {
		return nil
	}
	ga, gb := genSet(ea), genSet(eb)
	var donor, other *keyringEntry
	switch {
	case ea.serial > eb.serial:
		if containsAll(ga, gb) {
			return nil // a supersedes b
		}
		donor, other = ea, eb
	case eb.serial > ea.serial:
		if containsAll(gb, ga) {
			return nil
		}
		donor, other = eb, ea
	case containsAll(gb, ga) && len(gb) > len(ga):
		donor, other = ea, eb
	case containsAll(ga, gb) && len(ga) > len(gb):
		donor, other = eb, ea
	case bytes.Compare(a, b) < 0:
		donor, other = ea, eb
	default:
		donor, other = eb, ea
	}
	if !donor.opens(other.boxPub) {
		// The other's wraps are for a key pair the donor does not hold
		// (two renewals racing): merged only when it adds none.
		if !containsAll(genSet(donor), genSet(other)) {
			return nil
		}
		other = &keyringEntry{}
	}
	m := *donor
	m.serial = max(ea.serial, eb.serial) + 1
	gd := genSet(donor)
	m.gens = slices.Clone(donor.gens)
	for _, g := range other.gens {
		if !gd[heldKey{gen: g.gen}] {
			m.gens = append(m.gens, g)
		}
	}
	slices.SortFunc(m.gens, func(x, y wrappedGen) int { return cmpU(x.gen, y.gen) })
	type colGen struct {
		name string
		gen  uint64
	}
	held := map[colGen]bool{}
	for _, c := range donor.colKeys {
		held[colGen{c.name, c.gen}] = true
	}
	m.colKeys = slices.Clone(donor.colKeys)
	for _, c := range other.colKeys {
		if !held[colGen{c.name, c.gen}] {
			m.colKeys = append(m.colKeys, c)
		}
	}
	slices.SortStableFunc(m.colKeys, func(x, y wrappedCol) int {
		return cmp.Or(cmp.Compare(x.name, y.name), cmpU(x.gen, y.gen))
	})
	if len(m.gens) > maxKeyringList || len(m.colKeys) > maxKeyringList {
		return nil
	}
	m.seal(dk, vaultName, header)
	return m.encode()
}

// losesGenerations reports whether the entry src, replacing dst, would
// lose a data key generation dst holds: both of the same grant, neither
// revoked (a revocation or a new grant replaces what was), and src lacking
// a generation or a collection key of dst. Such a pair waits for mergeKeyring.
func losesGenerations(src, dst []byte) bool {
	es, err := decodeKeyring(src)
	if err != nil {
		return false
	}
	ed, err := decodeKeyring(dst)
	if err != nil {
		return false
	}
	return sameGrant(es, ed) && !es.revoked && !ed.revoked && !containsAll(genSet(es), genSet(ed))
}

// opens reports whether e holds the private key of the box public key
// pub: its current one, or an earlier one (prev).
func (e *keyringEntry) opens(pub []byte) bool {
	return bytes.Equal(e.boxPub, pub) || slices.ContainsFunc(e.prev, func(p prevBox) bool { return bytes.Equal(p.pub, pub) })
}

// sameGrant reports whether a and b are entries of the same grant: what
// the granter signed (grantStatement), the lock's kind and the MAC's
// generation are the same. Their box and signing keys may differ: a
// renewal keeps the grant (renew.go).
func sameGrant(a, b *keyringEntry) bool {
	return a.user == b.user && a.role == b.role && a.grantedBy == b.grantedBy && a.grantedAt == b.grantedAt &&
		slices.Equal(a.collections, b.collections) && bytes.Equal(a.grantBoxKey(), b.grantBoxKey()) &&
		bytes.Equal(a.grantSignKey(), b.grantSignKey()) && bytes.Equal(a.grantSig, b.grantSig) &&
		a.lock == b.lock && a.macGen == b.macGen
}

// heldKey names one key a keyring entry holds: a data key generation
// (name empty) or a collection's key of a generation.
type heldKey struct {
	gen  uint64
	name string
}

// genSet returns the keys e holds: its data key generations and its
// collection keys. A person limited to some collections gains no data key
// generation from a rotation, only collection keys: those must count too,
// or an entry lacking a rotation's keys would seem to hold all of them.
func genSet(e *keyringEntry) map[heldKey]bool {
	s := make(map[heldKey]bool, len(e.gens)+len(e.colKeys))
	for _, g := range e.gens {
		s[heldKey{gen: g.gen}] = true
	}
	for _, c := range e.colKeys {
		s[heldKey{gen: c.gen, name: c.name}] = true
	}
	return s
}

// containsAll reports whether every member of sub is in set.
func containsAll(set, sub map[heldKey]bool) bool {
	for n := range sub {
		if !set[n] {
			return false
		}
	}
	return true
}
