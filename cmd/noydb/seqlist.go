package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/vault"
)

// seriesJSON is one series (a counter, or a series numbered by passes) as
// 'seq list --json' prints it.
type seriesJSON struct {
	Series     string   `json:"series"`
	Partition  []string `json:"partition,omitempty"`
	Head       uint64   `json:"head"`
	Passes     bool     `json:"passes,omitempty"`
	Collection string   `json:"collection,omitempty"`
	Format     string   `json:"format,omitempty"`
	Period     string   `json:"period,omitempty"`
	Closed     bool     `json:"closed,omitempty"`
	Definition string   `json:"definition,omitempty"`
}

func (a *app) seqListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Print the series of the vault and their heads",
		Long: `Print every series of the vault, one per partition and period, with the
last number it handed out: the series (and partition, and "period LABEL"
for a series with periods), a tab, and the head; then "closed" for a closed
period, and the series' stored definition (format, period, fiscal-start,
tz, meta, corrects), when it has one. A series numbered by 'noydb number'
passes says so after its head, with the collection it numbers; a series
that 'put --seq' numbered at write time is listed once, as its counter,
unless records were also handed to passes of that name. With --json
it prints an array of {"series", "partition", "head", "passes",
"collection", "format", "period", "closed", "definition"}.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			infos, err := v.Series(cmd.Context())
			if err != nil {
				return err
			}
			if infos, err = withoutEmptyTwins(cmd.Context(), v, infos); err != nil {
				return err
			}
			list := make([]seriesJSON, 0, len(infos))
			for _, s := range infos {
				list = append(list, seriesJSON{s.Name, s.Partition, s.Head, s.Passes, s.Collection, s.Format, s.Period, s.Closed, s.Definition.String()})
			}
			if a.json {
				return a.printJSON(list)
			}
			if len(list) == 0 {
				_, err = fmt.Fprintf(a.io.err, "vault %s has no series yet\n", v.Name())
				return err
			}
			for _, s := range list {
				label := s.Series
				if len(s.Partition) > 0 {
					label += " " + strings.Join(s.Partition, ",")
				}
				if s.Period != "" {
					label += " period " + s.Period
				}
				line := fmt.Sprintf("%s\t%d", label, s.Head)
				if s.Closed {
					line += "\tclosed"
				}
				if s.Definition != "" {
					line += "\t" + s.Definition
				}
				if s.Passes {
					line += "\tnumbered by passes" + collectionNote(s.Collection)
				}
				if _, err := fmt.Fprintln(a.io.out, line); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// withoutEmptyTwins drops from infos each series numbered by passes that
// only holds what 'put --seq' stored when it numbered a counter of the same
// name at write time (on a store with atomic compare-and-swap, the handle
// stores its collection and format the same way on every store): no number
// given by a pass, no record waiting, no batch in flight. The counter is
// the series the user numbered; the empty twin beside it would list it
// twice.
func withoutEmptyTwins(ctx context.Context, v *vault.Vault, infos []vault.SeriesInfo) ([]vault.SeriesInfo, error) {
	counters := map[string]bool{}
	for _, s := range infos {
		if !s.Passes && len(s.Partition) == 0 && s.Period == "" {
			counters[s.Name] = true
		}
	}
	out := infos[:0:0]
	for _, s := range infos {
		if s.Passes && s.Head == 0 && counters[s.Name] {
			coll := s.Collection
			if coll == "" {
				coll = s.Name
			}
			h, err := cliNumbering(v, coll, s.Name, "", "number")
			if err != nil {
				return nil, err
			}
			st, err := h.Series().Status(ctx)
			if err != nil {
				return nil, err
			}
			if st.Last == 0 && st.Waiting == 0 && st.Batch == nil {
				continue
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// seriesOf finds series in the vault: the counter of the partition parts,
// and the series numbered by passes of that name (parts empty), each nil
// when the vault has none. When it has neither, the error is "no such
// series" with the vault's closest series names, or its partitions.
func seriesOf(ctx context.Context, v *vault.Vault, series string, parts []string) (counter, passes *vault.SeriesInfo, err error) {
	// The series itself first, at a cost that does not grow with the
	// records a deferred series holds; the whole vault only for the hint.
	infos, err := v.SeriesNamed(ctx, series)
	if err != nil {
		return nil, nil, err
	}
	if len(infos) == 0 {
		if infos, err = v.Series(ctx); err != nil {
			return nil, nil, err
		}
	}
	var names, partitions []string
	for i := range infos {
		s := &infos[i]
		if !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
		if s.Name != series {
			continue
		}
		switch {
		case s.Passes && len(parts) == 0:
			passes = s
		case !s.Passes && slices.Equal(s.Partition, parts):
			counter = s
		case !s.Passes:
			partitions = append(partitions, "["+strings.Join(s.Partition, ",")+"]")
		}
	}
	if counter != nil || passes != nil {
		return counter, passes, nil
	}
	if len(partitions) > 0 {
		return nil, nil, fmt.Errorf("series %q has no partition [%s] in vault %q; its partitions: %s",
			series, strings.Join(parts, ","), v.Name(), strings.Join(partitions, " "))
	}
	return nil, nil, noSuchName("series", series, v.Name(), names, false, "")
}

// closest lists names nearest to name first (by edit distance, then
// alphabetically), at most limit of them and a count of the rest.
func closest(name string, names []string, limit int) string {
	names = slices.Clone(names)
	sort.SliceStable(names, func(i, j int) bool {
		di, dj := editDistance(name, names[i]), editDistance(name, names[j])
		if di != dj {
			return di < dj
		}
		return names[i] < names[j]
	})
	if len(names) > limit {
		names = append(names[:limit:limit], fmt.Sprintf("and %d more", len(names)-limit))
	}
	return strings.Join(names, ", ")
}
