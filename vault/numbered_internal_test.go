package vault

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/numbering"
)

// The constructor package numbering hands the vault through internal/wire
// has the type the vault asserts it to.
func TestWireNumbering(t *testing.T) {
	_, ok := wire.NewNumbering.(func(deferred.Backend, string, numbering.Options) (*numbering.Series, deferred.Hooks, error))
	assert.True(t, ok, "wire.NewNumbering is %T", wire.NewNumbering)
}
