package vault

import (
	"fmt"
	"slices"

	"github.com/noydb-go/noydb/ledger"
)

// Record appends an application's own event to the vault's audit ledger
// in the transaction, as Vault.Record does outside one: the event commits
// with the transaction's records and numbers, or not at all. An import
// keeps its checkpoint so: the event that says how far it got commits with
// the records it got there with, so a resume after a crash neither skips
// nor repeats one. A bad name or data fails with an error matching
// ErrInvalidArgument and leaves the transaction as it was; a failure of
// the append itself spoils the transaction (nothing commits).
func (tx *Tx) Record(name string, data []byte) error {
	if err := tx.use(); err != nil {
		return fmt.Errorf("record event %q: %w", name, err)
	}
	if err := checkEvent(name, data); err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	e := ledger.Entry{Kind: ledger.AppEvent, Reason: name, CipherHash: slices.Clone(data)}
	if err := tx.v.appendTx(tx.ctx, tx.tx, e); err != nil {
		err = fmt.Errorf("record event %q: %w", name, closedIfWiped(err))
		tx.spoil(err)
		return err
	}
	return nil
}
