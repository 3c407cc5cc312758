package vault

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores/memstore"
)

// Every constructor the vault reaches through internal/wire is set, by the
// init function of its package, to the func type the vault asserts it to.
func TestWireHooksAreSet(t *testing.T) {
	hooks := map[string]struct {
		hook any
		ok   bool
	}{}
	check := func(name string, hook any, ok bool) {
		hooks[name] = struct {
			hook any
			ok   bool
		}{hook, ok}
	}
	_, ok := wire.NewLedger.(ledgerFunc)
	check("NewLedger", wire.NewLedger, ok)
	_, ok = wire.NewSequences.(sequencesFunc)
	check("NewSequences", wire.NewSequences, ok)
	_, ok = wire.VaultLedger.(func(*Vault) writableLedger)
	check("VaultLedger", wire.VaultLedger, ok)
	for name, h := range hooks {
		require.NotNil(t, h.hook, "wire.%s is not set", name)
		assert.True(t, h.ok, "wire.%s is a %T", name, h.hook)
	}
	// Hook returns them, and panics with the hook's name for an unset one.
	require.NotPanics(t, func() { newLedger(); newSequences() })
	assert.PanicsWithValue(t, "wire: hook Missing is not set", func() { wire.Hook[ledgerFunc]("Missing", nil) })
	assert.Panics(t, func() { wire.Hook[sequencesFunc]("NewLedger", wire.NewLedger) })

	// What they make works.
	st := memstore.New()
	l := newLedger()(st, forgerSealer{}, forgerMAC{}, "p/", wire.LedgerOptions{})
	require.NotNil(t, l)
	seqs := newSequences()(st, forgerSealer{}, "p/", sequenceConfig{})
	require.NotNil(t, seqs)
	require.NoError(t, seqs.Close())
	require.NoError(t, l.Close())
}
