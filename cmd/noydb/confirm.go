package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// Every write confirms what it did in one line, or as one JSON object with
// --json. These are the objects.

// putJSON is what put prints with --json.
type putJSON struct {
	Collection string `json:"collection"`
	ID         string `json:"id"`
	Revision   uint64 `json:"revision"`
}

// deleteJSON is what delete prints with --json.
type deleteJSON struct {
	Collection string `json:"collection"`
	ID         string `json:"id"`
	Deleted    bool   `json:"deleted"`
}

// seedJSON is what seq seed prints with --json: the head after the call and
// whether the call moved it.
type seedJSON struct {
	Series    string   `json:"series"`
	Partition []string `json:"partition,omitempty"`
	Period    string   `json:"period,omitempty"`
	Seeded    bool     `json:"seeded"`
	Head      uint64   `json:"head"`
	Next      uint64   `json:"next"`
}

// voidJSON is what seq void prints with --json.
type voidJSON struct {
	Series    string   `json:"series"`
	Partition []string `json:"partition,omitempty"`
	Number    uint64   `json:"number"`
	Formatted string   `json:"formatted"`
	Reason    string   `json:"reason"`
}

// seriesLabel names a series in a message: "fatture", or "fatture 2026,EU"
// for a partition.
func seriesLabel(s *sequence.Sequence) string {
	if p := s.Partition(); len(p) > 0 {
		return s.Series() + " " + strings.Join(p, ",")
	}
	return s.Series()
}

// putRevision finds the revision a put of collection/id wrote: Collection.Put
// returns none, so it is read from the ledger entry the put appended after
// before. With concurrent puts of the same record it is the latest one's.
func putRevision(ctx context.Context, v *vault.Vault, before ledger.Head, collection, id string) (uint64, error) {
	var rev uint64
	found := false
	for e, err := range v.Audit().Read(ctx, before.Seq+1) {
		if err != nil {
			return 0, err
		}
		if e.Kind == ledger.RecordPut && e.Collection == collection && e.ID == id {
			rev, found = e.Revision, true
		}
	}
	if !found {
		return 0, fmt.Errorf("put %s/%s: the ledger holds no entry of the put", collection, id)
	}
	return rev, nil
}

// confirmClose asks before a period is closed for good when that is most
// likely a mistake: the period has not begun yet, or the series has no
// number in it. yes (--yes) answers for the user; without it, off a
// terminal, the close is refused as a usage error.
func (a *app) confirmClose(ctx context.Context, v *vault.Vault, f *seqFlags, s *sequence.Sequence, label string, head uint64, yes bool) error {
	// Today's period: of a handle that is not dated (s may be --date's).
	o, err := f.options()
	if err != nil {
		return err
	}
	undated, err := v.Sequence(s.Series(), o)
	if err != nil {
		return err
	}
	today, err := undated.PeriodLabel(ctx)
	if err != nil {
		return err
	}
	var why []string
	if today != "" && len(label) == len(today) && label > today {
		why = append(why, "has not begun (today is in "+today+")")
	}
	if head == 0 {
		why = append(why, "has no number of "+s.Series())
	}
	if len(why) == 0 || yes {
		return nil
	}
	what := fmt.Sprintf("period %s %s", label, strings.Join(why, " and "))
	if !a.io.inTerminal {
		return usagef("%s: closing it is for good (no number can ever be dated into it); pass --yes if that is what you mean", what)
	}
	fmt.Fprintf(a.io.err, "The %s. Close it for good? [y/N] ", what)
	line, err := bufio.NewReader(a.io.in).ReadString('\n')
	if err != nil && line == "" {
		return usagef("%s: not confirmed, nothing closed", what)
	}
	if ans := strings.ToLower(strings.TrimSpace(line)); ans != "y" && ans != "yes" {
		return usagef("%s: not confirmed, nothing closed", what)
	}
	return nil
}
