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
