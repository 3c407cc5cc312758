package pins

// Ledger is the device-local memory of the furthest ledger head seen, keyed
// by the ledger's key prefix; the ledger takes it from the vault (a *Set).
// CheckLedger returns an error (one that the caller recognises as a
// rollback) when a head at seq with mac cannot follow the pinned one: a
// lower seq, or the pinned seq with another MAC.
//
// RaiseLedger moves the pin up to the head at seq with mac and returns an
// error when it could not make the pin durable: the appends (and updates)
// it covers are committed, and their callers get that error with the head.
type Ledger interface {
	LedgerPin(key string) (seq uint64, mac []byte)
	CheckLedger(key string, seq uint64, mac []byte) error
	RaiseLedger(key string, seq uint64, mac []byte) error
}

// Counter is the device-local memory of the highest value seen per counter
// key; the sequences take it from the vault (a *Set). CounterPin reads the
// pin; CheckCounter returns an error (one the caller recognises as a
// rollback) when value is below the pin of key. RaiseCounter moves the pin
// up to value and returns an error when it could not make the pin durable:
// the numbers of the write it covers are then returned with that error.
type Counter interface {
	CounterPin(key string) uint64
	CheckCounter(key string, value uint64) error
	RaiseCounter(key string, value uint64) error
}

// A Set is both.
var (
	_ Ledger  = (*Set)(nil)
	_ Counter = (*Set)(nil)
)
