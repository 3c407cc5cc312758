package vault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
)

// Local-first sync: a device vault (Config.Hub set) converges with the hub
// through Sync.
//
// The hub's change feed is the ledger of the hub-side vault: every change
// the hub accepts is written there by the same write path as a device's
// (a RecordPut or RecordDelete entry in the commit of the record), so the
// feed is dense, hash-chained and MAC'd with the vault's key, which the hub
// does not hold. A pull reads the feed from the device's pull cursor,
// fetches the records the entries name, checks each against its entry's
// cipher hash and revision, and applies them in local commits that also
// move the cursor. A push reads the device's own ledger from its push
// cursor (the record entries the device made; what it pulled is recorded
// under ledger.RecordPulled and RecordPulledDelete and never pushed back)
// and writes each record's sealed bytes to the hub only if the hub still
// holds the revision the device last synced (its base), in hub commits
// that also append the feed entries. Both sides' cursors move only after
// the commit that covers them, so a sync cut short anywhere leaves both
// sides consistent and the next one continues.
//
// The hub's store needs transactions; a device's need not: on a device
// store without them (a file folder) each local commit is written in
// steps, records, then ledger entries, then sync state, then cursors,
// behind an intent the next sync finishes after a crash (sync_staged.go).
//
// Device storage, each value sealed with the vault's key bound to its key:
//
//	prefix + "_sync/pull"                  1 || uvarint seq || lp(sha256 of the feed entry at seq)
//	                                       or 2 || uvarint seq || lp(sha256) || pulled-with
//	    pulled-with: 0 (all collections) | 1 || uvarint n || n × lp(collection)
//	    (version 1: written before the collections were recorded; taken
//	    as the person's collections of now)
//	prefix + "_sync/push"                  1 || uvarint seq (the device ledger position pushed through)
//	prefix + "_sync/base/" + coll/id       1 || uvarint rev || lp(cipher hash; empty: the hub holds none)
//	                                       or 2 || uvarint rev || lp(cipher hash) || lp(content sum; sync_content.go)
//	prefix + "_sync/conflict/" + coll/id   2 || uvarint feed seq || uvarint rev || lp(cipher hash of the hub's side; empty: deleted)
//	                                       (version 1: 1 || … || lp(the hub's sealed record), see keptConflict)
//	prefix + "_sync/lost/" + …             the side a conflict set aside: the loser a policy chose, or the hub's side
//	                                       of a kept conflict, as it was (not sealed again; sync_stored.go)
//	prefix + "_sync/held/" + coll/id       1 (a change held back: its collection is no longer the person's; sync_reseal.go)
const (
	syncDir       = "_sync/"
	syncPullKey   = syncDir + "pull"
	syncPushKey   = syncDir + "push"
	syncBaseDir   = syncDir + "base/"
	syncConfDir   = syncDir + "conflict/"
	syncVersion   = 1
	pullVersion2  = 2
	maxSyncHash   = 64
	syncMaxRounds = 4
)

// syncBatch is how many records a sync applies per local commit and
// writes per hub commit (a variable for the tests).
var syncBatch = 512

// Errors of Sync. Test them with errors.Is.
var (
	// ErrNoHub: the vault was opened without Config.Hub, so it has nothing
	// to sync with.
	ErrNoHub = errors.New("vault has no hub")
	// ErrHubTampered: the hub served a change feed or a record that does not
	// verify: a feed entry out of order, missing or not authentic, or a
	// record whose ciphertext is not the one its feed entry names (another
	// revision, or injected). Nothing past the first bad entry is applied.
	ErrHubTampered = errors.New("the hub's change feed does not verify")
)

// SyncPolicy says which side wins when a record changed both on this device
// and on the hub since they last synced.
type SyncPolicy uint8

// Conflict policies.
const (
	// HigherRevisionWins (the default): the side whose record is at the
	// higher revision wins. A deletion counts as the revision after the one
	// it deleted (on the device: after the revision last synced). On a tie
	// the revision with the greater cipher hash wins (a deletion loses), so
	// that every device decides alike.
	HigherRevisionWins SyncPolicy = iota
	// DeviceWins: this device's side wins.
	DeviceWins
	// HubWins: the hub's side wins.
	HubWins
	// LastWriterWins: the revision written last wins, by the write time
	// sealed in the record (Record.Modified), or the authenticated time of
	// the deletion's ledger entry. A tie is decided as by
	// HigherRevisionWins. The time is the writing device's own clock:
	// authenticated (no hub can alter it) but not checked, so a device
	// whose clock runs ahead wins every such conflict.
	LastWriterWins
	// FirstWriterWins: the revision written first wins, timed as for
	// LastWriterWins.
	FirstWriterWins
	// Manual: neither side wins. The device keeps its record and does not
	// push it; the hub's side is kept beside it, until the application
	// resolves the conflict (Vault.Conflicts lists them, Collection.Resolve
	// decides). A later hub change to the record replaces the hub's side.
	Manual
	// Merge: the collection's merge function (set with MergeWith, not with
	// SetConflictPolicy) makes the record from both sides' values, written
	// here above both revisions and pushed. When a side is a deletion, the
	// conflict is decided as by HigherRevisionWins; when the function
	// fails, the conflict is kept as under Manual (the failure is in the
	// report's Rejected).
	Merge
)

// String names the policy.
func (p SyncPolicy) String() string {
	switch p {
	case HigherRevisionWins:
		return "higher-revision-wins"
	case DeviceWins:
		return "device-wins"
	case HubWins:
		return "hub-wins"
	case LastWriterWins:
		return "last-writer-wins"
	case FirstWriterWins:
		return "first-writer-wins"
	case Manual:
		return "manual"
	case Merge:
		return "merge"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(p))
}

func (p SyncPolicy) valid() bool { return p <= Manual }

// SyncReport is what one Sync did.
type SyncReport struct {
	// Pulled is how many record changes from the hub were applied here.
	Pulled int
	// Pushed is how many record changes of this device the hub accepted.
	Pushed int
	// Conflicts lists the records changed on both sides, and who won.
	Conflicts []SyncConflict
	// Rejected lists the changes that were not synced, with why. Among
	// them, every change of this device in a collection its person may no
	// longer write (an owner narrowed them with SetCollections, and a
	// handle opened before wrote there before its device heard of it):
	// such a change is kept on this device, unpushed, and reported by
	// every Sync while it is held; the other changes of the Sync are
	// pushed. Once the person is given the collection again, a Sync pushes
	// it (re-sealed with the generation whose key of it they then hold).
	Rejected []SyncRejected
	// Settled holds, by series, the reports of the numbering passes that
	// SyncAndSettle ran on the hub (nil for Sync).
	Settled map[string]numbering.PassReport `json:",omitempty"`
}

// SyncConflict is one record changed both on this device and on the hub.
// The loser's revision is also recorded in the device's ledger (a
// ledger.SyncConflict entry).
type SyncConflict struct {
	// Collection and ID name the record.
	Collection, ID string
	// Policy is the collection's policy that decided.
	Policy SyncPolicy
	// HubWon reports whether the hub's side won.
	HubWon bool
	// DeviceRevision and HubRevision are the two sides' revisions (for a
	// deletion: the revision it deleted).
	DeviceRevision, HubRevision uint64
	// DeviceDeleted and HubDeleted report a side that deleted the record.
	DeviceDeleted, HubDeleted bool
	// Kept reports a conflict kept for the application to resolve (Manual,
	// or a Merge that could not merge): neither side won yet.
	Kept bool
	// Merged reports a record made by the collection's merge function.
	Merged bool
}

// SyncRejected is a change a sync could not carry, and why. A change of a
// collection the person may no longer write stays on the device, unpushed
// (see SyncReport.Rejected); the others are retried as their Reason says.
type SyncRejected struct {
	// Collection and ID name the record.
	Collection, ID string
	// Reason says why.
	Reason string
	// Held reports a change kept on this device, unpushed, because its
	// collection is no longer the person's (see SyncReport.Rejected): it
	// is pushed by the first Sync after the collection is given back. The
	// other rejections are retried by the next Sync.
	Held bool
}

// syncSettings is a vault's sync configuration and the lock that keeps one
// sync of the vault at a time.
type syncSettings struct {
	mu       sync.Mutex
	policies map[string]SyncPolicy
	merges   map[string]mergeFunc
	numbered map[string]numberedHook // sync_numbers.go
	run      sync.Mutex
	staged   sync.Mutex // one staged commit at a time (sync_staged.go)
	writing  inflight   // local writes in flight without transactions (sync_inflight.go)
}

// mergeFunc merges the JSON bodies of a record's two sides.
type mergeFunc func(local, hub []byte) ([]byte, error)

// SetConflictPolicy sets the policy that decides the conflicts of
// collection in this vault's syncs (HigherRevisionWins until set). An
// invalid collection name or policy (Merge included: set it with
// MergeWith) gives an error wrapping ErrInvalidArgument (or the name's
// error) and changes nothing.
func (v *Vault) SetConflictPolicy(collection string, p SyncPolicy) error {
	if err := CheckCollectionName(collection); err != nil {
		return fmt.Errorf("set conflict policy: %w", err)
	}
	if !p.valid() {
		return fmt.Errorf("set conflict policy %s: %v: %w", collection, p, ErrInvalidArgument)
	}
	v.syncs.mu.Lock()
	defer v.syncs.mu.Unlock()
	if v.syncs.policies == nil {
		v.syncs.policies = map[string]SyncPolicy{}
	}
	v.syncs.policies[collection] = p
	delete(v.syncs.merges, collection)
	return nil
}

