package ledger_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// edSigner is a person's signing key in the tests.
type edSigner struct{ priv ed25519.PrivateKey }

// newSigner derives a key from a one-byte seed, so that runs agree.
func newSigner(b byte) *edSigner {
	return &edSigner{priv: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))}
}

func (s *edSigner) Public() []byte { return s.priv.Public().(ed25519.PublicKey) }

func (s *edSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// People of the signing tests: olga the first owner, will a writer, rita
// a reader, mal an outsider who holds the data key (the test's seal and
// MAC keys) but was never granted.
var (
	olga = newSigner(1)
	will = newSigner(2)
	rita = newSigner(3)
	mal  = newSigner(4)
)

// signedOn is a ledger on st whose entries actor signs with s (nil: an
// unsigned writer), and whose Verify takes authors the ledger does not
// introduce from dir.
func signedOn(st stores.Store, actor string, s *edSigner, dir map[string]wire.LedgerPerson) *ledger.Ledger {
	opts := ledger.Options{Actor: actor, Now: func() time.Time { return fixedNow }}
	if s != nil {
		opts.Signer = s
	}
	opts.People = func(context.Context) (map[string]wire.LedgerPerson, error) { return dir, nil }
	return ledger.New(st, newSealer(nil), macer{macKey}, prefix, opts)
}

// peopleSetup writes entry 1 (olga's genesis), the grants of will
// (writer) and rita (reader), and one record of will: 4 entries.
func peopleSetup(t *testing.T, st stores.Store) (owner, writer *ledger.Ledger) {
	t.Helper()
	ctx := context.Background()
	owner = signedOn(st, "olga", olga, nil)
	_, err := owner.Append(ctx, fact(1))
	require.NoError(t, err)
	_, err = owner.Append(ctx,
		ledger.Entry{Kind: ledger.PersonGranted, ID: "will", Reason: "writer", SigningKey: will.Public()},
		ledger.Entry{Kind: ledger.PersonGranted, ID: "rita", Reason: "reader", SigningKey: rita.Public()})
	require.NoError(t, err)
	writer = signedOn(st, "will", will, nil)
	_, err = writer.Append(ctx, fact(2))
	require.NoError(t, err)
	return owner, writer
}

// sigProblem verifies l and asserts that it fails at seq with problem.
func sigProblem(t *testing.T, l *ledger.Ledger, seq uint64, problem ledger.SignatureProblem) {
	t.Helper()
	rep, err := l.Verify(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, ledger.ErrBadSignature)
	assert.ErrorIs(t, err, ledger.ErrTampered)
	var se *ledger.SignatureError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, seq, se.Seq)
	assert.Equal(t, problem, se.Problem, "%v", err)
	assert.Equal(t, seq, rep.FirstBad)
	assert.Equal(t, seq-1, rep.Entries)
	assert.Equal(t, err, rep.Problem)
}

