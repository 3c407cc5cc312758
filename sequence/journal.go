package sequence

import "github.com/noydb-go/noydb/internal/wire"

// What a Service tells its Journal and reads from its History, under short
// names: the types live in internal/wire, since only the vault, which
// records them in its audit ledger, deals in them.
type (
	event = wire.SequenceEvent
	fact  = wire.SequenceFact
)
