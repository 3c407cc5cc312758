package vault

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

type checkedNote struct{ Text string }

// adversaryVault opens an owner's vault on an Adversary over each store
// of internalStores, with a record in notes and a number of "inv" taken.
func adversaryVault(t *testing.T, newStore func(testing.TB) stores.Store) (*Vault, *faultstore.Adversary) {
	t.Helper()
	ctx := context.Background()
	adv := faultstore.NewAdversary(newStore(t))
	v := openTestVault(t, adv.Store())
	require.NoError(t, CollectionOf[checkedNote](v, "notes").Put(ctx, "n1", checkedNote{"one"}))
	require.NoError(t, CollectionOf[checkedNote](v, "notes").Put(ctx, "n2", checkedNote{"two"}))
	q, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	return v, adv
}

// listingCalls are the vault's calls that list the store, each returning
// its error.
func listingCalls(v *Vault) map[string]func(ctx context.Context) error {
	drain := func(seq iter.Seq2[Record[checkedNote], error]) error {
		for _, err := range seq {
			if err != nil {
				return err
			}
		}
		return nil
	}
	return map[string]func(ctx context.Context) error{
		"Verify": func(ctx context.Context) error { _, err := v.Audit().Verify(ctx); return err },
		"People": func(ctx context.Context) error { _, err := v.People(ctx); return err },
		"List":   func(ctx context.Context) error { return drain(CollectionOf[checkedNote](v, "notes").List(ctx)) },
		"Count": func(ctx context.Context) error {
			_, err := CollectionOf[checkedNote](v, "notes").Count(ctx)
			return err
		},
		"Series":      func(ctx context.Context) error { _, err := v.Series(ctx); return err },
		"SeriesNamed": func(ctx context.Context) error { _, err := v.SeriesNamed(ctx, "inv"); return err },
		"Conflicts":   func(ctx context.Context) error { _, err := v.Conflicts(ctx); return err },
	}
}

// noPanic runs fn and turns a panic into a test failure.
func noPanic(t *testing.T, name string, fn func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", name, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}

// A store whose List yields a key outside the prefix asked for (shorter
// than it, or beside it) gets stores.ErrMisbehaving from every call of the
// vault that lists, never a panic from a caller slicing the prefix off.
func TestListingOutsidePrefixIsMisbehaving(t *testing.T) {
	for name, newStore := range internalStores() {
		for _, bad := range []string{"v", "v/books/_keyrinf", "w/books/_keyring/zz"} {
			t.Run(name+"/"+bad, func(t *testing.T) {
				ctx := context.Background()
				v, adv := adversaryVault(t, newStore)
				adv.InjectList("", stores.Item{Key: bad, Value: []byte("x"), Version: 1})
				for call, fn := range listingCalls(v) {
					if strings.HasPrefix(call, "Series") && bad == "v/books/_keyrinf" {
						continue // sorts under the series' prefixes: another rule (order)
					}
					err := noPanic(t, call, func() error { return fn(ctx) })
					assert.ErrorIs(t, err, stores.ErrMisbehaving, call)
				}
			})
		}
	}
}

// A listing whose keys are out of order, or repeat one, is
// stores.ErrMisbehaving too: each key of a prefix is listed once, in
// ascending order.
func TestListingOutOfOrderIsMisbehaving(t *testing.T) {
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v, adv := adversaryVault(t, newStore)
			last := v.recordKey("notes", "n2")
			it, err := adv.Raw().Get(ctx, last)
			require.NoError(t, err)
			adv.InjectList(v.prefix, it) // n2 first, then n1 and n2 again
			for call, fn := range listingCalls(v) {
				if call == "List" || call == "Count" || call == "Verify" {
					err := noPanic(t, call, func() error { return fn(ctx) })
					assert.ErrorIs(t, err, stores.ErrMisbehaving, call)
				}
			}
		})
	}
}

// A Get answered with another key's item is stores.ErrMisbehaving, not a
// record read (nor ErrTampered: the store broke its contract visibly).
func TestGetAnsweringAnotherKeyIsMisbehaving(t *testing.T) {
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v, adv := adversaryVault(t, newStore)
			other, err := adv.Raw().Get(ctx, v.recordKey("notes", "n2"))
			require.NoError(t, err)
			adv.AnswerGet(v.recordKey("notes", "n1"), other)
			_, err = CollectionOf[checkedNote](v, "notes").Get(ctx, "n1")
			assert.ErrorIs(t, err, stores.ErrMisbehaving)
		})
	}
}

// A value read that is longer than any store may hold
// (stores.MaxValueLen) is stores.ErrMisbehaving, from a Get or a listing.
func TestValueReadAboveLimitIsMisbehaving(t *testing.T) {
	for name, newStore := range internalStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v, adv := adversaryVault(t, newStore)
			key := v.recordKey("notes", "n1")
			huge := stores.Item{Key: key, Value: make([]byte, stores.MaxValueLen+1), Version: 1}
			adv.AnswerGet(key, huge)
			_, err := CollectionOf[checkedNote](v, "notes").Get(ctx, "n1")
			assert.ErrorIs(t, err, stores.ErrMisbehaving, "Get")

			adv.InjectList(v.prefix+"notes/", stores.Item{Key: v.prefix + "notes/a", Value: huge.Value, Version: 1})
			_, err = CollectionOf[checkedNote](v, "notes").Count(ctx)
			assert.ErrorIs(t, err, stores.ErrMisbehaving, "Count")
		})
	}
}

