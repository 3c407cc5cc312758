package wire

import (
	"context"
	"iter"
	"time"

	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/stores"
)

// NewLedger is set by package ledger to its constructor, of type
//
//	func(store stores.Store, sealer seal.Sealer, mac seal.MACer, prefix string,
//		opts wire.LedgerOptions) wire.Ledger[ledger.Entry, ledger.Head, ledger.Report]
//
// which returns the writable ledger stored in store under prefix+"_ledger/"
// (see package ledger). It does no I/O; sealer and mac must stay the same
// for the life of the ledger.
var NewLedger any

// VaultLedger is set by package vault to a func of type
//
//	func(v *vault.Vault) wire.Ledger[ledger.Entry, ledger.Head, ledger.Report]
//
// returning the writable ledger of v. It exists for the tests of this
// module that must drive a vault's ledger directly (a batch of the ledger
// held open, entries the vault itself would never write); the SDK's own
// code never uses it, and users cannot: this package is internal.
var VaultLedger any

// LedgerMaxBatchBytes bounds the encoded size of the entries of one append
// to the ledger (one Append or AppendTx call): a larger one fails, writing
// nothing. The vault's writers size what they append below it (a numbering
// pass's step, a sequence's batch of events, an application's event).
const LedgerMaxBatchBytes = 1 << 20

// LedgerOptions configures a vault's ledger. The zero value means the
// documented defaults.
type LedgerOptions struct {
	// Actor is written into entries appended without one (the vault's user).
	Actor string
	// Now stamps entries appended with a zero Time; nil means time.Now.
	Now func() time.Time
	// MaxAttempts bounds the optimistic retries of one commit; 0 means
	// cas.DefaultMaxAttempts (16). It is the one retry budget of a vault's
	// writes: Vault.Update, record writes and numbers that commit with
	// their entries are bounded by it, and nothing retries around it.
	MaxAttempts int
	// Pins, if set, remembers outside the store the furthest head this
	// device has seen, so that a store serving an older ledger is caught.
	// The vault sets it to its rollback pins.
	Pins pins.Ledger
	// Signer, if set, signs every commit the ledger makes, once, on its
	// last entry (the vault's person's signing key). A Signer whose Public returns nil signs
	// nothing: the person has no signing key yet.
	Signer LedgerSigner
	// Alone, if set, reports whether the vault knows of no person but the
	// ledger's own (Actor) who ever held its data key. While it says so,
	// and the ledger's own entries say the same (no grant to anyone else,
	// no entry by anyone else), the ledger writes its entries Chained,
	// unsigned: the chain MAC, which only that person could compute, says
	// who wrote them (package ledger, sign.go). Once it says otherwise,
	// the next commit is signed, and every later one. It must be cheap
	// and must not block: it is asked inside commits.
	Alone func() bool
	// People, if set, is called by Verify for the people the vault's
	// keyring knows (checked), by name: the signing keys and roles of the
	// authors the ledger itself does not introduce.
	People func(ctx context.Context) (map[string]LedgerPerson, error)
	// Guard, if set, is asked in every commit that appends entries,
	// before the commit is signed and written, whether the ledger may
	// still write as its person: get reads a key as the commit sees it
	// (through the commit's transaction; on a store without transactions,
	// a plain read just before the compare-and-swap). An error refuses
	// the whole commit, which writes nothing, and is returned to every
	// call of the commit. The vault checks there that its person was not
	// revoked (or revoked and granted again) since the handle opened. An
	// error that is a cas.Hold holds the commit back instead: the ledger
	// waits for it outside the transaction, with its store's lock
	// released, and commits the calls again, with the whole retry budget
	// (the vault holds its commits back while it renews its person's
	// signing key).
	// The values get returns may be the store's own bytes
	// (stores.GetShared): Guard must never modify them.
	Guard func(get func(key string) (stores.Item, error)) error
	// GuardKeys are the keys Guard reads: on a store whose reads are round
	// trips (stores.Prefetcher) they are fetched, and locked, with the
	// ledger's head, in the same step.
	GuardKeys []string
}

