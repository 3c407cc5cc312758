package vault

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Vault is an unlocked vault: its collections, sequences and ledger. It is
// safe for concurrent use. Obtain one with Open (or noydb.DB.OpenVault).
type Vault struct {
	name   string
	user   string
	store  stores.Store
	prefix string
	dk     *crypto.Key
	seal   keySealer
	seqs   *sequence.Service
	ledger *ledger.Ledger
	pins   *pins.Set
	closed atomic.Bool
}

func newVault(cfg Config, prefix string, dk *crypto.Key, p *pins.Set) *Vault {
	v := &Vault{
		name:   cfg.Name,
		user:   cfg.User,
		store:  cfg.Store,
		prefix: prefix,
		dk:     dk,
		seal:   keySealer{dk: dk, vault: cfg.Name},
		pins:   p,
	}
	v.ledger = ledger.New(cfg.Store, v.seal, crypto.NewMACer(dk.Derive("noydb ledger v1")), prefix, ledger.Options{Actor: cfg.User, Pins: p})
	// Sequences write their counters and ledger entries in the ledger's
	// turn, like record writes, so that writers of this process never fail
	// one another on the ledger head.
	var seqStore stores.Store = cfg.Store
	if _, ok := cfg.Store.(stores.Transactor); ok {
		seqStore = ledgerTurn{Store: cfg.Store, l: v.ledger}
	}
	v.seqs = sequence.NewService(seqStore, v.seal, prefix, sequence.Config{
		Journal:  journal{l: v.ledger},
		History:  history{l: v.ledger},
		Pins:     p,
		ClaimMAC: crypto.NewMACer(dk.Derive("noydb claim keys v1")),
	})
	return v
}

// ledgerTurn is the vault's store as its sequences see it: transactions run
// in the ledger's turn.
type ledgerTurn struct {
	stores.Store
	l *ledger.Ledger
}

func (s ledgerTurn) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.l.Update(ctx, fn)
}

// Name returns the vault's name.
func (v *Vault) Name() string { return v.name }

// Store returns the store the vault lives on.
func (v *Vault) Store() stores.Store { return v.store }

// Ledger returns the vault's audit ledger.
func (v *Vault) Ledger() *ledger.Ledger { return v.ledger }

// Sequence returns a handle on a gap-free numbered series of this vault.
// Handles for the same series and partition share one counter and, within
// this process, one combining queue. The error is a *sequence.ValidationError
// for an invalid name, partition or format.
func (v *Vault) Sequence(series string, opts ...sequence.Options) (*sequence.Sequence, error) {
	return v.seqs.Sequence(series, opts...)
}

// Close marks the vault closed (later calls return ErrClosed) and writes its
// rollback pins to the state folder. It does not close the store.
func (v *Vault) Close() error {
	if v.closed.Swap(true) {
		return nil
	}
	return v.pins.Close()
}

func (v *Vault) check(ctx context.Context) error {
	if v.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// keySealer seals internal values (counters, ledger entries) bound to the
// vault and the store key they live at.
type keySealer struct {
	dk    *crypto.Key
	vault string
}

func (s keySealer) Seal(key string, plaintext []byte) ([]byte, error) {
	return crypto.SealAt(s.dk, plaintext, s.vault, key)
}

func (s keySealer) Open(key string, sealed []byte) ([]byte, error) {
	return crypto.OpenAt(s.dk, sealed, s.vault, key)
}

// journal records sequence events in the ledger, inside the counter's
// transaction when there is one.
type journal struct{ l *ledger.Ledger }

func (j journal) Record(ctx context.Context, tx stores.Tx, events []sequence.Event) error {
	entries := make([]ledger.Entry, len(events))
	for i, e := range events {
		entries[i] = ledger.Entry{
			Kind:      eventKind(e.Kind),
			Series:    e.Series,
			Partition: e.Partition,
			Number:    e.Number,
			From:      e.From,
			RequestID: e.RequestID,
			Reason:    e.Reason,
		}
	}
	var err error
	if tx != nil {
		_, err = j.l.AppendTx(ctx, tx, entries...)
	} else {
		_, err = j.l.Append(ctx, entries...)
	}
	return err
}

func eventKind(k sequence.EventKind) ledger.Kind {
	switch k {
	case sequence.Seeded:
		return ledger.SeriesSeeded
	case sequence.Voided:
		return ledger.NumberVoided
	default:
		return ledger.NumberAllocated
	}
}

// history reads a series' facts back from the ledger, for Sequence.Audit,
// the check of a counter against the ledger, Claim and Void.
type history struct{ l *ledger.Ledger }

func (h history) Facts(ctx context.Context, series string, partition []string, after uint64, fn func(sequence.Fact) error) (uint64, error) {
	through := after
	for e, err := range h.l.Read(ctx, after+1) {
		if err != nil {
			return after, err
		}
		through = e.Seq
		if e.Kind == ledger.RecordDelete {
			if err := fn(sequence.Fact{Seq: e.Seq, Kind: sequence.FactRecordDeleted, Collection: e.Collection, ID: e.ID}); err != nil {
				return after, err
			}
			continue
		}
		if e.Series != series || !slices.Equal(e.Partition, partition) {
			continue
		}
		f := sequence.Fact{Seq: e.Seq, Number: e.Number}
		switch e.Kind {
		case ledger.NumberAllocated:
			f.Kind, f.RequestID = sequence.FactAllocated, e.RequestID
		case ledger.RecordPut:
			f.Kind, f.Collection, f.ID = sequence.FactBound, e.Collection, e.ID
		case ledger.NumberVoided:
			f.Kind, f.Reason = sequence.FactVoided, e.Reason
		case ledger.SeriesSeeded:
			f.Kind, f.From = sequence.FactSeeded, e.From
		default:
			continue
		}
		if err := fn(f); err != nil {
			return after, err
		}
	}
	return through, nil
}