func (v *Vault) mergeOf(collection string) mergeFunc {
	v.syncs.mu.Lock()
	defer v.syncs.mu.Unlock()
	return v.syncs.merges[collection]
}

// Sync converges this device's vault with the hub: it copies the keyring
// entries each side lacks (an owner's Sync records on the hub's ledger the
// grants and revocations the hub learns from it, so that the hub's
// Audit().Verify checks each person's pushes with the key they held then
// and refuses a revoked person's later ones),
// pulls the changes the hub accepted since the
// last sync, then pushes this device's changes, and repeats (a few rounds
// at most) while another device's push raced its own. Its cost is
// proportional to the changes since the last sync.
//
// A change of this device in a collection its person may no longer write
// (narrowed by an owner after the change was made) is not pushed: it is
// kept on the device and reported in the report's Rejected, and pushed
// once they are given the collection again. A revoked person's Sync
// fails with ErrNoAccess once it has brought the revocation, and pulls
// and pushes nothing; so does the Sync of a handle opened before its
// person was revoked and granted again (the new grant's handles sync).
//
// A vault opened without a hub gives ErrNoHub. A hub whose feed does not
// verify gives ErrHubTampered, and one serving an older feed than this
// device has seen ErrRollback; what was applied before stays applied. A
// sync cut short (a lost connection, ctx ending, a crash) leaves both sides
// consistent: the next Sync continues where it stopped. The device's store
// may lack transactions (a file folder: see the package's sync notes); the
// hub's may not (stores.ErrNotSupported). One Sync of a vault
// runs at a time; the vault can be read and written meanwhile.
//
// What a hostile hub can do: it cannot read records, nor make a device
// apply a record the vault's users did not write (every record is bound
// to its vault, collection, id and revision, and every feed entry is
// MAC'd and chained: an injected, replayed, reordered or dropped change
// is ErrHubTampered, an older feed ErrRollback, also after a restart when
// Config.StateDir is set). It can withhold: serve nothing new, or refuse
// pushes. A device cannot tell that from a quiet hub.
//
// Numbers travel with their records and are never dropped by a conflict:
// a pending record's push carries its handoff entry, and a number stamped
// on the hub stays with the record whichever side wins (see
// SyncAndSettle for the round trip of records numbered by passes).
func (v *Vault) Sync(ctx context.Context) (SyncReport, error) {
	return v.SyncWith(ctx, SyncOptions{})
}

// SyncWith is Sync with options (a progress callback).
func (v *Vault) SyncWith(ctx context.Context, opts SyncOptions) (SyncReport, error) {
	var rep SyncReport
	if v.hub == nil {
		return rep, fmt.Errorf("sync %s: %w", v.name, ErrNoHub)
	}
	if err := v.enter(ctx); err != nil {
		return rep, fmt.Errorf("sync %s: %w", v.name, err)
	}
	defer v.exit()
	if err := v.hub.enter(ctx); err != nil {
		return rep, fmt.Errorf("sync %s: %w", v.name, err)
	}
	defer v.hub.exit()
	// The hub needs transactions; a device without them (a file folder)
	// commits in steps (sync_staged.go).
	if st := v.hub.store; !isTransactor(st) {
		return rep, fmt.Errorf("sync %s: %s has no transactions: %w", v.name, storeType(st), stores.ErrNotSupported)
	}
	v.syncs.run.Lock()
	defer v.syncs.run.Unlock()
	if err := v.recoverStaged(ctx); err != nil {
		return rep, fmt.Errorf("sync %s: %w", v.name, err)
	}
	s := &syncRun{v: v, h: v.hub, rep: &rep, progress: opts.Progress}
	reader := v.Role() == RoleReader
	s.keyringStep = s.keyrings
	if reader { // a reader pulls through a writable view of its device (reader_pull.go)
		s.v = v.pullView()
		defer s.v.release()
		s.keyringStep = s.readerKeyrings
	}
	if err := s.keyringStep(ctx); err != nil {
		return rep, fmt.Errorf("sync %s: keyring: %w", v.name, err)
	}
	// The collections the person may use, as the keyring step left their
	// entry; a revoked person syncs no more (sync_reseal.go).
	if err := s.loadGiven(ctx); err != nil {
		return rep, fmt.Errorf("sync %s: keyring: %w", v.name, err)
	}
	if err := s.loadStored(ctx); err != nil { // sync_stored.go
		return rep, fmt.Errorf("sync %s: stored policies: %w", v.name, err)
	}
	for round := 0; ; round++ {
		if err := s.pull(ctx); err != nil {
			return rep, fmt.Errorf("sync %s: pull: %w", v.name, err)
		}
		if reader {
			if err := s.refusePush(ctx); err != nil {
				return rep, fmt.Errorf("sync %s: push: %w", v.name, err)
			}
			break
		}
		stale, err := s.push(ctx)
		if err != nil {
			return rep, fmt.Errorf("sync %s: push: %w", v.name, err)
		}
		if len(stale) == 0 {
			break
		}
		if round+1 == syncMaxRounds {
			for _, k := range stale {
				reason := "the hub's record kept changing during the sync; the next sync carries it"
				if s.aheadOfFeed[k] {
					reason = "the hub's record is ahead of its feed (a hub write in flight, such as a numbering pass's stamp not yet recorded); the next sync carries this change"
				}
				rep.Rejected = append(rep.Rejected, SyncRejected{Collection: k.coll, ID: k.id, Reason: reason})
			}
			break
		}
	}
	return rep, nil
}

// syncRun is one Sync.
type syncRun struct {
	v, h *Vault
	rep  *SyncReport
	// stored are the sync policies stored with the collections (sync_stored.go).
	stored map[string]SyncPolicy
	// deleted holds, for LastWriterWins and FirstWriterWins, when this
	// device deleted each record it deleted since its push cursor.
	deleted map[recKey]time.Time
	// own holds the records with a change of this device's own in its
	// ledger after the push cursor (read through ownRead; see
	// ownChanges).
	own     map[recKey]bool
	ownRead uint64
	// ownPuts and ownDels are what those changes wrote: the record of
	// each cipher hash sealed, and the records deleted, with the position
	// of the entry (the last one, for a deletion; sync_own.go).
	ownPuts map[string]ownEntry
	ownDels map[recKey]uint64
	// ownContent holds, for each record, the content its own changes
	// read so far left it with (see ownEntry.content).
	ownContent map[recKey]uint64
	// rejected collects the rejections of one attempt of a local commit.
	rejected []SyncRejected
	// appended and appendedHead are the feed entries this push pass
	// appended, and the feed's head after the last of them.
	appended     []ledger.Entry
	appendedHead ledger.Head
	// progress is SyncOptions.Progress; from holds, per phase, the cursor
	// the sync started at (see report).
	progress func(SyncProgress)
	from     [2]*uint64
	// with are the collections the pull cursor records as pulled with
	// (pullAdded); only, when set, limits a pull to some collections, and
	// hold is then the cursor its commits keep (a catch-up before it).
	with pullCursor
	only func(coll string) bool
	hold *pullCursor
	// given lists the collections the person's keyring entry gives them
	// (sorted; nil: all), the only ones this Sync pulls and pushes; held
	// the changes left out of earlier pushes for being in other
	// collections, reported those this Sync reported in Rejected for it
	// (sync_reseal.go).
	given    *[]string
	held     map[recKey]bool
	reported map[recKey]bool
	// keyringStep is the keyring step of this Sync (keyrings, or
	// readerKeyrings); keyringFor the newest generation a pull took it
	// again for (see pull).
	keyringStep func(context.Context) error
	keyringFor  uint64
	// aheadOfFeed holds the records a push left behind because the hub's
	// revision is ahead of its feed (see checkStale).
	aheadOfFeed map[recKey]bool
}

func (s *syncRun) keyrings(ctx context.Context) error {
	hk := s.v.prefix + headerKey
	dh, err := s.v.store.Get(ctx, hk)
	if err != nil {
		return err
	}
	if err := s.hubPeople(ctx); err != nil { // signing.go
		return err
	}
	// The hub's ledger holds every device's people changes (hubPeople,
	// and a rotation's commit on the hub): of two entries of different
	// states, the one agreeing with it wins, and an entry that fails its
	// check (one the hub, or a person, planted) is copied neither way
	// (people_ledger.go).
	a, err := s.v.hubAuthority(ctx)
	if err != nil {
		return feedErr(err)
	}
	merge := preferLedger(ctx, a, keyringMerger(s.v.dk, s.v.name, dh.Value)) // see keyring_merge.go
	admit := func(name string, raw []byte) bool { return a.agrees(ctx, name, raw) }
	if err := copyKeyringAdmit(ctx, s.v.store, s.h.store, s.v.prefix, dh.Value, merge, admit); err != nil {
		return err
	}
	if err := copyKeyringAdmit(ctx, s.h.store, s.v.store, s.v.prefix, dh.Value, merge, admit); err != nil {
		return err
	}
	if err := s.devicePeople(ctx, a); err != nil { // signing.go
		return err
	}
	// Learn every generation the person's entry now holds (a rotation made
	// on another device): from now on this device seals with the latest,
	// so a revocation holds for what it writes once it has heard of it.
	if _, err := s.v.heldGenerations(ctx); err != nil {
		return closedIfWiped(err)
	}
	// A person granted on another device: this device's commits are
	// signed from now on (sole.go).
	if err := s.v.learnPeople(ctx); err != nil {
		return closedIfWiped(err)
	}
	return s.v.raiseCurrentGen(ctx) // rotate_current.go
}

