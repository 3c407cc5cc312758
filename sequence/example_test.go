package sequence_test

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// aeadSealer is a real sealer, for the tests: XChaCha20-Poly1305 with a random
// nonce, and the store key as associated data, so a sealed value moved to
// another key no longer opens.
type aeadSealer struct{ aead cipher.AEAD }

func newSealer() aeadSealer {
	key := make([]byte, chacha20poly1305.KeySize)
	rand.Read(key)
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		panic(err)
	}
	return aeadSealer{aead}
}

func (s aeadSealer) Seal(key string, plaintext []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	nonce := make([]byte, n, n+len(plaintext)+s.aead.Overhead())
	rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plaintext, []byte(key)), nil
}

func (s aeadSealer) Open(key string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("message authentication failed")
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], []byte(key))
}

// exampleVault opens a vault on a fresh memory store, with a key-derivation
// cost fit for an example (never for real secrets). Sequences are a vault's:
// Vault.Sequence returns them.
func exampleVault() *vault.Vault {
	v, err := vault.Open(context.Background(), vault.Config{
		Store: memstore.New(), Name: "books", User: "firm", Secret: []byte("s"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		panic(err)
	}
	return v
}

func ExampleSequence_Next() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()

	invoices, err := v.Sequence("invoice-2026", sequence.Options{})
	if err != nil {
		panic(err)
	}
	first, _ := invoices.Next(ctx)
	second, _ := invoices.Next(ctx)
	last, _ := invoices.Peek(ctx)
	fmt.Println(first, second, last)
	// Output: 1 2 2
}

func ExampleSequence_NextSerial() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()

	eu, err := v.Sequence("fatture", sequence.Options{
		Partition: []any{2026, "EU"},
		Format:    "{partition.0}/{partition.1}/{seq:04}",
	})
	if err != nil {
		panic(err)
	}
	us, _ := v.Sequence("fatture", sequence.Options{
		Partition: []any{2026, "US"},
		Format:    "{partition.0}/{partition.1}/{seq:04}",
	})
	for _, q := range []*sequence.Sequence{eu, eu, us} {
		s, err := q.NextSerial(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(s.N, s.Formatted)
	}
	// Output:
	// 1 2026/EU/0001
	// 2 2026/EU/0002
	// 1 2026/US/0001
}

func ExampleSequence_Claim() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()
	receipts, _ := v.Sequence("receipts", sequence.Options{})

	id := sequence.NewRequestID()
	n, _ := receipts.Claim(ctx, id)
	again, _ := receipts.Claim(ctx, id) // a retry after an unknown outcome
	fmt.Println(n, again)
	// Output: 1 1
}

func ExampleSequence_Bind() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()
	invoices, _ := v.Sequence("invoices", sequence.Options{Format: "INV-{seq:04}"})

	// The record and the number commit together, or not at all. (A vault's
	// collections do this for you: see vault.Collection.PutNumbered.)
	s, err := invoices.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
		return tx.Put("drafts/"+s.Formatted, []byte("total: 120.00"))
	})
	if err != nil {
		panic(err)
	}
	_, err = invoices.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
		return errors.New("customer has no tax id") // nothing is kept, no number taken
	})
	fmt.Println(s.Formatted, err != nil)
	next, _ := invoices.NextSerial(ctx)
	fmt.Println(next.Formatted)
	// Output:
	// INV-0001 true
	// INV-0002
}

func ExampleSequence_NextAt() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()

	// A fiscal year from 1 April, read in Rome: each year counts from 1.
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		panic(err)
	}
	invoices, err := v.Sequence("invoices", sequence.Options{
		Format: "{seq:04}", Period: sequence.PeriodFiscalYear,
		FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}, Location: rome,
	})
	if err != nil {
		panic(err)
	}
	for _, date := range []time.Time{
		time.Date(2026, time.April, 1, 9, 0, 0, 0, rome),
		time.Date(2026, time.April, 2, 9, 0, 0, 0, rome),
		time.Date(2026, time.March, 31, 18, 0, 0, 0, rome), // back-dated: the old year is open
	} {
		s, err := invoices.NextSerialAt(ctx, date)
		if err != nil {
			panic(err)
		}
		fmt.Println(s.Period, s.Formatted)
	}

	// The definition is stored with the series: a handle opened without
	// options numbers the same way.
	again, _ := v.Sequence("invoices", sequence.Options{})
	s, _ := again.At(time.Date(2026, time.May, 5, 9, 0, 0, 0, rome)).NextSerial(ctx)
	fmt.Println(s.Period, s.Formatted)
	// Output:
	// FY2026-27 0001
	// FY2026-27 0002
	// FY2025-26 0001
	// FY2026-27 0003
}

func ExampleSequence_ClosePeriod() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()
	invoices, _ := v.Sequence("invoices", sequence.Options{Period: sequence.PeriodYear})

	dec31 := time.Date(2025, time.December, 31, 12, 0, 0, 0, time.UTC)
	jan2 := time.Date(2026, time.January, 2, 12, 0, 0, 0, time.UTC)
	_, _ = invoices.NextAt(ctx, dec31)
	_, _ = invoices.NextAt(ctx, jan2)

	// The year 2025 is closed: no number can be dated into it any more.
	if err := invoices.ClosePeriod(ctx, "2025"); err != nil {
		panic(err)
	}
	_, err := invoices.NextAt(ctx, dec31)
	var closed *sequence.PeriodClosedError
	fmt.Println(errors.As(err, &closed), closed.Period)
	n, _ := invoices.NextAt(ctx, jan2) // 2026 goes on
	head, isClosed, _ := invoices.PeekPeriod(ctx, "2025")
	fmt.Println(n, head, isClosed)
	// Output:
	// true 2025
	// 2 1 true
}
