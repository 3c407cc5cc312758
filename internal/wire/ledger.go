package wire

// NewLedger is set by package ledger to its constructor, of type
//
//	func(store stores.Store, sealer seal.Sealer, mac seal.MACer, prefix string, opts ledger.Options) *ledger.Ledger
//
// which returns the ledger stored in store under prefix+"_ledger/" (see
// package ledger). It does no I/O; sealer and mac must stay the same for
// the life of the ledger.
var NewLedger any

// VaultLedger is set by package vault to a func of type
//
//	func(v *vault.Vault) *ledger.Ledger
//
// returning the writable ledger of v. It exists for the tests of this
// module that must drive a vault's ledger directly (a batch of the ledger
// held open, entries the vault itself would never write); the SDK's own
// code never uses it, and users cannot: this package is internal.
var VaultLedger any
