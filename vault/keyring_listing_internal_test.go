package vault

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A store whose List of the keyring yields a key outside the keyring's
// prefix (shorter than it) breaks its contract: Verify, People and
// RotateKeys, which read every keyring entry, fail with an error wrapping
// stores.ErrMisbehaving, never panic, and write nothing.
func TestKeyringListingOutsidePrefixIsMisbehaving(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	v := openSigning(t, signingCfg(adv.Store(), "olga", "o"))
	require.NoError(t, v.Grant(ctx, "rita", Secret([]byte("r")), RoleWriter))
	head, err := v.Audit().Head(ctx)
	require.NoError(t, err)

	adv.InjectList("v/team/", stores.Item{Key: "v/x", Value: []byte("x"), Version: 1})
	calls := map[string]func() error{
		"verify": func() error { _, err := v.Audit().Verify(ctx); return err },
		"people": func() error { _, err := v.People(ctx); return err },
		"rotate": func() error { _, err := v.RotateKeys(ctx); return err },
	}
	for name, call := range calls {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		assert.ErrorIs(t, err, stores.ErrMisbehaving, name)
	}
	after, err := v.Audit().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, after, "nothing written")
}
