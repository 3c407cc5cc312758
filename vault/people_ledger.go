package vault

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/ledger"
)

// ledgerPerson is the latest change of a person that the vault's own
// ledger records: a PersonGranted entry (role, signing key, collections),
// a KeyringUpgraded one (an owner, their new key) or a PersonRevoked one.
type ledgerPerson struct {
	revoked     bool
	role        string
	signKey     []byte
	collections []string // nil: every collection
}

// peopleIndex follows the people entries of the vault's ledger, read once
// and then only from where the last read stopped, so a rotation pays for
// the entries appended since the handle's previous one, not for the whole
// ledger each time.
type peopleIndex struct {
	mu     sync.Mutex
	next   uint64 // the first position not read yet (0: none read)
	latest map[string]ledgerPerson
}

// latestPeople returns the latest ledger change of each person the
// vault's ledger names. The map is a copy the caller may keep.
func (v *Vault) latestPeople(ctx context.Context) (map[string]ledgerPerson, error) {
	ix := &v.people
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.latest == nil {
		ix.latest = make(map[string]ledgerPerson)
	}
	for e, err := range v.ledger.Read(ctx, ix.next) {
		if err != nil {
			return nil, fmt.Errorf("read the ledger's people entries: %w", err)
		}
		ix.next = e.Seq + 1
		switch e.Kind {
		case ledger.PersonGranted:
			cols, limited, _ := e.GrantCollections()
			p := ledgerPerson{role: e.Reason, signKey: e.SigningKey}
			if limited {
				p.collections = slices.Clone(cols)
			}
			ix.latest[e.ID] = p
		case ledger.KeyringUpgraded:
			ix.latest[e.ID] = ledgerPerson{role: e.Reason, signKey: e.SigningKey}
		case ledger.PersonRevoked:
			ix.latest[e.ID] = ledgerPerson{revoked: true}
		}
	}
	out := make(map[string]ledgerPerson, len(ix.latest))
	for name, p := range ix.latest {
		out[name] = p
	}
	return out, nil
}

// skipOwnRecords moves the index of v's people past entries first..last
// of its ledger, which v appended itself and which change no person (the
// records a Sync pushed to its hub), when it has read every entry before
// them: the next read starts after them instead of fetching back what
// this handle wrote.
func (v *Vault) skipOwnRecords(first, last uint64) {
	ix := &v.people
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.latest != nil && max(ix.next, 1) == first && last >= first { // next 0: from 1
		ix.next = last + 1
	}
}

// matchesLedger reports whether e, a keyring entry not revoked, agrees
// with p, the latest change of its person in the vault's ledger: not
// revoked since, the same role and signing key (when the ledger names
// one), and collections within the ledger's (an entry put back as it
// was before a narrowing names more). A person the ledger does not name
// (the vault's creator, a person granted on another device of a hub
// before this device's ledger learnt of them) is taken as the keyring
// says, vouched for by the grant's signature alone.
func (e *keyringEntry) matchesLedger(p ledgerPerson, named bool) bool {
	if !named {
		return true
	}
	if p.revoked || e.revoked || e.role.String() != p.role {
		return false
	}
	if len(p.signKey) > 0 && !bytes.Equal(p.signKey, e.signPub) {
		return false
	}
	if p.collections == nil {
		return true
	}
	if e.collections == nil {
		return false
	}
	for _, c := range e.collections {
		if _, ok := slices.BinarySearch(p.collections, c); !ok {
			return false
		}
	}
	return true
}

// keyringLedger is the vault whose ledger records the people changes of
// the keyring a rotation reads (keyringStore): the hub's on a device of a
// hub (a device's Sync records there the changes it made, before it copies
// its keyring), else v.
func (v *Vault) keyringLedger() *Vault {
	if v.rotatesOnHub() {
		return v.hub
	}
	return v
}

// agreesWithLedger reports whether e, revoked or not, is in the state p
// (named: the ledger names its person) says: revoked when the ledger's
// latest change revokes the person, else as matchesLedger.
func (e *keyringEntry) agreesWithLedger(p ledgerPerson, named bool) bool {
	if named && p.revoked {
		return e.revoked
	}
	return e.matchesLedger(p, named)
}

// preferLedger wraps a keyring merge (see copyKeyringWith) for the copy
// between a device and its hub: of two entries of a person the ledger
// names, one agreeing with the person's latest change in the ledger and
// the other not, the agreeing one is kept, whatever their serials (dst
// itself is returned to keep it). A serial alone would let secret
// changes made on the person's device while an owner narrowed their
// collections undo the narrowing: they raise the entry of the wider
// grant past the narrowing's. Otherwise merge decides.
func preferLedger(people map[string]ledgerPerson, merge func(src, dst []byte) []byte) func(src, dst []byte) []byte {
	return func(src, dst []byte) []byte {
		if isKeyringV2(src) && isKeyringV2(dst) {
			es, serr := decodeKeyring(src)
			ed, derr := decodeKeyring(dst)
			if serr == nil && derr == nil && es.user == ed.user {
				if p, named := people[es.user]; named {
					as, ad := es.agreesWithLedger(p, true), ed.agreesWithLedger(p, true)
					switch {
					case as && !ad:
						return src
					case ad && !as:
						return dst
					}
				}
			}
		}
		return mergeOrNil(merge, src, dst)
	}
}
