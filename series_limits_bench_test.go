package noydb_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Benchmarks of the numbers a person limited to some collections takes,
// and of an owner's numbered records in a vault of people (the commits
// that check and bind series). They use only the public API, so that they
// run against an older commit too.

// BenchmarkVaultNextLimited: one goroutine's Next, on memstore, by a
// writer limited to customers, of a series an owner bound there.
func BenchmarkVaultNextLimited(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	owner := personVault(b, st, "olga", "o")
	if err := owner.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"); err != nil {
		b.Fatal(err)
	}
	if err := owner.BindSeries(ctx, "customers", "cust-no"); err != nil {
		b.Fatal(err)
	}
	seq, err := personVault(b, st, "wanda", "w").Sequence("cust-no", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := seq.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutNumberedPeople is BenchmarkPutNumbered by the owner of a
// vault of two people.
func BenchmarkPutNumberedPeople(b *testing.B) {
	v := peopleVault(b)
	seq, err := v.Sequence("invoices", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c := vault.CollectionOf[Invoice](v, "records")
	ctx := context.Background()
	var n int64
	b.ReportAllocs()
	for b.Loop() {
		n++
		if _, err := c.PutNumbered(ctx, "inv-"+strconv.FormatInt(n, 10), seq, func(s sequence.Serial) (Invoice, error) {
			return writeRecord(int64(s.N)), nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// personVault opens the vault "team" on st as user.
func personVault(b *testing.B, st *memstore.Store, user, secret string) *vault.Vault {
	b.Helper()
	v, err := vault.Open(context.Background(), personCfg(st, user, secret))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = v.Close() })
	return v
}
