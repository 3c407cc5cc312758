package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"maps"
	"slices"
)

// People replay.
//
// Who may do what in a vault is what its ledger's people entries say,
// replayed in order from the first: a PersonGranted entry gives a person
// a role and a signing key, a KeysRenewed entry of theirs (signed by that
// key) replaces the key, a PersonRevoked entry ends them, a
// KeyringUpgraded entry introduces a person of a vault of layout version 1
// as an owner with their new key. Each such entry counts only when the
// commit it belongs to is signed by its author (its own signature, or the
// signature of the commit's last entry, which covers it through the
// chain), with the key the replay gives that author at that position, and
// when the author may make the change there: an owner not revoked for a
// grant or a revocation, a holder of a vault of layout version 1 for their
// own upgrade. A people entry that fails is tampering (a *SignatureError):
// the chain key that every person of the vault holds lets any of them
// write an entry, never sign one in an owner's name.
//
// The replay starts from nobody. The author of a people commit the replay
// has not introduced is asked of the caller (PeopleVouch): the vault's
// first owner, who granted themselves, or, on a hub's ledger that began
// after the vault did, an owner the vault's keyring vouches for. The first
// root (a person who granted themselves) the replay accepts is the
// ledger's genesis; no other root is accepted after it.
//
// A replay is incremental: ReplayPeople continues from where the last one
// stopped, and starts over when the ledger no longer holds the history it
// replayed (a store that rolled it back or forked it: the ledger's own
// checks report that).

// PersonState is one person as the people entries of a ledger leave them.
type PersonState struct {
	// Key is the signing key of the person's current grant.
	Key []byte
	// Role is "owner", "writer" or "reader".
	Role string
	// Collections limits the person to these collections (nil: all).
	Collections []string
	// GrantedBy is the author of the entry that gave the current grant
	// (the person themselves for the genesis and for an upgrade).
	GrantedBy string
	// GranterKey is the key GrantedBy signed that entry with.
	GranterKey []byte
	// Seq is the position of that entry; 0 for a person the caller
	// vouched for (PeopleVouch), whom no entry of this ledger introduced.
	Seq uint64
	// Revoked is true once a PersonRevoked entry ended the grant, at
	// position RevokedSeq.
	Revoked    bool
	RevokedSeq uint64
	// Legacy is true for a person introduced by a KeyringUpgraded entry.
	Legacy bool
	// RenewedSeq is the position of the person's last KeysRenewed entry
	// since their current grant (0: none): Key is the one it names.
	RenewedSeq uint64
	// Held lists every signing key the person held, with its role, in
	// order (a person granted again after a revocation holds a new one).
	Held []HeldKey
	// RevokedKeys lists the signing keys a PersonRevoked entry ended: a
	// grant with one of them never holds again. RevokedAt holds, at the
	// same index, the position of the entry that ended each.
	RevokedKeys [][]byte
	RevokedAt   []uint64
	// Spans are the person's grants in ledger order, each with where it
	// held: who may sign what at a position (ReadVerified).
	Spans []GrantSpan
}

// GrantSpan is a grant of a person and the positions it held at: from
// From (the entry after the one that made it; 0 for a person the caller
// vouched for) to To (the entry that ended it: a revocation or a later
// grant; 0 while it holds).
type GrantSpan struct {
	Key         []byte
	Role        string
	Collections []string
	From, To    uint64
}

// grantAt returns the grant of p that held at position seq.
func (p *PersonState) grantAt(seq uint64) (GrantSpan, bool) {
	for i := len(p.Spans) - 1; i >= 0; i-- {
		g := p.Spans[i]
		if g.From <= seq && (g.To == 0 || seq < g.To) {
			return g, true
		}
	}
	return GrantSpan{}, false
}

// end closes p's open grant at position seq.
func (p *PersonState) end(seq uint64) {
	if n := len(p.Spans); n > 0 && p.Spans[n-1].To == 0 {
		p.Spans[n-1].To = seq
	}
}

// HeldKey is a signing key a person held, with the role it came with.
type HeldKey struct {
	Key  []byte
	Role string
}

