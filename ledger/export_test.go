package ledger

import (
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/seal"
)

// Waiting returns how many calls wait in l's queue for the commit in flight.
func Waiting(l *Ledger) int { return l.q.Waiting() }

// New is the constructor the vault reaches through wire.NewLedger, for the
// tests of this package.
var New = newLedger

// The interfaces the constructor takes, under the names the tests use.
type (
	Sealer = seal.Sealer
	MACer  = seal.MACer
	Pins   = pins.Ledger
)