// TestSignedEntries: every entry is signed by its author, Verify accepts
// the honest ledger, and each kind of forgery by someone holding the data
// key (seal and MAC keys: the chain recomputed) but not the right signing
// key fails with a *SignatureError at the forged position.
func TestSignedEntries(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, writer := peopleSetup(t, st)
		rep := verifyClean(t, owner, 4)
		assert.True(t, rep.OK())
		es := readAll(t, owner, 1)
		require.Len(t, es, 4)
		assert.Equal(t, olga.Public(), es[0].SigningKey, "entry 1 introduces its author")
		for _, e := range es {
			// Signed, or covered by the signature of its commit's last entry.
			assert.True(t, len(e.Signature) == ed25519.SignatureSize || e.Covered && len(e.Signature) == 0, "entry %d", e.Seq)
		}
		assert.Len(t, es[3].Signature, ed25519.SignatureSize, "the last entry ends a commit")
		assert.Equal(t, "will", es[3].Actor)
		_ = writer
	})

	cases := []struct {
		name    string
		forge   func(t *testing.T, st stores.Store)
		problem ledger.SignatureProblem
	}{
		{"unsigned, with the data key", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "olga", nil, nil).Append(ctx, fact(9))
			require.NoError(t, err)
		}, ledger.Unsigned},
		{"signed in the owner's name with another key", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "olga", mal, nil).Append(ctx, fact(9))
			require.NoError(t, err)
		}, ledger.BadSignature},
		{"signed by someone never granted", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "mal", mal, nil).Append(ctx, fact(9))
			require.NoError(t, err)
		}, ledger.UnknownSigner},
		{"a record by a reader", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "rita", rita, nil).Append(ctx, fact(9))
			require.NoError(t, err)
		}, ledger.NotPermitted},
		{"a grant by a writer", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "will", will, nil).Append(ctx,
				ledger.Entry{Kind: ledger.PersonGranted, ID: "mal", Reason: "owner", SigningKey: mal.Public()})
			require.NoError(t, err)
		}, ledger.NotPermitted},
		{"a revocation by a writer", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "will", will, nil).Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "olga"})
			require.NoError(t, err)
		}, ledger.NotPermitted},
		{"someone else's secret changed", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "rita", rita, nil).Append(ctx, ledger.Entry{Kind: ledger.SecretChanged, ID: "will"})
			require.NoError(t, err)
		}, ledger.NotPermitted},
		{"by a person granted without a key", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "olga", olga, nil).Append(ctx, ledger.Entry{Kind: ledger.PersonGranted, ID: "kim", Reason: "writer"})
			require.NoError(t, err)
			_, err = signedOn(st, "kim", mal, nil).Append(ctx, fact(9))
			require.NoError(t, err)
		}, ledger.UnknownSigner},
		{"a self-introduction after the genesis", func(t *testing.T, st stores.Store) {
			_, err := signedOn(st, "mal", mal, nil).Append(ctx,
				ledger.Entry{Kind: ledger.KeyringUpgraded, ID: "mal", Reason: "owner", SigningKey: mal.Public()})
			require.NoError(t, err)
		}, ledger.UnknownSigner},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st stores.Store) {
				owner, _ := peopleSetup(t, st)
				c.forge(t, st)
				// An honest entry after the forgery does not hide it.
				_, err := owner.Append(ctx, fact(10))
				require.NoError(t, err)
				at := uint64(5)
				if c.name == "by a person granted without a key" {
					at = 6 // the grant itself is the owner's right
				}
				sigProblem(t, owner, at, c.problem)
			})
		})
	}
}

// TestSignedReaderSecret: a reader may record the change of their own
// secret, and nothing else.
func TestSignedReaderSecret(t *testing.T) {
	st := storeKinds[0].make()
	owner, _ := peopleSetup(t, st)
	_, err := signedOn(st, "rita", rita, nil).Append(context.Background(), ledger.Entry{Kind: ledger.SecretChanged, ID: "rita"})
	require.NoError(t, err)
	verifyClean(t, owner, 5)
}

// TestSignedRevocation: a revoked person's entries before the revocation
// verify; the first one after it fails.
func TestSignedRevocation(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, writer := peopleSetup(t, st)
		_, err := writer.Append(ctx, fact(3))
		require.NoError(t, err)
		_, err = owner.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "will"})
		require.NoError(t, err)
		verifyClean(t, owner, 6)
		_, err = writer.Append(ctx, fact(4)) // a handle opened before the revocation
		require.NoError(t, err)
		sigProblem(t, owner, 7, ledger.Revoked)

		// Granted again with a new key: the old key stays refused.
		st2 := storeKinds[0].make()
		owner2, writer2 := peopleSetup(t, st2)
		_, err = owner2.Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "will"},
			ledger.Entry{Kind: ledger.PersonGranted, ID: "will", Reason: "writer", SigningKey: mal.Public()})
		require.NoError(t, err)
		_, err = signedOn(st2, "will", mal, nil).Append(ctx, fact(5))
		require.NoError(t, err)
		verifyClean(t, owner2, 7)
		_, err = writer2.Append(ctx, fact(6))
		require.NoError(t, err)
		sigProblem(t, owner2, 8, ledger.BadSignature)
	})
}

