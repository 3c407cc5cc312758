package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
)

// Signed entries.
//
// A vault whose person has a signing key (a keyring entry of layout
// version 2) signs every commit it makes, once: the last entry of the
// commit is encoded in format version 2 and its last field is the
// signature, by the author's Ed25519 key, of
//
//	sigDomain || len(prevMAC) as one byte || prevMAC || the encoding up to the signature field
//	[ || coverDomain || uvarint n ]   when the commit has n > 0 other entries
//
// where prevMAC is the chain MAC of the entry before (empty for entry 1).
// The commit's other entries are Covered (format version 3: no signature
// field). The encoding holds the entry's position (Seq), so the signature
// covers the entry, its position, the history it follows (through
// prevMAC, the commit's covered entries too) and how many entries before
// it are the commit's; the chain MAC of the stored entry covers the
// signature in turn. Verify accepts a run of covered entries only when the
// entry that ends it is signed by the same author with the run's length:
// covered entries left at the end, followed by an unsigned entry, claiming
// another author or slipped before an honest commit all fail.
//
// Verify replays who may sign what, in ledger order:
//
//   - Genesis: the author of the first signed entry is trusted: with the
//     entry's own SigningKey (the ledger puts the author's key on entry
//     1), else with their keyring entry. So is the self-granted person at
//     the root of the keyring's chain of grants leading to them, as an
//     owner: the vault's creator (who is the genesis author on a vault's
//     own ledger; on a hub's ledger, the first author may be a person the
//     creator granted).
//   - PersonGranted (by an owner) gives the person named in ID the role in
//     Reason and the key in SigningKey from the next entry on; PersonRevoked
//     (by an owner) ends the person's right to sign: any later entry of
//     theirs fails. KeysRenewed (by anyone, about themselves, ending its
//     commit, signed by their current key) replaces the author's key by
//     its SigningKey from the next entry on: the old key signs nothing
//     valid after it. KeyringUpgraded introduces its author's own new key as
//     an owner: accepted only in a ledger that began unsigned or with
//     such an entry (a vault of layout version 1) and for a key the
//     keyring holds, self-granted.
//   - Authors the ledger does not introduce (a person granted on another
//     device, the many authors of a hub's ledger) are taken from the
//     keyring (wire.LedgerOptions.People): a person granted by an owner the
//     replay accepts, with the keyring's key and role.
//   - A person a PersonGranted entry limits to some collections (Partition,
//     Entry.GrantCollections; a person taken from the keyring: its
//     collections) writes entries naming those collections only: an entry
//     with another Collection (a record put or delete, a number assigned,
//     a pull) fails with OutsideCollections. The grant in force at the
//     entry's position decides: a write after a narrowing, by a handle
//     opened before it, fails. A grant recorded before grant entries
//     named collections limits no one.
//   - A limited person's entries that name a series (numbers taken,
//     voided, seeded or assigned, periods closed, definitions, numbered
//     records) name a series bound to one of their collections before the
//     entry: by an owner's SeriesBound entry, or by an owner's own
//     numbered record (RecordPut or NumberAssigned naming the collection
//     and the series: the first one binds its series to its collection);
//     others fail with UnboundSeries. A limited person binds nothing.
//   - Owners and writers write records, numbers, application events and
//     key rotations; only owners change people; anyone changes their own
//     secret (SecretChanged about themselves) and their own recovery codes
//     (an owner anyone's), and records the pulls of a sync on their own
//     device (RecordPulled, RecordPulledDelete, SyncConflict); a reader
//     writes nothing else.
//   - Unsigned entries before the first signed one are accepted (a ledger
//     of a vault of layout version 1); after it, an unsigned entry fails.
//   - Chained entries are accepted inside the window of one person only
//     (below).
//
// One person.
//
// A signature tells apart the people who hold the data key. While one
// person alone has ever held it, the chain MAC already says who wrote an
// entry, so a vault that says so (wire.LedgerOptions.Alone) writes its
// entries Chained (format version 4: no signature) inside a window that
// the ledger's own entries bound:
//
//   - The first entry opens it when it is Chained and carries its
//     author's key (SigningKey): the author is the window's owner, the
//     ledger's genesis author as for a signed first entry.
//   - An entry by anyone else, a grant to anyone else (PersonGranted with
//     another ID), a KeyringUpgraded entry or a renewal of the owner's
//     keys (KeysRenewed: an old secret held the chain key too) closes it; so does a signed
//     commit whose signed entries do not begin with a change of people:
//     a writer that learns of a second person (granted on another
//     device, known to this one by its keyring) signs its next commit,
//     which closes the window where it learned. A one-person vault's own
//     changes of people (the end of its rotation) are signed and leave
//     it open. Once closed it never opens again: a person granted and
//     revoked still knows the chain key.
//   - Changes of people are never Chained: the commit that holds one is
//     signed from its first change of people on (Covered entries and the
//     signed last), so the grant of a second person is signed, and its
//     signature covers, through the MAC of the entry before, the whole
//     chain before it.
//
// Verify accepts a Chained entry only inside the window, by its owner,
// and not after Covered entries (which a signature must end); anywhere
// else it fails as Unsigned, at its position. The head (layout version 3)
// names the window's owner, so that a writer decides without reading the
// ledger; a head that names one wrongly (someone holding the seal key
// after the window closed) only makes the honest writer's next entry
// fail Verify there. A ledger begun before windows existed (its first
// entry signed) never has one: its writers sign every commit. The sync
// feed's verified read (ReadVerified) accepts no Chained entry: a hub's
// ledger is always signed.
//
// What the window leaves to the vault: a person granted on another
// device holds the data key before this device learns of them; until its
// next commit after that (its open, its next sync), they could append a
// Chained entry in the owner's name to this device's store, had they
// access to it. The README's threat table says so.
const sigDomain = "noydb ledger signature v1"

