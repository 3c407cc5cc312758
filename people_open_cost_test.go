package noydb_test

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// readCounter counts the values its store yields, read or listed.
type readCounter struct {
	stores.Store
	read atomic.Int64
}

func (c *readCounter) Get(ctx context.Context, key string) (stores.Item, error) {
	c.read.Add(1)
	return c.Store.Get(ctx, key)
}

func (c *readCounter) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for it, err := range c.Store.List(ctx, prefix) {
			c.read.Add(1)
			if !yield(it, err) {
				return
			}
		}
	}
}

// TestOpenReadsThePeopleNotTheLedger: opening checks the opener's keyring
// entry against the ledger's people entries, which the ledger links, so
// an open, People and a person's check read in proportion to the people,
// not to the thousands of record entries around them.
func TestOpenReadsThePeopleNotTheLedger(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
			notes := vault.CollectionOf[Note](owner, "notes")
			for i := range 3000 {
				require.NoError(t, notes.Put(ctx, fmt.Sprint("n", i), Note{Text: "x"}))
			}
			require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
			for i := range 1000 {
				require.NoError(t, notes.Put(ctx, fmt.Sprint("m", i), Note{Text: "y"}))
			}

			// A store value this process has not replayed yet: as a new
			// process opening the vault.
			rc := &readCounter{Store: st}
			rita := openPerson(t, personCfg(rc, "rita", "r"))
			assert.Less(t, rc.read.Load(), int64(64), "values read by an open")
			rc.read.Store(0)
			_, err := rita.People(ctx)
			require.NoError(t, err)
			assert.Less(t, rc.read.Load(), int64(64), "values read by People")
		})
	}
}
