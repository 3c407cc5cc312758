package noydb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/vault"
)

// collectionCalls are the calls of a Collection that read or write
// records, on p-1 (which exists) and new ids, each returning its error.
func collectionCalls(c *vault.Collection[Note]) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"Get":       func(ctx context.Context) error { _, err := c.Get(ctx, "p-1"); return err },
		"GetRecord": func(ctx context.Context) error { _, err := c.GetRecord(ctx, "p-1"); return err },
		"GetMany":   func(ctx context.Context) error { _, err := c.GetMany(ctx, []string{"p-1"}); return err },
		"List": func(ctx context.Context) error {
			for _, err := range c.List(ctx) {
				if err != nil {
					return err
				}
			}
			return nil
		},
		"Put":        func(ctx context.Context) error { return c.Put(ctx, "p-2", Note{Text: "after"}) },
		"PutIf":      func(ctx context.Context) error { return c.PutIf(ctx, "p-1", Note{Text: "after"}, 1) },
		"PutMany":    func(ctx context.Context) error { return c.PutMany(ctx, map[string]Note{"p-3": {}, "p-4": {}}) },
		"Delete":     func(ctx context.Context) error { return c.Delete(ctx, "p-1") },
		"DeleteIf":   func(ctx context.Context) error { return c.DeleteIf(ctx, "p-1", 1) },
		"DeleteMany": func(ctx context.Context) error { return c.DeleteMany(ctx, []string{"p-1"}) },
		"Update": func(ctx context.Context) error {
			_, err := c.Update(ctx, "p-1", func(n *Note) error { n.Text = "after"; return nil })
			return err
		},
	}
}

// TestNarrowedHandleIsRefusedNotTampered: bob, a writer of notes and
// payroll, keeps his handle open while olga narrows him to notes. Every
// call of that handle on payroll, through a collection handle made before
// the narrowing or after it, is refused as a matter of access
// (ErrNotPermitted or ErrNoAccess) on an honest store, never reported as
// ErrTampered, and writes nothing.
func TestNarrowedHandleIsRefusedNotTampered(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			early := vault.CollectionOf[Note](bob, "payroll")
			require.NoError(t, early.Put(ctx, "p-1", Note{Text: "before"}))

			require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
			before := snapshot(t, st)
			// A count reads no record (only keys, which the store shows
			// anyway): no alarm either.
			_, err := early.Count(ctx)
			assert.NotErrorIs(t, err, vault.ErrTampered)
			for when, c := range map[string]*vault.Collection[Note]{"early": early} {
				for call, fn := range collectionCalls(c) {
					err := fn(ctx)
					assert.True(t, errors.Is(err, vault.ErrNotPermitted) || errors.Is(err, vault.ErrNoAccess),
						"%s %s: %v", when, call, err)
					assert.NotErrorIs(t, err, vault.ErrTampered, "%s %s", when, call)
				}
			}
			late := vault.CollectionOf[Note](bob, "payroll")
			for call, fn := range collectionCalls(late) {
				err := fn(ctx)
				assert.True(t, errors.Is(err, vault.ErrNotPermitted) || errors.Is(err, vault.ErrNoAccess),
					"late %s: %v", call, err)
				assert.NotErrorIs(t, err, vault.ErrTampered, "late %s", call)
			}
			assert.Equal(t, before, snapshot(t, st), "a refused call writes nothing")
			verified(t, owner)
		})
	}
}
