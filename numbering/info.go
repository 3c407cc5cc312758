package numbering

import (
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

func init() {
	wire.NumberingInfo = info
	wire.NumberingGiven = given
	wire.NumberingPeriods = periodsOf
}

// periodsOf returns the labels of the periods of the series name that had
// records handed off (see wire.NumberingPeriods), in order.
func periodsOf(ctx context.Context, b deferred.Backend, name string) ([]string, error) {
	if err := checkSeries(name); err != nil {
		return nil, fmt.Errorf("%w: a key names series %q: %w", stores.ErrMisbehaving, name, err)
	}
	b.Partition = nil
	s := &Series{b: b, name: name, dir: seriesDir(b, name)}
	return s.periods(ctx)
}

// given reads with get the last number the passes of the series name have
// given, 0 when it has no head (see wire.NumberingGiven). It checks no
// rollback pin: the counter it raises is checked against the ledger.
func given(b deferred.Backend, name string, get func(key string) (stores.Item, error)) (uint64, error) {
	s := &Series{b: b, name: name, dir: seriesDir(b, name)}
	key := s.headKey()
	it, err := get(key)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, s.errorf("head", err)
	}
	p, err := b.Sealer.Open(key, it.Value)
	if err != nil {
		return 0, s.errorf("head", ErrTampered)
	}
	h, err := decodeHead(p)
	if err != nil {
		return 0, s.errorf("head", err)
	}
	return h.last, nil
}

// info reads what a listing of a vault's series shows of the series name:
// the collection it numbers and its stored format ("" when it has none
// yet), and its last number. It takes no lock and writes nothing; the head
// is checked against the rollback pins as every read of it is. With
// b.Partition, it reads the series of that period.
func info(ctx context.Context, b deferred.Backend, name string) (collection, format string, last uint64, err error) {
	if err := checkSeries(name); err != nil {
		return "", "", 0, fmt.Errorf("%w: a key names series %q: %w", stores.ErrMisbehaving, name, err)
	}
	if err := checkPartition(b.Partition); err != nil {
		return "", "", 0, fmt.Errorf("%w: series %q: %w", stores.ErrMisbehaving, name, err)
	}
	s := &Series{b: b, name: name, dir: seriesDir(b, name)}
	h, _, err := s.loadHead(ctx)
	if err != nil {
		return "", "", 0, s.errorf("info", err)
	}
	collection, last = h.collection, h.last
	key := s.configKey()
	it, err := b.Store.Get(ctx, key)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return collection, "", last, nil
	case err != nil:
		return "", "", 0, s.errorf("info", err)
	}
	p, err := b.Sealer.Open(key, it.Value)
	if err != nil {
		return "", "", 0, s.errorf("info", ErrTampered)
	}
	c, err := decodeConfig(p)
	if err != nil {
		return "", "", 0, s.errorf("info", err)
	}
	return c.collection, c.format, last, nil
}
