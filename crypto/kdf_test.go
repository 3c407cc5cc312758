package crypto_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

func TestKDFParamsCheck(t *testing.T) {
	const mib = 1024
	ok := crypto.KDFParams{Time: 2, MemoryKiB: 19 * mib, Threads: 1}
	tests := []struct {
		name      string
		p         crypto.KDFParams
		strict    error // Check(false)
		allowWeak error // Check(true)
		mentions  []string
	}{
		{"default", crypto.DefaultKDF, nil, nil, nil},
		{"minimum", ok, nil, nil, nil},
		{"t=1", crypto.KDFParams{Time: 1, MemoryKiB: 19 * mib, Threads: 1}, crypto.ErrKDFTooWeak, nil, []string{"time cost 1", "minimum 2"}},
		{"t=0", crypto.KDFParams{Time: 0, MemoryKiB: 19 * mib, Threads: 1}, crypto.ErrKDFTooWeak, crypto.ErrKDFTooWeak, []string{"time cost 0"}},
		{"m=19MiB-1", crypto.KDFParams{Time: 2, MemoryKiB: 19*mib - 1, Threads: 1}, crypto.ErrKDFTooWeak, nil, []string{"19455", "19456"}},
		{"t=16", crypto.KDFParams{Time: 16, MemoryKiB: 19 * mib, Threads: 1}, nil, nil, nil},
		{"t=17", crypto.KDFParams{Time: 17, MemoryKiB: 19 * mib, Threads: 1}, crypto.ErrKDFTooCostly, crypto.ErrKDFTooCostly, []string{"17", "maximum 16"}},
		{"m=4GiB", crypto.KDFParams{Time: 2, MemoryKiB: 4 * mib * mib, Threads: 1}, nil, nil, nil},
		{"m=4GiB+1KiB", crypto.KDFParams{Time: 2, MemoryKiB: 4*mib*mib + 1, Threads: 1}, crypto.ErrKDFTooCostly, crypto.ErrKDFTooCostly, []string{"4194305", "4194304"}},
		{"m=max", crypto.KDFParams{Time: 2, MemoryKiB: ^uint32(0), Threads: 1}, crypto.ErrKDFTooCostly, crypto.ErrKDFTooCostly, nil},
		{"threads=0", crypto.KDFParams{Time: 2, MemoryKiB: 19 * mib, Threads: 0}, crypto.ErrKDFTooWeak, crypto.ErrKDFTooWeak, []string{"threads 0"}},
		{"threads=255", crypto.KDFParams{Time: 2, MemoryKiB: 19 * mib, Threads: 255}, nil, nil, nil},
		{"m below 8KiB per thread", crypto.KDFParams{Time: 1, MemoryKiB: 31, Threads: 4}, crypto.ErrKDFTooWeak, crypto.ErrKDFTooWeak, []string{"31", "32"}},
		{"cheap test params", cheapKDF, crypto.ErrKDFTooWeak, nil, nil},
		{"zero", crypto.KDFParams{}, crypto.ErrKDFTooWeak, crypto.ErrKDFTooWeak, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(allowWeak bool, want error) {
				err := tt.p.Check(allowWeak)
				if want == nil {
					assert.NoError(t, err, "allowWeak=%v", allowWeak)
					return
				}
				require.ErrorIs(t, err, want, "allowWeak=%v", allowWeak)
				for _, m := range tt.mentions {
					assert.Contains(t, err.Error(), m)
				}
			}
			check(false, tt.strict)
			check(true, tt.allowWeak)
		})
	}
}

func TestDeriveUserKey(t *testing.T) {
	secret := []byte("correct horse battery staple")
	salt := []byte("0123456789abcdef")
	k, err := crypto.DeriveUserKey(secret, salt, cheapKDF)
	require.NoError(t, err)

	again, err := crypto.DeriveUserKey(secret, salt, cheapKDF)
	require.NoError(t, err)
	assert.True(t, sameKey(k, again), "deterministic")

	others := map[string]func() (*crypto.Key, error){
		"secret": func() (*crypto.Key, error) {
			return crypto.DeriveUserKey([]byte("Correct horse battery staple"), salt, cheapKDF)
		},
		"salt": func() (*crypto.Key, error) { return crypto.DeriveUserKey(secret, []byte("0123456789abcdeF"), cheapKDF) },
		"longer salt": func() (*crypto.Key, error) {
			return crypto.DeriveUserKey(secret, append([]byte("0123456789abcdef"), 0), cheapKDF)
		},
		"time": func() (*crypto.Key, error) {
			return crypto.DeriveUserKey(secret, salt, crypto.KDFParams{Time: 2, MemoryKiB: 64, Threads: 1})
		},
		"memory": func() (*crypto.Key, error) {
			return crypto.DeriveUserKey(secret, salt, crypto.KDFParams{Time: 1, MemoryKiB: 72, Threads: 1})
		},
		"threads": func() (*crypto.Key, error) {
			return crypto.DeriveUserKey(secret, salt, crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 2})
		},
	}
	for name, derive := range others {
		o, err := derive()
		require.NoError(t, err, name)
		assert.False(t, sameKey(k, o), "a different %s gives a different key", name)
	}
}

func TestDeriveUserKeyRefuses(t *testing.T) {
	_, err := crypto.DeriveUserKey([]byte("s"), make([]byte, crypto.SaltSize-1), cheapKDF)
	assert.ErrorIs(t, err, crypto.ErrMalformed, "short salt")
	_, err = crypto.DeriveUserKey([]byte("s"), nil, cheapKDF)
	assert.ErrorIs(t, err, crypto.ErrMalformed, "no salt")

	salt := make([]byte, crypto.SaltSize)
	_, err = crypto.DeriveUserKey([]byte("s"), salt, crypto.KDFParams{Time: 0, MemoryKiB: 64, Threads: 1})
	assert.ErrorIs(t, err, crypto.ErrKDFTooWeak)
	_, err = crypto.DeriveUserKey([]byte("s"), salt, crypto.KDFParams{Time: 1, MemoryKiB: 64})
	assert.ErrorIs(t, err, crypto.ErrKDFTooWeak)
	_, err = crypto.DeriveUserKey([]byte("s"), salt, crypto.KDFParams{Time: 17, MemoryKiB: 64, Threads: 1})
	assert.ErrorIs(t, err, crypto.ErrKDFTooCostly)
}

// TestDeriveUserKeyDefault runs the real default cost once (64 MiB).
func TestDeriveUserKeyDefault(t *testing.T) {
	require.NoError(t, crypto.DefaultKDF.Check(false))
	salt := []byte("0123456789abcdef")
	k, err := crypto.DeriveUserKey([]byte("secret"), salt, crypto.DefaultKDF)
	require.NoError(t, err)
	cheap, err := crypto.DeriveUserKey([]byte("secret"), salt, cheapKDF)
	require.NoError(t, err)
	assert.False(t, sameKey(k, cheap))
}
