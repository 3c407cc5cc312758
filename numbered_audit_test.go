package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
)

// A record numbered and then deleted through the handle leaves its number
// orphaned in the series' audit, on either path, in one report shape: taken
// at write time (Numbered.Put online) or given by a pass (a record put in
// line, Settle). The audit is not clean. (Before, on the pass path, the
// audit stayed clean, the number neither orphaned nor voided.)
func TestNumberedDeleteIsOrphanedOnBothPaths(t *testing.T) {
	for name, newStore := range memAndBadger() {
		for _, path := range []string{"online", "pass"} {
			t.Run(name+"/"+path, func(t *testing.T) {
				ctx := context.Background()
				_, v := openSession(t, newStore(t), "")
				c, h := stubsOf(t, v)
				require.True(t, h.Online())
				if path == "online" {
					for _, id := range []string{"a", "b"} {
						_, err := h.Put(ctx, id, Stub{Total: 1})
						require.NoError(t, err)
					}
				} else {
					handOff(t, c, h, "a", "b")
					_, err := h.Settle(ctx)
					require.NoError(t, err)
				}
				require.NoError(t, h.Delete(ctx, "a"))

				a, err := h.Audit(ctx)
				require.NoError(t, err)
				assert.False(t, a.Clean(), "%+v", a)
				assert.Equal(t, []sequence.Run{
					{From: 1, To: 1, State: sequence.StateBound, Collection: "tickets", ID: "a", Orphaned: true},
					{From: 2, To: 2, State: sequence.StateBound, Collection: "tickets", ID: "b"},
				}, a.Online.Runs)
				assert.Equal(t, 1, a.Online.Orphaned)
				assert.Equal(t, 2, a.Numbered())
			})
		}
	}
}
