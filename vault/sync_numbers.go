package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
)

// Numbers and sync. On a device of a hub every number is taken on the hub
// (Collection.PutNumbered commits there; Numbered.Settle runs its pass
// there), so the hub's revision of a record is the first to carry its
// number. A sync keeps it:
//
//   - A conflict whose hub side carries a number mark that the device's side
//     lacks (the device edited, or deleted, the record while it was pending)
//     never drops the number. A device winner (by policy, merge or Resolve)
//     is written with the hub's number marks, its pending mark of that
//     series dropped, and its body passed through the setter of the
//     series' NumberingOf handle when this vault has one open (Numbered.Get
//     shows the number from the mark in any case). A device's deletion
//     loses to a numbered hub revision whatever the policy: a number must
//     keep its record (the deletion is in the report and the ledger).
//   - A push of a pending record carries its handoff entries (sealed bound
//     to their keys, which are the same on the hub) in the same hub
//     commit, so a pass on the hub, run from any device, numbers it.
//   - A push that deletes a pending record on the hub also deletes the
//     hub's handoff entries of it, in the same hub commit, so no pass waits
//     for the record for ever; a pull that replaces a pending record here
//     with a revision no longer pending under the same provisional id (or
//     deletes it) drops this device's handoff entry of it likewise.
//
//   - A record PutNumbered on a device (committed with its number on the
//     hub, then copied here) is recorded in the device's ledger as pulled
//     (ledger.RecordPulled, with the hub's feed position of the commit) and
//     gets its sync base: no push carries it back, and a later change of it
//     here is no conflict with it.
//   - A pulled record that carries a number is recorded like any pulled
//     record (RecordPulled, its hub position and cipher hash) and is not
//     bound to its series in the device's ledger. The series is accounted
//     for once, in the hub's ledger, where its numbers are bound as they
//     are taken (the RecordPut of a PutNumbered, the NumberAssigned entries
//     of a pass); binding them again on each device would account for
//     each number once per device. So a device audits its numbers against
//     the hub: Numbered.Audit and the Audit of v.Sequence read the hub's
//     ledger, and a device's own ledger shows, for each numbered record,
//     the hub position it came from.
//
// The sequence a user follows to number receipts written offline:
//
//	rec, _ := receipts.Put(ctx, id, r) // NumberingOf handle: pending, offline too
//	rep, err := v.SyncAndSettle(ctx)  // sync, pass on the hub, sync
//
// or, step by step, v.Sync, then Settle on the handle, then v.Sync again.
// Since a push carries the handoff entries, the pass numbers the pending
// records every device has pushed, whichever device runs it; the other
// devices get the numbers with their next Sync.

// numberingDir and pendingDir are the layout of a deferred-numbering
// series' handoff entries (package numbering): prefix + numberingDir +
// series + "/" + pendingDir + provisional + "/" + id.
const (
	numberingDir   = "_numbering/"
	numberingQueue = "pending/"
)

// handoffKey is the key of the handoff entry of record id pending in
// series under provisional.
func (v *Vault) handoffKey(series, provisional, id string) string {
	return v.prefix + numberingDir + series + "/" + numberingQueue + provisional + "/" + id
}

// handoffKeyOf is the key of the handoff entry of record id that the
// pending mark m (pendingOf) names: in the folder of its period when m
// names one (package numbering's "period/<label>/", NumberingOfDated).
func (v *Vault) handoffKeyOf(m mark, id string) string {
	if len(m.partition) == 2 {
		return v.prefix + numberingDir + m.series + "/period/" + m.partition[1] + "/" + numberingQueue + m.partition[0] + "/" + id
	}
	return v.handoffKey(m.series, m.partition[0], id)
}

// isPending reports a pending mark (pendingOf's): a provisional id, and
// a period's label for a dated series, each one segment of a store key
// (handoffKeyOf). A mark is sealed by whoever wrote the record, so a
// member who may write could otherwise name keys outside the handoff
// folder that another device's Sync then deletes; such a mark is not
// pending.
func isPending(m mark) bool {
	if m.kind != markPending || (len(m.partition) != 1 && len(m.partition) != 2) {
		return false
	}
	for _, p := range m.partition {
		if !keySegment(p) {
			return false
		}
	}
	return true
}

// keySegment reports whether p can be one segment of a store key: not
// empty, at most MaxNameLen bytes, valid UTF-8, without '/' or a control
// character.
func keySegment(p string) bool {
	return p != "" && len(p) <= MaxNameLen && utf8.ValidString(p) &&
		!strings.ContainsRune(p, '/') && strings.IndexFunc(p, unicode.IsControl) < 0
}

// isNumberMark reports a mark that carries a number (either path).
func isNumberMark(m mark) bool { return m.kind == markSequence || m.kind == markNumbering }

// hasNumber reports whether marks carry a number of series.
func hasNumber(marks []mark, series string) bool {
	for _, m := range marks {
		if isNumberMark(m) && m.series == series {
			return true
		}
	}
	return false
}

// hubNumbers returns the number marks of hub whose series device carries
// no number of.
func hubNumbers(device, hub []mark) []mark {
	var out []mark
	for _, m := range hub {
		if isNumberMark(m) && !hasNumber(device, m.series) {
			out = append(out, m)
		}
	}
	return out
}