// recKey names a record.
type recKey struct{ coll, id string }

// version is one side's state of a record: absent (sealed nil), or a
// sealed revision with its cipher hash.
type version struct {
	sealed []byte
	rev    uint64
	hash   []byte
	// opened is the record opened, when a pull's check of the hub's
	// side opened it already (checkFetched): its apply takes it rather
	// than opening it again in the local commit.
	opened *stored
}

func (x version) exists() bool { return x.sealed != nil }

// base is the hub's state of a record when this device last synced it.
type base struct {
	rev  uint64
	hash []byte // nil: the hub held none
	sum  []byte // the content's sum (sync_content.go); nil: not known
}

// ---- pull ----

// syncPass bounds the ledger entries one read takes in: a sync reads a
// ledger in passes of this many entries and applies each pass in batches
// of syncBatch (a ledger read lists from a position cheaply only near its
// head, so a read per batch would make a large sync quadratic).
var syncPass = 128 * syncBatch

// pull applies the hub's feed from the pull cursor to its head.
//
// A rotation made on another device after this Sync's keyring step (it
// commits the new generation's keyring entries on the hub first, then
// that device's Sync pushes records sealed with it) leaves records on the
// hub, named by their feed entries, sealed with a generation this device
// does not hold yet; so does a numbering pass on the hub that stamps a
// record with the new generation before it appends the stamp's entry. The pull then takes the keyring step again and starts
// over; should the entries brought still not hold that generation, the
// hub keeps records its keyring gives no key of: ErrHubTampered.
func (s *syncRun) pull(ctx context.Context) error {
	for {
		err := s.pullFeed(ctx)
		var g *generationAhead
		if !errors.As(err, &g) || g.gen <= s.keyringFor {
			return err
		}
		s.keyringFor = g.gen
		if err := s.keyringStep(ctx); err != nil {
			return fmt.Errorf("keyring: %w", err)
		}
		if err := s.loadGiven(ctx); err != nil {
			return fmt.Errorf("keyring: %w", err)
		}
	}
}

// pullFeed is pull's work with the keys the device holds.
func (s *syncRun) pullFeed(ctx context.Context) error {
	if err := s.pullAdded(ctx); err != nil {
		return err
	}
	for {
		done, err := s.pullPass(ctx)
		if err != nil || done {
			return err
		}
	}
}

// generationAhead is the error of a pull that met a hub record sealed with
// a data key generation newer than any this device holds, as its feed
// entry names it or at a later revision (see pull and generationAhead).
type generationAhead struct {
	k   recKey
	seq uint64 // the feed entry
	gen uint64 // the record's generation
}

func (g *generationAhead) Error() string {
	return fmt.Sprintf("%v: %s/%s, at its feed entry %d, is sealed with key generation %d, of which the hub's keyring gives this person no key",
		ErrHubTampered, g.k.coll, g.k.id, g.seq, g.gen)
}

func (g *generationAhead) Unwrap() error { return ErrHubTampered }

// feedErr makes an integrity failure of the hub's ledger an ErrHubTampered
// (a rollback stays ErrRollback).
func feedErr(err error) error {
	if errors.Is(err, ErrRollback) || !isIntegrity(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrHubTampered, err)
}

func isIntegrity(err error) bool {
	var (
		g *ledger.GapError
		c *ledger.ChainError
		t *ledger.TamperError
	)
	return errors.As(err, &g) || errors.As(err, &c) || errors.As(err, &t) ||
		errors.Is(err, ledger.ErrTampered) || errors.Is(err, ledger.ErrMalformed)
}

// pullCursor is how far this device applied the hub's feed, and with which
// collections: a person limited to some pulls only theirs (pullWindow), so
// when their collections grow the cursor tells which were skipped before
// it (pullAdded).
type pullCursor struct {
	seq  uint64
	hash []byte
	// known: the collections pulled with are recorded (layout version 2);
	// limited: they were some (cols, sorted), not all.
	known, limited bool
	cols           []string
}

// pulledWith returns c recording the collections this run pulls with.
func (s *syncRun) pulledWith(c pullCursor) pullCursor {
	c.known, c.limited, c.cols = true, s.with.limited, s.with.cols
	return c
}

// pullPass reads up to syncPass feed entries after the pull cursor and
// applies them, syncBatch at a time; done when the feed has no more, or
// when a record is ahead of its entry (a hub commit in flight).
func (s *syncRun) pullPass(ctx context.Context) (bool, error) {
	cur, err := s.loadPull(ctx)
	if err != nil {
		return false, err
	}
	head, err := s.h.ledger.Head(ctx)
	if err != nil {
		return false, feedErr(err)
	}
	if head.Seq < cur.seq {
		return false, fmt.Errorf("the hub's feed ends at %d, this device has applied it through %d: %w", head.Seq, cur.seq, ErrRollback)
	}
	if head.Seq == 0 {
		return true, nil
	}
	s.report(SyncPulling, cur.seq, head.Seq)
	var all []ledger.Entry
	sawCursor := cur.seq == 0
	for e, err := range s.h.readFeed(ctx, max(cur.seq, 1)) { // people_ledger.go
		if err != nil {
			return false, feedErr(err)
		}
		if e.Seq == cur.seq {
			if !bytes.Equal(entryHash(e), cur.hash) {
				return false, fmt.Errorf("%w: the feed entry at %d is not the one this device applied (a rolled back or forked hub)", ErrHubTampered, e.Seq)
			}
			sawCursor = true
			continue
		}
		all = append(all, e)
		if len(all) == syncPass {
			break
		}
	}
	if !sawCursor {
		return false, fmt.Errorf("the hub's feed no longer holds entry %d: %w", cur.seq, ErrRollback)
	}
	// The records of each window are fetched from the hub and checked
	// while the window before is applied, whose local commit waits for
	// the device's disk.
	var ahead chan windowCheck // the check of the window at aheadAt, under way
	aheadAt := 0
	defer func() {
		if ahead != nil {
			<-ahead
		}
	}()
	checkAt := func(start int) chan windowCheck {
		end := min(start+syncBatch, len(all))
		done := make(chan windowCheck, 1)
		go func() { done <- s.checkWindow(ctx, all[start:end], all[end:]) }()
		return done
	}
	for start := 0; start < len(all); {
		var w windowCheck
		if ahead != nil && aheadAt == start {
			w, ahead = <-ahead, nil
		} else {
			end := min(start+syncBatch, len(all))
			w = s.checkWindow(ctx, all[start:end], all[end:])
		}
		if w.err != nil {
			return false, w.err
		}
		if next := start + len(w.win); w.cut == len(w.win) && next < len(all) {
			ahead, aheadAt = checkAt(next), next
		}
		n, err := s.applyWindow(ctx, w)
		if err != nil {
			return false, err
		}
		if n == 0 {
			return true, nil
		}
		start += n
		s.report(SyncPulling, all[start-1].Seq, head.Seq)
	}
	return len(all) < syncPass, nil
}

// pullWindow checks and applies the feed entries win (rest: the entries
// read after them) in one local commit, and returns how many it applied
// (see applyWindow).
func (s *syncRun) pullWindow(ctx context.Context, win, rest []ledger.Entry) (int, error) {
	w := s.checkWindow(ctx, win, rest)
	if w.err != nil {
		return 0, w.err
	}
	return s.applyWindow(ctx, w)
}

// windowCheck is a window of feed entries, checked against the hub's
// records (checkWindow) and ready to apply (applyWindow).
type windowCheck struct {
	win  []ledger.Entry
	hubv map[recKey]version // the hub's version of each record to apply
	cut  int                // entries from cut on are left to the next batch
	err  error
}

// applyWindow applies the checked window w in one local commit, and
// returns how many entries it applied: fewer than len(w.win) when a record
// is ahead of its entry (a hub commit in flight), whose entry and those
// after wait for the next sync.
func (s *syncRun) applyWindow(ctx context.Context, w windowCheck) (int, error) {
	if w.cut == 0 {
		s.rep.Rejected = append(s.rep.Rejected, SyncRejected{Collection: w.win[0].Collection, ID: w.win[0].ID,
			Reason: fmt.Sprintf("the hub's record is ahead of its feed entry %d (a hub write in flight); the next sync takes it", w.win[0].Seq)})
		return 0, nil
	}
	if err := s.applyPulled(ctx, w.win[:w.cut], w.hubv); err != nil {
		return 0, err
	}
	return w.cut, nil
}

// checkWindow fetches from the hub the records the feed entries win
// change (rest: the entries read after them) and checks each against its
// entry. It changes nothing, so it runs while an earlier window is
// applied.
func (s *syncRun) checkWindow(ctx context.Context, win, rest []ledger.Entry) windowCheck {
	hubv, cut, err := s.checkRecords(ctx, win, rest)
	return windowCheck{win: win, hubv: hubv, cut: cut, err: err}
}

