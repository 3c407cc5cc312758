package sequence

import (
	"context"
	"errors"
	"fmt"
)

// History gives a sequence the recorded facts about its numbers (the vault's
// audit ledger), for Audit.
type History interface {
	// Facts calls fn, in the order they were recorded, for every fact about
	// the numbers of series and partition. An error from fn stops the walk
	// and is returned.
	Facts(ctx context.Context, series string, partition []string, fn func(Fact) error) error
}

// FactKind says what a Fact records.
type FactKind uint8

// The facts a History reports.
const (
	// FactAllocated: the number was issued.
	FactAllocated FactKind = iota + 1
	// FactBound: a record was written carrying the number.
	FactBound
	// FactVoided: the issued number was cancelled.
	FactVoided
	// FactSeeded: the counter was moved forward to Number by SeedTo.
	FactSeeded
	// FactRecordDeleted: a record was deleted (Collection, ID; Number unused).
	// A History may report deletions of any record; Audit keeps those of
	// records that carried one of the series' numbers.
	FactRecordDeleted
)

// Fact is one recorded event about a number of a series.
type Fact struct {
	Kind       FactKind
	Number     uint64
	Collection string // FactBound
	ID         string // FactBound
	Reason     string // FactVoided
}

// NumberState is the outcome of one number in an Audit.
type NumberState uint8

// The states of a number.
const (
	// StateUnbound: issued, but no record carries it and it was not voided; re-drive
	// the work that took it, or void it.
	StateUnbound NumberState = iota + 1
	// StateBound: a record carries the number.
	StateBound
	// StateVoided: the number was cancelled, with a reason.
	StateVoided
	// StateSeeded: skipped over by SeedTo (numbers imported from elsewhere).
	StateSeeded
	// StateMissing: below the counter, but the history does not show it issued
	// (a crash between the counter and its ledger entry on a store without
	// transactions, or a history that was tampered with).
	StateMissing
)

func (s NumberState) String() string {
	switch s {
	case StateUnbound:
		return "unbound"
	case StateBound:
		return "bound"
	case StateVoided:
		return "voided"
	case StateSeeded:
		return "seeded"
	case StateMissing:
		return "missing"
	}
	return fmt.Sprintf("NumberState(%d)", uint8(s))
}

// NumberAudit is what the history says about one number.
type NumberAudit struct {
	N     uint64
	State NumberState
	// Collection and ID name the record carrying N (the last one, if several did).
	Collection, ID string
	// Reason is the void's reason.
	Reason string
	// Orphaned is true for a bound number whose record was later deleted, or
	// given another number of the series, so no live record carries it.
	Orphaned bool
}

// AuditReport accounts for every number 1..Head of a series.
type AuditReport struct {
	Series    string
	Partition []string
	Head      uint64
	Numbers   []NumberAudit // index i is number i+1
	// Counts per state, and of bound numbers no live record carries.
	Bound, Unbound, Voided, Seeded, Missing, Orphaned int
}

// ErrNoHistory: the sequence was made without a History, so it cannot be audited.
var ErrNoHistory = errors.New("sequence has no history to audit")

// Audit accounts for every number from 1 to the counter: which record each
// is bound to, which were voided, which were skipped by SeedTo, and which were
// issued but never bound (so they can be re-driven or voided). It reads the
// whole history of the vault, so its cost grows with the ledger, and it
// holds one NumberAudit per number, so its memory grows with the head.
func (q *Sequence) Audit(ctx context.Context) (AuditReport, error) {
	if q.svc.history == nil {
		return AuditReport{}, q.errorf("audit", ErrNoHistory)
	}
	head, err := q.Peek(ctx)
	if err != nil {
		return AuditReport{}, err
	}
	rep := AuditReport{Series: q.series, Partition: q.Partition(), Head: head, Numbers: make([]NumberAudit, head)}
	for i := range rep.Numbers {
		rep.Numbers[i] = NumberAudit{N: uint64(i) + 1, State: StateMissing}
	}
	var seededTo uint64
	carrier := map[string]uint64{} // collection "/" id -> the number that record carries
	err = q.svc.history.Facts(ctx, q.series, q.partition, func(f Fact) error {
		if f.Kind == FactRecordDeleted {
			if n, ok := carrier[f.Collection+"/"+f.ID]; ok {
				rep.Numbers[n-1].Orphaned = true
				delete(carrier, f.Collection+"/"+f.ID)
			}
			return nil
		}
		if f.Kind == FactSeeded {
			// Numbers skipped by a seed, not issued here.
			for n := max(seededTo, 1); n <= min(f.Number, head); n++ {
				if a := &rep.Numbers[n-1]; a.State == StateMissing {
					a.State = StateSeeded
				}
			}
			seededTo = max(seededTo, f.Number)
			return nil
		}
		if f.Number == 0 || f.Number > head {
			return nil // recorded beyond what the counter shows: Peek was older
		}
		a := &rep.Numbers[f.Number-1]
		switch f.Kind {
		case FactAllocated:
			if a.State == StateMissing || a.State == StateSeeded {
				a.State = StateUnbound
			}
		case FactBound:
			if a.State != StateVoided {
				a.State = StateBound
			}
			a.Collection, a.ID, a.Orphaned = f.Collection, f.ID, false
			rec := f.Collection + "/" + f.ID
			if m, ok := carrier[rec]; ok && m != f.Number {
				rep.Numbers[m-1].Orphaned = true
			}
			carrier[rec] = f.Number
		case FactVoided:
			a.State, a.Reason = StateVoided, f.Reason
		}
		return nil
	})
	if err != nil {
		return AuditReport{}, q.errorf("audit", err)
	}
	for _, a := range rep.Numbers {
		if a.Orphaned {
			rep.Orphaned++
		}
		switch a.State {
		case StateBound:
			rep.Bound++
		case StateUnbound:
			rep.Unbound++
		case StateVoided:
			rep.Voided++
		case StateSeeded:
			rep.Seeded++
		case StateMissing:
			rep.Missing++
		}
	}
	return rep, nil
}
