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
	Journal = wire.Journal
	History = wire.History
	Pins    = pins.Counter
	Sealer  = seal.Sealer
)

// What the Journal is told and the History yields, which live in
// internal/wire, under the names the tests of this package use.
type (
	Event     = wire.SequenceEvent
	EventKind = wire.SequenceEventKind
	Fact      = wire.SequenceFact
)

// The kinds of Event and Fact, under the names the tests use.
const (
	Allocated     = wire.EventAllocated
	Seeded        = wire.EventSeeded
	Voided        = wire.EventVoided
	FactAllocated = wire.FactAllocated
	FactVoided    = wire.FactVoided
	FactSeeded    = wire.FactSeeded
)

// NewService is the constructor the vault reaches through wire.NewSequences.
var NewService = newService