// checkRecords is checkWindow's work: the hub's version of each record
// to apply, and where the window is cut.
func (s *syncRun) checkRecords(ctx context.Context, win, rest []ledger.Entry) (map[recKey]version, int, error) {
	// The last feed entry of each record in the window. A person limited
	// to some collections (Grant) pulls only theirs: the others' records
	// do not open with their keys, and their device never holds them.
	last := map[recKey]int{}
	for i, e := range win {
		if isRecordEntry(e) && s.v.keys.permits(e.Collection) == nil && s.mayUse(e.Collection) && (s.only == nil || s.only(e.Collection)) {
			last[recKey{e.Collection, e.ID}] = i
		}
	}
	keys := make([]recKey, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return last[keys[i]] < last[keys[j]] })
	storeKeys := make([]string, len(keys))
	for i, k := range keys {
		storeKeys[i] = s.h.recordKey(k.coll, k.id)
	}
	got, err := fetch(ctx, s.h.store, storeKeys)
	if err != nil {
		return nil, 0, err
	}
	// Check each record against its entry.
	hubv := make(map[recKey]version, len(keys))
	var odd []recKey             // records not at their entry: superseded, or tampered
	aheadOf := map[recKey]bool{} // records at a later revision than their entry
	cut := len(win)              // entries from cut on are left to the next batch
	for i, k := range keys {
		e := win[last[k]]
		sealed, found := got[storeKeys[i]]
		x, ok, ahead := s.checkFetched(k, e, sealed, found)
		if g := s.generationAhead(e, sealed, ok); g > 0 {
			return nil, 0, &generationAhead{k: k, seq: e.Seq, gen: g}
		}
		switch {
		case ok:
			hubv[k] = x
		case ahead:
			aheadOf[k] = true
			odd = append(odd, k)
		default:
			odd = append(odd, k)
		}
	}
	if len(odd) > 0 {
		// A record not at its entry is fine only if a later entry of the
		// feed changed it again (among those read, or written since): it
		// is applied with that entry. Else a record ahead of its entry is
		// a hub commit in flight, and any other is tampered.
		later := map[recKey]bool{}
		for _, e := range rest {
			if isRecordEntry(e) {
				later[recKey{e.Collection, e.ID}] = true
			}
		}
		var unknown []recKey
		for _, k := range odd {
			if !later[k] {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			after := win[len(win)-1].Seq
			if len(rest) > 0 {
				after = rest[len(rest)-1].Seq
			}
			since, err := s.laterEntries(ctx, after, unknown)
			if err != nil {
				return nil, 0, err
			}
			for _, k := range unknown {
				switch {
				case since[k]:
				case aheadOf[k]:
					cut = min(cut, last[k])
				default:
					e := win[last[k]]
					if g := s.newerGeneration(got[s.h.recordKey(k.coll, k.id)]); g > 0 && e.Kind != ledger.RecordDelete {
						return nil, 0, &generationAhead{k: k, seq: e.Seq, gen: g}
					}
					return nil, 0, fmt.Errorf("%w: %s/%s is not the revision %d its feed entry %d names", ErrHubTampered, k.coll, k.id, e.Revision, e.Seq)
				}
			}
		}
	}
	for k := range hubv {
		if last[k] >= cut {
			delete(hubv, k) // its change is in the next batch
		}
	}
	return hubv, cut, nil
}

// checkFetched checks the hub record fetched for k against e, the record's
// last entry in the window. ahead: the record is at a later revision than e
// names (a hub commit not yet in the feed as read).
func (s *syncRun) checkFetched(k recKey, e ledger.Entry, sealed []byte, found bool) (x version, ok, ahead bool) {
	if e.Kind == ledger.RecordDelete {
		if !found {
			return version{rev: e.Revision}, true, false
		}
		return version{}, false, false
	}
	if !found {
		return version{}, false, false
	}
	h := cipherHash(sealed)
	st, err := s.h.openStored(k.coll, k.id, stores.Item{Value: sealed}, true)
	if err != nil {
		return version{}, false, false
	}
	if bytes.Equal(h, e.CipherHash) && st.rev == e.Revision {
		return version{sealed: sealed, rev: st.rev, hash: h, opened: &st}, true, false
	}
	return version{}, false, st.rev > e.Revision
}

// generationAhead returns the generation of sealed, the hub's record of
// feed entry e that did not check (ok false), when its ciphertext is the
// one e names and that generation is newer than any this device holds (a
// rotation made since the keyring step: see pull); else 0.
func (s *syncRun) generationAhead(e ledger.Entry, sealed []byte, ok bool) uint64 {
	if ok || e.Kind == ledger.RecordDelete || sealed == nil || !bytes.Equal(cipherHash(sealed), e.CipherHash) {
		return 0
	}
	return s.newerGeneration(sealed)
}

// newerGeneration returns the generation sealed is sealed with when it is
// newer than any this device holds, else 0. A record that is not the one
// its feed entry names, with no later entry, may be sealed so by an honest
// hub: a numbering pass on the hub stamps a record (a new revision, sealed
// with the hub's current generation) before it appends the stamp's entry,
// so a pull whose keyring step came before a rotation can meet the stamp
// sealed with a generation it does not hold yet. Only once it took the
// keyring step again can it tell a record ahead of its entry (a write in
// flight) from a tampered one (see pull).
func (s *syncRun) newerGeneration(sealed []byte) uint64 {
	if sealed == nil {
		return 0
	}
	g, err := recordGeneration(sealed)
	if cur, _ := s.v.keys.current(); err != nil || g <= cur {
		return 0
	}
	return g
}

// recordRevision opens a sealed record (authenticating it) and returns its revision.
func (v *Vault) recordRevision(coll, id string, sealed []byte) (uint64, error) {
	st, err := v.openStored(coll, id, stores.Item{Value: sealed}, true)
	return st.rev, err
}

// laterEntries reports which of keys have a feed entry after position after.
func (s *syncRun) laterEntries(ctx context.Context, after uint64, keys []recKey) (map[recKey]bool, error) {
	want := map[recKey]bool{}
	for _, k := range keys {
		want[k] = false
	}
	out := map[recKey]bool{}
	for e, err := range s.h.ledger.Read(ctx, after+1) {
		if err != nil {
			return nil, feedErr(err)
		}
		k := recKey{e.Collection, e.ID}
		if _, ok := want[k]; ok && isRecordEntry(e) {
			out[k] = true
		}
	}
	return out, nil
}

// applyPulled applies the feed entries win (checked) in one local commit
// that also moves the pull cursor to the last of them.
func (s *syncRun) applyPulled(ctx context.Context, win []ledger.Entry, hubv map[recKey]version) error {
	last := map[recKey]int{}
	for i, e := range win {
		if isRecordEntry(e) {
			last[recKey{e.Collection, e.ID}] = i
		}
	}
	var keys []recKey
	var tkeys []string
	kept, err := s.v.keptSideKeys(ctx) // sync_manual.go
	if err != nil {
		return err
	}
	for i, e := range win {
		k := recKey{e.Collection, e.ID}
		if !isRecordEntry(e) || last[k] != i {
			continue
		}
		if _, ok := hubv[k]; !ok {
			continue // superseded by a later entry: applied with it
		}
		keys = append(keys, k)
		// The sides a conflict there sets aside (at this entry's feed
		// position), and the one a conflict kept before holds apart.
		tkeys = append(tkeys, s.v.recordKey(k.coll, k.id), s.v.baseKey(k.coll, k.id), s.v.conflictKey(k.coll, k.id),
			s.v.lostKey(k.coll, k.id, e.Seq))
		if lk, ok := kept[k]; ok {
			tkeys = append(tkeys, lk)
		}
	}
	if len(tkeys) > 0 {
		// Written records read currentGenKey, and the commit writes the
		// pull cursor: named with the records, they are locked with them
		// in key order, not after them (see lockKeys).
		tkeys = append(tkeys, s.v.prefix+currentGenKey, s.v.prefix+syncPullKey, s.v.prefix+syncPushKey)
	}
	if err := s.deletionTimes(ctx, keys); err != nil {
		return err
	}
	mine, err := s.ownPushes(ctx, win) // sync_own.go
	if err != nil {
		return err
	}
	end := win[len(win)-1]
	cur := s.pulledWith(pullCursor{seq: end.Seq, hash: entryHash(end)})
	if s.hold != nil {
		cur = *s.hold
	}
	var pulled int
	var conflicts []SyncConflict
	var span [2]uint64 // the device ledger's entries the commit appended, all pulled (see pushPastPulled)
	err = s.v.localCommit(ctx, tkeys, func(tx stores.Tx) error {
		pulled, conflicts, s.rejected, span = 0, nil, nil, [2]uint64{}
		before, err := s.localHead(ctx, tx)
		if err != nil {
			return err
		}
		var entries []ledger.Entry
		for _, k := range keys {
			e := win[last[k]]
			n, c, es, err := s.applyOne(ctx, tx, k, e, hubv[k], mine[k])
			if err != nil {
				return err
			}
			pulled += n
			if c != nil {
				conflicts = append(conflicts, *c)
			}
			entries = append(entries, es...)
		}
		appended := len(entries)
		if slices.ContainsFunc(entries, isOwnRecordEntry) {
			appended = -1 // a deletion of the device's own that won: the push sends it
		}
		for len(entries) > 0 {
			n := min(len(entries), 1024)
			if err := s.v.appendTx(ctx, tx, entries[:n]...); err != nil {
				return err
			}
			entries = entries[n:]
		}
		after, err := s.pushPastPulled(ctx, tx, before, appended)
		if err != nil {
			return err
		}
		span = [2]uint64{before.Seq, after}
		return s.v.putSealedValue(tx, syncPullKey, encodePull(cur))
	})
	if err != nil {
		return err
	}
	if s.own != nil && span[1] > span[0] && s.ownRead == span[0] {
		// What the commit appended is no change of the device's own:
		// ownChanges need not read it back before the next commit.
		s.ownRead = span[1]
	}
	s.rep.Pulled += pulled
	s.rep.Conflicts = append(s.rep.Conflicts, conflicts...)
	s.rep.Rejected = append(s.rep.Rejected, s.rejected...)
	return nil
}

