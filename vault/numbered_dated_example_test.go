package vault_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// Till is a receipt that carries its own date and, once numbered, its number.
type Till struct {
	Number string
	Date   time.Time
	Total  int
}

// A till in a folder (offline, numbered by passes) counts receipts per
// month by each receipt's own date: a receipt dated 31 December that
// reaches the pass after January's takes December's next number.
func ExampleNumberingOfDated() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "noydb-dated-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := filestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	v, err := vault.Open(ctx, vault.Config{
		Store: st, Name: "shop", User: "till", Secret: []byte("shop-secret-2026"),
		// Cheap key derivation keeps the example fast; never do this in production.
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()

	// Said once: the period, how a number goes into a Till, and where a
	// Till's date is.
	tills, err := vault.NumberingOfDated(vault.CollectionOf[Till](v, "tills"), "tills",
		sequence.Options{Period: sequence.PeriodMonth, Format: "T{YYYY}{MM}-{seq:03}"},
		func(r *Till, s sequence.Serial) { r.Number = s.Formatted },
		func(r *Till) time.Time { return r.Date })
	if err != nil {
		log.Fatal(err)
	}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, time.UTC) }
	sell := func(id string, date time.Time) {
		if _, err := tills.Put(ctx, id, Till{Date: date, Total: 120}); err != nil {
			log.Fatal(err)
		}
	}
	sell("t-1", day(2026, time.December, 30))
	sell("t-2", day(2027, time.January, 2))
	if _, err := tills.Settle(ctx); err != nil {
		log.Fatal(err)
	}
	sell("t-3", day(2026, time.December, 31)) // reaches the pass in January
	if _, err := tills.Settle(ctx); err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		r, err := tills.Get(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s (period %s)\n", id, r.Value.Number, r.Serial.Period)
	}
	// Output:
	// t-1: T202612-001 (period 2026-12)
	// t-2: T202701-001 (period 2027-01)
	// t-3: T202612-002 (period 2026-12)
}
