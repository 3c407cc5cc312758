package vault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/gate"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Vault is an unlocked vault: its collections, sequences and audit ledger. It is
// safe for concurrent use. Obtain one with Open (or noydb.DB.OpenVault).
type Vault struct {
	name   string
	user   string
	store  vaultStore // the store through its checking wrapper (store_checked.go)
	prefix string
	dk     *crypto.Key   // the first generation's data key: internal values, the ledger's and claims' keys
	keys   *genKeys      // the data keys by generation, for records (rotate_keys.go)
	macer  *crypto.MACer // the ledger's chain key, wiped with dk
	claims *crypto.MACer // the sequences' claim key, wiped with dk
	seal   keySealer
	seqs   sequences
	ledger writableLedger
	audit  *Audit // the read-only view of ledger
	pins   *pins.Set

	// hub is the same vault on the hub store (Config.Hub), sharing dk; nil
	// without a hub. sharesKey marks such a hub-side vault: its Close leaves
	// dk to the device vault that owns it.
	hub       *Vault
	sharesKey bool
	// hubless marks a device of a hub opened without Config.Hub: its
	// numbers are on the hub, so it takes none here (see markDevice).
	hubless bool
	// joined, for a vault opened without a hub, is set once a handle of
	// this process opens it with one (hub_joined.go).
	joined *atomic.Bool
	syncs  syncSettings // sync.go
	// me is the vault's person: role, keyring entry, signing key (people.go).
	me *member
	// signAs is the person whose signing key signs the ledger's entries
	// (signing.go): me on a device's vault, the device's me on its hub-side
	// vault.
	signAs  *member
	signers *signerCache // signAs's key, expanded; wiped by Close
	// guard refuses the ledger's commits once signAs was revoked
	// (people_guard.go).
	guard *personGuard
	// rot is the last rotation this handle started (rotate.go).
	rot atomic.Pointer[Rotation]
	// people follows the people entries of ledger (people_ledger.go).
	people peopleIndex
	// curGen caches the current generation value last opened
	// (rotate_current.go).
	curGen atomic.Pointer[currentGen]
	// floor is the generation every record of the store was re-sealed
	// with, as the ledger's KeysResealed entries say (people_ledger.go).
	floor atomic.Uint64
	// binds is what the vault knows of which series are bound to which
	// collections (people_series.go).
	binds seriesBinds
	// sole says whether the keyring held anyone but the vault's person
	// when last listed (sole.go).
	sole atomic.Int32
	// txLocks caches whether the store's transactions lock keys as they
	// read them: 0 not known yet, 1 no, 2 yes (tx.go's locksOnRead).
	txLocks atomic.Int32

	// gate admits the vault's own calls (collections, numbering series)
	// until Close, which waits for those in flight.
	gate      gate.Gate
	closeOnce sync.Once
	closeErr  error
	closeDone atomic.Bool // Close has finished
	exitFn    func()      // v.exit, bound once: numbering calls get it without allocating
}

func newVault(cfg Config, prefix string, dk *crypto.Key, p *pins.Set) *Vault {
	st := checkStore(cfg.Store)
	if cfg.role == RoleReader {
		st = checkStore(readOnly(st)) // a reader writes nothing (keyring_readonly.go)
	}
	v := &Vault{
		name:   cfg.Name,
		user:   cfg.User,
		store:  st,
		prefix: prefix,
		dk:     dk,
		keys:   newGenKeys(map[uint64]*crypto.Key{1: dk}, nil),
		seal:   keySealer{dk: dk, vault: cfg.Name},
		pins:   p,
	}
	v.signers = &signerCache{}
	v.guard = newPersonGuard(v, cfg.User)
	v.exitFn = v.exit
	v.macer = newMACer(dk, "noydb ledger v1")
	v.claims = newMACer(dk, "noydb claim keys v1")
	// Every append passes the check of what it numbers (people_series.go).
	v.ledger = seriesLedger{newLedger()(st, v.seal, v.macer, prefix, v.ledgerOptions()), v}
	v.audit = &Audit{l: v.ledger}
	// Sequences write their counters and ledger entries through the
	// ledger's batches, like record writes, so that writers of this process
	// share commits and never fail one another on the ledger head.
	var seqStore stores.Store = st
	if _, ok := st.(stores.Transactor); ok {
		seqStore = ledgerBatch{Store: st, l: v.ledger, v: v}
	}
	v.seqs = newSequences()(seqStore, v.seal, prefix, sequenceConfig{
		Journal:  journal{l: v.ledger},
		History:  history{l: v.ledger},
		Pins:     p,
		ClaimMAC: v.claims,
		PassHead: v.passHead,
	})
	return v
}