// ErrBadSignature: Verify found an entry whose signature does not hold, or
// that its author could not sign (unsigned after the first signed entry,
// an unknown author, a role that does not allow it, a revoked author).
// Every *SignatureError matches it, and ErrTampered too.
var ErrBadSignature = errors.New("ledger entry signature not accepted")

// SignatureProblem says why Verify did not accept an entry's signature.
type SignatureProblem uint8

// The signature problems.
const (
	// BadSignature: the signature is not the author's key's over the entry.
	BadSignature SignatureProblem = iota + 1
	// Unsigned: an unsigned entry after the first signed one.
	Unsigned
	// UnknownSigner: the author has no key the ledger or keyring vouches for.
	UnknownSigner
	// NotPermitted: the author's role does not allow the entry.
	NotPermitted
	// Revoked: the author was revoked before the entry.
	Revoked
	// KeyMismatch: the keyring holds another signing key for a person than
	// the ledger introduced (Seq is the introducing entry).
	KeyMismatch
	// OutsideCollections: the author, limited to some collections at the
	// entry's position, wrote an entry naming another collection.
	OutsideCollections
	// UnboundSeries: the author, limited to some collections at the
	// entry's position, wrote an entry naming a series no owner bound to
	// any of them.
	UnboundSeries
)

var problemNames = [...]string{
	BadSignature:       "bad signature",
	Unsigned:           "unsigned entry after signed ones",
	UnknownSigner:      "unknown signer",
	NotPermitted:       "not permitted to the author's role",
	Revoked:            "author revoked",
	KeyMismatch:        "keyring signing key differs from the ledger's",
	OutsideCollections: "collection not among the author's",
	UnboundSeries:      "series not bound to the author's collections",
}

// String names the problem.
func (p SignatureProblem) String() string {
	if p >= BadSignature && p <= UnboundSeries {
		return problemNames[p]
	}
	return fmt.Sprintf("problem(%d)", uint8(p))
}

// SignatureError reports an entry Verify did not accept as signed by its
// author. It matches ErrBadSignature and ErrTampered.
type SignatureError struct {
	// Seq is the entry's position.
	Seq uint64
	// Actor is the entry's author (for KeyMismatch, the person).
	Actor string
	// Problem says what is wrong.
	Problem SignatureProblem
}

// Error describes the entry and the problem.
func (e *SignatureError) Error() string {
	return fmt.Sprintf("ledger: entry %d by %q: %s", e.Seq, e.Actor, e.Problem)
}

// Is reports whether target is ErrBadSignature or ErrTampered.
func (e *SignatureError) Is(target error) bool {
	return target == ErrBadSignature || target == ErrTampered
}

// signedMessage is what the signature of an entry covers (see above),
// followed, when the entry ends a commit of several entries, by
// coverDomain and the number of Covered entries before it in the commit:
// so Covered entries put before an honest commit by someone holding the
// data key are not vouched for by its signature.
func signedMessage(b []byte, prev, fields []byte, covered uint64) []byte {
	b = append(b, sigDomain...)
	b = append(b, byte(len(prev)))
	b = append(b, prev...)
	b = append(b, fields...)
	if covered > 0 {
		b = append(b, coverDomain...)
		b = codec.AppendUvarint(b, covered)
	}
	return b
}

// coverDomain separates the count of Covered entries in a signed message.
const coverDomain = "covers"