// LedgerSigner signs ledger entries as one person.
type LedgerSigner interface {
	// Public returns the Ed25519 public key, nil when there is none.
	Public() []byte
	// Sign returns the Ed25519 signature of msg.
	Sign(msg []byte) ([]byte, error)
}

// LedgerPerson is a person of a vault's keyring as the ledger's Verify
// sees them.
type LedgerPerson struct {
	// SigningKey is the person's Ed25519 public key.
	SigningKey []byte
	// Renewed are the signing keys the person held since their grant
	// before SigningKey, oldest first (the grant named the first): each
	// renewal (a secret change, a recovery) replaced one.
	Renewed [][]byte
	// Role is "owner", "writer" or "reader".
	Role string
	// Root is true for a person who granted themselves (a vault's
	// creator, an upgraded entry of layout version 1): such a key is
	// trusted only as the ledger's own records allow.
	Root bool
	// Revoked is true for a revoked person.
	Revoked bool
	// GrantedBy is who granted the person (themselves for a Root).
	GrantedBy string
	// Collections are the collections the person is limited to (none:
	// all of them).
	Collections []string
}

// Ledger is the writable audit ledger of a vault (E is ledger.Entry, H
// ledger.Head and R ledger.Report: type parameters, because this package
// cannot import ledger, which imports it). Only the vault holds one; users
// read it through vault.Audit, which has no method that writes. Package
// ledger documents the methods on its unexported implementation; it is
// safe for concurrent use.
type Ledger[E, H, R any] interface {
	// Head returns the ledger's current head.
	Head(ctx context.Context) (H, error)
	// Append records facts: entries as one batch, all or none, at the
	// positions following the head at commit time. Concurrent calls share
	// commits.
	Append(ctx context.Context, entries ...E) (H, error)
	// AppendTx appends entries inside tx, a transaction on the ledger's
	// store (the one Update or UpdateKeys hands its function, or one the
	// caller runs), so they commit or roll back with its other writes.
	AppendTx(ctx context.Context, tx stores.Tx, entries ...E) (H, error)
	// Update runs fn in a transaction of the ledger's store, batched with
	// the other calls waiting, retried on conflict within the budget.
	Update(ctx context.Context, fn func(tx stores.Tx) error) error
	// UpdateKeys is Update for a function that reads keys, prefetched in
	// one step on a store whose reads are round trips.
	UpdateKeys(ctx context.Context, keys []string, fn func(tx stores.Tx) error) error
	// Read yields the entries from position from up to the head, checking
	// the chain as it goes.
	Read(ctx context.Context, from uint64) iter.Seq2[E, error]
	// MACAt returns the chain MAC of the entry at position seq (nil when
	// there is none), which names the ledger up to seq.
	MACAt(ctx context.Context, seq uint64) ([]byte, error)
	// Verify walks the whole ledger and reports what it found.
	Verify(ctx context.Context) (R, error)
	// VerifyProgress is Verify, reporting to progress (when not nil)
	// how many entries it has walked, after each one.
	VerifyProgress(ctx context.Context, progress func(entries uint64)) (R, error)
	// Facts calls fn with the facts of the kind named kind that the
	// ledger's summary keeps (package ledger's FactKind; for
	// ledger.NumberFactsKind, fn gets a *ledger.NumberFacts), brought up
	// to the head first, and returns the head they hold through. fn must
	// only read them, not keep them, and not call the ledger. Never call
	// it inside a transaction of the ledger's store.
	Facts(ctx context.Context, kind string, fn func(facts any) error) (H, error)
	// ForeignThrough returns the highest position of a head that one of
	// the ledger's commits began on without having written it (another
	// writer moved the ledger since this ledger's commit before): see
	// HistoryWatch. One atomic load; callable inside a commit.
	ForeignThrough() uint64
	// HeadSigned reports whether the ledger's last entry, read through
	// get, is signed: a writer without a signing key must not append
	// after it.
	HeadSigned(get func(key string) (stores.Item, error)) (bool, error)
	// HeadPeople returns, from the head read through get, the position a
	// replay of the ledger's people entries must have read through to
	// know them all.
	HeadPeople(get func(key string) (stores.Item, error)) (uint64, error)
	// Close refuses new calls and waits for those in flight.
	Close() error
}