// newMACer returns a MACer for the subkey of dk for label. The MACer keeps
// its own copy of the subkey, so the derived Key is wiped at once.
func newMACer(dk *crypto.Key, label string) *crypto.MACer {
	k := dk.Derive(label)
	defer k.Wipe()
	return crypto.NewMACer(k)
}

// Format implements fmt.Formatter so that no verb (%v, %+v, %#v, %s, %x,
// ...) prints the vault's keys: it shows the name, the user and the store's
// type only.
func (v *Vault) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, v.String())
}

// String describes v without its keys.
func (v *Vault) String() string {
	if v == nil {
		return "vault.Vault(nil)"
	}
	return fmt.Sprintf("vault.Vault{Name: %q, User: %q, Keys: REDACTED, Store: %s}", v.name, v.user, storeType(v.store))
}

// GoString is String, so %#v does not print the keys either.
func (v *Vault) GoString() string { return v.String() }

// ledgerBatch is the vault's store as its sequences see it: transactions
// run through the ledger's batches, sharing commits with the vault's other
// writes.
type ledgerBatch struct {
	stores.Store
	l writableLedger
	v *Vault
}

// Update runs fn in a batch of the ledger. A transaction that committed but
// whose ledger pin was not saved fails with ledger.ErrUnpinned, which the
// sequences take for a commit (the numbers come with the error). The
// limits of a person who is not an owner are brought up to the ledger's
// people first (freshenGrant): the check of what the commit numbers cannot
// read the ledger inside it.
func (s ledgerBatch) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if err := s.v.freshenGrant(ctx); err != nil {
		return err
	}
	return s.l.Update(ctx, fn)
}

// UpdateKeys is Update for a function that reads keys (see
// wire.Ledger.UpdateKeys).
func (s ledgerBatch) UpdateKeys(ctx context.Context, keys []string, fn func(tx stores.Tx) error) error {
	if err := s.v.freshenGrant(ctx); err != nil {
		return err
	}
	return s.l.UpdateKeys(ctx, keys, fn)
}

// Name returns the vault's name.
func (v *Vault) Name() string { return v.name }

// Store returns the store the vault lives on, as the vault reaches it:
// through its checking wrapper, which refuses what a store that breaks its
// contract answers (a listed key outside the prefix asked, a value above
// stores.MaxValueLen: stores.ErrMisbehaving) and keeps the store's
// stores.Transactor and stores.Locker; a reader's refuses every write.
func (v *Vault) Store() stores.Store { return v.store }

// Sequence returns a handle on a gap-free numbered series of this vault,
// scoped to opts.Partition and rendering with opts.Format (the zero Options:
// one counter, plain decimal). Handles for the same series and partition
// share one counter and, within this process, one combining queue. The
// definition fields of opts (format, period, time zone…) are stored with
// the series by its first number and then used by every handle opened
// without them (see sequence.Options). The error is a
// *sequence.ValidationError for an invalid name, partition, format or
// other option.
//
// On a device of a hub (Config.Hub) the counters live on the hub, so that
// the numbers every device takes form one gap-free series: the handle takes
// them there, in hub commits that carry their ledger entries to the hub's
// ledger, and its rollback pins live in the device's state folder. When the
// hub cannot be reached its calls fail fast with an error wrapping
// sequence.ErrOffline (and the cause), taking nothing; write numbered
// records through NumberingOf then, which numbers them later. A vault this
// device has used with a hub and opens without one gives an error wrapping
// sequence.ErrOffline here: its counters are on the hub, and numbers taken
// from the device's own store would collide with them.
func (v *Vault) Sequence(series string, opts sequence.Options) (*sequence.Sequence, error) {
	if v.hub != nil {
		return v.hub.seqs.Sequence(series, opts)
	}
	if v.hubless {
		return nil, fmt.Errorf("sequence %q: %w", series, errHubless)
	}
	return v.seqs.Sequence(series, opts)
}

