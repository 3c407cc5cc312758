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

	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// 'noydb number status', 'lookup' and 'enqueue' of a series that counts
// per period look at the queue of each period, not the series' own
// (which a dated series never uses): status lists each period's last
// number and pending records, enqueue puts a record in the line of its
// date's period (--date-field), lookup finds a number in any period.
// Before, status said 0 pending, lookup "no number yet" after a pass,
// and enqueue put the record in a line no pass reads.
func TestNumberStatusLookupEnqueueSeeEveryPeriodOfADatedSeries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	fs, err := filestore.Open(data, nil)
	require.NoError(t, err)
	v := openTestVault(t, casFolder{fs})
	h := tillsHandle(t, v)
	for id, date := range map[string]time.Time{
		"dec": time.Date(2026, time.December, 31, 18, 0, 0, 0, time.UTC),
		"jan": time.Date(2027, time.January, 2, 9, 0, 0, 0, time.UTC),
	} {
		r, err := h.Put(ctx, id, till{Date: date})
		require.NoError(t, err)
		require.True(t, r.Pending)
	}
	plain := vault.CollectionOf[till](v, "tills")
	err = plain.Put(ctx, "late", till{Date: time.Date(2026, time.December, 15, 9, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	err = plain.Put(ctx, "undated", till{})
	require.NoError(t, err)
	require.NoError(t, v.Close())

	env := map[string]string{envTestKDF: "1", envUser: "ann", envSecret: "s",
		envVault: "books", envStore: "file:" + data, envStateDir: filepath.Join(dir, "state")}
	code, stdout, stderr := runWith(t, env, "number", "status", "tills")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, `series "tills" period 2026-12: last number 0, 1 pending
series "tills" period 2027-01: last number 0, 1 pending
`, stdout)

	// A record without the date the series counts by is refused, unchanged.
	code, _, stderr = runWith(t, env, "number", "enqueue", "tills", "undated", "--date-field", "date")
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, stderr, "date")
	code, _, stderr = runWith(t, env, "number", "enqueue", "tills", "late")
	assert.NotEqual(t, exitOK, code)
	assert.Contains(t, stderr, "--date-field")

	code, stdout, stderr = runWith(t, env, "number", "enqueue", "tills", "late", "--date-field", "date")
	require.Equal(t, exitOK, code, stderr)
	assert.True(t, strings.HasPrefix(stdout, "late\t"), stdout)

	code, stdout, stderr = runWith(t, env, "--json", "number", "status", "tills")
	require.Equal(t, exitOK, code, stderr)
	var st struct {
		Series  string `json:"series"`
		Periods []struct {
			Period  string `json:"period"`
			Last    uint64 `json:"last"`
			Pending int    `json:"pending"`
		} `json:"periods"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &st), stdout)
	require.Len(t, st.Periods, 2)
	assert.Equal(t, "2026-12", st.Periods[0].Period)
	assert.Equal(t, 2, st.Periods[0].Pending, "the enqueued record waits in its date's period")
	assert.Equal(t, 1, st.Periods[1].Pending)

	code, _, stderr = runWith(t, env, "number", "pass", "tills", "--field", "no", "--date-field", "date")
	require.Equal(t, exitOK, code, stderr)
	for id, want := range map[string]string{"dec": "T202612-001", "late": "T202612-002", "jan": "T202701-001"} {
		code, stdout, stderr = runWith(t, env, "number", "lookup", "tills", id)
		require.Equal(t, exitOK, code, stderr)
		assert.Equal(t, want+"\n", stdout, id)
	}
	code, stdout, stderr = runWith(t, env, "number", "status", "tills")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, `series "tills" period 2026-12: last number 2, 0 pending
series "tills" period 2027-01: last number 1, 0 pending
`, stdout)
}
