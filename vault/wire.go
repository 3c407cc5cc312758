package vault

import (
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// The constructors the vault reaches through internal/wire, as the concrete
// func types it asserts their hooks to (wire_test.go checks every one).
type (
	ledgerFunc    = func(store stores.Store, sealer seal.Sealer, mac seal.MACer, prefix string, opts wire.LedgerOptions) writableLedger
	sequencesFunc = func(store stores.Store, sealer seal.Sealer, prefix string, cfg sequenceConfig) sequences
)

// writableLedger is the vault's ledger, the one writer of its audit
// ledger: package ledger's unexported implementation, which only the vault
// holds (users get the read-only Audit).
type writableLedger = wire.Ledger[ledger.Entry, ledger.Head, ledger.Report]

// sequenceConfig and sequences are the vault's instances of the generic
// wiring types of package sequence.
type (
	sequenceConfig = wire.SequenceConfig
	sequences      = wire.Sequences[*sequence.Sequence, sequence.Options]
)

func init() {
	wire.VaultLedger = func(v *Vault) writableLedger { return v.ledger }
}

// newLedger returns package ledger's constructor.
func newLedger() ledgerFunc { return wire.Hook[ledgerFunc]("NewLedger", wire.NewLedger) }

// newSequences returns package sequence's constructor.
func newSequences() sequencesFunc {
	return wire.Hook[sequencesFunc]("NewSequences", wire.NewSequences)
}
