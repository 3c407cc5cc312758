package numbering

import "sync/atomic"

// PassPhase is what a running pass is doing.
type PassPhase int32

// The phases of a pass, in order.
const (
	// PassIdle: no pass runs through this handle.
	PassIdle PassPhase = iota
	// PassReading: the pass reads the pending entries (Total is not known
	// yet; Done counts the entries read).
	PassReading
	// PassChecking: the pass checks each pending record (numbered already,
	// deleted, still to come) before it commits a batch.
	PassChecking
	// PassNumbering: the pass stamps the records of its batch (or finishes
	// a batch an earlier pass left).
	PassNumbering
)

// String names the phase as the command line shows it.
func (p PassPhase) String() string {
	switch p {
	case PassReading:
		return "reading"
	case PassChecking:
		return "checking"
	case PassNumbering:
		return "numbering"
	}
	return "idle"
}

// PassProgress is how far the pass running through a handle has got.
type PassProgress struct {
	// Phase is what the pass is doing.
	Phase PassPhase
	// Done counts the units of the phase done: entries read, records
	// checked, records numbered (stamped, with their ledger entries).
	Done int
	// Total is the number of units of the phase (0 while reading).
	Total int
}

// progress holds a running pass's PassProgress; the pass updates it, any
// goroutine may read it.
type progress struct {
	phase       atomic.Int32
	done, total atomic.Int64
}

// start enters phase, with total units (0: unknown) and none done.
func (p *progress) start(phase PassPhase, total int) {
	p.done.Store(0)
	p.total.Store(int64(total))
	p.phase.Store(int32(phase))
}

// add counts n more units done.
func (p *progress) add(n int) { p.done.Add(int64(n)) }

// Progress returns how far the pass running through this handle has got
// (PassIdle when none runs). It is for showing progress: a pass on another
// handle, or in another process, is not seen.
func (s *Series) Progress() PassProgress {
	return PassProgress{
		Phase: PassPhase(s.prog.phase.Load()),
		Done:  int(s.prog.done.Load()),
		Total: int(s.prog.total.Load()),
	}
}
