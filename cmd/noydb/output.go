package main

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// printJSON writes v as indented JSON and a newline, for --json.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.io.out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("print JSON: %w", err)
	}
	return nil
}

// jsonLine is v as one line of JSON, without HTML escaping, for the items
// of a streamed array.
func jsonLine(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("print JSON: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// plural is "1 entry", "2 entries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// unescapeHTML undoes the \u003c, \u003e and \u0026 escapes that
// encoding/json puts in stored records, so a record prints as it was written
// ("Globex <GmbH>"). The JSON means the same either way.
func unescapeHTML(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u00`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, b[i], b[i+1]), i+1
	}
	return out
}

// confirm prints a write's confirmation: obj as JSON with --json, else the
// sentence format and args make, on one line.
func (a *app) confirm(obj any, format string, args ...any) error {
	if a.json {
		return a.printJSON(obj)
	}
	_, err := fmt.Fprintf(a.io.out, format+"\n", args...)
	return err
}

// personChangeJSON is what people add, remove and collections print with --json.
type personChangeJSON struct {
	User        string   `json:"user"`
	Role        string   `json:"role,omitempty"`
	Collections []string `json:"collections,omitempty"`
	All         bool     `json:"all,omitempty"`
	Removed     bool     `json:"removed,omitempty"`
	// Unchanged: the change was already made; nothing was written.
	Unchanged bool `json:"unchanged,omitempty"`
}

// accessJSON is what vault passwd, recover and revoke-recovery-codes print
// with --json.
type accessJSON struct {
	User                 string `json:"user"`
	SecretChanged        bool   `json:"secret_changed,omitempty"`
	KeyringUpgraded      bool   `json:"keyring_upgraded,omitempty"`
	Recovered            bool   `json:"recovered,omitempty"`
	RecoveryCodesRevoked bool   `json:"recovery_codes_revoked,omitempty"`
	// Unchanged: there was nothing to change; nothing was written.
	Unchanged bool `json:"unchanged,omitempty"`
}

// rotateJSON is what vault rotate prints with --json.
type rotateJSON struct {
	Generation uint64 `json:"generation"`
	Resealed   uint64 `json:"resealed"`
	Resumed    bool   `json:"resumed"`
}