// Vouched is what PeopleVouch says of a person the replay has not
// introduced.
type Vouched struct {
	// Key is the person's signing key, Role their role.
	Key  []byte
	Role string
	// Root is true for a person who granted themselves: accepted once, as
	// the ledger's genesis owner.
	Root bool
	// Earlier, when set, is a key the person held before Key (an older
	// entry of theirs, on another keyring the caller trusts): a read that
	// checks authors by position (ReadVerified) takes it where the
	// ledger has not named it.
	Earlier []byte
	// Renewed are the keys the person held since their grant before Key,
	// oldest first (their renewals: a secret change, a recovery), the
	// first the grant's. A replay introduces the person with the first of
	// these and Key that signs their commit (a ledger that records their
	// renewals begins with the grant's; one begun after a renewal, with a
	// later one); KeysRenewed entries lead on from there.
	Renewed [][]byte
}

// PeopleVouch returns what the caller knows of name, the author of a
// people commit the replay has not introduced, ok false when nothing.
type PeopleVouch func(name string) (v Vouched, ok bool)

// PeopleState is the replay of a ledger's people entries up to a position.
// Its zero value is the state before the first entry. It is not safe for
// concurrent use; Clone it to hand it on.
type PeopleState struct {
	next    uint64 // the first position not replayed (0 or 1: none)
	lastMAC []byte // the chain MAC of entry next-1
	people  map[string]*PersonState
	genesis string

	// began is true once entry 1 was replayed; legacy when it was unsigned
	// or a self-upgrade: the ledger of a vault of layout version 1.
	began, legacy bool
	// holders are the layout version 1 holders the first upgrade named
	// (nil: it named none, an upgrade written before upgrades named them).
	holders  []string
	upgraded bool // a KeyringUpgraded entry was replayed
	// floors are the generations owners' KeysResealed entries say every
	// record was re-sealed with, sorted, each once (one per rotation).
	floors []uint64
	// lastPeople is the last linked people entry replayed (0: none);
	// partial is true once entries before next were skipped (only the
	// linked people commits read).
	lastPeople uint64
	partial    bool
}

// Next returns the first position the state has not replayed.
func (s *PeopleState) Next() uint64 { return max(s.next, 1) }

// Person returns the state of name, ok false for a person no entry names.
func (s *PeopleState) Person(name string) (PersonState, bool) {
	p := s.people[name]
	if p == nil {
		return PersonState{}, false
	}
	return *p, true
}

// Names returns every person an entry names, sorted.
func (s *PeopleState) Names() []string { return slices.Sorted(maps.Keys(s.people)) }

// Genesis returns the ledger's genesis owner: the person who granted
// themselves and signed its first people commit ("" when none did yet).
func (s *PeopleState) Genesis() string { return s.genesis }

// Legacy reports whether the ledger began as a vault of layout version 1
// did: its first entry unsigned, or a holder's upgrade.
func (s *PeopleState) Legacy() bool { return s.legacy }

// Floor returns the highest generation a KeysResealed entry says every
// record of the store was re-sealed with (0: none), by an owner not
// revoked at its position (a writer's is ignored).
func (s *PeopleState) Floor() uint64 {
	if n := len(s.floors); n > 0 {
		return s.floors[n-1]
	}
	return 0
}

// FloorAtMost is Floor among the generations up to gen: a KeysResealed
// entry naming a later generation than the caller's keyring holds is not
// one a rotation of the vault finished, and must not hide the floors that
// are.
func (s *PeopleState) FloorAtMost(gen uint64) uint64 {
	i, found := slices.BinarySearch(s.floors, gen)
	if found {
		return gen
	}
	if i == 0 {
		return 0
	}
	return s.floors[i-1]
}

// Holders returns the holders of layout version 1 entries that the
// vault's first upgrade recorded, sorted; nil when it recorded none.
func (s *PeopleState) Holders() []string { return slices.Clone(s.holders) }

// Clone returns a copy of s that shares nothing with it.
func (s *PeopleState) Clone() *PeopleState {
	c := *s
	c.lastMAC = bytes.Clone(s.lastMAC)
	c.holders = slices.Clone(s.holders)
	c.floors = slices.Clone(s.floors)
	c.people = make(map[string]*PersonState, len(s.people))
	for n, p := range s.people {
		q := *p
		q.Collections = slices.Clone(p.Collections)
		q.Held = slices.Clone(p.Held)
		q.RevokedKeys = slices.Clone(p.RevokedKeys)
		q.RevokedAt = slices.Clone(p.RevokedAt)
		q.Spans = slices.Clone(p.Spans)
		c.people[n] = &q
	}
	return &c
}

