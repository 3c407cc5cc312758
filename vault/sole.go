package vault

import (
	"context"

	"github.com/noydb-go/noydb/stores"
)

// One person's vault.
//
// While a vault's keyring has held no one but its creator, the ledger
// writes its entries unsigned (ledger.Entry.Chained): only that person
// could compute their chain MACs. The ledger itself keeps the window
// (package ledger, sign.go): a grant to someone else, recorded in this
// ledger, closes it, and Verify demands signatures from there on. The
// vault tells the ledger what its ledger cannot see: a person granted on
// another device, whose keyring entry reached this one by a sync. From
// then on (LedgerOptions.Alone says no) every commit of this handle is
// signed, and the first one closes the window for good.

// The states of Vault.sole.
const (
	soleUnknown int32 = iota // not asked yet: the ledger signs
	soleAlone                // the keyring holds no one but the vault's person
	soleShared               // it holds someone else, or did
)

// alone is the ledger's Alone: whether the vault's keyring, when last
// listed, held no one but its person. Never true for a vault the device
// did not open as its own (a hub's side, an internal store).
func (v *Vault) alone() bool { return v.sole.Load() == soleAlone }

// learnPeople lists the keyring of the vault's store and records whether
// it holds anyone but the vault's person. Once someone else was seen, the
// vault is shared for good: a person revoked since still knows the chain
// key of what they held.
func (v *Vault) learnPeople(ctx context.Context) error {
	if v.sole.Load() == soleShared || v.signAs == nil {
		return nil
	}
	kp := v.prefix + keyringPrefix
	for it, err := range stores.ListUnder(ctx, v.store, kp) {
		if err != nil {
			return err
		}
		if it.Key[len(kp):] != v.user {
			v.sole.Store(soleShared)
			return nil
		}
	}
	v.sole.CompareAndSwap(soleUnknown, soleAlone)
	return nil
}
