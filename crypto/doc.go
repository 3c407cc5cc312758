// Package crypto holds every cryptographic choice and byte layout of noydb:
// key derivation from a user secret, subkeys, MACs, sealed envelopes for
// records and internal values, wrapped data keys and the vault header.
//
// The algorithms are fixed; only the Argon2id cost parameters are tunable
// ([KDFParams], stored in the vault [Header]):
//
//   - Argon2id (RFC 9106, golang.org/x/crypto/argon2) derives a user key
//     from a secret and the per-vault salt: [DeriveUserKey].
//   - XChaCha20-Poly1305 (golang.org/x/crypto/chacha20poly1305) with a
//     fresh random 24-byte nonce per message seals values: [Seal],
//     [SealRecord], [WrapKey].
//   - HKDF-SHA256 (RFC 5869) derives purpose subkeys: [Key.Derive].
//   - HMAC-SHA256 with length-prefixed parts authenticates: [Key.MAC].
//
// No other package builds or parses these layouts by hand.
//
// # Byte layouts
//
// All integers are big-endian. lp(s) is len(s) as 8 bytes followed by s.
//
// Vault header, version 1, 30 bytes, stored in clear:
//
//	"NOYH" | version (1) | salt [16] | time uint32 | memory KiB uint32 | threads uint8
//
// Envelope made by [Seal], version 1:
//
//	version (1) | nonce [24] | ciphertext+tag [n+16]
//	AEAD associated data: version | ad
//
// Record envelope made by [SealRecord], version 1 (no key generation; made
// before generations existed, and still for a RecordRef without one):
//
//	version (1) | revision uint64 | nonce [24] | ciphertext+tag [n+16]
//	AEAD associated data: version | lp("noydb record") | lp(vault) | lp(collection) | lp(id) | revision uint64
//
// Record envelope made by [SealRecord], version 2 (naming the generation of
// its key, [RecordGeneration]):
//
//	version (2) | revision uint64 | generation uint64 | nonce [24] | ciphertext+tag [n+16]
//	AEAD associated data: version | lp("noydb record") | lp(vault) | lp(collection) | lp(id) | revision uint64 | generation uint64
//
// Record envelope made by [SealRecord], version 3 (sealed with a
// collection's key of a generation, [CollectionKey], HKDF-SHA256 of the
// generation's data key with info "noydb collection v1" | 0x00 | collection):
//
//	version (3) | revision uint64 | generation uint64 | nonce [24] | ciphertext+tag [n+16]
//	AEAD associated data: version | lp("noydb record") | lp(vault) | lp(collection) | lp(id) | revision uint64 | generation uint64
//
// Associated data for an internal value stored at a key ([KeyAD]):
//
//	lp("noydb key") | lp(vault) | lp(key)
//
// Wrapped key made by [WrapKey]: a [Seal] envelope of the 32 key bytes with
// associated data lp("noydb wrapped key") | ad.
//
// Published layouts never change meaning; a new layout gets a new version
// byte, and readers refuse versions they do not know. Known-answer vectors
// for every layout live in testdata/vectors.json.
//
// # Errors
//
// Every failure to open a sealed value is the single opaque [ErrTampered].
// Bytes that do not parse are [ErrMalformed]. Costs outside the accepted
// range are [ErrKDFTooWeak] or [ErrKDFTooCostly].
//
// # Concurrency
//
// Keys are immutable and all functions are safe for concurrent use.
//
// # Caveats
//
// Go cannot reliably erase memory, so key bytes may linger in freed memory
// until it is reused. A [Key] never prints its bytes, whatever the fmt verb.
package crypto