// signEntry encodes e signed by the ledger's signer, whose key is pub,
// after the entry whose MAC is prev. Entry 1 carries the author's key.
func (l *ledger) signEntry(e *Entry, pub, prev []byte, covered uint64) ([]byte, error) {
	e.Signature = nil
	if e.Seq == 1 && e.SigningKey == nil {
		e.SigningKey = pub
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	b := e.appendFields(make([]byte, 0, e.encodedLen()+signatureSize+64), entryVersionSigned)
	msg := signedMessage(make([]byte, 0, len(sigDomain)+1+len(prev)+len(b)+len(coverDomain)+codec.MaxVarintLen), prev, b, covered)
	sig, err := l.signer.Sign(msg)
	if err != nil {
		return nil, fmt.Errorf("ledger: sign entry %d: %w", e.Seq, err)
	}
	if len(sig) != signatureSize {
		return nil, fmt.Errorf("ledger: signer returned %d bytes (want %d)", len(sig), signatureSize)
	}
	e.Signature = sig
	return codec.AppendBytes(b, sig), nil
}

// signer is a person as the replay of Verify knows them.
type signer struct {
	pub     []byte
	role    string
	revoked bool
	at      uint64 // the entry that introduced the key (0: the keyring)
	// cols are the collections the person is limited to (nil: all).
	cols []string
	// more are further keys that sign for the person (see sigJob.more).
	more [][]byte
}

// verifier replays the people of a ledger and checks each entry's
// signature, on a pool of workers.
type verifier struct {
	dir map[string]wire.LedgerPerson
	// binds holds, by series, the collections owners bound it to.
	binds map[string][]string
	known map[string]*signer
	// named holds, by person, the signing keys the ledger's people
	// entries named for them so far (granted or revoked).
	named map[string][][]byte
	// laterKeys holds, by person, the keys the ledger's people entries
	// named for them, with their positions; retry, the signature checks
	// finish makes again with them (see finish).
	laterKeys map[string][]keyAt
	retry     []sigJob
	signed    bool // a signed entry was seen
	legacy    bool // entry 1 was unsigned or an upgrade: the ledger began in layout version 1
	pending   []sigJob
	// openSeq and openActor: the first of the Covered entries since the
	// last signed one (0: none), and their author.
	openSeq   uint64
	openActor string
	// openPeople: the first of those entries changes people.
	openPeople bool
	// win is the person the window of Chained entries is open for ("":
	// closed): see "One person".
	win string
	// lastCovered and lastPeople: the first Covered entry of the commit
	// the signed entry just checked ends (0: none), and whether it
	// changes people.
	lastCovered uint64
	lastPeople  bool
	jobs        chan []sigJob
	wg          sync.WaitGroup

	mu  sync.Mutex
	bad *SignatureError // the first bad signature found by a worker
}

type sigJob struct {
	seq   uint64
	actor string
	pub   []byte
	msg   []byte
	sig   []byte
	// alt, when set, is the author's key of a grant the ledger has not
	// recorded yet (verifier.unrecorded): the signature holds with pub or
	// with it.
	alt []byte
	// later: the author was taken from the keyring at this position (see
	// verifier.finish).
	later bool
	// more are further keys that may sign instead (a renewal the ledger
	// does not record, see verifier.check).
	more [][]byte
}

// sigBatch is how many signatures a worker takes at a time: one batch
// equation (batchsig.go). The doublings of a batch are shared by its
// signatures: 256 cost about 5% less per signature than 64
// (BenchmarkBatchVerify).
const sigBatch = 256

func newVerifier(dir map[string]wire.LedgerPerson) *verifier {
	v := &verifier{dir: dir, known: map[string]*signer{}, named: map[string][][]byte{}}
	workers := runtime.GOMAXPROCS(0)
	v.jobs = make(chan []sigJob, 2*workers)
	for range workers {
		v.wg.Go(func() {
			keys := batchKeys{}
			for batch := range v.jobs {
				checkSigs(batch, keys, func(err *SignatureError) { v.failIn(batch, err) })
			}
		})
	}
	return v
}

// checkSigs checks the signatures of batch, at once when they all hold,
// and calls fail for each one ed25519.Verify rejects.
func checkSigs(batch []sigJob, keys batchKeys, fail func(*SignatureError)) {
	if batchVerify(batch, keys) {
		return
	}
	// Which signatures fail, as ed25519.Verify finds them.
	for _, j := range batch {
		if !ed25519.Verify(j.pub, j.msg, j.sig) && (j.alt == nil || !ed25519.Verify(j.alt, j.msg, j.sig)) &&
			!slices.ContainsFunc(j.more, func(k []byte) bool { return ed25519.Verify(k, j.msg, j.sig) }) {
			fail(&SignatureError{Seq: j.seq, Actor: j.actor, Problem: BadSignature})
		}
	}
}

func (v *verifier) fail(err *SignatureError) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.bad == nil || err.Seq < v.bad.Seq {
		v.bad = err
	}
}

// failIn is fail for the signature of a job of batch, unless the job's
// author was taken from the keyring (sigJob.later): that one is checked
// again by finish, with the keys the ledger names for them later.
func (v *verifier) failIn(batch []sigJob, err *SignatureError) {
	for _, j := range batch {
		if j.later && j.seq == err.Seq && j.actor == err.Actor {
			v.mu.Lock()
			v.retry = append(v.retry, j)
			v.mu.Unlock()
			return
		}
	}
	v.fail(err)
}

// finish waits for the signature checks and returns the first failure.
//
// A commit whose author the ledger had not introduced at its position is
// checked with their keyring entry's key; when that fails, with the keys a
// later people entry of the ledger names for them (granted or revoked,
// by an owner): they wrote before the ledger heard of them (their grant
// reached the hub's ledger after their first entries there), then were
// revoked and granted again, so that the keyring names the new key only.
func (v *verifier) finish() *SignatureError {
	if len(v.pending) > 0 {
		v.jobs <- v.pending
		v.pending = nil
	}
	close(v.jobs)
	v.wg.Wait()
	for _, j := range v.retry {
		d := v.dir[j.actor]
		if !slices.ContainsFunc(v.laterKeys[j.actor], func(k keyAt) bool {
			return k.seq > j.seq && ed25519.Verify(k.key, j.msg, j.sig)
		}) && !slices.ContainsFunc(append(slices.Clone(d.Renewed), d.SigningKey), func(k []byte) bool {
			return len(k) == signingKeySize && ed25519.Verify(k, j.msg, j.sig)
		}) {
			v.fail(&SignatureError{Seq: j.seq, Actor: j.actor, Problem: BadSignature})
		}
	}
	return v.bad
}