// PeopleReplayer is implemented by a vault's ledger. ReplayPeople brings
// st up to the ledger's head (see above), reading only the people entries
// and the commits they belong to when the head links them (a head written
// since links were), else every entry from st's position. ReplayAllPeople
// reads every entry whatever the head says, and checks that the links
// agree with what it read: a rotation, which hands out new keys, asks it,
// so that a head whose link someone holding the chain key turned back to
// an older people entry (hiding the later ones from ReplayPeople) is
// caught there (ErrTampered), as Verify catches it. On error st is left
// as it was.
type PeopleReplayer interface {
	ReplayPeople(ctx context.Context, st *PeopleState, vouch PeopleVouch) error
	ReplayAllPeople(ctx context.Context, st *PeopleState, vouch PeopleVouch) error
}

// isPeopleKind reports whether an entry of kind k changes who may do
// what (and so is linked, and replayed): a change of people, or the end
// of a rotation's re-sealing (the generation floor).
func isPeopleKind(k Kind) bool {
	return k == PersonGranted || k == PersonRevoked || k == KeyringUpgraded || k == KeysResealed || k == KeysRenewed
}

// peopleRun is the commit a replay is inside: the Covered entries since
// the last signed one, by one author, and the people entries among them.
type peopleRun struct {
	start  uint64
	actor  string
	people []Entry
}

// ReplayPeople brings st up to the head of l.
func (l *ledger) ReplayPeople(ctx context.Context, st *PeopleState, vouch PeopleVouch) error {
	return l.replayInto(ctx, st, vouch, false)
}

// ReplayAllPeople brings st up to the head of l reading every entry.
func (l *ledger) ReplayAllPeople(ctx context.Context, st *PeopleState, vouch PeopleVouch) error {
	return l.replayInto(ctx, st, vouch, true)
}

func (l *ledger) replayInto(ctx context.Context, st *PeopleState, vouch PeopleVouch, all bool) error {
	if err := l.enter(); err != nil {
		return err
	}
	defer l.gate.Exit()
	work := st.Clone()
	if all && work.partial {
		work = &PeopleState{}
	}
	for range 3 {
		again, err := l.replayPeople(ctx, work, vouch, all)
		if err != nil {
			return err
		}
		if !again {
			*st = *work
			return nil
		}
		// Not the history replayed so far: replay the ledger as it is.
		work = &PeopleState{}
	}
	return fmt.Errorf("ledger: people: the ledger kept changing under the replay: %w", ErrTampered)
}

// replayPeople brings st up to the head, reading the linked people
// commits only unless all; again reports that the ledger no longer holds
// what st replayed (st is then to be dropped).
func (l *ledger) replayPeople(ctx context.Context, st *PeopleState, vouch PeopleVouch, all bool) (again bool, err error) {
	if st.people == nil {
		st.people = map[string]*PersonState{}
	}
	hs, _, err := l.loadHeadAfter(ctx, l.pinned())
	if err != nil {
		return false, err
	}
	from := st.Next()
	switch {
	case from > hs.Seq+1:
		return true, nil // rolled back
	case from > 1:
		r, err := l.recordAt(ctx, hs, from-1)
		if err != nil {
			return false, err
		}
		if !bytes.Equal(r.mac(), st.lastMAC) {
			return true, nil
		}
	}
	if all || hs.linkFrom == 0 || from < hs.linkFrom {
		// Every entry, up to the head or to where links begin.
		stop := hs.Seq
		if !all && hs.linkFrom != 0 {
			stop = hs.linkFrom - 1
		}
		if again, err := l.replayWalk(ctx, st, hs, stop, vouch); err != nil || again {
			return again, err
		}
		if st.Next() > hs.Seq {
			return false, st.checkHeadLink(hs.Head)
		}
	}
	return false, l.replayLinked(ctx, st, hs, vouch)
}

