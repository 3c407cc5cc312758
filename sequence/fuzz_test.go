package sequence_test

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
)

var (
	tokenRe     = regexp.MustCompile(`\{([^{}]*)\}`)
	widthRe     = regexp.MustCompile(`^seq:0([1-9][0-9]?)$`)
	partitionRe = regexp.MustCompile(`^partition\.(0|[1-9][0-9]{0,2})$`)
	dateRe      = regexp.MustCompile(`^(YYYY|YY|MM|DD|DOY|WW|FY|FY_START|FY_END|TFY)$`)
)

// referenceFormat is an independent, slow implementation of the format
// grammar, to check the real parser against.
func referenceFormat(f string, partition []string, n uint64) (string, bool) {
	if f == "" {
		return strconv.FormatUint(n, 10), true // no format: plain decimal
	}
	if len(f) > sequence.MaxFormatLen || !utf8.ValidString(f) {
		return "", false
	}
	var out strings.Builder
	last, hasSeq := 0, false
	for _, m := range tokenRe.FindAllStringSubmatchIndex(f, -1) {
		lit := f[last:m[0]]
		if strings.ContainsAny(lit, "{}") {
			return "", false
		}
		out.WriteString(lit)
		last = m[1]
		token := f[m[2]:m[3]]
		digits := strconv.FormatUint(n, 10)
		switch {
		case token == "seq":
			out.WriteString(digits)
			hasSeq = true
		case widthRe.MatchString(token):
			w, _ := strconv.Atoi(widthRe.FindStringSubmatch(token)[1])
			if w > 20 {
				return "", false
			}
			if len(digits) < w {
				out.WriteString(strings.Repeat("0", w-len(digits)))
			}
			out.WriteString(digits)
			hasSeq = true
		case partitionRe.MatchString(token):
			i, _ := strconv.Atoi(partitionRe.FindStringSubmatch(token)[1])
			if i >= len(partition) {
				return "", false
			}
			out.WriteString(partition[i])
		case dateRe.MatchString(token):
			out.WriteString(token) // rendered from a date: format_fuzz_test.go checks it
		default:
			return "", false
		}
	}
	if strings.ContainsAny(f[last:], "{}") || !hasSeq {
		return "", false
	}
	out.WriteString(f[last:])
	return out.String(), true
}

func FuzzParseFormat(f *testing.F) {
	for _, seed := range []string{
		"{seq}", "{seq:04}", "{seq:020}", "{seq:021}", "INV-{seq:06}", "{partition.0}/{partition.1}/{seq:04}",
		"{seq", "seq}", "{}", "{{seq}}", "{partition.2}{seq}", "{partition.01}{seq}", "{seq:4}", "no token", "№ {seq} ✓",
	} {
		f.Add(seed, uint8(2), uint64(42))
	}
	svc := sequence.NewService(memstore.New(), newSealer(), "", sequence.Config{})
	parts := []any{2026, "EU", "a/b"}
	f.Fuzz(func(t *testing.T, format string, nparts uint8, n uint64) {
		partition := parts[:int(nparts)%(len(parts)+1)]
		q, err := svc.Sequence("fuzz", sequence.Options{Partition: partition, Format: format})
		dated := false
		if fm, err := sequence.ParseFormat(format, partition...); err == nil {
			dated = fm.Dated()
		}
		text := make([]string, len(partition))
		for i, p := range partition {
			text[i] = fmt.Sprint(p)
		}
		for _, v := range []uint64{n, 0, 1, math.MaxUint64} {
			want, ok := referenceFormat(format, text, v)
			if !ok {
				if err == nil {
					t.Fatalf("%q accepted, reference rejects it", format)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q rejected (%v), reference accepts it", format, err)
			}
			if got := q.Format(v); got != want && !dated {
				t.Fatalf("%q.Format(%d) = %q, want %q", format, v, got, want)
			}
		}
	})
}