// TestSignedLegacy: a ledger of unsigned entries verifies; its first
// signed entry starts the signed part, after which an unsigned entry
// fails; a person of the unsigned era introduces their key with a
// KeyringUpgraded entry that the keyring backs.
func TestSignedLegacy(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		dir := map[string]wire.LedgerPerson{
			"olga": {SigningKey: olga.Public(), Role: "owner", Root: true, GrantedBy: "olga"},
			"otto": {SigningKey: will.Public(), Role: "owner", Root: true, GrantedBy: "otto"},
		}
		old := signedOn(st, "olga", nil, dir)
		appendN(t, old, 3)
		verifyClean(t, old, 3)

		_, err := signedOn(st, "olga", olga, dir).Append(ctx,
			ledger.Entry{Kind: ledger.KeyringUpgraded, ID: "olga", Reason: "owner", SigningKey: olga.Public()})
		require.NoError(t, err)
		_, err = signedOn(st, "otto", will, dir).Append(ctx,
			ledger.Entry{Kind: ledger.KeyringUpgraded, ID: "otto", Reason: "owner", SigningKey: will.Public()})
		require.NoError(t, err)
		_, err = signedOn(st, "otto", will, dir).Append(ctx, fact(7))
		require.NoError(t, err)
		verifyClean(t, old, 6)

		_, err = old.Append(ctx, fact(8))
		require.NoError(t, err)
		sigProblem(t, old, 7, ledger.Unsigned)
	})
}

// TestSignedKeyring: authors the ledger does not introduce (granted on
// another device, the authors of a hub's ledger) are taken from the
// keyring when an owner the replay accepts granted them; a keyring that
// disagrees with the key the ledger introduced fails Verify.
func TestSignedKeyring(t *testing.T) {
	ctx := context.Background()
	st := storeKinds[0].make()
	dir := map[string]wire.LedgerPerson{
		"olga": {SigningKey: olga.Public(), Role: "owner", Root: true, GrantedBy: "olga"},
		"will": {SigningKey: will.Public(), Role: "writer", GrantedBy: "olga"},
		"rita": {SigningKey: rita.Public(), Role: "reader", GrantedBy: "olga"},
		"mal":  {SigningKey: mal.Public(), Role: "owner", Root: true, GrantedBy: "mal"},
	}
	// will writes first, as the first pusher of a hub's ledger does.
	l := signedOn(st, "will", will, dir)
	_, err := l.Append(ctx, fact(1))
	require.NoError(t, err)
	_, err = signedOn(st, "olga", olga, dir).Append(ctx, fact(2))
	require.NoError(t, err)
	verifyClean(t, l, 2)

	// A self-granted keyring entry that is not the genesis vouches for
	// nobody, nor for the people it "granted".
	dir["eve"] = wire.LedgerPerson{SigningKey: rita.Public(), Role: "writer", GrantedBy: "mal"}
	_, err = signedOn(st, "eve", rita, dir).Append(ctx, fact(3))
	require.NoError(t, err)
	sigProblem(t, l, 3, ledger.UnknownSigner)

	// The keyring's key of the genesis author replaced.
	st2 := storeKinds[0].make()
	owner, _ := peopleSetup(t, st2)
	l2 := signedOn(st2, "olga", olga, map[string]wire.LedgerPerson{
		"olga": {SigningKey: mal.Public(), Role: "owner", Root: true, GrantedBy: "olga"},
	})
	_, err = l2.Verify(ctx)
	var se *ledger.SignatureError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, ledger.KeyMismatch, se.Problem)
	assert.Equal(t, uint64(1), se.Seq)
	verifyClean(t, owner, 4)
}

