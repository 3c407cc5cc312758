package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// Several records in one commit.
//
// PutMany, GetMany and DeleteMany need a store with transactions: they are
// all or nothing there, and refused with stores.ErrNotSupported elsewhere
// (a store without transactions could only apply them one by one, leaving
// half a change behind after a failure). How many records one call can
// carry is bounded by the store's transaction size (badger: about a tenth
// of its memtable; PostgreSQL: no practical bound); a call the store
// refuses as too big writes nothing.

// PutMany stores every value of records under its id, in one commit with
// their ledger entries (in id order, one per record, as Put writes them):
// every record is written, or, on any error, none. Records that exist get
// their next revision and keep the numbers they carry. An invalid id gives
// ErrInvalidName before anything is written; no records is a no-op.
func (c *Collection[T]) PutMany(ctx context.Context, records map[string]T) error {
	ids := slices.Sorted(maps.Keys(records))
	plains := make([][]byte, len(ids))
	if err := c.beginMany(ctx, "put many", ids); err != nil {
		return err
	}
	defer c.v.exit()
	for i, id := range ids {
		plain, err := json.Marshal(records[id])
		if err != nil {
			return fmt.Errorf("put many %s: %s: encode: %w", c.name, id, err)
		}
		plains[i] = plain
	}
	if len(ids) == 0 {
		return nil
	}
	err := c.v.ledger.UpdateKeys(ctx, append(c.keys(ids), c.v.prefix+currentGenKey), func(tx stores.Tx) error {
		for i, id := range ids {
			if err := c.v.writeTx(ctx, tx, c.name, id, plains[i], nil, ledger.Entry{Kind: ledger.RecordPut}); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put many %s: %w", c.name, err)
	}
	return nil
}

// GetMany returns the records at ids, read in one transaction (a
// consistent view: no write commits halfway through it), keyed by id. An id
// with no record is absent from the map; an id given twice is read once.
// A record that fails to open gives ErrTampered and no records.
func (c *Collection[T]) GetMany(ctx context.Context, ids []string) (map[string]Record[T], error) {
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	if err := c.beginMany(ctx, "get many", ids); err != nil {
		return nil, err
	}
	defer c.v.exit()
	out := make(map[string]Record[T], len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	tr := c.v.store.(stores.Transactor) // checked by beginMany
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		return tr.Update(ctx, func(tx stores.Tx) error {
			return c.readMany(tx, ids, out)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("get many %s: %w", c.name, err)
	}
	return out, nil
}

// readMany reads the records at ids in tx into out.
func (c *Collection[T]) readMany(tx stores.Tx, ids []string, out map[string]Record[T]) error {
	clear(out)
	if p, ok := tx.(stores.Prefetcher); ok && len(ids) > 1 {
		if err := p.Prefetch(c.keys(ids)); err != nil {
			return err
		}
	}
	for _, id := range ids {
		it, err := tx.Get(c.v.recordKey(c.name, id))
		if errors.Is(err, stores.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		r, err := c.decodeTx(tx, id, it.Value)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		out[id] = r
	}
	return nil
}

// DeleteMany removes the records at ids in one commit with their ledger
// entries (in id order): all of them, or, on any error, none. An id with no
// record gives an error wrapping ErrNotFound, and nothing is deleted; an
// id given twice gives ErrInvalidArgument.
func (c *Collection[T]) DeleteMany(ctx context.Context, ids []string) error {
	sorted := slices.Sorted(slices.Values(ids))
	if len(slices.Compact(slices.Clone(sorted))) != len(sorted) {
		return fmt.Errorf("delete many %s: an id is given twice: %w", c.name, ErrInvalidArgument)
	}
	if err := c.beginMany(ctx, "delete many", sorted); err != nil {
		return err
	}
	defer c.v.exit()
	if len(sorted) == 0 {
		return nil
	}
	err := c.v.ledger.UpdateKeys(ctx, c.keys(sorted), func(tx stores.Tx) error {
		for _, id := range sorted {
			if err := c.v.writeTx(ctx, tx, c.name, id, nil, nil, ledger.Entry{Kind: ledger.RecordDelete}); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete many %s: %w", c.name, err)
	}
	return nil
}

// beginMany is begin for a call on several ids: it checks the name, every
// id and that the store has transactions, then enters the vault.
func (c *Collection[T]) beginMany(ctx context.Context, op string, ids []string) error {
	if err := c.check(ctx); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	for _, id := range ids {
		if err := checkIDFor(op, id); err != nil {
			return fmt.Errorf("%s %s: %w", op, c.name, err)
		}
	}
	if _, ok := c.v.store.(stores.Transactor); !ok {
		return fmt.Errorf("%s %s: %w", op, c.name, stores.ErrNotSupported)
	}
	if err := c.v.enter(ctx); err != nil {
		return fmt.Errorf("%s %s: %w", op, c.name, err)
	}
	return nil
}

// keys returns the store keys of the records at ids.
func (c *Collection[T]) keys(ids []string) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = c.v.recordKey(c.name, id)
	}
	return keys
}