// replayWalk replays every entry from st's position to stop.
func (l *ledger) replayWalk(ctx context.Context, st *PeopleState, hs headState, stop uint64, vouch PeopleVouch) (again bool, err error) {
	from := st.Next()
	if from > stop {
		return false, nil
	}
	var (
		run      *peopleRun
		bad      error
		diverged bool
	)
	_, err = l.walk(ctx, from, false, func(r record, prev []byte) bool {
		if r.entry.Seq > stop {
			return false
		}
		if r.entry.Seq == from && from > 1 && !bytes.Equal(prev, st.lastMAC) {
			diverged = true
			return false
		}
		var sb *SignatureError
		run, sb = st.step(r, prev, run, vouch)
		if sb != nil {
			bad = sb
			return false
		}
		if bad = st.link(r.entry, hs.linkFrom); bad != nil {
			return false
		}
		st.next, st.lastMAC = r.entry.Seq+1, bytes.Clone(r.mac())
		return true
	})
	switch {
	case err != nil:
		return false, err
	case bad != nil:
		return false, bad
	case diverged:
		return true, nil
	case run != nil && len(run.people) > 0:
		// People entries no signature vouches for, at the stop (the head,
		// or the end of the entries before links: a commit ends there).
		return false, &SignatureError{Seq: run.people[0].Seq, Actor: run.actor, Problem: Unsigned}
	}
	if st.next <= stop {
		// The walk ended before stop (the head moved back meanwhile).
		return true, nil
	}
	return false, nil
}

// link checks the people link of e, at or after linkFrom, against the
// people entry before it, and records e as the last one.
func (st *PeopleState) link(e Entry, linkFrom uint64) error {
	if !isPeopleKind(e.Kind) || linkFrom == 0 || e.Seq < linkFrom {
		return nil
	}
	if e.From != st.lastPeople {
		return &TamperError{Seq: e.Seq, Err: fmt.Errorf("%w: people entry links to %d, the one before is %d", ErrMalformed, e.From, st.lastPeople)}
	}
	st.lastPeople = e.Seq
	return nil
}

// checkHeadLink checks that head names the last people entry st read.
func (st *PeopleState) checkHeadLink(head Head) error {
	if head.linkFrom != 0 && head.people != st.lastPeople {
		return &TamperError{Seq: head.Seq, Err: fmt.Errorf("%w: the head names people entry %d, the last is %d", ErrMalformed, head.people, st.lastPeople)}
	}
	return nil
}

// replayLinked replays the people entries from st's position (at or after
// linkFrom) to the head by their links: each commit holding one is read
// whole, its chain checked, and replayed as a walk would.
func (l *ledger) replayLinked(ctx context.Context, st *PeopleState, hs headState, vouch PeopleVouch) error {
	from := st.Next()
	if !st.began && hs.Seq > 0 {
		r, err := l.recordAt(ctx, hs, 1)
		if err != nil {
			return err
		}
		st.began = true
		st.legacy = r.entry.unsigned() || (r.entry.Kind == KeyringUpgraded && r.entry.ID == r.entry.Actor)
	}
	// The linked people entries after from, newest first.
	var qs []uint64
	for q := hs.people; q >= from && q != 0; {
		r, err := l.recordAt(ctx, hs, q)
		if err != nil {
			return err
		}
		next := r.entry.From
		if !isPeopleKind(r.entry.Kind) || next >= q || (next != 0 && next < hs.linkFrom) {
			return &TamperError{Seq: q, Err: fmt.Errorf("%w: not a people entry linked to an earlier one", ErrMalformed)}
		}
		qs = append(qs, q)
		q = next
		if q < from && q != st.lastPeople {
			// The new links must continue the ones replayed.
			return &TamperError{Seq: qs[len(qs)-1], Err: fmt.Errorf("%w: people entry links to %d, the one before is %d", ErrMalformed, q, st.lastPeople)}
		}
	}
	if len(qs) == 0 && hs.people != st.lastPeople {
		return st.checkHeadLink(hs.Head)
	}
	slices.Reverse(qs)
	var done uint64
	for _, q := range qs {
		if q <= done {
			continue // in a commit replayed already
		}
		end, err := l.replayCommit(ctx, st, hs, q, vouch)
		if err != nil {
			return err
		}
		done = end
	}
	st.partial = st.partial || st.next <= hs.Seq
	st.next, st.lastMAC, st.lastPeople = hs.Seq+1, bytes.Clone(hs.MAC), hs.people
	return nil
}

