package noydb_test

import (
	"context"
	"testing"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// BenchmarkBadgerDurable64StateDir: durable badger, 64 callers on one
// series, with the ledger on, without and with a StateDir. With one, a
// number is returned only once its pin is fsynced too (callers share one
// pins write per commit), so it pays a second fsync per batch.
func BenchmarkBadgerDurable64StateDir(b *testing.B) {
	for _, withState := range []bool{false, true} {
		name := "no-statedir"
		if withState {
			name = "statedir"
		}
		b.Run(name, func(b *testing.B) {
			st, err := badgerstore.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			cfg := noydb.Config{User: "firm", Secret: []byte("s"), Store: st, KDF: cheapKDF, InsecureAllowWeakKDF: true}
			if withState {
				cfg.StateDir = b.TempDir()
			}
			db, err := noydb.Open(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = db.Close() })
			v, err := db.OpenVault(context.Background(), "books")
			if err != nil {
				b.Fatal(err)
			}
			seq, err := v.Sequence("bench", sequence.Options{})
			if err != nil {
				b.Fatal(err)
			}
			parallelNext(b, 64, func(ctx context.Context) error { _, err := seq.Next(ctx); return err })
		})
	}
}
