// Package gate lets a service refuse new calls once it is closing and wait
// for the calls already in flight, so that Close can release what those
// calls use (rollback pins, keys) only after the last of them has finished.
//
// # Usage
//
//	func (s *Service) Do(ctx context.Context) error {
//		if !s.gate.Enter() {
//			return ErrClosed
//		}
//		defer s.gate.Exit()
//		...
//	}
//
//	func (s *Service) Close() error {
//		if !s.gate.Close() {
//			return nil // closed before
//		}
//		... // no call is in flight, and none will start
//	}
//
// Enter never blocks, so calls nest freely (a call that makes another on the
// same gate while Close waits gets false from the inner Enter and fails,
// rather than deadlocking). Close must not be called from inside a call
// that entered the same gate: it would wait for itself.
//
// # Concurrency
//
// A Gate is safe for concurrent use. Its zero value is open.
package gate

import (
	"sync"
	"sync/atomic"
)

// closedBit marks a closing gate in the count of calls in flight.
const closedBit = 1 << 62

// Gate counts the calls in flight through a service and, once closing,
// turns new calls away.
type Gate struct {
	n       atomic.Int64 // calls in flight, plus closedBit once closing
	mu      sync.Mutex
	drained chan struct{} // closed when closing and no call is in flight
	once    sync.Once
}

// Enter admits a call and reports true, or reports false (and admits
// nothing) once the gate is closing. A call admitted must call Exit.
func (g *Gate) Enter() bool {
	if g.n.Add(1)&closedBit != 0 {
		g.Exit()
		return false
	}
	return true
}

// Exit ends a call admitted by Enter.
func (g *Gate) Exit() {
	if g.n.Add(-1) == closedBit {
		g.signal()
	}
}

// Closed reports whether the gate is closing or closed.
func (g *Gate) Closed() bool {
	return g.n.Load()&closedBit != 0
}

// Close turns new calls away and waits for the calls in flight to end. It
// reports true to the first caller only; later callers wait as well, and
// get false.
func (g *Gate) Close() bool {
	first := false
	for {
		old := g.n.Load()
		if old&closedBit != 0 {
			break
		}
		if g.n.CompareAndSwap(old, old|closedBit) {
			first = true
			if old == 0 {
				g.signal()
			}
			break
		}
	}
	<-g.ch()
	return first
}

func (g *Gate) ch() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.drained == nil {
		g.drained = make(chan struct{})
	}
	return g.drained
}

func (g *Gate) signal() {
	g.once.Do(func() { close(g.ch()) })
}
