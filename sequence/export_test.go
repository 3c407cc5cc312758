package sequence

import (
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/internal/wire"
)

// Queued reports how many calls wait for the write in flight on q's counter,
// so tests can order events without sleeping.
func Queued(q *Sequence) int {
	return q.c.q.Waiting()
}

// The wiring the vault reaches through wire.NewSequences, under the names
// the tests of this package use.
type (
	Service = service
	Config  = config
	Journal = wire.Journal[Event]
	History = wire.History[Fact]
	Pins    = pins.Counter
	Sealer  = seal.Sealer
	MACer   = seal.MACer
)

// NewService is the constructor the vault reaches through wire.NewSequences.
var NewService = newService
