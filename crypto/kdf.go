package crypto

import (
	"fmt"

	"golang.org/x/crypto/argon2"
)

// KDFParams are the Argon2id cost parameters. They are the only tunable part
// of key derivation; the algorithm itself is fixed. They are stored in the
// vault [Header] so a vault can be reopened with the costs it was made with.
// KDFParams is a plain value, safe to copy and share.
type KDFParams struct {
	// Time is the number of passes over the memory.
	Time uint32
	// MemoryKiB is the memory cost in KiB.
	MemoryKiB uint32
	// Threads is the degree of parallelism.
	Threads uint8
}

// DefaultKDF is the second recommended option of RFC 9106 (section 4):
// t=3 passes, 64 MiB of memory, 4 lanes.
var DefaultKDF = KDFParams{Time: 3, MemoryKiB: 64 * 1024, Threads: 4}

// Cost bounds enforced by [KDFParams.Check].
const (
	// MinKDFTime is the smallest accepted time cost unless weak costs are allowed.
	MinKDFTime = 2
	// MinKDFMemoryKiB is the smallest accepted memory cost (19 MiB, the OWASP
	// Argon2id minimum) unless weak costs are allowed.
	MinKDFMemoryKiB = 19 * 1024
	// MaxKDFTime is the largest time cost any header may carry; above it a
	// header is malformed. Openers refuse much less: see [DefaultMaxKDF].
	MaxKDFTime = 16
	// MaxKDFMemoryKiB is the largest memory cost any header may carry (4 GiB).
	MaxKDFMemoryKiB = 4 * 1024 * 1024
)

// DefaultMaxKDF is the ceiling an opener puts on the costs a vault header
// asks for when it sets none (see [KDFParams.CheckCeiling]): at most 10
// passes, 1 GiB of memory and 16 threads. The header is stored in clear, so
// without a ceiling a store could make every open cost what it likes (4 GiB
// and 30 s per open is within the format's bounds). [DefaultKDF] is well
// below it; a vault created with costs above it needs the opener to raise
// the ceiling.
var DefaultMaxKDF = KDFParams{Time: 10, MemoryKiB: 1024 * 1024, Threads: 16}

// CheckCeiling refuses, with [ErrKDFTooCostly], a p whose time, memory or
// thread count is above ceiling's. A zero field of ceiling means the field
// of [DefaultMaxKDF], so the zero ceiling is the default one. It does no
// derivation and costs nothing: call it on a header's costs before
// [DeriveUserKey].
func (p KDFParams) CheckCeiling(ceiling KDFParams) error {
	c := ceiling.orDefaultCeiling()
	switch {
	case p.Time > c.Time:
		return fmt.Errorf("check kdf params: time cost %d is above the ceiling %d: %w", p.Time, c.Time, ErrKDFTooCostly)
	case p.MemoryKiB > c.MemoryKiB:
		return fmt.Errorf("check kdf params: memory %d KiB is above the ceiling %d KiB: %w", p.MemoryKiB, c.MemoryKiB, ErrKDFTooCostly)
	case p.Threads > c.Threads:
		return fmt.Errorf("check kdf params: %d threads is above the ceiling %d: %w", p.Threads, c.Threads, ErrKDFTooCostly)
	}
	return nil
}

// orDefaultCeiling fills the zero fields of a ceiling from DefaultMaxKDF.
func (p KDFParams) orDefaultCeiling() KDFParams {
	if p.Time == 0 {
		p.Time = DefaultMaxKDF.Time
	}
	if p.MemoryKiB == 0 {
		p.MemoryKiB = DefaultMaxKDF.MemoryKiB
	}
	if p.Threads == 0 {
		p.Threads = DefaultMaxKDF.Threads
	}
	return p
}

// Check validates p. Unless allowWeak is set it refuses (with
// [ErrKDFTooWeak]) a time cost below [MinKDFTime] or a memory cost below
// [MinKDFMemoryKiB]; allowWeak exists for tests and must not be exposed to
// end users. It always refuses a time cost of 0, 0 threads, and memory below
// 8 KiB per thread (Argon2's own minimum) with [ErrKDFTooWeak], and a time
// cost above [MaxKDFTime] or memory above [MaxKDFMemoryKiB] with
// [ErrKDFTooCostly], so that a hostile header cannot make a reader spend
// unbounded time or memory. Error messages name the value and the bound.
func (p KDFParams) Check(allowWeak bool) error {
	switch {
	case p.Threads == 0:
		return fmt.Errorf("check kdf params: threads 0 is below the minimum 1: %w", ErrKDFTooWeak)
	case p.Time == 0:
		return fmt.Errorf("check kdf params: time cost 0 is below the minimum 1: %w", ErrKDFTooWeak)
	case p.Time > MaxKDFTime:
		return fmt.Errorf("check kdf params: time cost %d is above the maximum %d: %w", p.Time, MaxKDFTime, ErrKDFTooCostly)
	case p.MemoryKiB > MaxKDFMemoryKiB:
		return fmt.Errorf("check kdf params: memory %d KiB is above the maximum %d KiB: %w", p.MemoryKiB, MaxKDFMemoryKiB, ErrKDFTooCostly)
	case p.MemoryKiB < 8*uint32(p.Threads):
		return fmt.Errorf("check kdf params: memory %d KiB is below the minimum %d KiB for %d threads: %w",
			p.MemoryKiB, 8*uint32(p.Threads), p.Threads, ErrKDFTooWeak)
	}
	if allowWeak {
		return nil
	}
	switch {
	case p.Time < MinKDFTime:
		return fmt.Errorf("check kdf params: time cost %d is below the minimum %d: %w", p.Time, MinKDFTime, ErrKDFTooWeak)
	case p.MemoryKiB < MinKDFMemoryKiB:
		return fmt.Errorf("check kdf params: memory %d KiB is below the minimum %d KiB: %w", p.MemoryKiB, MinKDFMemoryKiB, ErrKDFTooWeak)
	}
	return nil
}

// DeriveUserKey derives a key from a user secret with Argon2id (RFC 9106).
// The salt must be at least [SaltSize] bytes (normally [Header.Salt]).
//
// DeriveUserKey applies only the always-enforced bounds of [KDFParams.Check]
// (as Check(true)), so it can reopen a vault made with cheap test costs;
// callers that create vaults or accept user-chosen costs should call
// p.Check(false) first. It does not judge the strength of the secret.
// DeriveUserKey is deliberately slow and memory hungry.
func DeriveUserKey(secret, salt []byte, p KDFParams) (*Key, error) {
	if len(salt) < SaltSize {
		return nil, fmt.Errorf("derive user key: salt of %d bytes is shorter than %d: %w", len(salt), SaltSize, ErrMalformed)
	}
	if err := p.Check(true); err != nil {
		return nil, fmt.Errorf("derive user key: %w", err)
	}
	out := argon2.IDKey(secret, salt, p.Time, p.MemoryKiB, p.Threads, KeySize)
	k := newKey(out)
	clear(out)
	return k, nil
}