// keyAt is a signing key a people entry at seq names.
type keyAt struct {
	key []byte
	seq uint64
}

// check replays entry r, whose predecessor's MAC is prev: it checks at
// once what depends on the order (unsigned entries, the author's right to
// sign the entry) and queues the signature check.
func (v *verifier) check(r record, prev []byte) *SignatureError {
	e := &r.entry
	if bad := v.checkSigned(r, prev); bad != nil {
		return bad
	}
	v.window(e)
	return nil
}

// chained checks e, a Chained entry: inside the window of its author (or
// opening it: the ledger's first entry, with its author's key), after no
// Covered entry, and no change of people (those are always signed).
func (v *verifier) chained(e *Entry) *SignatureError {
	switch {
	case v.openSeq != 0:
		// Covered entries no signature vouches for.
		return &SignatureError{Seq: v.openSeq, Actor: v.openActor, Problem: Unsigned}
	case isPeopleKind(e.Kind):
		return &SignatureError{Seq: e.Seq, Actor: e.Actor, Problem: Unsigned}
	case e.Seq == 1:
		if len(e.SigningKey) != signingKeySize {
			return &SignatureError{Seq: e.Seq, Actor: e.Actor, Problem: Unsigned}
		}
	case v.win == "" || e.Actor != v.win:
		return &SignatureError{Seq: e.Seq, Actor: e.Actor, Problem: Unsigned}
	}
	return nil
}

// window moves the window of Chained entries past e, an entry that check
// accepted.
func (v *verifier) window(e *Entry) {
	if e.Seq == 1 {
		v.win = genesisOwner(e)
	}
	if closesWindow(e, v.win) {
		v.win = ""
	}
	if len(e.Signature) == 0 {
		return // Chained; Covered (the commit's signature decides); or unsigned, of layout version 1
	}
	first := isPeopleKind(e.Kind)
	if v.lastCovered != 0 {
		first = v.lastPeople
	}
	if !first {
		v.win = ""
	}
}

// checkSigned is check for an entry that is not Chained.
func (v *verifier) checkSigned(r record, prev []byte) *SignatureError {
	e := &r.entry
	v.lastCovered, v.lastPeople = 0, false
	if e.Chained {
		if bad := v.chained(e); bad != nil {
			return bad
		}
	} else if len(e.Signature) == 0 && !e.Covered {
		if e.Seq == 1 {
			v.legacy = true
		}
		if v.openSeq != 0 {
			return &SignatureError{Seq: v.openSeq, Actor: v.openActor, Problem: Unsigned}
		}
		if v.signed {
			return &SignatureError{Seq: e.Seq, Actor: e.Actor, Problem: Unsigned}
		}
		return nil
	}
	if e.Seq == 1 && e.Kind == KeyringUpgraded && e.ID == e.Actor {
		// A vault of layout version 1 upgraded before its first entry:
		// its ledger begins signed, but its other people's entries are
		// of version 1 too, and upgrade later.
		v.legacy = true
	}
	fail := func(p SignatureProblem) *SignatureError {
		return &SignatureError{Seq: e.Seq, Actor: e.Actor, Problem: p}
	}
	s := v.author(e)
	// A grant of the author's that the ledger has not recorded (yet):
	// the entry may be signed under it rather than the one the ledger
	// holds, or when the ledger holds none.
	alt := v.unrecorded(e.Actor, s)
	if alt == nil && s != nil && !s.revoked {
		// A renewal of the author's keys this ledger does not record
		// (made on another device: the hub's ledger records it), which
		// the keyring's chain of renewals vouches for (each signed by the
		// key it replaced): its new key signs too.
		if d, ok := v.dir[e.Actor]; ok && len(d.SigningKey) == signingKeySize && heldBefore(d, s.pub) {
			alt = &signer{pub: d.SigningKey, role: s.role, cols: s.cols,
				more: keysAfter(append(slices.Clone(d.Renewed), d.SigningKey), s.pub)}
		}
	}
	problem := v.allowed(s, e)
	if alt != nil && v.allowed(alt, e) != 0 {
		alt = nil
	}
	if problem != 0 && alt != nil {
		s, alt, problem = alt, nil, 0
	}
	if problem != 0 {
		return fail(problem)
	}
	v.bind(s.role, e)
	v.signed = true
	if e.Chained {
		return nil // the chain vouches for it: no signature to check
	}
	if e.Covered {
		// The signature of the commit's last entry will vouch for it: by
		// the same author.
		if v.openSeq == 0 {
			v.openSeq, v.openActor, v.openPeople = e.Seq, e.Actor, isPeopleKind(e.Kind)
		} else if e.Actor != v.openActor {
			return fail(BadSignature)
		}
		v.apply(e)
		return nil
	}
	var covered uint64
	if v.openSeq != 0 {
		if e.Actor != v.openActor {
			// The covered entries claim another author than the signer.
			return &SignatureError{Seq: v.openSeq, Actor: v.openActor, Problem: BadSignature}
		}
		covered = e.Seq - v.openSeq
		v.lastCovered, v.lastPeople = v.openSeq, v.openPeople
		v.openSeq, v.openActor, v.openPeople = 0, "", false
	}
	enc := r.enc()
	fields := enc[:len(enc)-1-signatureSize]
	job := sigJob{seq: e.Seq - covered, actor: e.Actor, pub: s.pub,
		msg: signedMessage(nil, prev, fields, covered), sig: e.Signature}
	if alt != nil {
		job.alt, job.more = alt.pub, alt.more
	}
	job.later = s.at == 0
	v.pending = append(v.pending, job)
	if len(v.pending) == sigBatch {
		v.jobs <- v.pending
		v.pending = make([]sigJob, 0, sigBatch)
	}
	v.apply(e)
	return nil
}

