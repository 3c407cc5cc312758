package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// seriesJSON is one counter as 'seq list --json' prints it.
type seriesJSON struct {
	Series    string   `json:"series"`
	Partition []string `json:"partition,omitempty"`
	Head      uint64   `json:"head"`
}

func (a *app) seqListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Print the series of the vault and their heads",
		Long: `Print every series of the vault, one per partition, with the last number it
handed out: the series (and partition), a tab, and the head. With --json it
prints an array of {"series", "partition", "head"}. It lists the series that
'seq next', 'seq seed' or 'put --seq' have counted; series numbered only by
'noydb number' passes are not listed.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			list, err := listSeries(cmd.Context(), v)
			if err != nil {
				return err
			}
			if a.json {
				if list == nil {
					list = []seriesJSON{}
				}
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
				if _, err := fmt.Fprintf(a.io.out, "%s\t%d\n", label, s.Head); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// Counter keys, as the sequence package lays them out under the vault's
// prefix: "_sequences/<series>" or "_sequences/<series>\x00<partition>",
// partition components joined by '/' with '%', '/', NUL and \x01
// percent-escaped. Claim and void records follow the counter key after a
// \x01. The library lists no series, so the CLI reads the keys; the heads
// come from Sequence.Peek.
const (
	counterDir   = "_sequences/"
	counterExtra = "\x01"
)

// listSeries lists the counters of v, in key order, with their heads.
func listSeries(ctx context.Context, v *vault.Vault) ([]seriesJSON, error) {
	prefix := "v/" + v.Name() + "/" + counterDir
	var out []seriesJSON
	for it, err := range stores.ListUnder(ctx, v.Store(), prefix) {
		if err != nil {
			return nil, err
		}
		rest := it.Key[len(prefix):]
		if strings.Contains(rest, counterExtra) {
			continue
		}
		series, enc, partitioned := strings.Cut(rest, "\x00")
		var parts []string
		if partitioned {
			for p := range strings.SplitSeq(enc, "/") {
				dec, err := url.PathUnescape(p)
				if err != nil {
					return nil, fmt.Errorf("series %q: partition %q: %w", series, enc, err)
				}
				parts = append(parts, dec)
			}
		}
		opts := sequence.Options{}
		for _, p := range parts {
			opts.Partition = append(opts.Partition, p)
		}
		s, err := v.Sequence(series, opts)
		if err != nil {
			return nil, err
		}
		head, err := s.Peek(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, seriesJSON{Series: series, Partition: parts, Head: head})
	}
	return out, nil
}
