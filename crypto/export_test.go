package crypto

// Test-only access to the deterministic paths used by the known-answer
// vectors. Production code always uses a fresh random nonce.

// SealWithNonce is Seal with a fixed nonce.
func SealWithNonce(k *Key, nonce, plaintext, ad []byte) []byte {
	out, err := sealWithNonce(k, nonce, plaintext, ad)
	if err != nil {
		panic(err)
	}
	return out
}

// SealRecordWithNonce is SealRecord with a fixed nonce.
func SealRecordWithNonce(k *Key, nonce, plaintext []byte, ref RecordRef) []byte {
	out, err := sealRecordWithNonce(k, nonce, plaintext, ref)
	if err != nil {
		panic(err)
	}
	return out
}

// KeyFromBytes makes a Key from exactly KeySize bytes.
func KeyFromBytes(b []byte) *Key {
	if len(b) != KeySize {
		panic("crypto: KeyFromBytes: wrong length")
	}
	return newKey(b)
}

// KeyBytes returns a copy of the key bytes.
func KeyBytes(k *Key) []byte {
	var out []byte
	if k.use(func(b []byte) { out = append(out, b...) }) != nil {
		panic(ErrKeyWiped)
	}
	return out
}

// HeldAEADKey returns the memory where k's cached AEAD holds its copy of
// the key (not a copy of it), nil when k has no cached AEAD.
func HeldAEADKey(k *Key) []byte {
	k.s.mu.RLock()
	defer k.s.mu.RUnlock()
	return k.s.aeadKey
}
