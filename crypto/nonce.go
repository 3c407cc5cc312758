package crypto

import (
	"crypto/rand"
	"sync"
)

// Nonces. Every seal takes a fresh random 24-byte nonce from crypto/rand.
// Reading it 24 bytes at a time costs a call into the system's generator
// per seal, a quarter of a small seal's time; nonces are taken instead from
// buffers of random bytes read a few hundred at a time. Each byte of a
// buffer serves one nonce only, and a buffer is used by one goroutine at a
// time (it is taken from the pool while in use), so nonces stay as random,
// and as unlikely to repeat, as when read one by one. Nonces are not
// secret: the buffered bytes need no wiping.

// nonceBatch is how many nonces one read of the generator fills.
const nonceBatch = 32

type nonceBuffer struct {
	b   [nonceBatch * NonceSize]byte
	off int // the bytes before off were handed out
}

var nonceBuffers = sync.Pool{New: func() any { return &nonceBuffer{off: nonceBatch * NonceSize} }}

// readNonce fills dst (NonceSize bytes) with fresh random bytes.
func readNonce(dst []byte) error {
	if len(dst) != NonceSize {
		_, err := rand.Read(dst)
		return err
	}
	nb := nonceBuffers.Get().(*nonceBuffer)
	defer nonceBuffers.Put(nb)
	if nb.off+len(dst) > len(nb.b) {
		if _, err := rand.Read(nb.b[:]); err != nil {
			return err
		}
		nb.off = 0
	}
	n := copy(dst, nb.b[nb.off:])
	nb.off += n
	return nil
}
