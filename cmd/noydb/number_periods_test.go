package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// till is a receipt numbered by its own date.
type till struct {
	No   string    `json:"no,omitempty"`
	Date time.Time `json:"date"`
}

// casFolder is a file store that says its compare-and-swap is atomic
// (it is, among the processes of one machine): the SDK closes a period
// on it, which a plain file: store refuses.
type casFolder struct{ stores.Store }

func (s casFolder) Capabilities() stores.Capabilities {
	c := s.Store.Capabilities()
	c.CASAtomic = true
	return c
}

// tillsHandle is the SDK's handle of the "tills" series: per month, its
// numbers rendering each receipt's date.
func tillsHandle(t testing.TB, v *vault.Vault) *vault.Numbered[till] {
	t.Helper()
	h, err := vault.NumberingOfDated(vault.CollectionOf[till](v, "tills"), "tills",
		sequence.Options{Period: sequence.PeriodMonth, Format: "T{YYYY}{MM}-{seq:03}"},
		func(r *till, s sequence.Serial) { r.No = s.Formatted }, func(r *till) time.Time { return r.Date })
	require.NoError(t, err)
	return h
}

// 'noydb number pass' of a series that counts per period numbers every
// period that has records waiting, each record in the period of its
// date, rendered with that date (--date-field), and reports each period;
// a closed period numbers none and says how many wait (exit status 1,
// after the other periods). Before, the pass ran the series' own queue,
// which a dated series never uses: "nothing to number", every record
// left pending.
func TestNumberPassNumbersEveryPeriodOfADatedSeries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	fs, err := filestore.Open(data, nil)
	require.NoError(t, err)
	v := openTestVault(t, casFolder{fs})
	h := tillsHandle(t, v)
	require.False(t, h.Online())
	for _, p := range []struct {
		id   string
		date time.Time
	}{ // numbered in the order handed off, each in its period
		{"dec-a", time.Date(2026, time.December, 31, 18, 0, 0, 0, time.UTC)},
		{"dec-b", time.Date(2026, time.December, 1, 9, 0, 0, 0, time.UTC)},
		{"jan", time.Date(2027, time.January, 2, 9, 0, 0, 0, time.UTC)},
		{"nov", time.Date(2026, time.November, 30, 9, 0, 0, 0, time.UTC)},
	} {
		r, err := h.Put(ctx, p.id, till{Date: p.date})
		require.NoError(t, err)
		require.True(t, r.Pending)
	}
	q, err := v.Sequence("tills", sequence.Options{})
	require.NoError(t, err)
	require.NoError(t, q.ClosePeriod(ctx, "2026-11"))
	require.NoError(t, v.Close())

	env := map[string]string{envTestKDF: "1", envUser: "ann", envSecret: "s",
		envVault: "books", envStore: "file:" + data, envStateDir: filepath.Join(dir, "state")}
	code, stdout, stderr := runWith(t, env, "number", "pass", "tills", "--field", "no")
	require.Equal(t, exitUsage, code, stdout+stderr)
	assert.Contains(t, stderr, "--date-field")

	code, stdout, stderr = runWith(t, env, "number", "pass", "tills", "--field", "no", "--date-field", "date")
	assert.Equal(t, exitFailure, code, stderr)
	assert.Equal(t, `series "tills" period 2026-11: closed: 1 records wait and take no number there
series "tills" period 2026-12: batch 1 gave numbers 1 to 2 (2 stamped, 0 voided, 0 resumed, 0 skipped)
series "tills" period 2027-01: batch 1 gave numbers 1 to 1 (1 stamped, 0 voided, 0 resumed, 0 skipped)
`, stdout)
	assert.Contains(t, stderr, "2026-11")
	assert.Contains(t, stderr, "1 records wait")

	code, stdout, stderr = runWith(t, env, "--json", "number", "pass", "tills", "--field", "no", "--date-field", "date")
	assert.Equal(t, exitFailure, code, stderr)
	var out struct {
		Series  string           `json:"series"`
		Periods []periodPassJSON `json:"periods"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
	require.Len(t, out.Periods, 3)
	assert.Equal(t, 1, out.Periods[0].Closed)
	assert.Contains(t, out.Periods[0].Error, "closed")
	assert.Zero(t, out.Periods[1].Assigned, "numbered by the pass before")

	// One head per period, each numbered by passes.
	code, stdout, stderr = runWith(t, env, "seq", "list")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, []string{
		"tills period 2026-11\t0\tclosed\tformat=\"T{YYYY}{MM}-{seq:03}\" period=month\tnumbered by passes (collection tills)",
		"tills period 2026-12\t2\tformat=\"T{YYYY}{MM}-{seq:03}\" period=month\tnumbered by passes (collection tills)",
		"tills period 2027-01\t1\tformat=\"T{YYYY}{MM}-{seq:03}\" period=month\tnumbered by passes (collection tills)",
	}, strings.Split(strings.TrimSpace(stdout), "\n"))

	fs2, err := filestore.Open(data, nil)
	require.NoError(t, err)
	v2 := openTestVault(t, fs2)
	h2 := tillsHandle(t, v2)
	for id, want := range map[string]string{"dec-a": "T202612-001", "dec-b": "T202612-002", "jan": "T202701-001"} {
		g, err := h2.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want, g.Value.No, id)
		assert.Equal(t, want, g.Serial.Formatted, id)
	}
	g, err := h2.Get(ctx, "nov")
	require.NoError(t, err)
	assert.True(t, g.Pending)
}
