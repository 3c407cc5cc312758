package sequence

import (
	"slices"
	"strings"
	"testing"
)

// FuzzPartition: decodePartition is the exact inverse of encodePartition.
// What it decodes re-encodes to the same text (so a counter key names one
// partition, and that partition's counter is that key), and every list of
// components encodePartition accepts comes back unchanged.
func FuzzPartition(f *testing.F) {
	for _, s := range []string{"2026", "2026/a", "a%2Fb/%25", "%00%01", "a\x00b", "a//b", "%", "%2", "%2f", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, enc string) {
		parts, err := decodePartition(enc)
		if err == nil {
			if again := encodePartition(parts); again != enc || slices.Contains(parts, "") {
				t.Fatalf("decodePartition(%q) = %q, which encodes to %q", enc, parts, again)
			}
		}
		// The other way: components split from enc by NUL, as any strings.
		comps := strings.Split(enc, "\x00")
		for _, c := range comps {
			if c == "" {
				return // encodePartition's input holds no empty component
			}
		}
		back, err := decodePartition(encodePartition(comps))
		if err != nil {
			t.Fatalf("decodePartition(encodePartition(%q)): %v", comps, err)
		}
		if strings.Join(back, "\x00") != enc || len(back) != len(comps) {
			t.Fatalf("round trip of %q gave %q", comps, back)
		}
	})
}

// FuzzCounterKey: the key of every valid counter names it back through
// counterOf, series and partition alike, and is never taken for a claim
// or void record.
func FuzzCounterKey(f *testing.F) {
	f.Add("fatture", "2026\x00a/b%c")
	f.Add("inv", "")
	f.Add("a b", "\x01\x00%01")
	f.Fuzz(func(t *testing.T, series, joined string) {
		var parts []string
		if joined != "" {
			parts = strings.Split(joined, "\x00")
		}
		anyParts := make([]any, len(parts))
		for i, p := range parts {
			anyParts[i] = p
		}
		norm, err := normalizePartition(anyParts)
		if err != nil || checkSeries(series) != nil {
			return
		}
		key, err := counterKey("v/x/", series, norm)
		if err != nil {
			return
		}
		gotSeries, gotParts, ok, err := counterOf(strings.TrimPrefix(key, "v/x/"))
		if err != nil || !ok || gotSeries != series || !slices.Equal(gotParts, norm) {
			t.Fatalf("counterOf(%q) = %q, %q, %v, %v; want %q, %q", key, gotSeries, gotParts, ok, err, series, norm)
		}
	})
}
