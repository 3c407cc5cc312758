package pgstore

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server reads setting names in any case, and dashes for underscores
// in options: a connection string that sets enable_seqscan so is kept, and
// Open adds no second enable_seqscan parameter (which one the server kept
// would then depend on the order pgx sends them in).
func TestSeqScanSetAnySpelling(t *testing.T) {
	for conn, sets := range map[string]bool{
		"postgres://u@h/db":                                      false,
		"postgres://u@h/db?enable_seqscan=on":                    true,
		"postgres://u@h/db?ENABLE_SEQSCAN=on":                    true,
		"postgres://u@h/db?options=-c%20enable_seqscan%3Don":     true,
		"postgres://u@h/db?options=--enable-seqscan%3Don":        true,
		"postgres://u@h/db?options=-c%20Enable_SeqScan%3Don":     true,
		"postgres://u@h/db?options=-c%20geqo%3Doff":              false,
		"postgres://u@h/db?application_name=enable_seqscan_test": false,
	} {
		cfg, err := pgxpool.ParseConfig(conn)
		require.NoError(t, err, conn)
		assert.Equal(t, sets, setsSeqScan(cfg.ConnConfig.RuntimeParams), conn)
	}
}
