package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShowcase(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	assert.Equal(t, want, out.String())
}

const want = `invoices, numbered by fiscal year (1 April, Europe/Rome):
  FY2025-26/0001  2026-03-10  Rossi     120.00
  FY2025-26/0002  2026-03-27  Bianchi    80.00
  FY2026-27/0001  2026-04-01  Verdi     300.00
  FY2026-27/0002  2026-04-02  Rossi      45.50
  FY2026-27/0003  2026-04-07  Neri      990.00
  FY2025-26/0003  2026-03-31  Gallo      60.00

closing fiscal year 2025-26:
  FY2025-26 closed=true, last number 3
  an invoice dated 2026-03-30 is refused: sequence "invoices": period FY2025-26 is closed
  dated 2026-04-09 instead: FY2026-27/0004

a credit note for FY2026-27/0002:
  NC-FY2026-27/001  2026-04-20  Rossi     -45.50  corrects FY2026-27/0002
  a credit note that names no invoice is refused: true
  so is one for an invoice never issued (FY2026-27/0009): true

the audit shows the pair on both sides:
  invoices FY2026-27: FY2026-27/0002 is corrected by credit-notes NC-FY2026-27/001
  credit-notes FY2026-27: NC-FY2026-27/001 corrects invoices FY2026-27/0002 ("invoices" period FY2026-27 number 2)

the series of the vault:
  credit-notes  FY2026-27  head 1  open
  invoices      FY2025-26  head 3  closed
  invoices      FY2026-27  head 4  open
`
