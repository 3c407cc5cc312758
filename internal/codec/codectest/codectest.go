// Package codectest checks stored binary layouts against known-answer
// vectors kept in a testdata file. It is imported by tests only.
//
// A vector file is a JSON object mapping a case name to the hex of its
// encoding. Vectors are published format: once a name is in the file its
// hex never changes. Running the tests with NOYDB_WRITE_VECTORS=1 adds the
// cases missing from the file (encoded by the code under test) and never
// rewrites an existing one.
package codectest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Case is one value of one layout.
type Case struct {
	// Name identifies the case in the vector file.
	Name string
	// Value is the decoded value the vector stands for.
	Value any
	// Encode returns the encoding of Value.
	Encode func() ([]byte, error)
	// Decode decodes b; it must fail for anything that is not a valid encoding.
	Decode func(b []byte) (any, error)
	// PrefixOK says a strict prefix of the encoding may be a valid encoding
	// of another value (so prefixes are only checked not to panic and to
	// re-encode canonically); otherwise every strict prefix must be refused.
	PrefixOK bool
	// TrailingOK says bytes after the encoding are part of it or ignored;
	// otherwise one trailing byte must be refused.
	TrailingOK bool
	// Err is the error every refusal must match (errors.Is), when set.
	Err error
}

// Check runs every case against the vector file at path: the encoding of
// Value is the file's hex, decoding the hex gives Value, and truncated or
// extended encodings are refused as the case says.
func Check(t *testing.T, path string, cases []Case) {
	t.Helper()
	want := map[string]string{}
	b, err := os.ReadFile(path)
	if err == nil {
		require.NoError(t, json.Unmarshal(b, &want))
	} else if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
	}
	if os.Getenv("NOYDB_WRITE_VECTORS") == "1" {
		added := false
		for _, c := range cases {
			if _, ok := want[c.Name]; ok {
				continue
			}
			enc, err := c.Encode()
			require.NoError(t, err, c.Name)
			want[c.Name] = hex.EncodeToString(enc)
			added = true
		}
		if added {
			writeSorted(t, path, want)
		}
	}
	seen := map[string]bool{}
	for _, c := range cases {
		require.False(t, seen[c.Name], "case %q twice", c.Name)
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			h, ok := want[c.Name]
			require.True(t, ok, "no vector for %q in %s", c.Name, path)
			enc, err := hex.DecodeString(h)
			require.NoError(t, err)

			got, err := c.Encode()
			require.NoError(t, err)
			assert.Equal(t, h, hex.EncodeToString(got), "encode")

			v, err := c.Decode(enc)
			require.NoError(t, err, "decode")
			assert.Equal(t, c.Value, v, "decode")

			for n := range len(enc) {
				v, err := c.Decode(enc[:n:n])
				if err != nil {
					if c.Err != nil && !assert.ErrorIs(t, err, c.Err, "prefix of %d bytes", n) {
						break
					}
					continue
				}
				if !c.PrefixOK {
					t.Errorf("prefix of %d bytes accepted as %+v", n, v)
					break
				}
			}
			if !c.TrailingOK {
				_, err := c.Decode(append(enc[:len(enc):len(enc)], 0))
				require.Error(t, err, "one trailing byte")
				if c.Err != nil {
					assert.ErrorIs(t, err, c.Err)
				}
			}
		})
	}
	for name := range want {
		assert.True(t, seen[name], "vector %q of %s has no case: vectors are never removed", name, path)
	}
}

func writeSorted(t *testing.T, path string, m map[string]string) {
	t.Helper()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	b := []byte("{\n")
	for i, n := range names {
		k, _ := json.Marshal(n)
		v, _ := json.Marshal(m[n])
		b = append(b, "\t"...)
		b = append(b, k...)
		b = append(b, ": "...)
		b = append(b, v...)
		if i < len(names)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	b = append(b, "}\n"...)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// Layout is a layout's decoder and encoder, for Fuzz.
type Layout struct {
	// Seeds is the vector file whose cases named Prefix+"..." seed the corpus.
	Seeds, Prefix string
	// Decode decodes b into a value; Encode encodes such a value.
	Decode func(b []byte) (any, error)
	Encode func(v any) ([]byte, error)
	// Err is the error every refusal must match, when set.
	Err error
	// TrailingIgnored says Decode ignores bytes after the encoding, so
	// re-encoding an accepted input gives a prefix of it.
	TrailingIgnored bool
}

// Fuzz runs the fuzz target of a layout: Decode never panics, refuses with
// Err, and an accepted input is canonical: encoding what it decodes to gives
// the input back (or a prefix of it), which decodes to the same value.
func Fuzz(f *testing.F, l Layout) {
	b, err := os.ReadFile(l.Seeds)
	require.NoError(f, err)
	var vs map[string]string
	require.NoError(f, json.Unmarshal(b, &vs))
	for name, h := range vs {
		if len(name) >= len(l.Prefix) && name[:len(l.Prefix)] == l.Prefix {
			enc, err := hex.DecodeString(h)
			require.NoError(f, err)
			f.Add(enc)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := l.Decode(b)
		if err != nil {
			if l.Err != nil {
				require.ErrorIs(t, err, l.Err)
			}
			return
		}
		out, err := l.Encode(v)
		require.NoError(t, err)
		if l.TrailingIgnored {
			require.LessOrEqual(t, len(out), len(b))
			require.Equal(t, b[:len(out)], out)
		} else {
			require.Equal(t, b, out)
		}
		again, err := l.Decode(out)
		require.NoError(t, err)
		require.Equal(t, v, again)
	})
}
