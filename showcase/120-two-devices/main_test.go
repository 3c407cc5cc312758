package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// want is the showcase's whole output after its first line (which names
// the hub): the same on every hub.
const want = `
both online:
  laptop sync: pulled 0, pushed 2
  till   sync: pulled 2, pushed 0

both offline:
  laptop renames acme (revision 2) and adds cargo
  till fixes acme's address twice (revision 3)
  till cannot take a number: sequence.ErrOffline (numbers live on the hub)
  till sells espresso       1.20: receipt s-1 pending: true
  till sells croissant      1.50: receipt s-2 pending: true
  till sells orange juice   3.50: receipt s-3 pending: true

back online, sync:
  laptop sync: pulled 0, pushed 2
  till   sync: pulled 1, pushed 4
         conflict on customers/acme (higher-revision-wins): the till's revision 3 beats the hub's revision 2, which the till's ledger records
  laptop sync: pulled 4, pushed 0

the till numbers its receipts: a pass on the hub, then sync:
  pass on the hub: batch 1, numbers 1 to 3, 3 receipts stamped
  till   sync: pulled 3, pushed 0
  laptop sync: pulled 3, pushed 0

where they stand:
  laptop acme: ACME, Milano, via Roma 10; receipts R-0001 R-0002 R-0003
  till   acme: ACME, Milano, via Roma 10; receipts R-0001 R-0002 R-0003
  both hold the same 6 records, at the same revisions: true
  laptop ledger: 11 entries, intact: true
  till   ledger: 12 entries, intact: true
`

func runShowcase(t *testing.T, o options) (hubLine, rest string) {
	t.Helper()
	o.cheapKDF = true // the key derivation is not what this shows
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, o))
	hubLine, rest, ok := strings.Cut(out.String(), "\n")
	require.True(t, ok, out.String())
	return hubLine, rest
}

// TestBadgerHub runs the showcase with a badger folder for a hub: the
// customer converges on the till's higher revision, the receipts are
// R-0001..R-0003 on both devices, and both ledgers verify.
func TestBadgerHub(t *testing.T) {
	hubLine, rest := runShowcase(t, options{})
	assert.Equal(t, "hub: a badger folder; each device on a badger folder of its own", hubLine)
	assert.Equal(t, want, rest)
}

// TestPostgresHub runs it with PostgreSQL for a hub (scripts/with-postgres;
// skipped without a server, failing with CI=true), in a schema of its own.
func TestPostgresHub(t *testing.T) {
	hubLine, rest := runShowcase(t, options{pgURL: pgtest.URL(t), schema: pgtest.Schema(t)})
	assert.Equal(t, "hub: PostgreSQL; each device on a badger folder of its own", hubLine)
	assert.Equal(t, want, rest)
}
