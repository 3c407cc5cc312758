package pgstore_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// The server takes setting names in any case and reads dashes in options as
// underscores: so spelt, the connection string's enable_seqscan is kept, on
// every connection (a second parameter of Open's would win or lose by the
// order pgx sends them in, which is a map's).
func TestSeqScanOtherSpellingsKept(t *testing.T) {
	for name, set := range map[string][2]string{
		"upper case":      {"ENABLE_SEQSCAN", "on"},
		"dashed option":   {"options", "--enable-seqscan=on"},
		"mixed in option": {"options", "-c Enable_SeqScan=on"},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(pgtest.URL(t))
			require.NoError(t, err)
			q := u.Query()
			q.Set(set[0], set[1])
			u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
			for range 8 { // each Open sends its parameters in a new order
				s, err := pgstore.Open(context.Background(), u.String(), &pgstore.Options{Schema: pgtest.Schema(t), MaxConns: 1})
				require.NoError(t, err)
				v, err := pgstore.Setting(guardCtx(t), s, "enable_seqscan")
				require.NoError(t, s.Close())
				require.NoError(t, err)
				assert.Equal(t, "on", v)
			}
		})
	}
}
