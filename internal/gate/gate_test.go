package gate_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/gate"
)

// Close waits for every admitted call, nested ones included: it returns
// only after the last of them has called Exit. A refused Enter admits
// nothing and needs no Exit.
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	var g gate.Gate
	require.True(t, g.Enter())
	require.True(t, g.Enter()) // nested
	closed := make(chan bool)
	go func() { closed <- g.Close() }()
	// Once closing, new calls are turned away, even while two are in flight.
	for g.Enter() {
		g.Exit()
	}
	assert.True(t, g.Closed())
	assert.False(t, g.Enter(), "refused: nothing to exit")
	assert.False(t, gate.Drained(&g), "two calls in flight")
	g.Exit()
	assert.False(t, gate.Drained(&g), "one call still in flight")
	select {
	case <-closed:
		t.Fatal("Close returned with a call in flight")
	default:
	}
	g.Exit()
	assert.True(t, <-closed)
	assert.True(t, gate.Drained(&g))
	assert.False(t, g.Enter())
	assert.False(t, g.Close(), "only the first Close reports true")
}

func TestCloseOfIdleGate(t *testing.T) {
	var g gate.Gate
	assert.False(t, g.Closed())
	assert.True(t, g.Close())
	assert.True(t, g.Closed())
	assert.False(t, g.Enter())
}

// Callers enter and exit in a loop while Close runs: no call is in flight
// once Close has returned, and every Enter after it fails. Run with -race.
func TestCloseRacesCallers(t *testing.T) {
	for range 50 {
		var (
			g        gate.Gate
			inFlight atomic.Int64
			after    atomic.Bool
			wg       sync.WaitGroup
		)
		for range 8 {
			wg.Go(func() {
				for {
					if !g.Enter() {
						return
					}
					inFlight.Add(1)
					assert.False(t, after.Load(), "a call admitted after Close returned")
					inFlight.Add(-1)
					g.Exit()
				}
			})
		}
		g.Close()
		after.Store(true)
		assert.Zero(t, inFlight.Load())
		wg.Wait()
	}
}
