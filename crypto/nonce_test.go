package crypto

import (
	"sync"
	"testing"
)

// TestNoncesNeverRepeat: nonces taken from the buffers by many goroutines
// at once are all distinct, and none is all zeros (a buffer handed out
// before it was filled).
func TestNoncesNeverRepeat(t *testing.T) {
	const goroutines, each = 8, 4 * nonceBatch
	var (
		mu   sync.Mutex
		seen = make(map[[NonceSize]byte]bool, goroutines*each)
		wg   sync.WaitGroup
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				var n [NonceSize]byte
				if err := readNonce(n[:]); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[n] {
					t.Errorf("nonce %x handed out twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if seen[[NonceSize]byte{}] {
		t.Error("a nonce of zeros: a buffer used before it was filled")
	}
	if len(seen) != goroutines*each {
		t.Errorf("%d distinct nonces, want %d", len(seen), goroutines*each)
	}
}
