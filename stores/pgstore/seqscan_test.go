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

// TestSeqScanSetInOptions: Open turns enable_seqscan off unless the
// connection string sets it, also the usual way for any server setting, in
// options (-c enable_seqscan=on), which the server applies before Open's own
// startup parameters.
func TestSeqScanSetInOptions(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("options", "-c enable_seqscan=on")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq reads + literally
	dbURL := u.String()
	s, err := pgstore.Open(context.Background(), dbURL, &pgstore.Options{Schema: pgtest.Schema(t)})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	v, err := pgstore.Setting(guardCtx(t), s, "enable_seqscan")
	require.NoError(t, err)
	assert.Equal(t, "on", v, "the connection string's options keep their enable_seqscan")
}
