package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// A number of a series is named the way the user sees it: N, LABEL/N for
// a series with periods (FY2026-27/3), or the number as printed
// (FY2026-27/0003, INV-0003), which is looked up among the numbers the
// series has issued.

// numberRef is a number of a series and the label of its period ("" for
// none, or when the text did not say).
type numberRef struct {
	period string
	n      uint64
}

// allDigits reports whether s is a non-empty run of ASCII digits.
func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// digitRuns returns the numbers written in text, each maximal run of
// digits once.
func digitRuns(text string) []uint64 {
	var out []uint64
	for i := 0; i < len(text); {
		if text[i] < '0' || text[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(text) && text[j] >= '0' && text[j] <= '9' {
			j++
		}
		if n, err := strconv.ParseUint(text[i:j], 10, 64); err == nil && n > 0 && !slices.Contains(out, n) {
			out = append(out, n)
		}
		i = j
	}
	return out
}

// parseNumberRef reads text naming a number of series (in partition
// parts): N; the number as printed, which it finds among the numbers the
// series' counters have issued; or LABEL/N. what names the argument in
// messages.
func parseNumberRef(ctx context.Context, v *vault.Vault, series string, parts []string, text, what string) (numberRef, error) {
	if allDigits(text) {
		n, err := parseNumber(what, text)
		return numberRef{n: n}, err
	}
	matches, err := printedAs(ctx, v, series, parts, text)
	if err != nil {
		return numberRef{}, err
	}
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) > 1:
		var labels []string
		for _, m := range matches {
			labels = append(labels, m.period+"/"+strconv.FormatUint(m.n, 10))
		}
		return numberRef{}, usagef("%s %q is printed the same in several periods of %s: name it as LABEL/N (%s)", what, text, series, strings.Join(labels, " or "))
	}
	if i := strings.LastIndexByte(text, '/'); i > 0 && allDigits(text[i+1:]) {
		n, err := parseNumber(what, text[i+1:])
		return numberRef{period: text[:i], n: n}, err
	}
	return numberRef{}, usagef("%s %q: want N, LABEL/N for a series with periods (FY2026-27/3), or a number %s issued as it was printed (FY2026-27/0003)", what, text, series)
}

// printedAs finds the numbers of series (in partition parts) that its
// counters have issued and that print as text: for each counter, each
// number written in text that the counter has reached is rendered in the
// counter's period and compared.
func printedAs(ctx context.Context, v *vault.Vault, series string, parts []string, text string) ([]numberRef, error) {
	infos, err := v.SeriesNamed(ctx, series)
	if err != nil {
		return nil, err
	}
	candidates := digitRuns(text)
	var out []numberRef
	for _, info := range infos {
		if info.Passes || !slices.Equal(info.Partition, parts) || info.Head == 0 {
			continue
		}
		opts := sequence.Options{}
		for _, p := range parts {
			opts.Partition = append(opts.Partition, p)
		}
		s, err := v.Sequence(series, opts)
		if err != nil {
			return nil, err
		}
		if info.Period != "" {
			if s, err = atLabel(ctx, s, info.Period); err != nil {
				return nil, err
			}
		}
		for _, n := range candidates {
			if n <= info.Head && s.Format(n) == text {
				out = append(out, numberRef{period: info.Period, n: n})
			}
		}
	}
	return out, nil
}

// correctionRef is the number --correcting names, of the series s
// corrects (its definition's Corrects, or --corrects).
func (f *seqFlags) correctionRef(ctx context.Context, v *vault.Vault, s *sequence.Sequence) (sequence.Ref, error) {
	parts := splitParts(f.correctingPartition)
	def, err := s.Definition(ctx)
	if err != nil {
		return sequence.Ref{}, err
	}
	corrected := def.Corrects
	if corrected == "" {
		// The SDK refuses the correction (the series corrects none); a
		// plain number is all it needs to say so.
		n, _ := strconv.ParseUint(f.correcting, 10, 64)
		return sequence.Ref{Partition: parts, Period: f.correctingPeriod, N: n}, nil
	}
	ref, err := parseNumberRef(ctx, v, corrected, parts, f.correcting, "--correcting")
	if err != nil {
		return sequence.Ref{}, err
	}
	switch {
	case ref.period != "" && f.correctingPeriod != "" && ref.period != f.correctingPeriod:
		return sequence.Ref{}, usagef("--correcting %s is in period %s, --correcting-period says %s: give one", f.correcting, ref.period, f.correctingPeriod)
	case ref.period == "":
		ref.period = f.correctingPeriod
	}
	if ref.period == "" {
		cs, err := v.Sequence(corrected, sequence.Options{})
		if err != nil {
			return sequence.Ref{}, err
		}
		cdef, err := cs.Definition(ctx)
		if err != nil {
			return sequence.Ref{}, err
		}
		if cdef.Period != sequence.PeriodNone {
			return sequence.Ref{}, usagef("--correcting %s: %s counts per %s, so its numbers are named with their period: LABEL/N (as in FY2026-27/%d) or as printed",
				f.correcting, corrected, cdef.Period, ref.n)
		}
	}
	return sequence.Ref{Partition: parts, Period: ref.period, N: ref.n}, nil
}

// numberIn resolves the positional number of a command on s (void): N,
// as printed, or LABEL/N; a number that names its period gives the handle
// of that period, which --period or --date must not contradict.
func (a *app) numberIn(ctx context.Context, v *vault.Vault, f *seqFlags, s *sequence.Sequence, text, what string) (*sequence.Sequence, uint64, error) {
	ref, err := parseNumberRef(ctx, v, s.Series(), s.Partition(), text, what)
	if err != nil || ref.period == "" {
		return s, ref.n, err
	}
	if label := f.periodLabel(); (label != "" && label != ref.period) || f.date != "" {
		here, err := s.PeriodLabel(ctx)
		if err != nil {
			return nil, 0, err
		}
		if here != ref.period {
			return nil, 0, usagef("%s %s is in period %s, not in %s (--period or --date): give one", what, text, ref.period, here)
		}
	}
	t, err := atLabel(ctx, s, ref.period)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", what, text, err)
	}
	return t, ref.n, nil
}
