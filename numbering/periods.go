package numbering

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Periods. A series with periods (vault.NumberingOfDated on a store where
// passes number) counts each period with a deferred series of its own:
// the same name, with deferred.Backend.Partition set to the period's
// label. Its values live in the period's folder, relative to the series'
// folder "_numbering/<series>/":
//
//	period/<label>/…     the period's config, handoff entries, head, batches and index
//	periods/<label>      the period is in use: written with its first handoff entry
//
// Plaintext of a periods entry: [1] 1, str label.
//
// A pass of a period numbers its records above the period's head and its
// counter (the one the write-time path takes from, sequence.Sequence.At),
// raises that counter, and records its numbers in the ledger under the
// label (Entry.Partition): one head per period for both paths.
const (
	periodDir     = "period/"
	periodsDir    = "periods/"
	periodVersion = 1
	maxLabelLen   = 64
)

// seriesDir is the folder of the series name of b: its period's, for a
// period's series.
func seriesDir(b deferred.Backend, name string) string {
	dir := b.Prefix + dirName + name + "/"
	if len(b.Partition) == 1 {
		dir += periodDir + b.Partition[0] + "/"
	}
	return dir
}

// checkPartition checks a series' partition: none, or one period label
// that can name a folder.
func checkPartition(p []string) error {
	switch {
	case len(p) == 0:
		return nil
	case len(p) > 1:
		return errors.New("a deferred series counts one period, not a partition")
	case p[0] == "" || len(p[0]) > maxLabelLen || strings.ContainsAny(p[0], "/\x00"):
		return fmt.Errorf("period label %q", p[0])
	}
	return nil
}

// periodKey is the key of the entry saying the series' period label is in use.
func (s *Series) periodKey(label string) string {
	return s.b.Prefix + dirName + s.name + "/" + periodsDir + label
}

// periodEntry is deferred.Hooks.Period: the key and sealed value of the
// entry that lists the period of a period's series among its series'.
func (s *Series) periodEntry() (string, []byte, error) {
	if len(s.b.Partition) != 1 {
		return "", nil, fmt.Errorf("numbering %q: %w: not a period's series", s.name, ErrInvalid)
	}
	label := s.b.Partition[0]
	key := s.periodKey(label)
	sealed, err := s.b.Sealer.Seal(key, codec.AppendString([]byte{periodVersion}, label))
	if err != nil {
		return "", nil, err
	}
	return key, sealed, nil
}

// periods is deferred.Hooks.Periods: the labels of the periods of the
// series that had records handed off, in key order. A store that lists a
// key outside them, or an entry that does not open or names another
// label, fails it.
func (s *Series) periods(ctx context.Context) ([]string, error) {
	prefix := s.b.Prefix + dirName + s.name + "/" + periodsDir
	var out []string
	for it, err := range stores.ListUnder(ctx, s.b.Store, prefix) {
		if err != nil {
			return nil, s.errorf("periods", err)
		}
		label := it.Key[len(prefix):]
		p, err := s.b.Sealer.Open(it.Key, it.Value)
		if err != nil {
			return nil, s.errorf("periods", fmt.Errorf("period %s: %w", label, ErrTampered))
		}
		r := codec.NewReader(p)
		r.Version(periodVersion)
		got := r.String(maxLabelLen)
		if err := r.End(); err != nil || got != label || checkPartition([]string{label}) != nil {
			return nil, s.errorf("periods", fmt.Errorf("period %s: %w", label, ErrTampered))
		}
		out = append(out, label)
	}
	return out, nil
}

// closedPeriod is the error of a pass of a closed period: nil when no
// record waits for a number there, else an error matching
// sequence.ErrPeriodClosed (a *sequence.PeriodClosedError) that says how
// many wait, and how many. Nothing is numbered, and the records stay in
// line.
func (s *Series) closedPeriod(ctx context.Context) (int, error) {
	n := 0
	for _, err := range stores.ListUnder(ctx, s.b.Store, s.dir+pendingDir) {
		if err != nil {
			return 0, fmt.Errorf("list pending: %w", err)
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	label := ""
	if len(s.b.Partition) == 1 {
		label = s.b.Partition[0]
	}
	return n, fmt.Errorf("%d records wait for a number: %w", n, &sequence.PeriodClosedError{Series: s.name, Period: label})
}
