package ledger_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// openExampleVault opens a vault on st, with a key-derivation cost fit for
// an example (never for real secrets). A vault keeps its ledger; read it
// with Vault.Audit.
func openExampleVault(st stores.Store) *vault.Vault {
	v, err := vault.Open(context.Background(), vault.Config{
		Store: st, Name: "books", User: "ann", Secret: []byte("s"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		panic(err)
	}
	return v
}

// Every record write, number and application event of a vault is an entry
// of its ledger, read back and checked with Read and Verify.
func Example() {
	ctx := context.Background()
	v := openExampleVault(memstore.New())
	defer v.Close()

	invoices := vault.CollectionOf[map[string]int](v, "invoices")
	_ = invoices.Put(ctx, "inv-1", map[string]int{"total": 120})
	_ = invoices.Put(ctx, "inv-2", map[string]int{"total": 80})
	_, _ = v.Record(ctx, "exported", []byte("invoices.csv"))

	for e, err := range v.Audit().Read(ctx, 1) {
		if err != nil {
			panic(err)
		}
		if name, data, ok := e.Event(); ok {
			fmt.Println(e.Seq, e.Kind, name, string(data), "by", e.Actor)
			continue
		}
		fmt.Println(e.Seq, e.Kind, e.Collection+"/"+e.ID, "rev", e.Revision, "by", e.Actor)
	}

	rep, err := v.Audit().Verify(ctx)
	fmt.Println("intact:", rep.OK(), "entries:", rep.Entries, "err:", err)
	// Output:
	// 1 record-put invoices/inv-1 rev 1 by ann
	// 2 record-put invoices/inv-2 rev 1 by ann
	// 3 app-event exported invoices.csv by ann
	// intact: true entries: 3 err: <nil>
}

// Verify names the first position at fault: here the store lost an entry.
func Example_verify() {
	ctx := context.Background()
	st := memstore.New()
	v := openExampleVault(st)
	defer v.Close()
	for i := 1; i <= 5; i++ {
		_, _ = v.Record(ctx, "tick", []byte(fmt.Sprint(i)))
	}

	_ = st.Delete(ctx, "v/books/_ledger/00000000000000000003") // the store loses an entry

	rep, err := v.Audit().Verify(ctx)
	fmt.Println(err)
	fmt.Println("first bad:", rep.FirstBad, "intact before it:", rep.Entries, "head:", rep.Head.Seq)
	var gap *ledger.GapError
	fmt.Println("a gap:", errors.As(err, &gap))
	// Output:
	// ledger: entry 3 missing (found 4 next)
	// first bad: 3 intact before it: 2 head: 5
	// a gap: true
}

// Every entry is signed by its author, and Verify checks that the author
// could write it there: an entry by a revoked person after their
// revocation fails it (a *SignatureError whose Problem is Revoked). A
// handle opened before its person's revocation cannot write such an
// entry: its commits are refused with vault.ErrNoAccess.
func Example_signatures() {
	ctx := context.Background()
	st := memstore.New()
	owner := openExampleVault(st)
	defer owner.Close()
	_ = owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter)
	bob, err := vault.Open(ctx, vault.Config{
		Store: st, Name: "books", User: "bob", Secret: []byte("b"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		panic(err)
	}
	defer bob.Close()
	_, _ = bob.Record(ctx, "login", nil)
	_ = owner.Revoke(ctx, "bob")
	_, err = bob.Record(ctx, "export", nil) // the open handle is refused
	fmt.Println("bob after his revocation:", errors.Is(err, vault.ErrNoAccess))
	if r := owner.Rotation(); r != nil {
		_ = r.Wait(ctx) // the revocation's re-sealing ends with an entry
	}

	for e, err := range owner.Audit().Read(ctx, 1) {
		if err == nil {
			// The last entry of a commit is signed; the others are
			// covered by its signature.
			fmt.Println(e.Seq, e.Kind, "by", e.Actor, "signed:", len(e.Signature) > 0, "covered:", e.Covered)
		}
	}
	_, err = owner.Audit().Verify(ctx)
	fmt.Println("verify:", err)
	// Output:
	// bob after his revocation: true
	// 1 person-granted by ann signed: true covered: false
	// 2 app-event by bob signed: true covered: false
	// 3 person-revoked by ann signed: false covered: true
	// 4 keys-rotated by ann signed: true covered: false
	// 5 keys-resealed by ann signed: true covered: false
	// verify: <nil>
}