// allowed returns the problem of e by s (nil: no signer found), 0 when s
// may write it.
func (v *verifier) allowed(s *signer, e *Entry) SignatureProblem {
	switch {
	case s == nil || (len(s.pub) != signingKeySize && !s.revoked):
		return UnknownSigner
	case s.revoked:
		return Revoked
	case !permitted(s.role, e):
		return NotPermitted
	case s.cols != nil && e.Collection != "" && !slices.Contains(s.cols, e.Collection):
		return OutsideCollections
	case s.cols != nil && e.Series != "" && !v.bound(e.Series, s.cols):
		return UnboundSeries
	}
	return 0
}

// unrecorded returns the author name as the keyring holds them when its
// key is one the ledger has not named for them so far, granted by an
// owner the replay accepts: a grant made on a device after the last one
// this ledger records of them (granted again after a revocation), which
// reaches the ledger with that device's next sync, after the entries the
// person signed with it meanwhile (their handle brought the keyring entry
// to the hub). nil when there is none, or it is s's.
func (v *verifier) unrecorded(name string, s *signer) *signer {
	d, ok := v.dir[name]
	if !ok || d.Root || len(d.SigningKey) != signingKeySize || (s != nil && bytes.Equal(s.pub, d.SigningKey)) {
		return nil
	}
	if slices.ContainsFunc(v.named[name], func(k []byte) bool { return bytes.Equal(k, d.SigningKey) }) {
		return nil
	}
	g := v.vouched(d.GrantedBy, 1)
	if g == nil || g.revoked || g.role != roleOwner {
		return nil
	}
	return &signer{pub: d.SigningKey, role: d.Role, cols: limit(d.Collections)}
}

// name records that the ledger's entry at seq named key as the person's.
func (v *verifier) name(person string, key []byte, seq uint64) {
	if len(key) > 0 {
		v.named[person] = append(v.named[person], key)
		if v.laterKeys == nil {
			v.laterKeys = map[string][]keyAt{}
		}
		v.laterKeys[person] = append(v.laterKeys[person], keyAt{key: key, seq: seq})
	}
}

// bound reports whether series is bound to one of cols.
func (v *verifier) bound(series string, cols []string) bool {
	for _, c := range v.binds[series] {
		if slices.Contains(cols, c) {
			return true
		}
	}
	return false
}

// bind records the binding e makes, written by an author of role: an
// owner's SeriesBound entry, or an owner's numbered record (the first one
// binds its series to its collection).
func (v *verifier) bind(role string, e *Entry) {
	if role != roleOwner || e.Series == "" || e.Collection == "" {
		return
	}
	switch e.Kind {
	case SeriesBound, RecordPut, NumberAssigned:
	default:
		return
	}
	if slices.Contains(v.binds[e.Series], e.Collection) {
		return
	}
	if v.binds == nil {
		v.binds = map[string][]string{}
	}
	v.binds[e.Series] = append(v.binds[e.Series], e.Collection)
}

// author returns who signs e: known to the replay, the genesis, a
// KeyringUpgraded self-introduction, or vouched for by the keyring. It
// returns nil for an author none of these accounts for.
func (v *verifier) author(e *Entry) *signer {
	if s := v.known[e.Actor]; s != nil {
		return s
	}
	// The key a PersonGranted or PersonRevoked entry names is its
	// person's, not its author's (unless they are one).
	// A KeysRenewed entry's is the key that replaces its author's.
	self := len(e.SigningKey) > 0 && e.Kind != KeysRenewed && (e.Kind != PersonGranted && e.Kind != PersonRevoked || e.ID == e.Actor)
	d, inDir := v.dir[e.Actor]
	if !v.signed {
		// The genesis: its author is trusted, and so is the root of the
		// keyring's chain of grants that leads to them (the vault's
		// creator, on a hub's ledger whose first author is someone else).
		if self {
			role, cols := roleOwner, []string(nil)
			if inDir && (bytes.Equal(d.SigningKey, e.SigningKey) || bytes.Equal(firstKey(d), e.SigningKey)) {
				role, cols = d.Role, d.Collections
			}
			s := v.introduce(e.Actor, e.SigningKey, role, e.Seq)
			s.cols = limit(cols)
			if inDir && !d.Root {
				v.anchor(d.GrantedBy)
			}
			return s
		}
		v.anchor(e.Actor)
	}
	if e.Kind == KeyringUpgraded && e.ID == e.Actor && self && v.legacy &&
		inDir && d.Root && bytes.Equal(d.SigningKey, e.SigningKey) {
		return v.introduce(e.Actor, e.SigningKey, roleOwner, e.Seq)
	}
	return v.vouched(e.Actor, 0)
}