// localHead returns the device ledger's head as tx holds it (a zero Head
// in a staged commit, which appends only at its flush).
func (s *syncRun) localHead(ctx context.Context, tx stores.Tx) (ledger.Head, error) {
	if _, staged := tx.(*stageTx); staged {
		return ledger.Head{}, nil
	}
	return s.v.ledger.AppendTx(ctx, tx) // no entries: the head, unchanged
}

// pushPastPulled moves the push cursor past the n entries a pull's local
// commit appended in tx after the device ledger's head before (pulled
// records and conflicts, none of which a push sends), when the cursor
// stood right before them and the commit appended nothing else (a record
// of the device's own, resealed above the hub's): so the next push does
// not read back what a pull wrote, and a first pull of many records is not
// followed by a push reading them all. n < 0 says the entries hold a
// change of the device's own (a deletion that won a conflict); nothing
// then, and nothing in a staged commit. It returns the position of the
// last of those entries when they are all the commit appended (whether
// the cursor moved or not), else before.Seq.
func (s *syncRun) pushPastPulled(ctx context.Context, tx stores.Tx, before ledger.Head, n int) (uint64, error) {
	if _, staged := tx.(*stageTx); staged || n <= 0 {
		return before.Seq, nil
	}
	after, err := s.localHead(ctx, tx)
	if err != nil || after.Seq-before.Seq != uint64(n) {
		return before.Seq, err
	}
	key := s.v.prefix + syncPushKey
	var at uint64
	it, err := tx.Get(key)
	switch {
	case errors.Is(err, stores.ErrNotFound):
	case err != nil:
		return before.Seq, err
	default:
		plain, err := s.v.seal.Open(key, it.Value)
		if err != nil {
			return before.Seq, s.v.openFailed(err)
		}
		if at, err = decodePush(plain); err != nil {
			return before.Seq, fmt.Errorf("sync push cursor: %w", ErrTampered)
		}
	}
	if at != before.Seq {
		return after.Seq, nil // changes of the device's own wait before the pulled entries
	}
	return after.Seq, s.v.putSealedValue(tx, syncPushKey, encodePush(after.Seq))
}

// applyOne applies the hub's version hv of record k (feed entry e) in tx,
// deciding a conflict with the device's changes by the collection's
// policy. It writes the record and its base, and returns how many changes
// it applied, the conflict if any and the device ledger entries to append.
// Record writes that are the device's own (a device winner resealed above
// the hub's revision) are appended by putSealedTx directly.
func (s *syncRun) applyOne(ctx context.Context, tx stores.Tx, k recKey, e ledger.Entry, hv version, mine *ownPush) (int, *SyncConflict, []ledger.Entry, error) {
	rkey := s.v.recordKey(k.coll, k.id)
	dv, dst, err := s.v.localVersion(tx, k)
	if err != nil {
		return 0, nil, nil, err
	}
	b, err := s.v.loadBase(tx, k)
	if err != nil {
		return 0, nil, nil, err
	}
	if !s.v.transactional() && !bytes.Equal(dv.hash, b.hash) {
		// The record differs from its sync base. Without a change of this
		// device's own to push (and no conflict kept for it), that is a
		// staged commit cut after it wrote the record and before its base
		// (sync_staged.go): the record is what this device last synced,
		// and the hub's change applies. Else a hub deletion would match a
		// missing base (no hash either), or a hub revision lower than the
		// record's would lose to it by revision, as if the record were
		// this device's change, which no push carries: it would stay here
		// for ever.
		switch _, err := tx.Get(s.v.conflictKey(k.coll, k.id)); {
		case errors.Is(err, stores.ErrNotFound):
			// A local write between its record and its ledger entry is
			// the device's change too (asked before the ledger is read:
			// see sync_inflight.go).
			busy := s.v.syncs.writing.has(k)
			if err := s.ownChanges(ctx); err != nil {
				return 0, nil, nil, err
			}
			if !s.own[k] && !busy {
				b.hash, b.sum = dv.hash, nil
				if dv.exists() {
					b.rev, b.sum = dv.rev, contentSum(dst)
				}
			}
		case err != nil:
			return 0, nil, nil, err
		}
	}
	if s.pushedBy(k, mine, b, dv) && (b.rev != mine.rev || !bytes.Equal(b.hash, mine.hash)) {
		// A push of this device's own that the hub committed, and this
		// device never acknowledged (sync_own.go): what it last synced.
		// (A base that names it already keeps its content's sum.) A
		// record the device only re-sealed since holds its content.
		b = mine.base
		if s.sameContent(k, mine.hash, dv.hash) {
			b.sum = contentSum(dst)
		}
	}
	// The hub's side, opened for its numbers and its content's sum, which
	// the new base keeps (sync_content.go): a base without a sum that names
	// the hub's side (a push of this device's own recognised, sync_own.go)
	// takes the sum of that side.
	var hst stored
	newBase := base{rev: hv.rev, hash: hv.hash}
	switch {
	case bytes.Equal(hv.hash, b.hash) && (b.sum != nil || !hv.exists()):
		newBase.sum = b.sum
	case bytes.Equal(dv.hash, hv.hash):
		if dv.exists() {
			newBase.sum = contentSum(dst)
		}
	case hv.opened != nil:
		hst = *hv.opened
		newBase.sum = contentSum(hst)
	case hv.exists():
		hst, err = s.h.openStoredTx(tx, k.coll, k.id, stores.Item{Value: hv.sealed}, true) // tx: the device's
		if err != nil {
			return 0, nil, nil, err
		}
		newBase.sum = contentSum(hst)
	}
	if err := s.v.putSealedValue(tx, s.v.baseKey(k.coll, k.id), encodeBase(newBase)); err != nil {
		return 0, nil, nil, err
	}
	if bytes.Equal(dv.hash, hv.hash) {
		// Already here (this device's own push, or the same change): a
		// conflict kept for it is moot.
		return 0, nil, nil, s.v.dropKept(tx, k)
	}
	if bytes.Equal(hv.hash, b.hash) {
		// The hub holds what this device last synced (its own push coming
		// back): the device's later change stands, and is pushed.
		return 0, nil, nil, nil
	}
	// A conflict kept earlier is settled by what follows, or kept again
	// with the hub's new side. While it was kept, pushes passed the
	// device's side by (held): if the device wins now, it is written
	// again below, so that the next push carries it.
	held := false
	switch _, err := tx.Get(s.v.conflictKey(k.coll, k.id)); {
	case err == nil:
		held = true
	case !errors.Is(err, stores.ErrNotFound):
		return 0, nil, nil, err
	}
	if err := s.v.dropKept(tx, k); err != nil {
		return 0, nil, nil, err
	}
	hubMarks := hst.marks // the marks of the hub's side (none: deleted)
	pulledEntry := func() ledger.Entry {
		if hv.exists() {
			return ledger.Entry{Kind: ledger.RecordPulled, Collection: k.coll, ID: k.id, Revision: hv.rev, CipherHash: hv.hash, Number: e.Seq}
		}
		return ledger.Entry{Kind: ledger.RecordPulledDelete, Collection: k.coll, ID: k.id, Revision: hv.rev, Number: e.Seq}
	}
	takeHub := func() error {
		if err := s.v.dropLocalHandoffs(tx, k.id, dst.marks, hubMarks); err != nil {
			return err
		}
		if hv.exists() {
			return tx.Put(rkey, hv.sealed)
		}
		if dv.exists() {
			return tx.Delete(rkey)
		}
		return nil
	}
	if bytes.Equal(dv.hash, b.hash) || (!held && onlyResealed(dst, dv.exists(), b)) {
		// No change here since the last sync (or a re-seal of what it
		// synced, sync_content.go): the hub's change applies.
		if err := takeHub(); err != nil {
			return 0, nil, nil, err
		}
		return 1, nil, []ledger.Entry{pulledEntry()}, nil
	}
	if !held && (onlyResealed(hst, hv.exists(), b) || b.sum == nil && s.pushedBy(k, mine, b, dv) && mine.resealOf(hv)) {
		// The hub's side is a re-seal of what this device last synced:
		// the device's change stands, and is pushed. A record at a
		// revision the hub's reaches is sealed again above it first, so
		// that revisions keep growing on the hub (with the numbers the
		// hub's side carries, as a device winner below).
		if !dv.exists() {
			return 0, nil, nil, nil
		}
		return 0, nil, nil, s.v.resealAbove(ctx, tx, k, dv, dst, hv, hubMarks, false)
	}
	// Changed on both sides.
	pol := s.policyOf(k.coll)
	dRev := dv.rev
	if !dv.exists() {
		dRev = b.rev + 1
	}
	hRev := hv.rev
	if !hv.exists() {
		hRev++
	}
	c := &SyncConflict{Collection: k.coll, ID: k.id, Policy: pol,
		DeviceRevision: dv.rev, HubRevision: hv.rev, DeviceDeleted: !dv.exists(), HubDeleted: !hv.exists()}
	if !dv.exists() {
		c.DeviceRevision = b.rev
	}
	rule := pol
	if pol == Merge && (!dv.exists() || !hv.exists()) {
		rule = HigherRevisionWins // a deletion has no value to merge
	}
	var hubWins bool
	switch {
	case !dv.exists() && len(hubNumbers(nil, hubMarks)) > 0:
		// A number taken on the hub keeps its record: a deletion made
		// here loses to it, whatever the policy (see sync_numbers.go).
		hubWins = true
	case rule == Manual || rule == Merge:
		return s.keepOrMerge(ctx, tx, pol, k, c, dv, dst, hv, e)
	default:
		hubWins, err = s.decide(ctx, rule, k, dv, dst, dRev, hv, hRev, e)
		if err != nil {
			return 0, nil, nil, err
		}
	}
	c.HubWon = hubWins
	if hubWins {
		if err := takeHub(); err != nil {
			return 0, nil, nil, err
		}
		lost := ledger.Entry{Kind: ledger.SyncConflict, Collection: k.coll, ID: k.id, Revision: c.DeviceRevision,
			CipherHash: dv.hash, Reason: pol.String() + ": device lost", Number: e.Seq}
		if err := s.v.keepLost(tx, k.coll, k.id, e.Seq, dv.sealed); err != nil { // sync_stored.go
			return 0, nil, nil, err
		}
		return 1, c, []ledger.Entry{pulledEntry(), lost}, nil
	}
	lost := ledger.Entry{Kind: ledger.SyncConflict, Collection: k.coll, ID: k.id, Revision: hv.rev,
		CipherHash: hv.hash, Reason: pol.String() + ": hub lost", Number: e.Seq}
	if err := s.v.keepLost(tx, k.coll, k.id, e.Seq, hv.sealed); err != nil { // sync_stored.go
		return 0, nil, nil, err
	}
	if dv.exists() {
		// A side held back by a kept conflict gets a new revision too,
		// and a ledger entry the next push carries.
		if err := s.v.resealAbove(ctx, tx, k, dv, dst, hv, hubMarks, held); err != nil {
			return 0, nil, nil, err
		}
	}
	if !dv.exists() && held {
		// A deletion held back: a deletion entry the next push carries.
		return 0, c, []ledger.Entry{lost, {Kind: ledger.RecordDelete, Collection: k.coll, ID: k.id, Revision: c.DeviceRevision}}, nil
	}
	return 0, c, []ledger.Entry{lost}, nil
}

