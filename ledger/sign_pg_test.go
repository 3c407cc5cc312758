package ledger_test

import (
	"testing"

	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// TestSignedCommitsOnPostgres runs the signed commits of batched Update
// calls on PostgreSQL (skipped without NOYDB_PG_URL, failing under
// CI=true): the commit's last entry is signed inside the transaction, and
// when the batch's last closure was dropped, the entry to sign is read
// back from the transaction, which must see its own writes (pgstore keeps
// them until its next round trip).
func TestSignedCommitsOnPostgres(t *testing.T) {
	t.Run("updates", func(t *testing.T) { signedCommitOfUpdates(t, pgtest.Open(t, nil)) })
	t.Run("dropped update", func(t *testing.T) { signedCommitDroppedUpdate(t, pgtest.Open(t, nil)) })
}
