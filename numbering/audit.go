package numbering

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/noydb-go/noydb/ledger"
)

// AuditReport is what the vault's ledger says about the numbers of a series.
// Its size grows with the problems found, not with the numbers.
type AuditReport struct {
	// Series is the series name.
	Series string
	// Last is the highest number the series has given (its head).
	Last uint64
	// Assigned and Voided count the numbers 1 … Last whose pass's ledger
	// entry assigns them to a record, or voids them.
	Assigned, Voided int
	// Missing counts the numbers of the batch a pass has not finished yet
	// (the next pass records them) that have no ledger entry. (A series has
	// one head for both paths, so the numbers 1 … Last are not all the
	// passes': a number without any entry, lost from the ledger, is the
	// series' audit's StateMissing, see vault.NumberedAudit.)
	Missing int
	// Renumbered lists the records the ledger shows assigned more than one
	// number of the series, by record id: a record must never get a second
	// number. It happens only when the store lost what said the record had
	// its number (its index entry, and its stamped revision with it). A
	// record deleted (a RecordDelete entry) and written again under its id
	// is another record, and may get another number.
	Renumbered []Renumbered
	// Reused lists the numbers the ledger shows given to more than one
	// record, in order.
	Reused []uint64
}

// Renumbered is a record that the ledger shows with more than one number.
type Renumbered struct {
	// RecordID is the record.
	RecordID string
	// Numbers are its numbers, in the order they were recorded.
	Numbers []uint64
}

// Audit reads the vault's ledger and accounts for the numbers of the series:
// how many were assigned or voided, how many have no entry yet, and every
// record given two numbers or number given to two records. When it finds
// any of the last two it returns the full report together with an error
// wrapping ErrDuplicate. The same (number, record) pair recorded twice (a
// resumed batch, see the package documentation) is not a problem. Audit
// reads the whole ledger, so its cost grows with the ledger. A head below a
// number the ledger records is ErrRollback.
func (s *Series) Audit(ctx context.Context) (AuditReport, error) {
	rep := AuditReport{Series: s.name}
	exit, err := s.enter(ctx)
	if err != nil {
		return rep, s.errorf("audit", err)
	}
	defer exit()
	h, _, err := s.loadHead(ctx)
	if err != nil {
		return rep, s.errorf("audit", err)
	}
	rep.Last = h.last
	type fact struct {
		id     string
		voided bool
	}
	byNumber := map[uint64]fact{}
	byRecord := map[string][]uint64{}
	reused := map[uint64]bool{}
	var before []Renumbered // the numbers of records deleted since
	var highest uint64      // the highest number the ledger records
	for e, err := range s.b.Ledger.Read(ctx, 1) {
		if err != nil {
			return rep, s.errorf("audit", err)
		}
		if e.Kind == ledger.RecordDelete && e.Collection == s.opts.Collection {
			// A record written again under this id after its deletion is
			// another record: it may get a number of its own.
			if ns := byRecord[e.ID]; len(ns) > 0 {
				before = append(before, Renumbered{RecordID: e.ID, Numbers: ns})
				delete(byRecord, e.ID)
			}
			continue
		}
		if e.Series != s.name || e.Collection == "" || !slices.Equal(e.Partition, s.b.Partition) ||
			(e.Kind != ledger.NumberAssigned && e.Kind != ledger.NumberVoided) {
			continue // another series, or a sequence's void (no record)
		}
		highest = max(highest, e.Number)
		f := fact{id: e.ID, voided: e.Kind == ledger.NumberVoided}
		if prev, ok := byNumber[e.Number]; ok {
			if prev.id != f.id {
				reused[e.Number] = true
			}
			continue
		}
		byNumber[e.Number] = f
		if !f.voided && !slices.Contains(byRecord[e.ID], e.Number) {
			byRecord[e.ID] = append(byRecord[e.ID], e.Number)
		}
	}
	if highest > rep.Last {
		// Numbers recorded after the head was read are fine if the head
		// has moved on since; a head still behind them was rolled back.
		now, _, err := s.loadHead(ctx)
		if err != nil {
			return rep, s.errorf("audit", err)
		}
		if now.last < highest {
			return rep, s.errorf("audit", headBehind(now.last, highest))
		}
	}
	for _, r := range before {
		if len(r.Numbers) > 1 {
			rep.Renumbered = append(rep.Renumbered, r)
		}
	}
	for n, f := range byNumber {
		if n == 0 || n > rep.Last {
			continue
		}
		if f.voided {
			rep.Voided++
		} else {
			rep.Assigned++
		}
	}
	if b := h.batch; b != nil {
		for n := b.first; n <= b.last && n != 0; n++ {
			if _, ok := byNumber[n]; !ok {
				rep.Missing++
			}
		}
	}
	for id, ns := range byRecord {
		if len(ns) > 1 {
			rep.Renumbered = append(rep.Renumbered, Renumbered{RecordID: id, Numbers: ns})
		}
	}
	slices.SortStableFunc(rep.Renumbered, func(a, b Renumbered) int { return strings.Compare(a.RecordID, b.RecordID) })
	for n := range reused {
		rep.Reused = append(rep.Reused, n)
	}
	slices.Sort(rep.Reused)
	if len(rep.Renumbered) > 0 || len(rep.Reused) > 0 {
		return rep, s.errorf("audit", fmt.Errorf("%w: %d records with more than one number, %d numbers on more than one record",
			ErrDuplicate, len(rep.Renumbered), len(rep.Reused)))
	}
	return rep, nil
}