// resealAbove writes, in tx, the device's record dv (opened: dst) that won
// over the hub's side hv (whose marks are hubMarks) when it must overwrite
// a hub revision at least as high, or lacks numbers the hub's side
// carries, or always: it is sealed again as the revision after both,
// unchanged but for those numbers, with a ledger entry the next push
// carries.
func (v *Vault) resealAbove(ctx context.Context, tx stores.Tx, k recKey, dv version, dst stored, hv version, hubMarks []mark, always bool) error {
	marks, body, numbered, err := v.keepNumbers(dst.marks, dst.body, hubMarks)
	if err != nil {
		return err
	}
	if dv.rev > hv.rev && !numbered && !always {
		return nil
	}
	sealed, rev, err := v.sealMeta(k.coll, k.id, joinRecord(marks, body), max(dv.rev, hv.rev), dst.meta)
	if err != nil {
		return err
	}
	if err := v.dropLocalHandoffs(tx, k.id, dst.marks, marks); err != nil {
		return err
	}
	return v.putSealedTx(ctx, tx, k.coll, k.id, sealed, rev, cipherHash(sealed), ledger.Entry{Kind: ledger.RecordPut})
}

// decide returns whether the hub's side wins a conflict under pol.
func (s *syncRun) decide(ctx context.Context, pol SyncPolicy, k recKey, dv version, dst stored, dRev uint64, hv version, hRev uint64, e ledger.Entry) (bool, error) {
	byRevision := func() bool {
		if hRev != dRev {
			return hRev > dRev
		}
		return bytes.Compare(hv.hash, dv.hash) > 0
	}
	switch pol {
	case DeviceWins:
		return false, nil
	case HubWins:
		return true, nil
	case LastWriterWins, FirstWriterWins:
		dt, err := s.deviceTime(ctx, k, dv, dst)
		if err != nil {
			return false, err
		}
		ht := e.Time
		if hv.exists() {
			hs, err := s.h.openStored(k.coll, k.id, stores.Item{Value: hv.sealed}, true)
			if err != nil {
				return false, err
			}
			ht = hs.meta.modified
		}
		if dt.Equal(ht) {
			return byRevision(), nil
		}
		if pol == LastWriterWins {
			return ht.After(dt), nil
		}
		return ht.Before(dt), nil
	}
	return byRevision(), nil
}

// deviceTime is when the device's side of a conflict was written: the
// record's sealed time, or for a deletion the time of the device's ledger
// entry deleting it (see deletionTimes).
func (s *syncRun) deviceTime(_ context.Context, k recKey, dv version, dst stored) (time.Time, error) {
	if dv.exists() {
		return dst.meta.modified, nil
	}
	return s.deleted[k], nil
}

// deletionTimes reads, once per sync and only when one of keys is in a
// collection timed by its policy, when this device deleted records since
// its push cursor (the changes it has not pushed).
func (s *syncRun) deletionTimes(ctx context.Context, keys []recKey) error {
	if s.deleted != nil {
		return nil
	}
	timed := false
	for _, k := range keys {
		if p := s.policyOf(k.coll); p == LastWriterWins || p == FirstWriterWins {
			timed = true
			break
		}
	}
	if !timed {
		return nil
	}
	from, err := s.loadPush(ctx)
	if err != nil {
		return err
	}
	s.deleted = map[recKey]time.Time{}
	for e, err := range s.v.ledger.Read(ctx, from+1) {
		if err != nil {
			return err
		}
		if e.Kind == ledger.RecordDelete {
			s.deleted[recKey{e.Collection, e.ID}] = e.Time
		}
	}
	return nil
}

// ownChanges reads into s.own the records this device changed itself
// (own record entries of its ledger) after its push cursor, from where the
// last call stopped: a staged pull asks when it meets a record that
// differs from its sync base (see applyOne). A record pushed meanwhile stays in s.own; its
// push wrote its base, which is what applyOne looks at first.
func (s *syncRun) ownChanges(ctx context.Context) error {
	if s.own == nil {
		from, err := s.loadPush(ctx)
		if err != nil {
			return err
		}
		s.own, s.ownRead = map[recKey]bool{}, from
		s.ownPuts, s.ownDels, s.ownContent = map[string]ownEntry{}, map[recKey]uint64{}, map[recKey]uint64{}
		// The changes held back (sync_reseal.go) are its own too, though
		// the push cursor moved past them.
		if s.held == nil {
			if err := s.loadHeld(ctx); err != nil {
				return err
			}
		}
		for k := range s.held {
			s.own[k] = true
		}
	}
	for e, err := range s.v.ledger.Read(ctx, s.ownRead+1) {
		if err != nil {
			return err
		}
		s.readOwn(e) // sync_own.go
		s.ownRead = e.Seq
	}
	return nil
}

// localVersion reads the device's record k in tx.
func (v *Vault) localVersion(tx stores.Tx, k recKey) (version, stored, error) {
	it, err := tx.Get(v.recordKey(k.coll, k.id))
	if errors.Is(err, stores.ErrNotFound) {
		return version{}, stored{}, nil
	}
	if err != nil {
		return version{}, stored{}, err
	}
	st, err := v.openStoredTx(v.keyTx(tx), k.coll, k.id, it, true)
	if err != nil {
		return version{}, stored{}, fmt.Errorf("%s/%s: %w", k.coll, k.id, err)
	}
	return version{sealed: it.Value, rev: st.rev, hash: cipherHash(it.Value)}, st, nil
}

// ---- push ----

// push writes the device's changes after the push cursor to the hub, and
// returns the records it could not write because the hub's record moved
// since this device last pulled it.
func (s *syncRun) push(ctx context.Context) ([]recKey, error) {
	held, err := s.pushHeld(ctx) // sync_reseal.go
	if err != nil {
		return nil, err
	}
	for {
		stale, done, err := s.pushPass(ctx)
		if err != nil || done {
			return append(held, stale...), err
		}
	}
}

// pushPass reads the device's ledger after the push cursor, up to syncPass
// records, and pushes them syncBatch records at a time. It stops at the
// first batch with a record left behind (stale), which the next round
// takes after a pull; done when the ledger has no more.
func (s *syncRun) pushPass(ctx context.Context) ([]recKey, bool, error) {
	from, err := s.loadPush(ctx)
	if err != nil {
		return nil, false, err
	}
	first := map[recKey]uint64{} // each record's first entry in the pass
	var keys []recKey
	var end uint64
	full := false
	for e, err := range s.v.ledger.Read(ctx, from+1) {
		if err != nil {
			return nil, false, err
		}
		if isOwnRecordEntry(e) {
			k := recKey{e.Collection, e.ID}
			if _, ok := first[k]; !ok {
				if len(keys) == syncPass {
					full = true
					break
				}
				first[k] = e.Seq
				keys = append(keys, k)
			}
		}
		end = e.Seq
	}
	if end == 0 {
		return nil, true, nil
	}
	s.report(SyncPushing, from, end)
	s.appended, s.appendedHead = nil, ledger.Head{}
	for i := 0; ; i += syncBatch {
		batch := keys[i:min(i+syncBatch, len(keys))]
		// The cursor after this batch: before the next batch's first entry.
		upto := end
		if i+syncBatch < len(keys) {
			upto = first[keys[i+syncBatch]] - 1
		}
		stale, err := s.pushBatch(ctx, batch, first, from, upto)
		if err != nil {
			return nil, true, err
		}
		if len(stale) > 0 {
			return stale, true, s.skipEchoes(ctx)
		}
		s.report(SyncPushing, upto, end)
		if i+syncBatch >= len(keys) {
			return nil, !full, s.skipEchoes(ctx)
		}
	}
}

