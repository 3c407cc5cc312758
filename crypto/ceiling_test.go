package crypto_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/crypto"
)

func TestCheckCeiling(t *testing.T) {
	def := crypto.DefaultMaxKDF
	assert.Equal(t, crypto.KDFParams{Time: 10, MemoryKiB: 1 << 20, Threads: 16}, def)
	assert.NoError(t, crypto.DefaultKDF.CheckCeiling(crypto.KDFParams{}), "the default cost is under the default ceiling")
	assert.NoError(t, def.CheckCeiling(crypto.KDFParams{}), "the ceiling itself is accepted")

	for name, p := range map[string]crypto.KDFParams{
		"time":    {Time: def.Time + 1, MemoryKiB: 64, Threads: 1},
		"memory":  {Time: 1, MemoryKiB: def.MemoryKiB + 1, Threads: 1},
		"threads": {Time: 1, MemoryKiB: 8 * 17, Threads: def.Threads + 1},
		"4 GiB":   {Time: 3, MemoryKiB: crypto.MaxKDFMemoryKiB, Threads: 4},
		"t=16":    {Time: crypto.MaxKDFTime, MemoryKiB: 64 * 1024, Threads: 4},
	} {
		assert.ErrorIs(t, p.CheckCeiling(crypto.KDFParams{}), crypto.ErrKDFTooCostly, name)
		assert.NoError(t, p.Check(true), "%s: within the format's bounds, refused only by the ceiling", name)
	}

	// A raised ceiling lets more through; zero fields keep their defaults.
	big := crypto.KDFParams{Time: 12, MemoryKiB: 2 << 20, Threads: 32}
	assert.NoError(t, big.CheckCeiling(big))
	assert.ErrorIs(t, big.CheckCeiling(crypto.KDFParams{Time: 12}), crypto.ErrKDFTooCostly, "memory keeps the default ceiling")
	assert.NoError(t, crypto.KDFParams{Time: 12, MemoryKiB: 64, Threads: 1}.CheckCeiling(crypto.KDFParams{Time: 12}))

	// A lowered ceiling refuses what the default accepts.
	low := crypto.KDFParams{Time: 2, MemoryKiB: 128, Threads: 1}
	assert.ErrorIs(t, crypto.KDFParams{Time: 3, MemoryKiB: 64, Threads: 1}.CheckCeiling(low), crypto.ErrKDFTooCostly)
	assert.ErrorIs(t, crypto.KDFParams{Time: 1, MemoryKiB: 256, Threads: 1}.CheckCeiling(low), crypto.ErrKDFTooCostly)
	assert.ErrorIs(t, crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 2}.CheckCeiling(low), crypto.ErrKDFTooCostly)
	assert.NoError(t, low.CheckCeiling(low))
}
