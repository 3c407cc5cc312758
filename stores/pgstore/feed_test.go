package pgstore_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// planNode is what these tests read of a node of EXPLAIN's JSON plan.
type planNode struct {
	NodeType    string     `json:"Node Type"`
	IndexName   string     `json:"Index Name"`
	ActualRows  float64    `json:"Actual Rows"`
	ActualLoops float64    `json:"Actual Loops"`
	SharedHit   int        `json:"Shared Hit Blocks"`
	SharedRead  int        `json:"Shared Read Blocks"`
	Plans       []planNode `json:"Plans"`
}

// scans parses a plan and returns its scan nodes of the items table,
// failing t on any scan other than a read of the primary key's index.
func scans(t *testing.T, raw []byte) []planNode {
	t.Helper()
	var top []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &top), "plan %s", raw)
	require.Len(t, top, 1)
	var found []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
		switch n.NodeType {
		case "Index Scan", "Index Only Scan":
			assert.Equal(t, "items_pkey", n.IndexName, "plan %s", raw)
			found = append(found, n)
		case "Seq Scan", "Bitmap Heap Scan", "Bitmap Index Scan", "Tid Scan", "Tid Range Scan":
			t.Errorf("plan has a %s: %s", n.NodeType, raw)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(top[0].Plan)
	require.Len(t, found, 1, "one read of the index: %s", raw)
	return found
}

// feedKey is the key of position seq of a feed under dir, laid out as the
// ledger lays out its entries: the position in 20 digits, then "head" after
// every position.
func feedKey(dir string, seq int) string { return fmt.Sprintf("%s%020d", dir, seq) }

// fillFeed writes positions 1..n and the head of a feed under dir, in
// transactions of 5,000 keys.
func fillFeed(t *testing.T, s *pgstore.Store, dir string, n int, value []byte) {
	t.Helper()
	for lo := 1; lo <= n; lo += 5000 {
		require.NoError(t, s.Update(guardCtx(t), func(tx stores.Tx) error {
			for seq := lo; seq < min(n+1, lo+5000); seq++ {
				if err := tx.Put(feedKey(dir, seq), value); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	_, err := s.Put(guardCtx(t), dir+"head", value)
	require.NoError(t, err)
}

// TestListAfterIsOneIndexRange: reading a feed after a device's cursor (a
// prefix whose keys sort by position, as the ledger's do) is one range read
// of the primary key's index that starts at the cursor, in the plan chosen
// for the given values and in the generic plan the server keeps for a
// prepared statement: it reads the rows it yields and the few pages that
// hold them, however many positions come before the cursor. The feed sits
// between other prefixes, so that both ends of the range matter.
func TestListAfterIsOneIndexRange(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	const n = 20_000
	value := make([]byte, 200)
	fillFeed(t, s, "v/_ledger/", n, value)
	fillFeed(t, s, "u/_ledger/", 2000, value)
	fillFeed(t, s, "w/_ledger/", 2000, value)
	err := pgstore.Analyze(ctx, s)
	require.NoError(t, err)

	for _, tc := range []struct {
		after string
		rows  int // the rows the first page reads: what it yields
	}{
		{feedKey("v/_ledger/", n-10), 11}, // 10 positions and the head
		{feedKey("v/_ledger/", n), 1},     // the head alone
		{"v/_ledger/head", 0},
		{feedKey("v/_ledger/", 10), 256}, // a full page
	} {
		for _, generic := range []bool{false, true} {
			plan, err := pgstore.ExplainListAfter(ctx, s, "v/_ledger/", tc.after, generic)
			require.NoError(t, err)
			scan := scans(t, plan)[0]
			assert.Equal(t, float64(tc.rows), scan.ActualRows, "rows read after %q (generic plan %v)", tc.after, generic)
			assert.Equal(t, float64(1), scan.ActualLoops)
			// 20,000 rows of 200 bytes fill some 700 pages; a range read
			// touches the index's root and leaves and the rows' pages.
			assert.LessOrEqual(t, scan.SharedHit+scan.SharedRead, 16+tc.rows/8,
				"pages read after %q (generic plan %v): %s", tc.after, generic, plan)
		}
	}

	var got []string
	for it, err := range s.ListAfter(ctx, "v/_ledger/", feedKey("v/_ledger/", n-3)) {
		require.NoError(t, err)
		got = append(got, it.Key)
	}
	assert.Equal(t, []string{feedKey("v/_ledger/", n-2), feedKey("v/_ledger/", n-1), feedKey("v/_ledger/", n), "v/_ledger/head"}, got)
}

// TestListAfterReadsItsPageAfterTheTableGrew: a feed read after its
// cursor reads the rows of its page, also on a connection that listed the
// table many times while it was small, when the table has grown since and
// the server has not analyzed it again (a hub's first push of many
// records). A plan the server kept from the small table (a sort of every
// row after the cursor) would read them all for each page, which made a
// first pull of 100,000 records quadratic.
func TestListAfterReadsItsPageAfterTheTableGrew(t *testing.T) {
	s := pgtest.Open(t, &pgstore.Options{MaxConns: 1}) // one connection: its statements, its counts
	ctx := guardCtx(t)
	value := make([]byte, 200)
	fillFeed(t, s, "v/_ledger/", 10, value)
	for range 10 { // more than the few runs after which the server may keep one plan
		n := 0
		for _, err := range s.ListAfter(ctx, "v/_ledger/", feedKey("v/_ledger/", 2)) {
			require.NoError(t, err)
			n++
		}
		require.Equal(t, 9, n) // positions 3..10 and the head
	}
	const n = 20_000
	fillFeed(t, s, "v/_ledger/", n, value)
	before, err := pgstore.IndexEntriesRead(ctx, s)
	require.NoError(t, err)
	got := 0
	for _, err := range s.ListAfter(ctx, "v/_ledger/", feedKey("v/_ledger/", 10)) {
		require.NoError(t, err)
		if got++; got == 100 { // within the first page
			break
		}
	}
	after, err := pgstore.IndexEntriesRead(ctx, s)
	require.NoError(t, err)
	assert.LessOrEqual(t, after-before, int64(300), "index entries read for one page of 256 after position 10 of %d", n)
}

// TestGetManyIsOneIndexRead: GetMany of scattered keys is one read of the
// primary key's index, touching the pages of the keys it finds, not the
// table.
func TestGetManyIsOneIndexRead(t *testing.T) {
	s := pgtest.Open(t, nil)
	ctx := guardCtx(t)
	const n = 20_000
	fillFeed(t, s, "v/_ledger/", n, make([]byte, 200))
	err := pgstore.Analyze(ctx, s)
	require.NoError(t, err)
	var keys []string
	for seq := 7; seq <= n; seq += n / 10 {
		keys = append(keys, feedKey("v/_ledger/", seq))
	}
	keys = append(keys, "missing", "v/_ledger/head")
	for _, generic := range []bool{false, true} {
		plan, err := pgstore.ExplainGetMany(ctx, s, keys, generic)
		require.NoError(t, err)
		scan := scans(t, plan)[0]
		assert.Equal(t, float64(len(keys)-1), scan.ActualRows, "rows of GetMany (generic plan %v)", generic)
		assert.LessOrEqual(t, scan.SharedHit+scan.SharedRead, 4*len(keys),
			"pages read by GetMany (generic plan %v): %s", generic, plan)
	}
}