// TestSignedParallel: on a ledger long enough for Verify's parallel walk,
// a forgery is found at its position, at a chunk's first entry (whose
// predecessor's MAC comes from the chunk before) and inside a chunk.
func TestSignedParallel(t *testing.T) {
	ctx := context.Background()
	for _, at := range []int{257, 600} {
		st := storeKinds[0].make()
		owner := signedOn(st, "olga", olga, nil)
		batch := make([]ledger.Entry, 0, 100)
		for i := 1; i < at; i++ {
			batch = append(batch, fact(i))
			if len(batch) == cap(batch) || i == at-1 {
				_, err := owner.Append(ctx, batch...)
				require.NoError(t, err)
				batch = batch[:0]
			}
		}
		_, err := signedOn(st, "olga", mal, nil).Append(ctx, fact(at))
		require.NoError(t, err)
		for i := at + 1; i <= 1500; i += 100 {
			for j := i; j < i+100 && j <= 1500; j++ {
				batch = append(batch, fact(j))
			}
			_, err := owner.Append(ctx, batch...)
			require.NoError(t, err)
			batch = batch[:0]
		}
		sigProblem(t, owner, uint64(at), ledger.BadSignature)
	}
}

// TestSignedCommits: a commit of several entries carries one signature, on
// its last entry, which covers the others; each way of slipping an entry
// into a signed commit, or of leaving covered entries without one, fails.
func TestSignedCommits(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		owner, _ := peopleSetup(t, st)
		_, err := owner.Append(ctx, fact(5), fact(6), fact(7))
		require.NoError(t, err)
		es := readAll(t, owner, 5)
		require.Len(t, es, 3)
		for _, e := range es[:2] {
			assert.True(t, e.Covered, "entry %d", e.Seq)
			assert.Empty(t, e.Signature, "entry %d", e.Seq)
		}
		assert.False(t, es[2].Covered)
		assert.Len(t, es[2].Signature, ed25519.SignatureSize)
		verifyClean(t, owner, 7)
	})

	cases := []struct {
		name    string
		forge   func(t *testing.T, st stores.Store, owner *ledger.Ledger)
		at      uint64
		problem ledger.SignatureProblem
	}{
		{"a covered entry put before an honest commit", func(t *testing.T, st stores.Store, owner *ledger.Ledger) {
			e := fact(9)
			e.Covered = true
			_, err := signedOn(st, "olga", nil, nil).Append(ctx, e)
			require.NoError(t, err)
			_, err = owner.Append(ctx, fact(10))
			require.NoError(t, err)
		}, 5, ledger.BadSignature},
		{"covered entries no signature ends", func(t *testing.T, st stores.Store, owner *ledger.Ledger) {
			e := fact(9)
			e.Covered = true
			_, err := signedOn(st, "olga", nil, nil).Append(ctx, e, e)
			require.NoError(t, err)
		}, 5, ledger.Unsigned},
		{"covered entries, then an unsigned one", func(t *testing.T, st stores.Store, owner *ledger.Ledger) {
			e := fact(9)
			e.Covered = true
			_, err := signedOn(st, "olga", nil, nil).Append(ctx, e, fact(10))
			require.NoError(t, err)
		}, 5, ledger.Unsigned},
		{"a commit whose covered entry claims another author", func(t *testing.T, st stores.Store, owner *ledger.Ledger) {
			e := ledger.Entry{Kind: ledger.PersonGranted, Actor: "olga", ID: "mal", Reason: "owner", SigningKey: mal.Public()}
			_, err := signedOn(st, "will", will, nil).Append(ctx, e, fact(9))
			require.NoError(t, err)
		}, 5, ledger.BadSignature},
		{"a covered entry rewritten with the data key", func(t *testing.T, st stores.Store, owner *ledger.Ledger) {
			_, err := owner.Append(ctx, fact(5), fact(6), fact(7))
			require.NoError(t, err)
			// Re-chain the ledger with entry 6 changed, keeping entry 7's
			// signature: the MAC it signed no longer is the one before it.
			es := readAll(t, owner, 1)
			scratch := memstore.New()
			forger := signedOn(scratch, "olga", nil, nil)
			for _, e := range es {
				if e.Seq == 6 {
					e.ID = "forged"
				}
				_, err := forger.Append(ctx, e)
				require.NoError(t, err)
			}
			for seq := uint64(1); seq <= 7; seq++ {
				put(t, st, entryKey(seq), raw(t, scratch, entryKey(seq)))
			}
			put(t, st, headKey, raw(t, scratch, headKey))
		}, 5, ledger.BadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st stores.Store) {
				owner, _ := peopleSetup(t, st)
				c.forge(t, st, owner)
				sigProblem(t, owner, c.at, c.problem)
			})
		})
	}
}