// anchor accepts, as an owner, the self-granted person at the root of the
// keyring's chain of grants through name.
func (v *verifier) anchor(name string) {
	for range len(v.dir) + 1 {
		if v.known[name] != nil {
			return
		}
		d, ok := v.dir[name]
		if !ok {
			return
		}
		if d.Root {
			v.introduce(name, firstKey(d), roleOwner, 0)
			return
		}
		name = d.GrantedBy
	}
}

// vouched returns the keyring's person name when an owner the replay
// accepts granted them (depth bounds a chain of grants).
func (v *verifier) vouched(name string, depth int) *signer {
	if s := v.known[name]; s != nil {
		return s
	}
	d, ok := v.dir[name]
	if !ok || d.Root || depth > len(v.dir) {
		return nil
	}
	g := v.vouched(d.GrantedBy, depth+1)
	if g == nil || g.revoked || g.role != roleOwner {
		return nil
	}
	// The keyring's revocation has no position in this ledger: the person
	// keeps signing here until a PersonRevoked entry of this ledger.
	s := v.introduce(name, firstKey(d), d.Role, 0)
	s.cols = limit(d.Collections)
	return s
}

// limit returns the collections a person is limited to, nil for all.
func limit(cols []string) []string {
	if len(cols) == 0 {
		return nil
	}
	return slices.Clone(cols)
}

// firstKey is the first signing key d's person held since their grant:
// a ledger that records their renewals (KeysRenewed) leads from it to
// SigningKey. One that does not (it began after a renewal) has their
// commits signed by a later key: finish checks those again with every key
// of d.
func firstKey(d wire.LedgerPerson) []byte {
	if len(d.Renewed) > 0 {
		return d.Renewed[0]
	}
	return d.SigningKey
}

// heldBefore reports whether key is one the keyring says d's person held
// before a renewal (d.Renewed).
func heldBefore(d wire.LedgerPerson, key []byte) bool {
	return slices.ContainsFunc(d.Renewed, func(k []byte) bool { return bytes.Equal(k, key) })
}

func (v *verifier) introduce(name string, pub []byte, role string, at uint64) *signer {
	s := &signer{pub: pub, role: role, at: at}
	v.known[name] = s
	return s
}

// apply records the change of people e makes, from the next entry on.
func (v *verifier) apply(e *Entry) {
	switch e.Kind {
	case PersonGranted:
		// The collections the grant limits the person to (none: all of
		// them, or a grant recorded before grant entries named them).
		cols, _, _ := e.GrantCollections()
		v.known[e.ID] = &signer{pub: e.SigningKey, role: e.Reason, at: e.Seq, cols: limit(cols)}
		v.name(e.ID, e.SigningKey, e.Seq)
	case PersonRevoked:
		// It ends the person's grant. One the replay took from the
		// keyring (at 0) whose key it does not name was made after the
		// grant it ends, on a device whose Sync records it later: the
		// revoked key is theirs, not the keyring's (see unrecorded).
		s := v.known[e.ID]
		switch {
		case s == nil:
			v.known[e.ID] = &signer{revoked: true, at: e.Seq}
		case s.at == 0 && len(e.SigningKey) > 0 && len(s.pub) > 0 && !bytes.Equal(e.SigningKey, s.pub):
			v.known[e.ID] = &signer{pub: e.SigningKey, revoked: true, at: e.Seq}
		default:
			s.revoked = true
		}
		if len(e.SigningKey) == 0 && s != nil {
			v.name(e.ID, s.pub, e.Seq)
		}
		v.name(e.ID, e.SigningKey, e.Seq)
	case KeyringUpgraded:
		v.known[e.ID] = &signer{pub: e.SigningKey, role: roleOwner, at: e.Seq}
		v.name(e.ID, e.SigningKey, e.Seq)
	case KeysRenewed:
		// permitted checked the author is the person: from the next
		// entry on, only the new key signs for them (a new signer: the
		// queued check of this entry keeps the old key).
		if s := v.known[e.ID]; s != nil && !s.revoked {
			v.known[e.ID] = &signer{pub: e.SigningKey, role: s.role, at: e.Seq, cols: s.cols}
		}
		v.name(e.ID, e.SigningKey, e.Seq)
	}
}

// keyring compares the keys the ledger introduced with the keyring's.
func (v *verifier) keyring() *SignatureError {
	var first *SignatureError
	for name, s := range v.known {
		d, ok := v.dir[name]
		if !ok || s.at == 0 || s.pub == nil || s.revoked || bytes.Equal(d.SigningKey, s.pub) || heldBefore(d, s.pub) {
			continue // a renewal this ledger does not record: see check
		}
		if first == nil || s.at < first.Seq {
			first = &SignatureError{Seq: s.at, Actor: name, Problem: KeyMismatch}
		}
	}
	return first
}

// Role names, as PersonGranted entries hold them (vault.Role.String).
const (
	roleOwner  = "owner"
	roleWriter = "writer"
	roleReader = "reader"
)