// replayCommit replays the commit holding the people entry at q: from the
// entry after the previous commit's last (Covered entries before q are
// the commit's) to its signed last entry, checking their chain from the
// MAC of the entry before. It returns the commit's last position.
func (l *ledger) replayCommit(ctx context.Context, st *PeopleState, hs headState, q uint64, vouch PeopleVouch) (uint64, error) {
	start, prev := q, []byte(nil)
	for start > 1 {
		r, err := l.recordAt(ctx, hs, start-1)
		if err != nil {
			return 0, err
		}
		if !r.entry.Covered {
			prev = r.mac()
			break
		}
		start--
	}
	var run *peopleRun
	for seq := start; seq <= hs.Seq; seq++ {
		r, err := l.recordAt(ctx, hs, seq)
		if err != nil {
			return 0, err
		}
		if !bytes.Equal(l.chainMAC(prev, seq, r.enc()), r.mac()) {
			return 0, &ChainError{Seq: seq}
		}
		var bad *SignatureError
		if run, bad = st.step(r, prev, run, vouch); bad != nil {
			return 0, bad
		}
		if isPeopleKind(r.entry.Kind) {
			st.lastPeople = seq
		}
		prev = r.mac()
		if !r.entry.Covered {
			if run != nil && len(run.people) > 0 {
				return 0, &SignatureError{Seq: run.people[0].Seq, Actor: run.actor, Problem: Unsigned}
			}
			return seq, nil
		}
	}
	return 0, &SignatureError{Seq: q, Problem: Unsigned}
}

// recordAt reads and decodes whole the record at position seq (at most
// the head's).
func (l *ledger) recordAt(ctx context.Context, hs headState, seq uint64) (record, error) {
	return l.readAt(ctx, hs, seq, false)
}

