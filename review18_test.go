package noydb_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReview18JoinCutShortAfterClosedPeriod: a join that seeded and closed
// a period on the hub, then lost the hub before it wrote the header, joins
// at the next call: the seed of the closed period again is no error.
func TestReview18JoinCutShortAfterClosedPeriod(t *testing.T) {
	ctx := context.Background()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	opts := sequence.Options{Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location: rome, Format: "FY{FY}/{seq:04}"}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, rome) }

	dev := memstore.New()
	solo := openStandalone(t, dev)
	q, err := solo.Sequence("invoices", opts)
	require.NoError(t, err)
	for range 2 {
		_, err := q.NextAt(ctx, day(2026, 3, 1))
		require.NoError(t, err)
	}
	_, err = q.NextAt(ctx, day(2026, 5, 1))
	require.NoError(t, err)
	require.NoError(t, q.ClosePeriod(ctx, "FY2025-26"))
	require.NoError(t, solo.Close())

	var failHeader atomic.Bool
	failHeader.Store(true)
	hub := faultstore.New(memstore.New(), faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "_header") && failHeader.CompareAndSwap(true, false) {
			return fmt.Errorf("connection reset: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	v := openOnHub(t, dev, hub, deviceOpts{})
	require.False(t, failHeader.Load(), "the header write was cut short")
	qa, err := v.Sequence("invoices", opts)
	require.NoError(t, err)
	n, err := qa.NextAt(ctx, day(2026, 5, 2))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
}

// TestReview18BehindInAClosedPeriod: two copies of a vault numbered a
// fiscal year on their own; the first closed it and joined the hub (which
// closes it there); the second went on in that year past the first's
// head. The hub's period is closed, so it can give no number of it again:
// the second joins. Before the fix it was refused with ErrHubBehind, and
// the way out the error names (seed the hub) fails on a closed period.
func TestReview18BehindInAClosedPeriod(t *testing.T) {
	ctx := context.Background()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	opts := sequence.Options{Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location: rome, Format: "FY{FY}/{seq:04}"}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, rome) }
	take := func(v interface {
		Sequence(string, sequence.Options) (*sequence.Sequence, error)
	}, at time.Time, n int) {
		q, err := v.Sequence("invoices", opts)
		require.NoError(t, err)
		for range n {
			_, err := q.NextAt(ctx, at)
			require.NoError(t, err)
		}
	}

	devA := memstore.New()
	solo := openStandalone(t, devA)
	take(solo, day(2026, 3, 1), 2)
	require.NoError(t, solo.Close())
	devB := memstore.New()
	restoreStore(t, devB, snapshotStore(t, devA))

	solo = openStandalone(t, devA)
	q, err := solo.Sequence("invoices", opts)
	require.NoError(t, err)
	require.NoError(t, q.ClosePeriod(ctx, "FY2025-26"))
	require.NoError(t, solo.Close())
	hub := memstore.New()
	a := openOnHub(t, devA, hub, deviceOpts{})
	require.NoError(t, a.Close())

	soloB := openStandalone(t, devB)
	take(soloB, day(2026, 3, 2), 2) // FY2025-26 at 4 on B, closed at 2 on the hub
	require.NoError(t, soloB.Close())
	b, err := openOnHubErr(devB, hub, deviceOpts{})
	require.NoError(t, err, "the hub's period is closed: nothing can be given twice in it")
	require.NoError(t, b.Close())
}

// TestReview18ReplayedRevocationIsTampered: bob was revoked, then granted
// again; his handle opened after the new grant. The store serves his
// revoked keyring entry of before (a genuine one, older than the entry he
// opened with) and a record whose generation it changed to one bob does
// not hold: the read must say ErrTampered. errRevokedSince took the
// replayed entry for a revocation since the handle opened and said
// ErrNoAccess only, hiding the tampering.
func TestReview18ReplayedRevocationIsTampered(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	require.NoError(t, owner.Revoke(ctx, "bob"))
	require.NoError(t, owner.Rotation().Wait(ctx))
	var bobKey string
	for k := range snapshotStore(t, st) {
		if strings.HasSuffix(k, "bob") && strings.Contains(k, "keyring") {
			bobKey = k
		}
	}
	require.NotEmpty(t, bobKey)
	revoked, err := st.Get(ctx, bobKey)
	require.NoError(t, err)
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
	notes := vault.CollectionOf[Note](owner, "notes")
	require.NoError(t, notes.Put(ctx, "n1", Note{Text: "x"}))
	bob := openPerson(t, personCfg(st, "bob", "b2"))
	_, err = vault.CollectionOf[Note](bob, "notes").Get(ctx, "n1")
	require.NoError(t, err, "control: bob reads")

	var recKey string
	for k := range snapshotStore(t, st) {
		if strings.HasSuffix(k, "n1") && strings.Contains(k, "notes") {
			recKey = k
		}
	}
	require.NotEmpty(t, recKey)
	rec, err := st.Get(ctx, recKey)
	require.NoError(t, err)
	forged := append([]byte(nil), rec.Value...)
	require.GreaterOrEqual(t, len(forged), 17)
	binary.BigEndian.PutUint64(forged[9:17], 99)
	_, err = st.Put(ctx, recKey, forged)
	require.NoError(t, err)
	_, err = st.Put(ctx, bobKey, revoked.Value)
	require.NoError(t, err)

	_, err = vault.CollectionOf[Note](bob, "notes").Get(ctx, "n1")
	assert.ErrorIs(t, err, vault.ErrTampered)
}