// permitted reports whether a person of role may author e.
func permitted(role string, e *Entry) bool {
	switch e.Kind {
	case PersonGranted, PersonRevoked, SeriesBound:
		return role == roleOwner
	case KeyringUpgraded:
		return role == roleOwner && e.ID == e.Actor
	case SecretChanged:
		return e.ID == e.Actor
	case KeysRenewed:
		// Anyone's own renewal, ending its commit (signed by the key it
		// replaces), naming a key.
		return e.ID == e.Actor && !e.Covered && len(e.SigningKey) == signingKeySize
	case RecoveryCodesIssued, RecoveryCodeUsed, RecoveryCodesRevoked:
		// A person's own recovery codes, or an owner's doing (revoking a
		// person revokes their codes).
		return e.ID == e.Actor || role == roleOwner
	case RecordPulled, RecordPulledDelete, SyncConflict:
		// What a sync applied on the author's own device, from a hub that
		// accepted it: a reader's device pulls too. These entries change
		// no record of the hub and vouch for no one else's.
		return role == roleOwner || role == roleWriter || role == roleReader
	}
	return role == roleOwner || role == roleWriter
}

// verifySigned is Verify with the signature replay: the walk runs as
// Verify's, each entry is replayed in order, and the first problem of
// either kind, by position, is the one reported. progress, when not nil,
// gets the count of entries walked after each one (see VerifyProgress).
func (l *ledger) verifySigned(ctx context.Context, progress func(entries uint64)) (Report, error) {
	var dir map[string]wire.LedgerPerson
	if l.people != nil {
		var err error
		if dir, err = l.people(ctx); err != nil {
			return Report{}, fmt.Errorf("verify ledger: keyring: %w", err)
		}
	}
	v := newVerifier(dir)
	var (
		rep    Report
		sigErr *SignatureError
	)
	// The walk decodes the entries whole (not skimmed): the replay needs
	// their authors, kinds and people fields, and the parallel walk
	// decodes on its workers.
	// The people entries' links, checked once the head is known.
	var links []Entry
	head, err := l.walk(ctx, 1, false, func(r record, prev []byte) bool {
		if sigErr = v.check(r, prev); sigErr != nil {
			return false
		}
		if isPeopleKind(r.entry.Kind) {
			links = append(links, Entry{Seq: r.entry.Seq, Kind: r.entry.Kind, From: r.entry.From})
		}
		rep.Entries++
		if progress != nil {
			progress(rep.Entries)
		}
		return true
	})
	rep.Head = head
	if sigErr == nil && err == nil && v.openSeq != 0 {
		// Covered entries no signature vouches for.
		sigErr = &SignatureError{Seq: v.openSeq, Actor: v.openActor, Problem: Unsigned}
	}
	bad := v.finish()
	var linkErr error
	if err == nil && sigErr == nil {
		st := &PeopleState{}
		for _, e := range links {
			if linkErr = st.link(e, head.linkFrom); linkErr != nil {
				break
			}
		}
		if linkErr == nil {
			linkErr = st.checkHeadLink(head)
		}
	}
	switch {
	case bad != nil && (linkErr == nil || bad.Seq <= tamperSeq(linkErr)):
		err = bad
	case sigErr != nil:
		err = sigErr
	case linkErr != nil:
		err = linkErr
		var te *TamperError
		if errors.As(linkErr, &te) {
			rep.Entries = te.Seq - 1
		}
	case err == nil:
		if km := v.keyring(); km != nil && l.people != nil {
			rep.Problem, rep.FirstBad = km, km.Seq
			return rep, km
		}
	}
	return rep.finish(err)
}

// One signature per commit.
//
// The entries a commit appends are all written by the ledger's own
// author, so the ledger signs only the last of them: the others are
// encoded Covered (without a signature field), and the signature of the
// last covers them through the chain, since the signed message holds the
// MAC of the entry before the last. Verify accepts a run of Covered
// entries only when an entry of the same author, signed, ends it.

// coverEntry encodes e, to be appended by the ledger's signer whose key is
// pub, as a Covered entry. Entry 1 carries the author's key.
func (l *ledger) coverEntry(e *Entry, pub, dst []byte) ([]byte, error) {
	e.Signature, e.Covered = nil, true
	if e.Seq == 1 && e.SigningKey == nil {
		e.SigningKey = pub
	}
	return e.AppendBinary(dst)
}

// buildSigned is build for a commit of its own: the last entry is signed.
func (l *ledger) buildSigned(head Head, entries []Entry) ([]record, Head, error) {
	recs, h, err := l.build(head, entries)
	if err != nil {
		return nil, Head{}, err
	}
	return recs, h, l.signLast(recs, h.cover)
}

// signLast signs the last of recs, the entries of one commit, in place,
// when they end with Covered ones from position cover on.
func (l *ledger) signLast(recs []record, cover uint64) error {
	if l.signer == nil || len(recs) == 0 {
		return nil
	}
	last := recs[len(recs)-1]
	if !last.entry.Covered || cover == 0 {
		return nil // the signer has no key, or every entry is Chained: nothing is signed
	}
	signed, err := l.resign(last, last.entry.Seq-cover)
	if err != nil {
		return err
	}
	recs[len(recs)-1] = signed
	return nil
}

