package ledger_test

import (
	"context"
	"fmt"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
)

// The vault passes its own sealer (XChaCha20-Poly1305 bound to the store
// key) and a MAC key derived from its data key; the examples use the test
// stand-ins of helpers_test.go, which do the same.
func Example() {
	ctx := context.Background()
	st := memstore.New()
	l := ledger.New(st, newSealer(nil), macer{macKey}, "v/books/", ledger.Options{Actor: "ann"})

	// Facts: two record changes, committed together.
	h, err := l.Append(ctx,
		ledger.Entry{Kind: ledger.RecordPut, Collection: "invoices", ID: "inv-1", Revision: 1},
		ledger.Entry{Kind: ledger.RecordPut, Collection: "invoices", ID: "inv-2", Revision: 1},
	)
	if err != nil {
		panic(err)
	}
	fmt.Println("head after the batch:", h.Seq)

	for e, err := range l.Read(ctx, 1) {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Seq, e.Kind, e.Collection+"/"+e.ID, "by", e.Actor)
	}

	rep, err := l.Verify(ctx)
	fmt.Println("intact:", rep.OK(), "entries:", rep.Entries, "err:", err)
	// Output:
	// head after the batch: 2
	// 1 record-put invoices/inv-1 by ann
	// 2 record-put invoices/inv-2 by ann
	// intact: true entries: 2 err: <nil>
}

// A decision derived from the ledger's state is fenced on the head it was
// derived from: if another writer got there first, derive runs again.
func ExampleLedger_AppendFunc() {
	ctx := context.Background()
	l := ledger.New(memstore.New(), newSealer(nil), macer{macKey}, "v/books/", ledger.Options{})
	_, _ = l.Append(ctx, ledger.Entry{Kind: ledger.NumberAllocated, Series: "invoice", Number: 1})

	h, err := l.AppendFunc(ctx, func(head ledger.Head) ([]ledger.Entry, error) {
		return []ledger.Entry{{Kind: ledger.NumberVoided, Series: "invoice", Number: 1,
			Reason: fmt.Sprintf("voided after entry %d", head.Seq)}}, nil
	})
	if err != nil {
		panic(err)
	}
	for e, err := range l.Read(ctx, h.Seq) {
		if err != nil {
			panic(err)
		}
		fmt.Println(e.Seq, e.Kind, e.Reason)
	}
	// Output:
	// 2 number-voided voided after entry 1
}

// Verify names the first position at fault.
func ExampleLedger_Verify() {
	ctx := context.Background()
	st := memstore.New()
	l := ledger.New(st, newSealer(nil), macer{macKey}, "v/books/", ledger.Options{})
	for i := 1; i <= 5; i++ {
		_, _ = l.Append(ctx, ledger.Entry{Kind: ledger.RecordPut, Collection: "invoices", ID: fmt.Sprint("inv-", i)})
	}

	_ = st.Delete(ctx, "v/books/_ledger/00000000000000000003") // the store loses an entry

	rep, err := l.Verify(ctx)
	fmt.Println(err)
	fmt.Println("first bad:", rep.FirstBad, "intact before it:", rep.Entries, "head:", rep.Head.Seq)
	// Output:
	// ledger: entry 3 missing (found 4 next)
	// first bad: 3 intact before it: 2 head: 5
}