// TestReview18JoinPartitionedPeriods: a series with partitions and
// periods continues on the hub in its partition's period, and a copy
// that gave a number the hub gave there too is refused naming the
// partition, the period and the number.
func TestReview18JoinPartitionedPeriods(t *testing.T) {
	ctx := context.Background()
	opts := sequence.Options{Period: sequence.PeriodYear, Partition: []any{"EU"}, Location: time.UTC}
	day := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	devA := memstore.New()
	solo := openStandalone(t, devA)
	q, err := solo.Sequence("inv", opts)
	require.NoError(t, err)
	for range 3 {
		_, err := q.NextAt(ctx, day)
		require.NoError(t, err)
	}
	require.NoError(t, solo.Close())
	devB := memstore.New()
	restoreStore(t, devB, snapshotStore(t, devA))
	hub := memstore.New()
	a := openOnHub(t, devA, hub, deviceOpts{})
	qa, err := a.Sequence("inv", opts)
	require.NoError(t, err)
	n, err := qa.NextAt(ctx, day)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), n)

	soloB := openStandalone(t, devB)
	qb, err := soloB.Sequence("inv", opts)
	require.NoError(t, err)
	for range 3 {
		_, err := qb.NextAt(ctx, day)
		require.NoError(t, err)
	}
	require.NoError(t, soloB.Close())
	_, err = openOnHubErr(devB, hub, deviceOpts{})
	var de *vault.HubDivergedError
	require.ErrorAs(t, err, &de, "B's 4 is the hub's 4")
	assert.Equal(t, []vault.DivergedSeries{{Series: "inv", Partition: []string{"EU"}, Period: "2026",
		Numbers: []vault.NumberRange{{From: 4, To: 4}}}}, de.Series)
}

// TestReview18TwoCopiesJoinAtOnce: two copies of a vault that numbered 1..5
// on its own join one fresh hub at the same time and take numbers there at
// once: the hub's numbers are exactly 6..5+2M, none twice, none skipped.
func TestReview18TwoCopiesJoinAtOnce(t *testing.T) {
	const before, each = 5, 15
	devA := memstore.New()
	solo := openStandalone(t, devA)
	takeFrom(t, solo, "orders", sequence.Options{}, before)
	require.NoError(t, solo.Close())
	devB := memstore.New()
	restoreStore(t, devB, snapshotStore(t, devA))
	hub := memstore.New()

	got := make([][]uint64, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, dev := range []stores.Store{devA, devB} {
		wg.Go(func() {
			v, err := openOnHubErr(dev, hub, deviceOpts{})
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = v.Close() }()
			q, err := v.Sequence("orders", sequence.Options{})
			if err != nil {
				errs[i] = err
				return
			}
			for range each {
				n, err := q.Next(context.Background())
				if err != nil {
					errs[i] = err
					return
				}
				got[i] = append(got[i], n)
			}
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	all := append(append([]uint64(nil), got[0]...), got[1]...)
	slices.Sort(all)
	want := make([]uint64, 0, 2*each)
	for n := uint64(before + 1); n <= before+2*each; n++ {
		want = append(want, n)
	}
	assert.Equal(t, want, all)
}

// TestReview18OtherVaultAfterAJoinCutShort: vault A's join of a fresh hub
// is cut short before its header is written; another vault of the same
// name (B, whose person changed their secret, so their entry's serial is
// higher) then reaches the hub. B is ErrHubMismatch and writes nothing,
// and A joins at its next call and a new device of A opens. Before the
// fix B took the hub for fresh, wrote its keyring entry over A's, then
// failed with a tampering error: A's handle found itself "revoked and
// granted again" and a new device of A got "wrong secret".
func TestReview18OtherVaultAfterAJoinCutShort(t *testing.T) {
	ctx := context.Background()
	devA, devB := memstore.New(), memstore.New()
	solo := openStandalone(t, devA)
	takeFrom(t, solo, "orders", sequence.Options{}, 3)
	require.NoError(t, solo.Close())
	soloB := openStandalone(t, devB) // another vault, the same name
	takeFrom(t, soloB, "orders", sequence.Options{}, 7)
	require.NoError(t, soloB.ChangeSecret(ctx, []byte("s3cret"), []byte("s3cret")))
	require.NoError(t, soloB.ChangeSecret(ctx, []byte("s3cret"), []byte("s3cret")))
	require.NoError(t, soloB.Close())

	var failHeader atomic.Bool
	failHeader.Store(true)
	inner := memstore.New()
	hub := faultstore.New(inner, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "_header") && failHeader.CompareAndSwap(true, false) {
			return fmt.Errorf("connection reset: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	a := openOnHub(t, devA, hub, deviceOpts{})
	require.False(t, failHeader.Load(), "A's header write was cut short")

	before := snapshotStore(t, inner)
	_, err := openOnHubErr(devB, hub, deviceOpts{})
	require.ErrorIs(t, err, vault.ErrHubMismatch)
	assert.Equal(t, before, snapshotStore(t, inner), "B wrote nothing on the hub")

	assert.Equal(t, []uint64{4}, takeFrom(t, a, "orders", sequence.Options{}, 1))
	other := openOnHub(t, memstore.New(), hub, deviceOpts{})
	assert.Equal(t, []uint64{5}, takeFrom(t, other, "orders", sequence.Options{}, 1))
}