// step replays r, whose predecessor's MAC is prev, inside run (nil: none
// open), and returns the run open after it.
func (st *PeopleState) step(r record, prev []byte, run *peopleRun, vouch PeopleVouch) (*peopleRun, *SignatureError) {
	e := r.entry
	if e.Seq == 1 {
		st.began = true
		st.legacy = e.unsigned() || (e.Kind == KeyringUpgraded && e.ID == e.Actor)
	}
	people := isPeopleKind(e.Kind)
	broken := func(at uint64, actor string) *SignatureError {
		return &SignatureError{Seq: at, Actor: actor, Problem: BadSignature}
	}
	if len(e.Signature) == 0 && !e.Covered {
		// Unsigned: a ledger of layout version 1 before its first signed
		// entry (Verify refuses one after it). A people entry is never
		// unsigned.
		if run != nil && len(run.people) > 0 {
			return nil, &SignatureError{Seq: run.people[0].Seq, Actor: run.actor, Problem: Unsigned}
		}
		if people {
			return nil, &SignatureError{Seq: e.Seq, Actor: e.Actor, Problem: Unsigned}
		}
		return nil, nil
	}
	if run != nil && run.actor != e.Actor {
		if len(run.people) > 0 {
			return nil, broken(run.people[0].Seq, run.actor)
		}
		run = nil
	}
	if e.Covered {
		if run == nil {
			run = &peopleRun{start: e.Seq, actor: e.Actor}
		}
		if people {
			run.people = append(run.people, e)
		}
		return run, nil
	}
	var covered uint64
	var entries []Entry
	if run != nil {
		covered, entries = e.Seq-run.start, run.people
	}
	if people {
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	key, alts, problem := st.signerKey(e.Actor, entries, vouch)
	if problem != 0 {
		return nil, &SignatureError{Seq: entries[0].Seq, Actor: e.Actor, Problem: problem}
	}
	enc := r.enc()
	msg := signedMessage(nil, prev, enc[:len(enc)-1-signatureSize], covered)
	if !ed25519.Verify(key, msg, e.Signature) {
		if i := slices.IndexFunc(alts, func(k []byte) bool { return ed25519.Verify(k, msg, e.Signature) }); i >= 0 {
			key = alts[i]
			st.people[e.Actor].rekey(key)
		} else if ks := st.renewedElsewhere(e.Actor, vouch); slices.ContainsFunc(ks, func(k []byte) bool { return ed25519.Verify(k, msg, e.Signature) }) {
			key = ks[slices.IndexFunc(ks, func(k []byte) bool { return ed25519.Verify(k, msg, e.Signature) })]
			st.people[e.Actor].renew(key, e.Seq-covered)
		} else {
			return nil, &SignatureError{Seq: e.Seq, Actor: e.Actor, Problem: BadSignature}
		}
	}
	for _, p := range entries {
		if problem := st.apply(p, key); problem != 0 {
			return nil, &SignatureError{Seq: p.Seq, Actor: p.Actor, Problem: problem}
		}
	}
	return nil, nil
}

// signerKey returns the key the author of a commit holding the people
// entries signs with: theirs as the replay knows them, the key their own
// upgrade introduces, or the key the caller vouches for; alts are the
// other keys the caller vouches for (Vouched.Renewed), one of which may
// sign instead (the caller then calls rekey).
func (st *PeopleState) signerKey(actor string, entries []Entry, vouch PeopleVouch) (key []byte, alts [][]byte, problem SignatureProblem) {
	for _, p := range entries {
		if p.Kind == KeyringUpgraded && p.ID == actor {
			// The upgrade is signed by the key it introduces; whether the
			// author may introduce one, apply decides.
			return p.SigningKey, nil, 0
		}
	}
	if s := st.people[actor]; s != nil {
		if s.Revoked || len(s.Key) != signingKeySize {
			return nil, nil, Revoked
		}
		return s.Key, nil, 0
	}
	if vouch == nil {
		return nil, nil, UnknownSigner
	}
	v, ok := vouch(actor)
	if !ok || len(v.Key) != signingKeySize {
		return nil, nil, UnknownSigner
	}
	if v.Root {
		if st.genesis != "" {
			return nil, nil, UnknownSigner // one genesis
		}
		st.genesis, v.Role = actor, roleOwner
	}
	// The grant's key first: a ledger that records the person's renewals
	// holds their commits signed with it before them.
	keys := append(slices.Clone(v.Renewed), v.Key)
	keys = slices.DeleteFunc(keys, func(k []byte) bool { return len(k) != signingKeySize })
	key, alts = keys[0], keys[1:]
	st.people[actor] = &PersonState{Key: key, Role: v.Role, GrantedBy: actor, Held: []HeldKey{{Key: key, Role: v.Role}},
		Spans: []GrantSpan{{Key: key, Role: v.Role}}}
	if !v.Root {
		st.people[actor].GrantedBy = ""
	}
	return key, alts, 0
}

// renewedElsewhere returns the keys the caller vouches for actor, known
// to the replay and not revoked, renewed from the key the replay gives
// them (after it in Vouched.Renewed, then Vouched.Key): renewals made on
// another device, which this ledger does not record (the hub's does),
// vouched for by the keyring's chain of renewals, each signed by the key
// it replaced. nil when the caller's keyring does not say they renewed it.
func (st *PeopleState) renewedElsewhere(actor string, vouch PeopleVouch) [][]byte {
	p := st.people[actor]
	if p == nil || p.Revoked || vouch == nil {
		return nil
	}
	v, ok := vouch(actor)
	if !ok || len(v.Key) != signingKeySize {
		return nil
	}
	return keysAfter(append(slices.Clone(v.Renewed), v.Key), p.Key)
}

// keysAfter returns the keys of chain after key (nil when key is not in
// it).
func keysAfter(chain [][]byte, key []byte) [][]byte {
	i := slices.IndexFunc(chain, func(k []byte) bool { return bytes.Equal(k, key) })
	if i < 0 {
		return nil
	}
	return chain[i+1:]
}

// renew gives p key from position from on (a renewal, see
// renewedElsewhere).
func (p *PersonState) renew(key []byte, from uint64) {
	p.end(from)
	p.Spans = append(p.Spans, GrantSpan{Key: key, Role: p.Role, Collections: p.Collections, From: from})
	p.Held = append(p.Held, HeldKey{Key: key, Role: p.Role})
	p.Key = key
}

// rekey makes key the one p, just vouched for, holds (another of the keys
// vouched for signed their first commit).
func (p *PersonState) rekey(key []byte) {
	p.Key, p.Held[0].Key, p.Spans[0].Key = key, key, key
}

// apply replays the people entry p, signed by its author with key.
func (st *PeopleState) apply(p Entry, key []byte) SignatureProblem {
	author := st.people[p.Actor]
	switch p.Kind {
	case PersonGranted, PersonRevoked:
		if author == nil || author.Revoked || author.Role != roleOwner || !bytes.Equal(author.Key, key) {
			return NotPermitted
		}
		if p.Kind == PersonRevoked {
			s := st.people[p.ID]
			if s == nil {
				s = &PersonState{}
				st.people[p.ID] = s
			}
			// The entry names the key it ends (entries written before
			// they did end the person's current grant).
			key := p.SigningKey
			if key == nil {
				key = s.Key
			}
			if key != nil {
				s.RevokedKeys = append(s.RevokedKeys, key)
				s.RevokedAt = append(s.RevokedAt, p.Seq)
			}
			if key == nil || s.Key == nil || bytes.Equal(key, s.Key) {
				s.Revoked, s.RevokedSeq, s.Key = true, p.Seq, key
				s.end(p.Seq)
			}
			return 0
		}
		if len(p.SigningKey) != signingKeySize || !validRole(p.Reason) {
			return NotPermitted
		}
		cols, _, _ := p.GrantCollections()
		s := st.people[p.ID]
		if s == nil {
			s = &PersonState{}
			st.people[p.ID] = s
		}
		held := s.Held
		if len(held) == 0 || !bytes.Equal(held[len(held)-1].Key, p.SigningKey) || held[len(held)-1].Role != p.Reason {
			held = append(held, HeldKey{Key: p.SigningKey, Role: p.Reason})
		}
		s.end(p.Seq)
		spans := append(s.Spans, GrantSpan{Key: p.SigningKey, Role: p.Reason, Collections: limit(cols), From: p.Seq + 1})
		*s = PersonState{Key: p.SigningKey, Role: p.Reason, Collections: limit(cols), GrantedBy: p.Actor,
			GranterKey: key, Seq: p.Seq, Held: held, RevokedKeys: s.RevokedKeys, RevokedAt: s.RevokedAt, Spans: spans}
	case KeysResealed:
		if author == nil || author.Revoked || !bytes.Equal(author.Key, key) || (author.Role != roleOwner && author.Role != roleWriter) {
			return NotPermitted
		}
		// Only an owner's sets the floor. A writer's handle finishing a
		// rotation's re-seal wrote one once (so a writer's is not refused),
		// but a writer with the raw store could write one with a huge
		// generation and make every record of the store ErrTampered.
		if i, found := slices.BinarySearch(st.floors, p.Number); author.Role == roleOwner && !found {
			st.floors = slices.Insert(st.floors, i, p.Number)
		}
	case KeysRenewed:
		// A person's own renewal, signed by their current key, at the end
		// of its commit: the key it names holds from the next entry on.
		if author == nil || author.Revoked || p.ID != p.Actor || p.Covered || !bytes.Equal(author.Key, key) ||
			len(p.SigningKey) != signingKeySize {
			return NotPermitted
		}
		author.end(p.Seq + 1)
		author.Spans = append(author.Spans, GrantSpan{Key: p.SigningKey, Role: author.Role,
			Collections: author.Collections, From: p.Seq + 1})
		author.Held = append(author.Held, HeldKey{Key: p.SigningKey, Role: author.Role})
		author.Key, author.RenewedSeq = p.SigningKey, p.Seq
	case KeyringUpgraded:
		if p.ID != p.Actor || !st.legacy || len(p.SigningKey) != signingKeySize || !bytes.Equal(p.SigningKey, key) {
			return NotPermitted
		}
		if st.holders != nil {
			if _, ok := slices.BinarySearch(st.holders, p.ID); !ok {
				return NotPermitted
			}
		}
		if s := st.people[p.ID]; s != nil {
			return NotPermitted // one upgrade per holder
		}
		if !st.upgraded {
			st.upgraded = true
			if len(p.Partition) > 0 {
				st.holders = slices.Clone(p.Partition)
				slices.Sort(st.holders)
				if _, ok := slices.BinarySearch(st.holders, p.ID); !ok {
					return NotPermitted
				}
			}
		}
		st.people[p.ID] = &PersonState{Key: p.SigningKey, Role: roleOwner, GrantedBy: p.ID, GranterKey: key,
			Seq: p.Seq, Legacy: true, Held: []HeldKey{{Key: p.SigningKey, Role: roleOwner}},
			Spans: []GrantSpan{{Key: p.SigningKey, Role: roleOwner, From: p.Seq}}}
	}
	return 0
}

func validRole(r string) bool { return r == roleOwner || r == roleWriter || r == roleReader }

// String describes the state for a test's failure message.
func (s *PeopleState) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "people at %d (genesis %q, legacy %v):", s.Next(), s.genesis, s.legacy)
	for _, n := range s.Names() {
		p := s.people[n]
		fmt.Fprintf(&b, " %s=%s/by %s/revoked %v", n, p.Role, p.GrantedBy, p.Revoked)
	}
	return b.String()
}