// TestSignedCommitOfUpdates: the Update calls and appends that share one
// commit of the batch share its one signature, and verify.
func TestSignedCommitOfUpdates(t *testing.T) {
	eachStore(t, signedCommitOfUpdates)
}

func signedCommitOfUpdates(t *testing.T, st stores.Store) {
	ctx := context.Background()
	owner, _ := peopleSetup(t, st)
	_, tx := st.(stores.Transactor) // without transactions: appends only
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			var err error
			switch {
			case !tx && i%2 == 1:
				_, err = owner.Append(ctx, fact(100+i), fact(200+i))
			case i%2 == 0:
				_, err = owner.Append(ctx, fact(100+i))
			default:
				err = owner.Update(ctx, func(tx stores.Tx) error {
					_, err := owner.AppendTx(ctx, tx, fact(100+i), fact(200+i))
					return err
				})
			}
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	es := readAll(t, owner, 5)
	require.Len(t, es, 16+32)
	assert.Len(t, es[len(es)-1].Signature, ed25519.SignatureSize)
	verifyClean(t, owner, 4+16+32)
}

// TestSignedCommitDroppedUpdate: an Update whose closure appended and
// then failed leaves nothing in the commit it shared, whose signature,
// on the last entry kept, verifies.
func TestSignedCommitDroppedUpdate(t *testing.T) {
	for _, sk := range storeKinds {
		st := sk.make()
		if _, ok := st.(stores.Transactor); !ok {
			continue // Update needs transactions
		}
		t.Run(sk.name, func(t *testing.T) { signedCommitDroppedUpdate(t, st) })
	}
}