// Close closes the vault. Every handle obtained from it, before or after
// (collections, sequences, the audit view, numbering series), then refuses with
// ErrClosed. Calls in flight end first: a collection call or a numbering
// call (a pass included) admitted before Close completes, with its ledger
// entries, before Close returns; a Next waiting in a combining queue either
// gets its number, covered by the rollback pins, before Close returns, or
// fails; nothing is written after Close returns. Close then writes the
// rollback pins to the state folder and wipes the data key and the keys
// derived from it from memory. It does not close the store.
//
// Close is idempotent, and safe to call concurrently (every caller returns
// once the vault is closed). It must not be called from inside a call on
// the vault (a Bind or PutNumbered build function, the body of a range
// over a collection's List, a numbering series' Assignments or
// Audit().Read): it would wait for itself.
func (v *Vault) Close() error {
	v.closeOnce.Do(func() {
		// The vault's own calls first: they use the sequences and the
		// ledger. A call they nest is refused from here on, so none waits
		// for this Close.
		v.gate.Close()
		var errs []error
		if v.hub != nil {
			errs = append(errs, v.hub.Close())
		}
		// Outer services next: sequences append to the ledger.
		errs = append(errs, v.seqs.Close(), v.ledger.Close())
		errs = append(errs, v.pins.Close())
		v.signers.wipe()
		v.macer.Wipe()
		v.claims.Wipe()
		if !v.sharesKey {
			v.dk.Wipe()
			v.keys.wipe()
			v.me.wipeSigner()
		}
		v.closeErr = errors.Join(errs...)
		v.closeDone.Store(true)
	})
	return v.closeErr
}

// CloseEnded reports whether Close was called on v and has finished: its
// calls in flight ended, its pins written and its keys wiped.
func (v *Vault) CloseEnded() bool { return v.closeDone.Load() }

// Closed reports whether Close was called on v (it may still be waiting
// for calls in flight). A closed vault stays closed: open it again with
// Open (noydb.DB.OpenVault does so for a vault closed this way).
func (v *Vault) Closed() bool { return v.gate.Closed() }

// enter admits a call of the vault, or returns ErrClosed once Close has
// begun (or ctx's error). A call admitted must call exit when it ends.
// Calls nest: one made from inside another enters again.
func (v *Vault) enter(ctx context.Context) error {
	if !v.gate.Enter() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		v.gate.Exit()
		return err
	}
	return nil
}

// exit ends a call admitted by enter.
func (v *Vault) exit() { v.gate.Exit() }

// enterSeries is enter for a numbering series (deferred.Backend.Enter).
func (v *Vault) enterSeries(ctx context.Context) (exit func(), err error) {
	if err := v.enter(ctx); err != nil {
		return nil, err
	}
	return v.exitFn, nil
}

// openFailed is the error for a sealed value that did not open: ErrClosed
// when the data key was wiped by Close meanwhile, else ErrTampered.
func (v *Vault) openFailed(err error) error {
	if errors.Is(err, crypto.ErrKeyWiped) {
		return ErrClosed
	}
	return ErrTampered
}

