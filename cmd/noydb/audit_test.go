package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

func openTestVault(t testing.TB, st stores.Store) *vault.Vault {
	t.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{
		User: "ann", Secret: []byte("s"), Store: st, KDF: testKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	v, err := db.OpenVault(context.Background(), "books")
	require.NoError(t, err)
	return v
}

// audit is the command's view of seq's audit.
func audit(t testing.TB, seq *sequence.Sequence) auditReport {
	t.Helper()
	r, err := seq.Audit(context.Background())
	require.NoError(t, err)
	return auditOf(seq, r)
}

type invoice struct {
	Number string `json:"number"`
}

// TestAudit checks the command's rendering of Sequence.Audit: one row per
// bound or voided number, runs of unbound and seeded numbers folded, other
// series kept out.
func TestAudit(t *testing.T) {
	ctx := context.Background()
	v := openTestVault(t, memstore.New())
	invoices := vault.CollectionOf[invoice](v, "invoices")
	opts := sequence.Options{Partition: []any{2026}, Format: "{partition.0}/{seq:03}"}
	seq, err := v.Sequence("fatture", opts)
	require.NoError(t, err)
	put := func(id string) {
		t.Helper()
		_, err := invoices.PutNumbered(ctx, id, seq, func(s sequence.Serial) (invoice, error) {
			return invoice{Number: s.Formatted}, nil
		})
		require.NoError(t, err)
	}

	put("a")               // 1
	put("b")               // 2
	put("c")               // 3
	_, err = seq.Next(ctx) // 4, no record
	require.NoError(t, err)
	require.NoError(t, seq.Void(ctx, 2, "cancelled"))
	require.NoError(t, seq.SeedTo(ctx, 10)) // 5..10 numbered elsewhere
	put("d")                                // 11
	require.NoError(t, invoices.Delete(ctx, "c"))
	require.NoError(t, invoices.Put(ctx, "a", invoice{Number: "2026/001"})) // a plain put keeps the binding

	// Another partition and another series do not show up.
	other, err := v.Sequence("fatture", sequence.Options{Partition: []any{2027}})
	require.NoError(t, err)
	_, err = other.Next(ctx)
	require.NoError(t, err)
	plain, err := v.Sequence("tickets", sequence.Options{})
	require.NoError(t, err)
	_, err = plain.Next(ctx)
	require.NoError(t, err)

	rep := audit(t, seq)
	assert.Equal(t, uint64(11), rep.Head)
	assert.Equal(t, []string{"2026"}, rep.Partition)
	assert.Equal(t, []auditRow{
		{Number: 1, Formatted: "2026/001", Status: statusBound, Collection: "invoices", ID: "a"},
		{Number: 2, Formatted: "2026/002", Status: statusVoided, Collection: "invoices", ID: "b", Reason: "cancelled"},
		{Number: 3, Formatted: "2026/003", Status: statusBound, Collection: "invoices", ID: "c"},
		{Number: 4, Formatted: "2026/004", Status: statusUnbound},
		{Number: 5, To: 10, Formatted: "2026/005", Status: statusSeeded},
		{Number: 11, Formatted: "2026/011", Status: statusBound, Collection: "invoices", ID: "d"},
	}, rep.Numbers)
	assert.Equal(t, map[string]int{statusBound: 3, statusVoided: 1, statusUnbound: 1, statusSeeded: 6, statusMissing: 0}, rep.Counts)

	// A number inside a seeded run was never issued here: it cannot be voided.
	assert.ErrorIs(t, seq.Void(ctx, 7, "spoiled"), sequence.ErrSkipped)

	// Consecutive unbound numbers are one row; a voided one splits them.
	for range 3 { // 12..14
		_, err = seq.Next(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, seq.Void(ctx, 13, "spoiled"))
	rep = audit(t, seq)
	assert.Equal(t, []auditRow{
		{Number: 12, Formatted: "2026/012", Status: statusUnbound},
		{Number: 13, Formatted: "2026/013", Status: statusVoided, Reason: "spoiled"},
		{Number: 14, Formatted: "2026/014", Status: statusUnbound},
	}, rep.Numbers[6:])
	for range 2 { // 15, 16
		_, err = seq.Next(ctx)
		require.NoError(t, err)
	}
	rep = audit(t, seq)
	assert.Equal(t, auditRow{Number: 14, To: 16, Formatted: "2026/014", Status: statusUnbound}, rep.Numbers[8])
	assert.Equal(t, 6, rep.Counts[statusSeeded])
	assert.Equal(t, 5, rep.Counts[statusUnbound]) // 4, 12, 14..16
}

// The command's status names are the SDK's state names.
func TestAuditStatusNames(t *testing.T) {
	assert.Equal(t, statusBound, sequence.StateBound.String())
	assert.Equal(t, statusVoided, sequence.StateVoided.String())
	assert.Equal(t, statusUnbound, sequence.StateUnbound.String())
	assert.Equal(t, statusSeeded, sequence.StateSeeded.String())
	assert.Equal(t, statusMissing, sequence.StateMissing.String())
}

// TestAuditMissing: on a store without transactions the counter is written
// before its ledger entry; a failure between the two leaves a number the
// ledger does not mention, which the audit reports as missing.
func TestAuditMissing(t *testing.T) {
	ctx := context.Background()
	var failLedger atomic.Bool
	st := faultstore.New(memstore.New(), faultstore.Options{
		HideTransactor: true,
		Before: func(op faultstore.Op, key string) error {
			if op.IsWrite() && failLedger.Load() && strings.Contains(key, "/_ledger/") {
				return errors.New("ledger write lost")
			}
			return nil
		},
	})
	v := openTestVault(t, st)
	seq, err := v.Sequence("tickets", sequence.Options{})
	require.NoError(t, err)
	_, err = seq.Next(ctx) // 1
	require.NoError(t, err)
	failLedger.Store(true)
	for range 2 { // 2, 3: taken, never journaled
		n, err := seq.Next(ctx)
		require.Error(t, err)
		require.NotZero(t, n)
	}
	failLedger.Store(false)
	_, err = seq.Next(ctx) // 4
	require.NoError(t, err)

	rep := audit(t, seq)
	assert.Equal(t, []auditRow{
		{Number: 1, Formatted: "1", Status: statusUnbound},
		{Number: 2, To: 3, Formatted: "2", Status: statusMissing},
		{Number: 4, Formatted: "4", Status: statusUnbound},
	}, rep.Numbers)
	assert.Equal(t, 2, rep.Counts[statusMissing])
}

func TestAuditTamperedLedger(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openTestVault(t, st)
	seq, err := v.Sequence("tickets", sequence.Options{})
	require.NoError(t, err)
	for range 3 {
		_, err = seq.Next(ctx)
		require.NoError(t, err)
	}
	key := "v/books/_ledger/00000000000000000002"
	it, err := st.Get(ctx, key)
	require.NoError(t, err)
	it.Value[len(it.Value)-1] ^= 1
	_, err = st.Put(ctx, key, it.Value)
	require.NoError(t, err)
	_, err = seq.Audit(ctx)
	assert.ErrorIs(t, err, vault.ErrTampered)
}

// TestVerifyOnTerminal: with a progress bar, verify walks the ledger itself;
// its report must be the one ledger.Verify gives, intact or tampered.
func TestVerifyOnTerminal(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openTestVault(t, st)
	seq, err := v.Sequence("tickets", sequence.Options{})
	require.NoError(t, err)
	for range 5 {
		_, err = seq.Next(ctx)
		require.NoError(t, err)
	}
	var bar bytes.Buffer
	a := &app{io: stdio{err: &bar, errTerminal: true}}
	check := func() {
		t.Helper()
		want, wantErr := v.Audit().Verify(ctx)
		got, gotErr := a.verify(ctx, v.Audit())
		assert.Equal(t, want.Entries, got.Entries)
		assert.Equal(t, want.Head, got.Head)
		assert.Equal(t, want.FirstBad, got.FirstBad)
		assert.Equal(t, want.OK(), got.OK())
		assert.Equal(t, wantErr == nil, gotErr == nil)
		if want.Problem != nil {
			assert.Equal(t, want.Problem.Error(), got.Problem.Error())
		}
	}
	check()
	flip := func(key string) {
		t.Helper()
		it, err := st.Get(ctx, key)
		require.NoError(t, err)
		it.Value[len(it.Value)-1] ^= 1
		_, err = st.Put(ctx, key, it.Value)
		require.NoError(t, err)
	}
	for _, key := range []string{"v/books/_ledger/00000000000000000003", "v/books/_ledger/head"} {
		flip(key)
		check()
		flip(key)
	}
	require.NoError(t, st.Delete(ctx, "v/books/_ledger/00000000000000000002"))
	check()
}