func signedCommitDroppedUpdate(t *testing.T, st stores.Store) {
	ctx := context.Background()
	errDrop := errors.New("dropped")
	owner, _ := peopleSetup(t, st)
	var wg sync.WaitGroup
	for i := range 48 {
		wg.Go(func() {
			err := owner.Update(ctx, func(tx stores.Tx) error {
				if _, err := owner.AppendTx(ctx, tx, fact(100+i)); err != nil {
					return err
				}
				if i%3 == 2 {
					return errDrop
				}
				return nil
			})
			if i%3 == 2 {
				assert.ErrorIs(t, err, errDrop)
			} else {
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	verifyClean(t, owner, 4+32)

	// The closure that fails is the last of its batch: the entry
	// to sign is read back from the transaction.
	hold, held := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		assert.NoError(t, owner.Update(ctx, func(tx stores.Tx) error {
			close(held)
			<-hold
			_, err := owner.AppendTx(ctx, tx, fact(300))
			return err
		}))
	})
	<-held
	wg.Go(func() {
		assert.NoError(t, owner.Update(ctx, func(tx stores.Tx) error {
			_, err := owner.AppendTx(ctx, tx, fact(301), fact(302))
			return err
		}))
	})
	waitQueued(owner, 1)
	wg.Go(func() {
		assert.ErrorIs(t, owner.Update(ctx, func(tx stores.Tx) error {
			if _, err := owner.AppendTx(ctx, tx, fact(303)); err != nil {
				return err
			}
			return errDrop
		}), errDrop)
	})
	waitQueued(owner, 2)
	close(hold)
	wg.Wait()
	verifyClean(t, owner, 4+32+3)
}

// TestSignedRecoveryCodes: a person's own recovery codes are theirs to
// issue, use and revoke, whatever their role; another's are an owner's.
func TestSignedRecoveryCodes(t *testing.T) {
	ctx := context.Background()
	st := storeKinds[0].make()
	owner, _ := peopleSetup(t, st)
	reader := signedOn(st, "rita", rita, nil)
	for _, k := range []ledger.Kind{ledger.RecoveryCodesIssued, ledger.RecoveryCodeUsed, ledger.RecoveryCodesRevoked} {
		_, err := reader.Append(ctx, ledger.Entry{Kind: k, ID: "rita"})
		require.NoError(t, err)
	}
	_, err := owner.Append(ctx, ledger.Entry{Kind: ledger.RecoveryCodesRevoked, ID: "will"})
	require.NoError(t, err)
	verifyClean(t, owner, 8)
	_, err = reader.Append(ctx, ledger.Entry{Kind: ledger.RecoveryCodesIssued, ID: "will"})
	require.NoError(t, err)
	sigProblem(t, owner, 9, ledger.NotPermitted)
}

// keyless is a Signer for a person without a signing key yet.
type keyless struct{}

func (keyless) Public() []byte              { return nil }
func (keyless) Sign([]byte) ([]byte, error) { return nil, errors.New("keyless: no key") }

// TestSignerWithoutKey: a signer without a key signs nothing, on every
// path of a commit, and the ledger verifies as unsigned.
func TestSignerWithoutKey(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := ledger.New(st, newSealer(nil), macer{macKey}, prefix, ledger.Options{Actor: "olga", Signer: keyless{}})
		_, err := l.Append(ctx, fact(1), fact(2))
		require.NoError(t, err)
		_, err = l.Append(ctx, fact(3))
		require.NoError(t, err)
		for _, e := range readAll(t, l, 1) {
			assert.False(t, e.Covered, "entry %d", e.Seq)
			assert.Empty(t, e.Signature, "entry %d", e.Seq)
		}
		verifyClean(t, l, 3)
	})
}

// TestSignedReaderPulls: a reader's device records the pulls of its
// syncs, signed by the reader; a reader's record, deletion or number is
// still refused.
func TestSignedReaderPulls(t *testing.T) {
	ctx := context.Background()
	st := storeKinds[0].make()
	owner, _ := peopleSetup(t, st)
	reader := signedOn(st, "rita", rita, nil)
	_, err := reader.Append(ctx,
		ledger.Entry{Kind: ledger.RecordPulled, Collection: "notes", ID: "a", Revision: 1, Number: 1},
		ledger.Entry{Kind: ledger.RecordPulledDelete, Collection: "notes", ID: "b", Revision: 2, Number: 2},
		ledger.Entry{Kind: ledger.SyncConflict, Collection: "notes", ID: "c", Revision: 1, Reason: "hub-wins: device lost", Number: 3})
	require.NoError(t, err)
	verifyClean(t, owner, 7)
	for _, e := range []ledger.Entry{
		{Kind: ledger.RecordDelete, Collection: "notes", ID: "a", Revision: 2},
		{Kind: ledger.NumberAllocated, Series: "inv", Number: 1},
		{Kind: ledger.AppEvent, Reason: "login"},
	} {
		st := storeKinds[0].make()
		owner, _ := peopleSetup(t, st)
		_, err := signedOn(st, "rita", rita, nil).Append(ctx, e)
		require.NoError(t, err)
		sigProblem(t, owner, 5, ledger.NotPermitted)
	}
}