// sizeRecorder is a store without transactions that records the largest
// value a write asked it to store.
type sizeRecorder struct {
	stores.Store
	largest int
}

func (s *sizeRecorder) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	s.largest = max(s.largest, len(value))
	return s.Store.Put(ctx, key, value)
}

func (s *sizeRecorder) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	s.largest = max(s.largest, len(value))
	return s.Store.CompareAndSwap(ctx, key, expected, value)
}

// A value too large for any store is refused with stores.ErrTooLarge
// before the store is asked to write it.
func TestValueWrittenAboveLimitNeverReachesStore(t *testing.T) {
	ctx := context.Background()
	st := &sizeRecorder{Store: memstore.New()}
	v := openTestVault(t, st)
	err := CollectionOf[checkedNote](v, "notes").Put(ctx, "big", checkedNote{strings.Repeat("x", stores.MaxValueLen)})
	require.ErrorIs(t, err, stores.ErrTooLarge)
	assert.LessOrEqual(t, st.largest, stores.MaxValueLen, "the store was asked to write a value above the limit")
}

var storeIface = reflect.TypeFor[stores.Store]()

// TestVaultReachesStoresOnlyChecked walks what open vaults hold (their
// fields, and what those hold in turn: the ledger, the sequences, the
// hub-side vault, the person) and fails on any store that is reached
// without passing one of checkStore's wrappers: the raw store is
// unreachable from the vault but through the wrapper.
func TestVaultReachesStoresOnlyChecked(t *testing.T) {
	ctx := context.Background()
	kdf := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	open := func(cfg Config) *Vault {
		cfg.Name, cfg.KDF, cfg.InsecureAllowWeakKDF = "books", kdf, true
		v, err := Open(ctx, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = v.Close() })
		return v
	}
	st, hub, dev := memstore.New(), memstore.New(), memstore.New()
	owner := open(Config{Store: st, User: "olga", Secret: []byte("o")})
	require.NoError(t, owner.Grant(ctx, "rita", Secret([]byte("r")), RoleReader))
	q, err := owner.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	reader := open(Config{Store: st, User: "rita", Secret: []byte("r")})
	device := open(Config{Store: dev, Hub: hub, User: "olga", Secret: []byte("o")})
	hq, err := device.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = hq.Next(ctx)
	require.NoError(t, err)

	for name, v := range map[string]*Vault{"owner": owner, "reader": reader, "device": device} {
		var raw []string
		walkStores(reflect.ValueOf(v), name, map[uintptr]bool{}, &raw)
		assert.Empty(t, raw, "%s: raw stores reachable without the checking wrapper", name)
	}
	assert.Contains(t, owner.String(), "*memstore.Store", "the store's own type names it")
}

// walkStores records in raw the path to every store reachable from x that
// is not behind a vaultStore.
func walkStores(x reflect.Value, path string, seen map[uintptr]bool, raw *[]string) {
	switch x.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		if x.IsNil() {
			return
		}
		if x.Kind() != reflect.Slice {
			if seen[x.Pointer()] {
				return
			}
			seen[x.Pointer()] = true
		}
	case reflect.Interface:
		if x.IsNil() {
			return
		}
	}
	if x.Kind() != reflect.Interface && x.Type().Implements(storeIface) {
		if x.Type().Implements(reflect.TypeFor[vaultStore]()) {
			// Behind the wrapper. What it wraps may be one of the vault's
			// own wrappers (a hub's timeouts, a reader's refusals), whose
			// code reaches what they wrap in turn: that must be checked too.
			for x.Type() != reflect.TypeFor[checkedStore]() {
				x = x.Field(0) // the variants embed checkedStore first
			}
			if inner := x.Field(0).Elem(); ownType(inner.Type()) {
				walkStores(inner, path+".inner", seen, raw)
			}
			return
		}
		if !ownType(x.Type()) {
			*raw = append(*raw, path+" ("+x.Type().String()+")")
			return
		}
		// One of the vault's own wrappers: what it wraps must be checked.
	}
	switch x.Kind() {
	case reflect.Pointer, reflect.Interface:
		walkStores(x.Elem(), path, seen, raw)
	case reflect.Struct:
		for i := range x.NumField() {
			walkStores(x.Field(i), path+"."+x.Type().Field(i).Name, seen, raw)
		}
	case reflect.Slice, reflect.Array:
		for i := range x.Len() {
			walkStores(x.Index(i), fmt.Sprintf("%s[%d]", path, i), seen, raw)
		}
	case reflect.Map:
		it := x.MapRange()
		for it.Next() {
			walkStores(it.Value(), path+"[]", seen, raw)
		}
	}
}

// ownType reports whether t, or what it points to, is a type of package
// vault.
func ownType(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == reflect.TypeFor[Vault]().PkgPath()
}