// resign returns r, a Covered entry built by this ledger, signed: the last
// entry of a commit, after covered entries of the commit.
func (l *ledger) resign(r record, covered uint64) (record, error) {
	e := r.entry
	e.Covered = false
	plain, err := l.signEntry(&e, l.signer.Public(), r.prev, covered)
	if err != nil {
		return record{}, err
	}
	mac := l.chainMAC(r.prev, e.Seq, plain)
	if len(mac) == 0 || len(mac) > maxMAC {
		return record{}, fmt.Errorf("ledger: MACer returned %d bytes (want 1 to %d)", len(mac), maxMAC)
	}
	return record{entry: e, plain: append(plain, mac...), encLen: len(plain), prev: r.prev}, nil
}

// signCommit signs the last entry of a commit in tx, which moved the head
// from start to end, writes it and returns the head after it. The entry is
// the one putEntries kept unwritten or built last when its MAC is end's (an
// Update closure whose writes were dropped may have built another since),
// else it is read back from tx.
func (l *ledger) signCommit(tx stores.Tx, start, end Head) (Head, error) {
	l.mu.Lock()
	last := l.built
	l.built = record{}
	l.mu.Unlock()
	if pend, ok := l.takeUnwritten(); ok {
		if pend.entry.Seq == end.Seq && bytes.Equal(pend.mac(), end.MAC) {
			last = pend // written once, below, signed
		} else if err := l.putEntry(l.run.tx, pend); err != nil {
			return Head{}, err
		}
	}
	if last.entry.Seq != end.Seq || !bytes.Equal(last.mac(), end.MAC) || last.plain == nil {
		var err error
		if last, err = l.readBack(tx, end.Seq); err != nil {
			return Head{}, err
		}
		if !bytes.Equal(last.mac(), end.MAC) {
			return Head{}, fmt.Errorf("ledger: sign commit: entry %d is not the commit's last", end.Seq)
		}
		switch {
		case end.Seq-1 == start.Seq:
			last.prev = start.MAC
		default:
			before, err := l.readBack(tx, end.Seq-1)
			if err != nil {
				return Head{}, err
			}
			last.prev = before.mac()
		}
	}
	if !last.entry.Covered {
		return end, nil // signed already
	}
	signed, err := l.resign(last, end.Seq-end.cover)
	if err != nil {
		return Head{}, err
	}
	if err := l.putEntry(tx, signed); err != nil {
		return Head{}, err
	}
	h := end
	h.MAC = bytes.Clone(signed.mac())
	return h, nil
}

// readBack reads and decodes the entry at seq as tx holds it.
func (l *ledger) readBack(tx stores.Tx, seq uint64) (record, error) {
	key := l.entryKey(seq)
	it, err := tx.Get(key)
	if err != nil {
		return record{}, fmt.Errorf("ledger: sign commit: read entry %d: %w", seq, err)
	}
	return l.openEntry(key, seq, it.Value, false)
}

// HeadSigned reports whether the ledger's last entry, read through get
// (a commit's reads, or plain reads of the ledger's store), is signed
// (itself, or covered by its commit's signature). Once one commit is
// signed every later one must be (Verify fails an unsigned entry after a
// signed one), so a writer without a signing key (a person whose keyring
// entry is of layout version 1) asks this before it appends. An empty
// ledger is not signed.
func (l *ledger) HeadSigned(get func(key string) (stores.Item, error)) (bool, error) {
	it, err := get(l.headKey)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	hs, err := l.openHead(it.Value)
	if err != nil || hs.Seq == 0 {
		return false, err
	}
	last := record{}
	if n := len(hs.pending); n > 0 {
		last = hs.pending[n-1] // committed, not yet written at its key
	} else {
		key := l.entryKey(hs.Seq)
		it, err := get(key)
		if err != nil {
			return false, fmt.Errorf("ledger: read entry %d: %w", hs.Seq, err)
		}
		if last, err = l.openEntry(key, hs.Seq, it.Value, false); err != nil {
			return false, err
		}
	}
	return last.entry.Signature != nil || last.entry.Covered || last.entry.Chained, nil
}

// HeadPeople returns, from the head read through get, the position a
// replay of the ledger's people entries must have read through to know
// them all: the last people entry (or, when none is linked, the entry
// before the first linked position); the head's own position when the
// head was written before people entries were linked; 0 for an empty
// ledger. Inside a batch the head read is the batch's.
func (l *ledger) HeadPeople(get func(key string) (stores.Item, error)) (uint64, error) {
	it, err := get(l.headKey)
	switch {
	case errors.Is(err, stores.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	h, ok := l.fromToken(it.Value)
	if !ok {
		hs, err := l.openHead(it.Value)
		if err != nil {
			return 0, err
		}
		h = hs.Head
	}
	switch {
	case h.Seq == 0:
		return 0, nil
	case h.linkFrom == 0:
		return h.Seq, nil
	case h.people != 0:
		return h.people, nil
	}
	return h.linkFrom - 1, nil
}

// tamperSeq is the position of a *TamperError (0 for another error).
func tamperSeq(err error) uint64 {
	var te *TamperError
	if errors.As(err, &te) {
		return te.Seq
	}
	return 0
}