// closedIfWiped makes a use of the wiped data key an ErrClosed.
func closedIfWiped(err error) error {
	if err != nil && errors.Is(err, crypto.ErrKeyWiped) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// keySealer seals internal values (counters, ledger entries) bound to the
// vault and the store key they live at.
type keySealer struct {
	dk    *crypto.Key
	vault string
}

func (s keySealer) Seal(key string, plaintext []byte) ([]byte, error) {
	out, err := crypto.SealAt(s.dk, plaintext, s.vault, key)
	return out, closedIfWiped(err)
}

func (s keySealer) Open(key string, sealed []byte) ([]byte, error) {
	out, err := crypto.OpenAt(s.dk, sealed, s.vault, key)
	return out, closedIfWiped(err)
}

// journal records sequence events in the ledger, inside the counter's
// transaction when there is one.
type journal struct{ l writableLedger }

func (j journal) Record(ctx context.Context, tx stores.Tx, events []wire.SequenceEvent) error {
	bp := journalEntries.Get().(*[]ledger.Entry)
	entries := slices.Grow((*bp)[:0], len(events))[:len(events)]
	defer func() {
		// The ledger keeps none of them once the append returned.
		clear(entries)
		*bp = entries[:0]
		journalEntries.Put(bp)
	}()
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

// journalEntries recycles the entries Record builds, one per number.
var journalEntries = sync.Pool{New: func() any { return new([]ledger.Entry) }}

func eventKind(k wire.SequenceEventKind) ledger.Kind {
	switch k {
	case wire.EventSeeded:
		return ledger.SeriesSeeded
	case wire.EventVoided:
		return ledger.NumberVoided
	case wire.EventDefined:
		return ledger.SeriesDefined
	case wire.EventClosed:
		return ledger.PeriodClosed
	default:
		return ledger.NumberAllocated
	}
}

// history reads a series' facts back from the ledger, for Sequence.Audit,
// the check of a counter against the ledger, Claim and Void.
type history struct{ l writableLedger }

// CounterFacts answers the check of a counter from the ledger's summary
// (wire.HistorySummary), which reads only the entries since its position.
func (h history) CounterFacts(ctx context.Context, series string, partition []string) (wire.CounterFacts, error) {
	var out wire.CounterFacts
	head, err := h.l.Facts(ctx, ledger.NumberFactsKind, func(f any) error {
		nf := f.(*ledger.NumberFacts)
		c, sf := nf.Counter(series, partition), nf.Series(series)
		// A period's passes give numbers of its counter too.
		out = wire.CounterFacts{Highest: c.Highest, Closed: c.Closed, Defined: sf.Defined,
			Passes: nf.Passes(series, partition).Assigned}
		return nil
	})
	out.Through = head.Seq
	return out, err
}

// ForeignThrough reports the highest position of a head another writer
// left, as the ledger's commits found it (wire.HistoryWatch).
func (h history) ForeignThrough() uint64 { return h.l.ForeignThrough() }

func (h history) Facts(ctx context.Context, series string, partition []string, after uint64, fn func(wire.SequenceFact) error) (uint64, error) {
	through := after
	for e, err := range h.l.Read(ctx, after+1) {
		if err != nil {
			return after, err
		}
		through = e.Seq
		if e.Kind == ledger.RecordDelete {
			if err := fn(wire.SequenceFact{Seq: e.Seq, Kind: wire.FactRecordDeleted, Collection: e.Collection, ID: e.ID}); err != nil {
				return after, err
			}
			continue
		}
		if e.Kind == ledger.SeriesDefined && e.Series == series {
			// A definition holds for every partition of its series.
			if err := fn(wire.SequenceFact{Seq: e.Seq, Kind: wire.FactDefined}); err != nil {
				return after, err
			}
			continue
		}
		if e.Series != series || !slices.Equal(e.Partition, partition) {
			if e.Kind == ledger.NumberAllocated && e.Reason != "" {
				// A correction of one of series' numbers, taken in another.
				if r, ok := wire.ParseCorrection(e.Reason); ok && r.Series == series && slices.Equal(r.Counter(), partition) {
					f := wire.SequenceFact{Seq: e.Seq, Kind: wire.FactCorrected, Number: r.N, Corrector: wire.CorrectionRef{Series: e.Series, Partition: e.Partition, N: e.Number}}
					if err := fn(f); err != nil {
						return after, err
					}
				}
			}
			continue
		}
		f := wire.SequenceFact{Seq: e.Seq, Number: e.Number}
		switch e.Kind {
		case ledger.NumberAllocated:
			f.Kind, f.RequestID, f.Reason = wire.FactAllocated, e.RequestID, e.Reason
		case ledger.RecordPut, ledger.NumberAssigned:
			// A number carried by a record: taken at write time, or given
			// by a pass (one head for both paths).
			f.Kind, f.Collection, f.ID = wire.FactBound, e.Collection, e.ID
		case ledger.NumberVoided:
			// A counter's void, or a pass's (which names the record).
			f.Kind, f.Reason = wire.FactVoided, e.Reason
		case ledger.SeriesSeeded:
			f.Kind, f.From = wire.FactSeeded, e.From
			if e.Reason == wire.SeedBroughtReason {
				f.Kind, f.RequestID = wire.FactBrought, e.RequestID
			}
		case ledger.PeriodClosed:
			f.Kind = wire.FactClosed
		default:
			continue
		}
		if err := fn(f); err != nil {
			return after, err
		}
	}
	return through, nil
}
