package crypto_test

import (
	"fmt"

	"github.com/noydb-go/noydb/crypto"
)

func Example() {
	// Create a vault header once, then derive the user's key from the secret.
	h, err := crypto.NewHeader(crypto.DefaultKDF)
	if err != nil {
		panic(err)
	}
	userKey, err := crypto.DeriveUserKey([]byte("correct horse battery staple"), h.Salt[:], h.KDF)
	if err != nil {
		panic(err)
	}

	// The vault's data key is random and stored wrapped under the user key.
	dataKey, err := crypto.GenerateKey()
	if err != nil {
		panic(err)
	}
	ad := crypto.KeyAD("books", "_keyring/alice")
	wrapped, err := crypto.WrapKey(userKey, dataKey, ad)
	if err != nil {
		panic(err)
	}
	unwrapped, err := crypto.UnwrapKey(userKey, wrapped, ad)
	if err != nil {
		panic(err)
	}
	fmt.Println(unwrapped)
	// Output: crypto.Key(REDACTED)
}

func ExampleSeal() {
	k, err := crypto.GenerateKey()
	if err != nil {
		panic(err)
	}
	ad := crypto.KeyAD("books", "_sequences/invoices")
	env, err := crypto.Seal(k, []byte("next=42"), ad)
	if err != nil {
		panic(err)
	}
	pt, err := crypto.Open(k, env, ad)
	fmt.Println(string(pt), err)

	// The same bytes under another store key do not open.
	_, err = crypto.Open(k, env, crypto.KeyAD("books", "_sequences/receipts"))
	fmt.Println(err)
	// Output:
	// next=42 <nil>
	// message authentication failed
}

func ExampleSealRecord() {
	k, err := crypto.GenerateKey()
	if err != nil {
		panic(err)
	}
	ref := crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "INV-0001", Revision: 3}
	env, err := crypto.SealRecord(k, []byte(`{"total":"42.00"}`), ref)
	if err != nil {
		panic(err)
	}
	clearRev, _ := crypto.RecordRevision(env)
	pt, rev, err := crypto.OpenRecord(k, env, crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "INV-0001"})
	fmt.Println(clearRev, rev, string(pt), err)

	_, _, err = crypto.OpenRecord(k, env, crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "INV-0002"})
	fmt.Println(err)
	// Output:
	// 3 3 {"total":"42.00"} <nil>
	// message authentication failed
}

func ExampleKDFParams_Check() {
	fmt.Println(crypto.DefaultKDF.Check(false))
	fmt.Println(crypto.KDFParams{Time: 1, MemoryKiB: 64 * 1024, Threads: 4}.Check(false))
	// Output:
	// <nil>
	// check kdf params: time cost 1 is below the minimum 2: key derivation cost too weak
}
