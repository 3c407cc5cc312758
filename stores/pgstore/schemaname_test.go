package pgstore

import (
	"regexp"
	"strings"
	"testing"
)

// validSchema accepts exactly the names of the pattern it stands for.
func TestValidSchemaIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	names := []string{"", "a", "_", "noydb", "noydb_2", "z9", "9z", "Upper", "has-dash", "a b", `q"uote`,
		"é", "a\x00", strings.Repeat("s", 63), strings.Repeat("s", 64), "_" + strings.Repeat("0", 62), "_" + strings.Repeat("0", 63)}
	for _, n := range names {
		if got, want := validSchema(n), pattern.MatchString(n); got != want {
			t.Errorf("validSchema(%q) = %v, the pattern says %v", n, got, want)
		}
	}
}
