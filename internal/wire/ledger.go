package wire

// NewLedger is set by package ledger to its constructor, of type
//
//	func(store stores.Store, sealer seal.Sealer, mac seal.MACer, prefix string, opts ledger.Options) *ledger.Ledger
//
// which returns the ledger stored in store under prefix+"_ledger/" (see
// package ledger). It does no I/O; sealer and mac must stay the same for
// the life of the ledger.
var NewLedger any