// TestSignedCollections: a person limited to some collections by their
// grant (Partition) writes record entries of those only, as the grant in
// force at the entry's position says; a later grant widens or narrows it,
// and a person the ledger does not introduce is held to the keyring's
// collections.
func TestSignedCollections(t *testing.T) {
	ctx := context.Background()
	rec := func(kind ledger.Kind, coll string) ledger.Entry {
		return ledger.Entry{Kind: kind, Collection: coll, ID: "x", Revision: 1, CipherHash: bytes.Repeat([]byte{1}, 32)}
	}
	grant := func(cols ...string) ledger.Entry {
		return ledger.Entry{Kind: ledger.PersonGranted, ID: "will", Reason: "writer", SigningKey: will.Public(), Partition: cols}
	}
	setup := func(t *testing.T) (stores.Store, *ledger.Ledger, *ledger.Ledger) {
		st := storeKinds[0].make()
		owner := signedOn(st, "olga", olga, nil)
		_, err := owner.Append(ctx, fact(1))
		require.NoError(t, err)
		_, err = owner.Append(ctx, grant("memos", "notes"))
		require.NoError(t, err)
		writer := signedOn(st, "will", will, nil)
		_, err = writer.Append(ctx, rec(ledger.RecordPut, "notes"), rec(ledger.RecordDelete, "memos"))
		require.NoError(t, err)
		verifyClean(t, owner, 4)
		return st, owner, writer
	}
	for _, kind := range []ledger.Kind{ledger.RecordPut, ledger.RecordDelete, ledger.NumberAssigned} {
		t.Run("a "+kind.String()+" outside", func(t *testing.T) {
			_, owner, writer := setup(t)
			e := rec(kind, "payroll")
			if kind == ledger.NumberAssigned {
				e = ledger.Entry{Kind: kind, Collection: "payroll", ID: "x", Series: "s", Number: 1}
			}
			_, err := writer.Append(ctx, e)
			require.NoError(t, err)
			sigProblem(t, owner, 5, ledger.OutsideCollections)
		})
	}
	t.Run("a covered entry outside, in a commit", func(t *testing.T) {
		_, owner, writer := setup(t)
		_, err := writer.Append(ctx, rec(ledger.RecordPut, "payroll"), rec(ledger.RecordPut, "notes"))
		require.NoError(t, err)
		sigProblem(t, owner, 5, ledger.OutsideCollections)
	})
	t.Run("widened, then narrowed", func(t *testing.T) {
		_, owner, writer := setup(t)
		_, err := owner.Append(ctx, grant())
		require.NoError(t, err)
		_, err = writer.Append(ctx, rec(ledger.RecordPut, "payroll"))
		require.NoError(t, err)
		verifyClean(t, owner, 6)
		_, err = owner.Append(ctx, grant("notes"))
		require.NoError(t, err)
		_, err = writer.Append(ctx, rec(ledger.RecordPut, "notes"))
		require.NoError(t, err)
		verifyClean(t, owner, 8)
		// A write after the narrowing (a handle opened before it).
		_, err = writer.Append(ctx, rec(ledger.RecordPut, "memos"))
		require.NoError(t, err)
		sigProblem(t, owner, 9, ledger.OutsideCollections)
	})
	t.Run("taken from the keyring", func(t *testing.T) {
		st := storeKinds[0].make()
		dir := map[string]wire.LedgerPerson{
			"olga": {SigningKey: olga.Public(), Role: "owner", Root: true, GrantedBy: "olga"},
			"will": {SigningKey: will.Public(), Role: "writer", GrantedBy: "olga", Collections: []string{"notes"}},
		}
		l := signedOn(st, "will", will, dir)
		_, err := l.Append(ctx, rec(ledger.RecordPut, "notes"))
		require.NoError(t, err)
		_, err = signedOn(st, "olga", olga, dir).Append(ctx, rec(ledger.RecordPut, "payroll"))
		require.NoError(t, err)
		verifyClean(t, l, 2)
		_, err = l.Append(ctx, rec(ledger.RecordPut, "payroll"))
		require.NoError(t, err)
		sigProblem(t, l, 3, ledger.OutsideCollections)
	})
}
