package crypto_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

func BenchmarkSeal1KiB(b *testing.B) {
	k, pt, ad := newKey(b), make([]byte, 1024), crypto.KeyAD("books", "_ledger/1")
	b.SetBytes(int64(len(pt)))
	for b.Loop() {
		if _, err := crypto.Seal(k, pt, ad); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen1KiB(b *testing.B) {
	k, ad := newKey(b), crypto.KeyAD("books", "_ledger/1")
	env, err := crypto.Seal(k, make([]byte, 1024), ad)
	require.NoError(b, err)
	b.SetBytes(1024)
	for b.Loop() {
		if _, err := crypto.Open(k, env, ad); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSealRecord1KiB(b *testing.B) {
	k, pt := newKey(b), make([]byte, 1024)
	ref := crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "INV-1", Revision: 1}
	b.SetBytes(int64(len(pt)))
	for b.Loop() {
		if _, err := crypto.SealRecord(k, pt, ref); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenRecord1KiB(b *testing.B) {
	k := newKey(b)
	ref := crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "INV-1", Revision: 1}
	env, err := crypto.SealRecord(k, make([]byte, 1024), ref)
	require.NoError(b, err)
	b.SetBytes(1024)
	for b.Loop() {
		if _, _, err := crypto.OpenRecord(k, env, ref); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMAC200B(b *testing.B) {
	k, msg := newKey(b), make([]byte, 200)
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		k.MAC(msg)
	}
}

func BenchmarkDeriveUserKeyDefault(b *testing.B) {
	salt := make([]byte, crypto.SaltSize)
	for b.Loop() {
		if _, err := crypto.DeriveUserKey([]byte("secret"), salt, crypto.DefaultKDF); err != nil {
			b.Fatal(err)
		}
	}
}