// keepNumbers returns the marks and body of a device winner over a hub
// revision carrying hubMarks: the device's, with the hub's numbers added
// (see hubNumbers) and the pending marks of their series dropped, and the
// body passed through the setters of the series' open handles. changed is
// false when the hub carries no number the device lacks.
func (v *Vault) keepNumbers(dmarks []mark, body []byte, hubMarks []mark) ([]mark, []byte, bool, error) {
	add := hubNumbers(dmarks, hubMarks)
	if len(add) == 0 {
		return dmarks, body, false, nil
	}
	marks := slices.Clone(dmarks)
	for _, m := range add {
		marks = withMark(withoutPending(marks, m.series), m)
		if set := v.numberSetter(m.series); set != nil {
			b, ok, err := set(body, m.n)
			if err != nil {
				return nil, nil, false, fmt.Errorf("set number %d of %q: %w", m.n, m.series, err)
			}
			if ok {
				body = b
			}
		}
	}
	return marks, body, true, nil
}

// numberedHook is what a NumberingOf handle of a device registers with its
// vault for syncs: its setter, and its pass on the hub.
type numberedHook struct {
	// set puts number n into a record's JSON body; ok false when the
	// series' format is not known here yet (the body is left as it is).
	set func(body []byte, n uint64) (out []byte, ok bool, err error)
	// settle is Numbered.Settle.
	settle func(ctx context.Context) (numbering.PassReport, error)
}

// registerNumbered records h as the handle of series (the last one opened
// wins: handles of one series number alike).
func (v *Vault) registerNumbered(series string, h numberedHook) {
	v.syncs.mu.Lock()
	defer v.syncs.mu.Unlock()
	if v.syncs.numbered == nil {
		v.syncs.numbered = map[string]numberedHook{}
	}
	v.syncs.numbered[series] = h
}

func (v *Vault) numberSetter(series string) func([]byte, uint64) ([]byte, bool, error) {
	v.syncs.mu.Lock()
	defer v.syncs.mu.Unlock()
	return v.syncs.numbered[series].set
}

// SyncAndSettle is the whole round trip of numbers written offline: a
// Sync (which pushes the pending records), a Settle of every series this
// vault has a NumberingOf handle of (each runs its pass on the hub, in
// series name order), and a second Sync (which pulls the stamped records
// and pushes what changed meanwhile; with no handle open, the first Sync
// is all). The report adds up both syncs, with the passes' reports in
// Settled. A series whose pass another machine is running
// (numbering.ErrPassRunning) is left to that pass: its records come with a
// later sync; any other error of a pass ends the call (the first Sync
// stays done). A vault without a hub gives ErrNoHub.
func (v *Vault) SyncAndSettle(ctx context.Context) (SyncReport, error) {
	rep, err := v.Sync(ctx)
	if err != nil {
		return rep, err
	}
	v.syncs.mu.Lock()
	names := make([]string, 0, len(v.syncs.numbered))
	hooks := make(map[string]numberedHook, len(v.syncs.numbered))
	for s, h := range v.syncs.numbered {
		names = append(names, s)
		hooks[s] = h
	}
	v.syncs.mu.Unlock()
	if len(names) == 0 {
		return rep, nil // nothing to number: one Sync is all
	}
	sort.Strings(names)
	for _, s := range names {
		pr, err := hooks[s].settle(ctx)
		if errors.Is(err, numbering.ErrPassRunning) {
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("sync and settle %s: %w", v.name, err)
		}
		if rep.Settled == nil {
			rep.Settled = map[string]numbering.PassReport{}
		}
		rep.Settled[s] = pr
	}
	second, err := v.Sync(ctx)
	rep.Pulled += second.Pulled
	rep.Pushed += second.Pushed
	rep.Conflicts = append(rep.Conflicts, second.Conflicts...)
	// A change held back, or rejected again for the same reason, is
	// reported once.
	for _, r := range second.Rejected {
		if !slices.Contains(rep.Rejected, r) {
			rep.Rejected = append(rep.Rejected, r)
		}
	}
	return rep, err
}

// dropHubHandoffs deletes in tx (a hub commit) the handoff entries of the
// hub's record it (collection/id), which a push is deleting: a pass would
// wait for the record for ever.
func (s *syncRun) dropHubHandoffs(tx stores.Tx, k recKey, it stores.Item) error {
	rec, err := s.h.openStored(k.coll, k.id, it, true)
	if err != nil {
		return fmt.Errorf("hub's record %s/%s: %w", k.coll, k.id, err)
	}
	for _, m := range rec.marks {
		if isPending(m) {
			if err := tx.Delete(s.h.handoffKeyOf(m, k.id)); err != nil && !errors.Is(err, stores.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// dropLocalHandoffs deletes in tx (a device commit) this device's handoff
// entries of the pending marks of before (the record being replaced) that
// after (its new revision; nil marks and !exists: deleted) no longer
// carries under the same provisional id.
func (v *Vault) dropLocalHandoffs(tx stores.Tx, id string, before []mark, after []mark) error {
	for _, m := range before {
		if !isPending(m) {
			continue
		}
		if pendingOf(after, m.series) == m.partition[0] {
			continue
		}
		if err := tx.Delete(v.handoffKeyOf(m, id)); err != nil && !errors.Is(err, stores.ErrNotFound) {
			return err
		}
	}
	return nil
}

// handoffKeys returns the keys of the handoff entries of record id's
// pending marks.
func (v *Vault) handoffKeys(id string, marks []mark) []string {
	var out []string
	for _, m := range marks {
		if isPending(m) {
			out = append(out, v.handoffKeyOf(m, id))
		}
	}
	return out
}

// copyHandoffs writes in tx (a hub commit) the handoff entries keys the
// device holds (in device) and the hub lacks.
func copyHandoffs(tx stores.Tx, keys []string, device map[string][]byte) error {
	for _, k := range keys {
		val, ok := device[k]
		if !ok {
			continue // numbered meanwhile, or deleted
		}
		switch _, err := tx.Get(k); {
		case err == nil:
			continue
		case !errors.Is(err, stores.ErrNotFound):
			return err
		}
		if err := tx.Put(k, val); err != nil {
			return err
		}
	}
	return nil
}
