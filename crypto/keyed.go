package crypto

import (
	"crypto/rand"
	"fmt"
	"io"
	"sync"
)

// adBuffers holds scratch buffers for associated data, which the AEAD reads
// but does not keep, so hot paths build it without allocating.
var adBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// SealAt is Seal(k, plaintext, KeyAD(vault, key)), without building the
// associated data on the heap: for values sealed at a store key on hot paths
// (counters, ledger entries). The envelope is the same.
func SealAt(k *Key, plaintext []byte, vault, key string) ([]byte, error) {
	aead, err := newAEAD(k)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	var nonce [NonceSize]byte
	if _, err := io.ReadFull(rand.Reader, nonce[:]); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	bp := adBuffers.Get().(*[]byte)
	ad := appendKeyAD(append((*bp)[:0], EnvelopeVersion), vault, key)
	out := make([]byte, 0, EnvelopeOverhead+len(plaintext))
	out = append(out, EnvelopeVersion)
	out = append(out, nonce[:]...)
	out = aead.Seal(out, nonce[:], plaintext, ad)
	*bp = ad[:0]
	adBuffers.Put(bp)
	return out, nil
}

// OpenAt is Open(k, envelope, KeyAD(vault, key)), without building the
// associated data on the heap.
func OpenAt(k *Key, envelope []byte, vault, key string) ([]byte, error) {
	if len(envelope) < EnvelopeOverhead || envelope[0] != EnvelopeVersion {
		return nil, ErrTampered
	}
	aead, err := newAEAD(k)
	if err != nil {
		return nil, err
	}
	bp := adBuffers.Get().(*[]byte)
	ad := appendKeyAD(append((*bp)[:0], envelope[0]), vault, key)
	pt, err := aead.Open(nil, envelope[1:1+NonceSize], envelope[1+NonceSize:], ad)
	*bp = ad[:0]
	adBuffers.Put(bp)
	if err != nil {
		return nil, ErrTampered
	}
	if pt == nil {
		pt = []byte{}
	}
	return pt, nil
}

func appendKeyAD(b []byte, vault, key string) []byte {
	b = appendLP(b, keyDomain)
	b = appendLP(b, vault)
	return appendLP(b, key)
}
