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

// SetCheckpointEvery makes l store a checkpoint of its summary every n
// entries.
func SetCheckpointEvery(l *Ledger, n uint64) {
	l.sum.mu.Lock()
	l.sum.every = n
	l.sum.mu.Unlock()
}

// Checkpoint runs the background catch-up of l's summary in the caller,
// storing a checkpoint when one is due.
func Checkpoint(ctx context.Context, l *Ledger) error { return l.checkpoint(ctx) }

// WaitBackground waits for the background catch-ups of l's summary started
// so far to end.
func WaitBackground(l *Ledger) { l.sum.bgRuns.Wait() }

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

// ForgeChained appends e after l's head as a Chained entry, with its
// chain MAC, and moves the head past it, as someone holding the data key
// (seal and MAC keys) but no signing key can.
func ForgeChained(ctx context.Context, l *Ledger, e Entry) error {
	hs, _, err := l.loadHead(ctx)
	if err != nil {
		return err
	}
	e.Seq, e.Chained, e.Covered, e.Signature = hs.Seq+1, true, false, nil
	enc, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	mac := l.chainMAC(hs.MAC, e.Seq, enc)
	key := l.entryKey(e.Seq)
	sealed, err := l.sealer.Seal(key, append(enc, mac...))
	if err != nil {
		return err
	}
	if _, err := l.store.Put(ctx, key, sealed); err != nil {
		return err
	}
	h := hs.Head
	h.Seq, h.MAC = e.Seq, mac
	if sealed, err = l.sealHead(h, nil); err != nil {
		return err
	}
	_, err = l.store.Put(ctx, l.headKey, sealed)
	return err
}

// TurnHeadAlone rewrites the head record of l naming owner as the one
// person of the vault ("" none), as someone holding the seal key can.
func TurnHeadAlone(ctx context.Context, l *Ledger, owner string) error {
	hs, _, err := l.loadHead(ctx)
	if err != nil {
		return err
	}
	hs.alone = owner
	sealed, err := l.sealHead(hs.Head, hs.pending)
	if err != nil {
		return err
	}
	_, err = l.store.Put(ctx, l.headKey, sealed)
	return err
}

// HeadAlone returns whom l's head names as the vault's one person.
func HeadAlone(ctx context.Context, l *Ledger) (string, error) {
	hs, _, err := l.loadHead(ctx)
	return hs.alone, err
}
