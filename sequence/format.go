package sequence

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxFormatLen is the longest format template, in bytes.
const MaxFormatLen = 256

// maxWidth is the widest zero padding {seq:0N} accepts (a uint64 has at most 20 digits).
const maxWidth = 20

// piece is one part of a parsed format: literal text (partition tokens are
// substituted at parse time) or the number with a minimum width.
type piece struct {
	lit   string
	seq   bool
	width int
}

// template is a parsed format, specialised to one partition tuple, so
// formatting a number is a loop over a few pieces.
type template struct {
	pieces []piece
	size   int // bytes of literal text
}

// parseFormat parses a format template against a partition tuple.
//
// Grammar: literal text, with the tokens
//
//	{seq}           the number in decimal
//	{seq:0N}        the number zero-padded to at least N digits, N in 1..20
//	{partition.i}   component i (decimal, from 0) of the partition tuple
//
// A brace outside a token, an unknown token, or an index outside the tuple is
// an error, as is a template without {seq}.
func parseFormat(f string, partition []string) (*template, error) {
	bad := func(reason string) error { return invalid("format", f, reason) }
	switch {
	case len(f) > MaxFormatLen:
		return nil, bad(fmt.Sprintf("longer than %d bytes", MaxFormatLen))
	case !utf8.ValidString(f):
		return nil, bad("not valid UTF-8")
	}
	t := &template{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.pieces = append(t.pieces, piece{lit: lit.String()})
			t.size += lit.Len()
			lit.Reset()
		}
	}
	hasSeq := false
	for rest := f; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			lit.WriteString(rest)
			break
		}
		if rest[open] == '}' {
			return nil, bad(fmt.Sprintf("unbalanced '}' at byte %d", len(f)-len(rest)+open))
		}
		lit.WriteString(rest[:open])
		rest = rest[open+1:]
		end := strings.IndexAny(rest, "{}")
		if end < 0 || rest[end] == '{' {
			return nil, bad(fmt.Sprintf("unclosed '{' at byte %d", len(f)-len(rest)-1))
		}
		token := rest[:end]
		rest = rest[end+1:]
		switch {
		case token == "seq":
			flush()
			t.pieces = append(t.pieces, piece{seq: true})
			hasSeq = true
		case strings.HasPrefix(token, "seq:"):
			w, ok := width(token[len("seq:"):])
			if !ok {
				return nil, bad(fmt.Sprintf("token {%s}: want {seq:0N} with N from 1 to %d", token, maxWidth))
			}
			flush()
			t.pieces = append(t.pieces, piece{seq: true, width: w})
			hasSeq = true
		case strings.HasPrefix(token, "partition."):
			i, ok := index(token[len("partition."):])
			if !ok || i >= len(partition) {
				return nil, bad(fmt.Sprintf("token {%s}: the partition has %d components", token, len(partition)))
			}
			lit.WriteString(partition[i])
		default:
			return nil, bad(fmt.Sprintf("unknown token {%s}", token))
		}
	}
	flush()
	if !hasSeq {
		return nil, bad("no {seq} token: every number would format the same")
	}
	return t, nil
}

// width parses the "0N" of {seq:0N}.
func width(s string) (int, bool) {
	if len(s) < 2 || s[0] != '0' {
		return 0, false
	}
	n, ok := index(s[1:])
	if !ok || n < 1 || n > maxWidth {
		return 0, false
	}
	return n, true
}

// index parses a canonical small decimal: digits only, no leading zero.
func index(s string) (int, bool) {
	if s == "" || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// format renders n.
func (t *template) format(n uint64) string {
	var digits [maxWidth]byte
	d := strconv.AppendUint(digits[:0], n, 10)
	size := t.size
	for _, p := range t.pieces {
		if p.seq {
			size += max(p.width, len(d))
		}
	}
	b := make([]byte, 0, size)
	for _, p := range t.pieces {
		if !p.seq {
			b = append(b, p.lit...)
			continue
		}
		for i := len(d); i < p.width; i++ {
			b = append(b, '0')
		}
		b = append(b, d...)
	}
	return string(b)
}
