package stores_test

import (
	"context"
	"fmt"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A change feed whose keys sort by position, read from a cursor: the
// entries after position 2.
func ExampleListAfter() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	for seq := 1; seq <= 4; seq++ {
		key := fmt.Sprintf("feed/%020d", seq)
		if _, err := st.Put(ctx, key, fmt.Appendf(nil, "change %d", seq)); err != nil {
			fmt.Println(err)
			return
		}
	}
	cursor := fmt.Sprintf("feed/%020d", 2)
	for it, err := range stores.ListAfter(ctx, st, "feed/", cursor) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s\n", it.Value)
	}
	// Output:
	// change 3
	// change 4
}

// The records a feed names, fetched together: missing keys are left out,
// the rest come in key order.
func ExampleGetMany() {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := st.Put(ctx, "rec/"+id, []byte("record "+id)); err != nil {
			fmt.Println(err)
			return
		}
	}
	items, err := stores.GetMany(ctx, st, []string{"rec/c", "rec/x", "rec/a"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range items {
		fmt.Printf("%s: %s\n", it.Key, it.Value)
	}
	// Output:
	// rec/a: record a
	// rec/c: record c
}
