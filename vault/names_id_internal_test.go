package vault

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
)

// badIDs break the documented rule for record ids (valid UTF-8, no
// control character) but not the rule of earlier releases (no NUL).
var badIDs = []string{"two\nlines", "tab\there", "bell\x07", "del\x7f", "bad\xffutf8", "c1\u0085"}

// TestRecordIDsCheckedForNewWritesOnly: every call that writes a new
// revision refuses an id that is not valid UTF-8 or holds a control
// character (ErrInvalidName), writing nothing; a record an earlier
// release stored under such an id stays readable, listable and
// deletable.
func TestRecordIDsCheckedForNewWritesOnly(t *testing.T) {
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openTestVault(t, st)
			notes := CollectionOf[checkedNote](v, "notes")
			seq, err := v.Sequence("n", sequence.Options{})
			require.NoError(t, err)
			nb, err := NumberingOf(notes, "nn", sequence.Options{}, func(*checkedNote, sequence.Serial) {})
			require.NoError(t, err)
			before := storeKeys(t, st)
			for _, id := range badIDs {
				writes := map[string]error{
					"Put":      notes.Put(ctx, id, checkedNote{"x"}),
					"PutIf":    notes.PutIf(ctx, id, checkedNote{"x"}, 0),
					"PutMany":  notes.PutMany(ctx, map[string]checkedNote{id: {"x"}}),
					"Update":   func() error { _, err := notes.Update(ctx, id, func(*checkedNote) error { return nil }); return err }(),
					"Numbered": func() error { _, err := nb.Put(ctx, id, checkedNote{"x"}); return err }(),
					"PutNumbered": func() error {
						_, err := notes.PutNumbered(ctx, id, seq, func(sequence.Serial) (checkedNote, error) { return checkedNote{"x"}, nil })
						return err
					}(),
					"Tx": v.Update(ctx, func(tx *Tx) error { return notes.In(tx).Put(id, checkedNote{"x"}) }),
				}
				for call, err := range writes {
					assert.ErrorIs(t, err, ErrInvalidName, "%s %q", call, id)
				}
			}
			assert.Equal(t, before, storeKeys(t, st), "a refused write writes nothing")

			// Stored by an earlier release (which checked only for NUL).
			for _, id := range badIDs {
				plain, err := json.Marshal(checkedNote{"old"})
				require.NoError(t, err)
				require.NoError(t, v.write(ctx, "notes", id, plain, ledger.Entry{Kind: ledger.RecordPut}))
			}
			for _, id := range badIDs {
				got, err := notes.Get(ctx, id)
				require.NoError(t, err, "%q readable", id)
				assert.Equal(t, "old", got.Text)
			}
			n := 0
			for _, err := range notes.List(ctx) {
				require.NoError(t, err)
				n++
			}
			assert.Equal(t, len(badIDs), n)
			many, err := notes.GetMany(ctx, badIDs[:2])
			require.NoError(t, err)
			assert.Len(t, many, 2)
			require.NoError(t, notes.DeleteMany(ctx, badIDs[:2]))
			require.NoError(t, v.Update(ctx, func(tx *Tx) error { return notes.In(tx).Delete(badIDs[2]) }))
			for _, id := range badIDs[3:] {
				require.NoError(t, notes.Delete(ctx, id), "%q deletable", id)
			}
			n, err = notes.Count(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.NoError(t, rep.Problem)
		})
	}
}
