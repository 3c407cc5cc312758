package wire

import (
	"strconv"
	"strings"
)

// Corrections. A number taken in a correcting series (a credit note)
// records the number it corrects in the Reason of its allocation entry,
// as readable text that CorrectionText writes and ParseCorrection reads:
//
//	corrects "invoices"["shop1"] period FY2026-27 number 3
//
// the corrected series and partition (quoted, as Go quotes strings; no
// brackets for a series without partition), the period label when the
// corrected series has periods, and the number. The vault's history
// yields such an allocation as a FactCorrected to the corrected series.

// CorrectionRef names one number of a series: its series, its partition
// without the period, the period's label ("" for none) and the number.
type CorrectionRef struct {
	Series    string
	Partition []string
	Period    string
	N         uint64
}

// Counter returns the partition of the counter r's number was taken on:
// the partition followed by the period's label, if any.
func (r CorrectionRef) Counter() []string {
	if r.Period == "" {
		return r.Partition
	}
	return append(append(make([]string, 0, len(r.Partition)+1), r.Partition...), r.Period)
}

const correctionPrefix = "corrects "

// CorrectionText is the Reason of an allocation correcting r.
func CorrectionText(r CorrectionRef) string {
	var b strings.Builder
	b.WriteString(correctionPrefix)
	b.WriteString(strconv.Quote(r.Series))
	if len(r.Partition) > 0 {
		b.WriteByte('[')
		for i, p := range r.Partition {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(p))
		}
		b.WriteByte(']')
	}
	if r.Period != "" {
		b.WriteString(" period ")
		b.WriteString(r.Period)
	}
	b.WriteString(" number ")
	b.WriteString(strconv.FormatUint(r.N, 10))
	return b.String()
}

// ParseCorrection reads what CorrectionText writes, and only that (ok is
// false for any other text, the empty Reason of a plain allocation first).
func ParseCorrection(s string) (r CorrectionRef, ok bool) {
	rest, found := strings.CutPrefix(s, correctionPrefix)
	if !found {
		return CorrectionRef{}, false
	}
	unquote := func() (string, bool) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil || q[0] != '"' {
			return "", false
		}
		v, err := strconv.Unquote(q)
		if err != nil || v == "" || strconv.Quote(v) != q {
			return "", false
		}
		rest = rest[len(q):]
		return v, true
	}
	if r.Series, ok = unquote(); !ok {
		return CorrectionRef{}, false
	}
	if strings.HasPrefix(rest, "[") {
		rest = rest[1:]
		for {
			p, ok := unquote()
			if !ok {
				return CorrectionRef{}, false
			}
			r.Partition = append(r.Partition, p)
			if strings.HasPrefix(rest, "]") {
				rest = rest[1:]
				break
			}
			if rest, found = strings.CutPrefix(rest, ", "); !found {
				return CorrectionRef{}, false
			}
		}
	}
	if rest, found = strings.CutPrefix(rest, " period "); found {
		i := strings.IndexByte(rest, ' ')
		if i <= 0 {
			return CorrectionRef{}, false
		}
		r.Period, rest = rest[:i], rest[i:]
	}
	num, found := strings.CutPrefix(rest, " number ")
	if !found || num == "" || num[0] == '0' {
		return CorrectionRef{}, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return CorrectionRef{}, false
	}
	r.N = n
	return r, true
}
