package crypto

// Test-only access to the deterministic paths used by the known-answer
// vectors. Production code always uses a fresh random nonce.

// SealWithNonce is Seal with a fixed nonce.
func SealWithNonce(k *Key, nonce, plaintext, ad []byte) []byte {
	return sealWithNonce(k, nonce, plaintext, ad)
}

// SealRecordWithNonce is SealRecord with a fixed nonce.
func SealRecordWithNonce(k *Key, nonce, plaintext []byte, ref RecordRef) []byte {
	return sealRecordWithNonce(k, nonce, plaintext, ref)
}

// KeyFromBytes makes a Key from exactly KeySize bytes.
func KeyFromBytes(b []byte) *Key {
	if len(b) != KeySize {
		panic("crypto: KeyFromBytes: wrong length")
	}
	k := new(Key)
	copy(k.b[:], b)
	return k
}

// KeyBytes returns a copy of the key bytes.
func KeyBytes(k *Key) []byte {
	return append([]byte(nil), k.b[:]...)
}
