package ledger

import (
	"context"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/internal/wire"
)

// Waiting returns how many calls wait in l's queue for the commit in flight.
func Waiting(l *Ledger) int { return l.q.Waiting() }

// New is the constructor the vault reaches through wire.NewLedger, for the
// tests of this package.
var New = newLedger

// The unexported errors the tests check for.
var (
	ErrStaleHead     = errStaleHead
	ErrBatchTooLarge = errBatchTooLarge
)

// The unexported ledger, its options and the interfaces the constructor
// takes, under the names the tests use.
type (
	Ledger  = ledger
	Options = wire.LedgerOptions
	MACer   = seal.MACer
	Pins    = pins.Ledger
)

// TurnHeadPeople rewrites the head record of l with its people link at
// people, as someone holding the seal key can.
func TurnHeadPeople(ctx context.Context, l *Ledger, people uint64) error {
	hs, _, err := l.loadHead(ctx)
	if err != nil {
		return err
	}
	hs.people = people
	sealed, err := l.sealHead(hs.Head, hs.pending)
	if err != nil {
		return err
	}
	_, err = l.store.Put(ctx, l.headKey, sealed)
	return err
}

// WriteHeadV1 rewrites the head record of l in layout version 1, as a
// release before people links wrote it.
func WriteHeadV1(ctx context.Context, l *Ledger) error {
	hs, _, err := l.loadHead(ctx)
	if err != nil {
		return err
	}
	b := []byte{1}
	b = codec.AppendUvarint(b, hs.Seq)
	b = codec.AppendBytes(b, hs.MAC)
	b = codec.AppendUvarint(b, uint64(len(hs.pending)))
	for _, r := range hs.pending {
		b = codec.AppendBytes(b, r.plain)
	}
	sealed, err := l.sealer.Seal(l.headKey, b)
	if err != nil {
		return err
	}
	_, err = l.store.Put(ctx, l.headKey, sealed)
	return err
}