// skipEchoes moves the pull cursor past the feed entries this pass
// appended, when they directly follow it (see echoes), in a local commit
// of its own: once per pass, since reading them back is a ledger read.
func (s *syncRun) skipEchoes(ctx context.Context) error {
	appended, head := s.appended, s.appendedHead
	s.appended, s.appendedHead = nil, ledger.Head{}
	pull, err := s.echoes(ctx, appended, head)
	if err != nil || pull == nil {
		return err
	}
	return s.v.localCommit(ctx, nil, func(tx stores.Tx) error {
		return s.v.putSealedValue(tx, syncPullKey, encodePull(s.pulledWith(*pull)))
	})
}

// pushBatch pushes the records keys in one hub commit, then acknowledges
// them and moves the push cursor to upto (or before the first entry of a
// record left behind) in one local commit. The changes of collections the
// person may no longer write are left out, and held (sync_reseal.go).
func (s *syncRun) pushBatch(ctx context.Context, keys []recKey, first map[recKey]uint64, from, upto uint64) ([]recKey, error) {
	keys, refused := s.refuse(keys)
	var hold []recKey
	for _, k := range refused {
		if !s.held[k] {
			hold = append(hold, k)
		}
	}
	// The device's records and bases, as they stand now.
	dkeys := make([]string, 0, 3*len(keys))
	for _, k := range keys {
		dkeys = append(dkeys, s.v.recordKey(k.coll, k.id), s.v.baseKey(k.coll, k.id), s.v.conflictKey(k.coll, k.id))
	}
	got, err := fetch(ctx, s.v.store, dkeys)
	if err != nil {
		return nil, err
	}
	if err := s.resealBeforePush(ctx, keys, got); err != nil { // sync_reseal.go
		return nil, err
	}
	type change struct {
		k        recKey
		dv       version
		sum      []byte // dv's content sum (sync_content.go)
		b        base
		handoffs []string // the handoff keys of its pending marks
	}
	var changes []change
	for i, k := range keys {
		var c change
		c.k = k
		if _, ok := got[dkeys[3*i+2]]; ok {
			continue // a conflict kept for the application: held until resolved
		}
		if sealed, ok := got[dkeys[3*i]]; ok {
			st, err := s.v.openStored(k.coll, k.id, stores.Item{Value: sealed}, true)
			if err != nil {
				s.rep.Rejected = append(s.rep.Rejected, SyncRejected{Collection: k.coll, ID: k.id,
					Reason: "the device's record does not open: " + err.Error()})
				continue
			}
			c.dv = version{sealed: sealed, rev: st.rev, hash: cipherHash(sealed)}
			c.sum = contentSum(st)
			c.handoffs = s.v.handoffKeys(k.id, st.marks)
		}
		if raw, ok := got[dkeys[3*i+1]]; ok {
			b, err := s.v.openBase(k, raw)
			if err != nil {
				return nil, err
			}
			c.b = b
		}
		changes = append(changes, c)
	}
	// The handoff entries of the pending records, which travel with them
	// (sync_numbers.go).
	var handoffKeys []string
	for _, c := range changes {
		handoffKeys = append(handoffKeys, c.handoffs...)
	}
	handoffs, err := fetch(ctx, s.v.store, handoffKeys)
	if err != nil {
		return nil, err
	}
	// The hub commit: each record written where the hub still holds its base.
	hkeys := make([]string, len(changes), len(changes)+len(handoffKeys))
	for i, c := range changes {
		hkeys[i] = s.h.recordKey(c.k.coll, c.k.id)
	}
	lockKeys := append(hkeys, handoffKeys...)
	var acked []change
	var stale []recKey
	var pushed int
	var appended []ledger.Entry // the feed entries of this commit
	var head ledger.Head        // the feed's head after them
	if len(changes) > 0 {
		err = s.h.ledger.UpdateKeys(ctx, lockKeys, func(tx stores.Tx) error {
			acked, stale, pushed, appended = nil, nil, 0, nil
			var entries []ledger.Entry
			for i, c := range changes {
				var hh []byte
				var hit stores.Item
				switch it, err := tx.Get(hkeys[i]); {
				case err == nil:
					hh, hit = cipherHash(it.Value), it
				case !errors.Is(err, stores.ErrNotFound):
					return err
				}
				if c.dv.exists() && (bytes.Equal(hh, c.dv.hash) || bytes.Equal(hh, c.b.hash)) {
					if err := copyHandoffs(tx, c.handoffs, handoffs); err != nil {
						return err
					}
				}
				switch {
				case bytes.Equal(hh, c.dv.hash):
					// Already there: an earlier push committed.
				case bytes.Equal(hh, c.b.hash):
					if c.dv.exists() {
						if err := tx.Put(hkeys[i], c.dv.sealed); err != nil {
							return err
						}
						e := ledger.Entry{Kind: ledger.RecordPut, Collection: c.k.coll, ID: c.k.id, Revision: c.dv.rev, CipherHash: c.dv.hash}
						if c.b.sum != nil && bytes.Equal(c.sum, c.b.sum) {
							// The content of what the hub holds, re-sealed
							// (by however many rotations, or a re-seal
							// before this push): the entry says so
							// (sync_own.go).
							e.Reason = ResealedReason
						}
						entries = append(entries, e)
					} else {
						if hh != nil {
							if err := s.dropHubHandoffs(tx, c.k, hit); err != nil {
								return err
							}
						}
						if err := tx.Delete(hkeys[i]); err != nil {
							return err
						}
						entries = append(entries, ledger.Entry{Kind: ledger.RecordDelete, Collection: c.k.coll, ID: c.k.id, Revision: c.b.rev})
					}
					pushed++
				default:
					stale = append(stale, c.k)
					continue
				}
				acked = append(acked, c)
			}
			appended = entries
			for len(entries) > 0 {
				n := min(len(entries), 1024)
				h, err := s.h.ledger.AppendTx(ctx, tx, entries[:n]...)
				if err != nil {
					return err
				}
				head, entries = h, entries[n:]
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	bases := make(map[recKey]base, len(stale))
	for _, c := range changes {
		bases[c.k] = c.b
	}
	if err := s.checkStale(ctx, stale, bases); err != nil {
		return nil, err
	}
	// The local acknowledgement: bases of what the hub now holds, and the
	// cursor through the window, or up to the first record left behind.
	cur := upto
	for _, k := range stale {
		cur = min(cur, first[k]-1)
	}
	cur = max(cur, from)
	s.appended = append(s.appended, appended...)
	if len(appended) > 0 {
		s.appendedHead = head // (the hub's replay of people follows its links: it never reads these back)
	}
	err = s.v.localCommit(ctx, nil, func(tx stores.Tx) error {
		for _, c := range acked {
			b := base{rev: c.dv.rev, hash: c.dv.hash, sum: c.sum}
			if !c.dv.exists() {
				b = base{rev: c.b.rev}
			}
			if err := s.v.putSealedValue(tx, s.v.baseKey(c.k.coll, c.k.id), encodeBase(b)); err != nil {
				return err
			}
			if s.held[c.k] {
				if err := tx.Delete(s.v.heldKey(c.k)); err != nil {
					return err
				}
			}
		}
		for _, k := range hold {
			if err := s.v.putSealedValue(tx, s.v.heldKey(k), []byte{syncVersion}); err != nil {
				return err
			}
		}
		return s.v.putSealedValue(tx, syncPushKey, encodePush(cur))
	})
	if err != nil {
		return nil, err
	}
	if s.held == nil {
		s.held = map[recKey]bool{}
	}
	for _, c := range acked {
		delete(s.held, c.k)
	}
	for _, k := range hold {
		s.held[k] = true
	}
	s.rep.Pushed += pushed
	return stale, nil
}

// checkStale checks the records a push left behind (stale: the hub holds
// another state than the device's base, bases by record) against the hub's
// feed. A sync writes a record and its feed entry in one hub commit, and
// the device's base is the hub's state as of the feed entries through its
// pull cursor (it applied them, or pushed them itself), so a record the hub
// changed since has a feed entry after the cursor, which the next round's
// pull applies. One without such an entry is either ahead of the feed (a
// revision newer than the base: a numbering pass on the hub stamps its
// records before it appends their entries, and one stopped between the two
// leaves them so until a pass runs again), left behind as a pull leaves a
// record ahead of its entry, or it was changed behind the feed (a pushed
// record the hub lost, an older revision put back, a record injected at an
// id this device writes): ErrHubTampered. Without this check the push would
// find it stale at every round of every sync, for ever, and never say why.
// The feed is read after the hub commit that found them stale, so an entry
// committed with a change that commit saw is there.
func (s *syncRun) checkStale(ctx context.Context, stale []recKey, bases map[recKey]base) error {
	if len(stale) == 0 {
		return nil
	}
	cur, err := s.loadPull(ctx)
	if err != nil {
		return err
	}
	since, err := s.laterEntries(ctx, cur.seq, stale)
	if err != nil {
		return err
	}
	for _, k := range stale {
		if since[k] {
			continue
		}
		ahead, err := s.hubAhead(ctx, k, bases[k])
		if err != nil {
			return err
		}
		if !ahead {
			return fmt.Errorf("%w: the hub's %s/%s is not the state its feed names through entry %d (lost, replaced or injected behind the feed); this device's change is not pushed",
				ErrHubTampered, k.coll, k.id, cur.seq)
		}
		if s.aheadOfFeed == nil {
			s.aheadOfFeed = map[recKey]bool{}
		}
		s.aheadOfFeed[k] = true
	}
	return nil
}

// hubAhead reports whether the hub holds record k at a revision newer
// than b, the device's base of it (see checkStale).
func (s *syncRun) hubAhead(ctx context.Context, k recKey, b base) (bool, error) {
	it, err := s.h.store.Get(ctx, s.h.recordKey(k.coll, k.id))
	if errors.Is(err, stores.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rev, err := s.h.recordRevision(k.coll, k.id, it.Value)
	return err == nil && rev > b.rev, nil
}

// echoes returns the pull cursor moved past the feed entries this device
// just appended (appended, ending at head), when they directly follow the
// pull cursor: a pull need not fetch back what this device wrote. The
// entries are read back from the feed and must be the ones appended (the
// chain checks them); nil when they do not follow the cursor.
func (s *syncRun) echoes(ctx context.Context, appended []ledger.Entry, head ledger.Head) (*pullCursor, error) {
	if len(appended) == 0 {
		return nil, nil
	}
	cur, err := s.loadPull(ctx)
	if err != nil {
		return nil, err
	}
	if head.Seq-uint64(len(appended)) != cur.seq {
		return nil, nil
	}
	i := 0
	var end ledger.Entry
	for e, err := range s.h.ledger.Read(ctx, max(cur.seq, 1)) {
		if err != nil {
			return nil, feedErr(err)
		}
		if e.Seq == cur.seq {
			if !bytes.Equal(entryHash(e), cur.hash) {
				return nil, fmt.Errorf("%w: the feed entry at %d is not the one this device applied (a rolled back or forked hub)", ErrHubTampered, e.Seq)
			}
			continue
		}
		if e.Seq > head.Seq {
			break
		}
		w := appended[i]
		if e.Kind != w.Kind || e.Collection != w.Collection || e.ID != w.ID || e.Revision != w.Revision || !bytes.Equal(e.CipherHash, w.CipherHash) {
			return nil, nil // not ours after all: a pull reads them
		}
		i++
		end = e
	}
	if i != len(appended) {
		return nil, nil
	}
	return &pullCursor{seq: end.Seq, hash: entryHash(end)}, nil
}

// ---- helpers ----

func isRecordEntry(e ledger.Entry) bool {
	return e.Kind == ledger.RecordPut || e.Kind == ledger.RecordDelete ||
		(e.Kind == ledger.NumberAssigned && len(e.CipherHash) > 0)
}

// isOwnRecordEntry: a record change this device made (not one it pulled).
func isOwnRecordEntry(e ledger.Entry) bool { return isRecordEntry(e) }

// entryHash identifies a feed entry (its canonical encoding).
func entryHash(e ledger.Entry) []byte {
	b, err := e.MarshalBinary()
	if err != nil {
		return nil
	}
	return cipherHash(b)
}

// fetch reads keys from st with stores.GetMany (one round trip on
// PostgreSQL, a read without locks) and returns those found. The answer
// need not be one snapshot, and nothing here needs one: a hub record is
// checked against its own feed entry (a record ahead of it waits for the
// next sync, one behind it must be superseded by a later entry), and on
// the device the sync state it reads (bases, kept conflicts) is written
// by syncs only, one at a time, while a record the application writes
// meanwhile is pushed as read or by the next pass, its ledger entry being
// past the cursor this pass moves to.
func fetch(ctx context.Context, st stores.Store, keys []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	items, err := stores.GetMany(ctx, st, keys)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		out[it.Key] = it.Value
	}
	return out, nil
}

func (v *Vault) baseKey(coll, id string) string {
	return v.prefix + syncBaseDir + coll + "/" + id
}

// putSealedValue seals plain at the vault key name and puts it in tx.
func (v *Vault) putSealedValue(tx stores.Tx, name string, plain []byte) error {
	key := name
	if !strings.HasPrefix(name, v.prefix) {
		key = v.prefix + name
	}
	sealed, err := v.seal.Seal(key, plain)
	if err != nil {
		return err
	}
	return tx.Put(key, sealed)
}

// getSealedValue reads and opens the vault value at name; nil when absent.
func (v *Vault) getSealedValue(ctx context.Context, name string) ([]byte, error) {
	key := v.prefix + name
	it, err := v.store.Get(ctx, key)
	if errors.Is(err, stores.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	plain, err := v.seal.Open(key, it.Value)
	if err != nil {
		return nil, v.openFailed(err)
	}
	return plain, nil
}

func (s *syncRun) loadPull(ctx context.Context) (pullCursor, error) {
	plain, err := s.v.getSealedValue(ctx, syncPullKey)
	if err != nil || plain == nil {
		return pullCursor{}, err
	}
	c, err := decodePull(plain)
	if err != nil {
		return pullCursor{}, fmt.Errorf("sync pull cursor: %w", ErrTampered)
	}
	return c, nil
}

func decodePull(plain []byte) (pullCursor, error) {
	r := codec.NewReader(plain)
	var c pullCursor
	switch v := r.Byte(); {
	case r.Err() != nil:
	case v == pullVersion2:
		c.known = true
	case v == syncVersion:
	default:
		r.Failf("unknown version %d", v)
	}
	c.seq = r.Uvarint()
	if h := r.Bytes(maxSyncHash); len(h) > 0 {
		c.hash = bytes.Clone(h)
	}
	if c.known {
		if c.limited = r.Bool(); c.limited {
			n := r.Count(maxPulledCols, 1)
			for range n {
				c.cols = append(c.cols, r.String(maxKeyringName))
			}
		}
	}
	if err := r.End(); err != nil {
		return pullCursor{}, err
	}
	return c, nil
}

// maxPulledCols bounds the collections a pull cursor records.
const maxPulledCols = 1 << 16

func encodePull(c pullCursor) []byte {
	if !c.known {
		b := []byte{syncVersion}
		b = codec.AppendUvarint(b, c.seq)
		return codec.AppendBytes(b, c.hash)
	}
	b := []byte{pullVersion2}
	b = codec.AppendUvarint(b, c.seq)
	b = codec.AppendBytes(b, c.hash)
	if !c.limited {
		return append(b, 0)
	}
	b = append(b, 1)
	b = codec.AppendUvarint(b, uint64(len(c.cols)))
	for _, col := range c.cols {
		b = codec.AppendString(b, col)
	}
	return b
}

func (s *syncRun) loadPush(ctx context.Context) (uint64, error) {
	plain, err := s.v.getSealedValue(ctx, syncPushKey)
	if err != nil || plain == nil {
		return 0, err
	}
	seq, err := decodePush(plain)
	if err != nil {
		return 0, fmt.Errorf("sync push cursor: %w", ErrTampered)
	}
	return seq, nil
}

func decodePush(plain []byte) (uint64, error) {
	r := codec.NewReader(plain)
	r.Version(syncVersion)
	seq := r.Uvarint()
	if err := r.End(); err != nil {
		return 0, err
	}
	return seq, nil
}

func encodePush(seq uint64) []byte {
	return codec.AppendUvarint([]byte{syncVersion}, seq)
}

func encodeBase(b base) []byte {
	if b.sum != nil {
		out := []byte{syncBaseVersion2}
		out = codec.AppendUvarint(out, b.rev)
		out = codec.AppendBytes(out, b.hash)
		return codec.AppendBytes(out, b.sum)
	}
	out := []byte{syncVersion}
	out = codec.AppendUvarint(out, b.rev)
	return codec.AppendBytes(out, b.hash)
}

// loadBase reads the base of k in tx (zero when none).
func (v *Vault) loadBase(tx stores.Tx, k recKey) (base, error) {
	it, err := tx.Get(v.baseKey(k.coll, k.id))
	if errors.Is(err, stores.ErrNotFound) {
		return base{}, nil
	}
	if err != nil {
		return base{}, err
	}
	return v.openBase(k, it.Value)
}

func (v *Vault) openBase(k recKey, sealed []byte) (base, error) {
	key := v.baseKey(k.coll, k.id)
	plain, err := v.seal.Open(key, sealed)
	if err != nil {
		return base{}, v.openFailed(err)
	}
	b, err := decodeBase(plain)
	if err != nil {
		return base{}, fmt.Errorf("sync state of %s/%s: %w", k.coll, k.id, ErrTampered)
	}
	return b, nil
}

func decodeBase(plain []byte) (base, error) {
	r := codec.NewReader(plain)
	v := r.Byte()
	if r.Err() == nil && v != syncVersion && v != syncBaseVersion2 {
		r.Failf("unknown version %d", v)
	}
	b := base{rev: r.Uvarint()}
	if h := r.Bytes(maxSyncHash); len(h) > 0 {
		b.hash = bytes.Clone(h)
	}
	if v == syncBaseVersion2 {
		if sum := r.Bytes(maxSyncHash); len(sum) > 0 {
			b.sum = bytes.Clone(sum)
		} else {
			r.Fail("an empty content sum")
		}
	}
	if err := r.End(); err != nil {
		return base{}, err
	}
	return b, nil
}
