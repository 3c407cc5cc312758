// Command 102-formatted-sequence shows gap-free, formatted, partitioned
// numbering on the in-memory default store.
//
// It prints series "fatture" partitioned by year ("2026/0001", "2026/0002",
// then "2027/0001" in its own partition, then "2026/0003"), a "DDT-{seq:05}"
// series with Peek before and after, and a series partitioned by region.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "102-formatted-sequence:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	db, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("firm-secret-2026")})
	if err != nil {
		return err
	}
	defer db.Close()
	books, err := db.OpenVault(ctx, "books")
	if err != nil {
		return err
	}

	year := func(y int) (*sequence.Sequence, error) {
		return books.Sequence("fatture", sequence.Options{Partition: []any{y}, Format: "{partition.0}/{seq:04}"})
	}
	f2026, err := year(2026)
	if err != nil {
		return err
	}
	f2027, err := year(2027)
	if err != nil {
		return err
	}
	fmt.Println("fatture, one counter per year:")
	for _, s := range []*sequence.Sequence{f2026, f2026, f2027, f2026} {
		if err := printNext(ctx, s); err != nil {
			return err
		}
	}

	ddt, err := books.Sequence("ddt", sequence.Options{Format: "DDT-{seq:05}"})
	if err != nil {
		return err
	}
	fmt.Println("\ndelivery notes:")
	if err := printPeek(ctx, ddt); err != nil {
		return err
	}
	for range 2 {
		if err := printNext(ctx, ddt); err != nil {
			return err
		}
	}
	if err := printPeek(ctx, ddt); err != nil {
		return err
	}

	fmt.Println("\ninvoices by region:")
	for _, region := range []string{"EU", "US", "EU", "EU", "US"} {
		s, err := books.Sequence("invoices", sequence.Options{Partition: []any{2026, region}, Format: "INV-{partition.1}-{partition.0}-{seq:03}"})
		if err != nil {
			return err
		}
		if err := printNext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func printNext(ctx context.Context, s *sequence.Sequence) error {
	serial, err := s.NextSerial(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  next  %s\n", serial.Formatted)
	return nil
}

func printPeek(ctx context.Context, s *sequence.Sequence) error {
	n, err := s.Peek(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  peek  %d\n", n)
	return nil
}
