package crypto

import (
	"crypto/rand"
	"fmt"
	"sync"
)

// adBuffers holds scratch buffers for associated data, which the AEAD reads
// but does not keep, so hot paths build it without allocating.
var adBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// SealAt is Seal(k, plaintext, KeyAD(vault, key)), without building the
// associated data on the heap: for values sealed at a store key on hot paths
// (counters, ledger entries). The envelope is the same.
func SealAt(k *Key, plaintext []byte, vault, key string) ([]byte, error) {
	out := make([]byte, 1+NonceSize, EnvelopeOverhead+len(plaintext))
	out[0] = EnvelopeVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	bp := adBuffers.Get().(*[]byte)
	ad := appendKeyAD(append((*bp)[:0], EnvelopeVersion), vault, key)
	out, err := sealEnvelope(k, out, out[1:], plaintext, ad)
	*bp = ad[:0]
	adBuffers.Put(bp)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return out, nil
}

// OpenAt is Open(k, envelope, KeyAD(vault, key)), without building the
// associated data on the heap.
func OpenAt(k *Key, envelope []byte, vault, key string) ([]byte, error) {
	if len(envelope) < EnvelopeOverhead || envelope[0] != EnvelopeVersion {
		return nil, ErrTampered
	}
	bp := adBuffers.Get().(*[]byte)
	ad := appendKeyAD(append((*bp)[:0], envelope[0]), vault, key)
	pt, err := openEnvelope(k, envelope[1:1+NonceSize], envelope[1+NonceSize:], ad)
	*bp = ad[:0]
	adBuffers.Put(bp)
	return pt, err
}

func appendKeyAD(b []byte, vault, key string) []byte {
	b = appendLP(b, keyDomain)
	b = appendLP(b, vault)
	return appendLP(b, key)
}
