// Command 120-two-devices shows local-first sync: two devices, a laptop in
// the office and a till in the shop, each keep the vault on their own
// badger folder and converge through a hub (PostgreSQL when a URL is
// given, else a third badger folder). Both work offline: they edit the same
// customer, and the till writes receipts whose numbers are deferred
// (vault.NumberingOf), since numbers live on the hub. Then they sync: the
// customer converges under the collection's policy (the higher revision
// wins, and the loser is reported), the receipts get 1..K through
// Sync, Settle (the numbering pass runs on the hub) and Sync, and both
// devices' ledgers verify.
//
//	go run ./showcase/120-two-devices                                  # hub: a badger folder
//	go run ./showcase/120-two-devices -hub postgres://user@host/db     # hub: PostgreSQL
//
// The URL can also come from $NOYDB_PG_URL (scripts/with-postgres sets
// it). On PostgreSQL each run uses a schema of its own (-schema, default
// noydb_120_ and random letters), left for you to inspect.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/vault"
)

// Customer is a record both devices edit.
type Customer struct {
	Name string
	City string
}

// Receipt is a sale at the till; Number is stamped by the numbering pass.
type Receipt struct {
	Number string
	Item   string
	Total  int // cents
}

// options choose the hub and, for tests, a cheap key derivation.
type options struct {
	pgURL, schema string
	cheapKDF      bool
}

func main() {
	var o options
	flag.StringVar(&o.pgURL, "hub", os.Getenv("NOYDB_PG_URL"), "PostgreSQL URL of the hub (default $NOYDB_PG_URL; none: a badger folder)")
	flag.StringVar(&o.schema, "schema", "", "PostgreSQL schema of the hub (default: a new one, noydb_120_…)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "120-two-devices:", err)
		os.Exit(1)
	}
}

// switchable is a hub as one device reaches it: while off, every call
// fails with stores.ErrUnavailable, as a hub out of reach does (the device
// then works offline, and what needs the hub fails with
// sequence.ErrOffline).
type switchable struct {
	hub interface {
		stores.Store
		stores.Transactor
		stores.Locker
	}
	off atomic.Bool
}

var errOutOfReach = fmt.Errorf("the hub is out of reach: %w", stores.ErrUnavailable)

func (s *switchable) Get(ctx context.Context, key string) (stores.Item, error) {
	if s.off.Load() {
		return stores.Item{}, errOutOfReach
	}
	return s.hub.Get(ctx, key)
}

func (s *switchable) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if s.off.Load() {
		return 0, errOutOfReach
	}
	return s.hub.Put(ctx, key, value)
}

func (s *switchable) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	if s.off.Load() {
		return 0, errOutOfReach
	}
	return s.hub.CompareAndSwap(ctx, key, expected, value)
}

func (s *switchable) Delete(ctx context.Context, key string) error {
	if s.off.Load() {
		return errOutOfReach
	}
	return s.hub.Delete(ctx, key)
}

func (s *switchable) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	if s.off.Load() {
		return func(yield func(stores.Item, error) bool) { yield(stores.Item{}, errOutOfReach) }
	}
	return s.hub.List(ctx, prefix)
}

func (s *switchable) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if s.off.Load() {
		return errOutOfReach
	}
	return s.hub.Update(ctx, fn)
}

func (s *switchable) Lock(ctx context.Context, name string) (func(), error) {
	if s.off.Load() {
		return nil, errOutOfReach
	}
	return s.hub.Lock(ctx, name)
}

func (s *switchable) TryLock(ctx context.Context, name string) (func(), error) {
	if s.off.Load() {
		return nil, errOutOfReach
	}
	return s.hub.TryLock(ctx, name)
}

func (s *switchable) Capabilities() stores.Capabilities { return s.hub.Capabilities() }

// Close leaves the shared hub open: run closes it.
func (s *switchable) Close() error { return nil }

// device is one device: its own store, its vault, and its link to the hub.
type device struct {
	name      string
	store     stores.Store
	link      *switchable
	db        *noydb.DB
	v         *vault.Vault
	customers *vault.Collection[Customer]
	receipts  *vault.Numbered[Receipt]
}

func openDevice(ctx context.Context, name, dir string, hub *switchable, vaultName string, o options) (*device, error) {
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	cfg := noydb.Config{User: "shop", Secret: []byte("shop-secret-2026"), Store: st, Hub: hub, StateDir: dir + "-state"}
	if o.cheapKDF {
		cfg.KDF, cfg.InsecureAllowWeakKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, true
	}
	db, err := noydb.Open(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, err
	}
	v, err := db.OpenVault(ctx, vaultName)
	if err != nil {
		db.Close()
		st.Close()
		return nil, err
	}
	d := &device{name: name, store: st, link: hub, db: db, v: v, customers: vault.CollectionOf[Customer](v, "customers")}
	// The stated policy: on a customer changed on both sides, the higher
	// revision wins (the default, said here for the reader).
	if err := v.SetConflictPolicy("customers", vault.HigherRevisionWins); err != nil {
		d.close()
		return nil, err
	}
	d.receipts, err = vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipts",
		sequence.Options{Format: "R-{seq:04}"},
		func(r *Receipt, s sequence.Serial) { r.Number = s.Formatted })
	if err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *device) close() {
	d.db.Close()
	d.store.Close()
}

// sync syncs the device and prints its report.
func (d *device) sync(ctx context.Context, w io.Writer) error {
	rep, err := d.v.Sync(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", d.name, err)
	}
	fmt.Fprintf(w, "  %-6s sync: pulled %d, pushed %d", d.name, rep.Pulled, rep.Pushed)
	if len(rep.Rejected) > 0 {
		fmt.Fprintf(w, ", %d rejected", len(rep.Rejected))
	}
	fmt.Fprintln(w)
	for _, c := range rep.Conflicts {
		won, lost := fmt.Sprintf("the %s's revision %d", d.name, c.DeviceRevision), fmt.Sprintf("the hub's revision %d", c.HubRevision)
		if c.HubWon {
			won, lost = lost, won
		}
		fmt.Fprintf(w, "         conflict on %s/%s (%s): %s beats %s, which the %s's ledger records\n",
			c.Collection, c.ID, c.Policy, won, lost, d.name)
	}
	for _, r := range rep.Rejected {
		fmt.Fprintf(w, "         rejected %s/%s: %s\n", r.Collection, r.ID, r.Reason)
	}
	return nil
}

// state is a device's records, for comparing devices.
func (d *device) state(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for r, err := range d.customers.List(ctx) {
		if err != nil {
			return nil, err
		}
		out["customers/"+r.ID] = fmt.Sprintf("%d %+v", r.Revision, r.Value)
	}
	for r, err := range vault.CollectionOf[Receipt](d.v, "receipts").List(ctx) {
		if err != nil {
			return nil, err
		}
		out["receipts/"+r.ID] = fmt.Sprintf("%d %+v", r.Revision, r.Value)
	}
	return out, nil
}

// hubStore opens the hub: PostgreSQL when o names a URL, else a badger
// folder in dir.
func hubStore(ctx context.Context, dir string, o options) (interface {
	stores.Store
	stores.Transactor
	stores.Locker
}, string, error) {
	if o.pgURL == "" {
		st, err := badgerstore.Open(dir+"/hub", nil)
		return st, "a badger folder", err
	}
	schema := o.schema
	if schema == "" {
		b := make([]byte, 6)
		if _, err := rand.Read(b); err != nil {
			return nil, "", err
		}
		schema = "noydb_120_" + hex.EncodeToString(b)
	}
	st, err := pgstore.Open(ctx, o.pgURL, &pgstore.Options{Schema: schema})
	return st, "PostgreSQL", err
}

func run(ctx context.Context, w io.Writer, o options) error {
	dir, err := os.MkdirTemp("", "noydb-two-devices-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	hub, kind, err := hubStore(ctx, dir, o)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer hub.Close()
	fmt.Fprintf(w, "hub: %s; each device on a badger folder of its own\n", kind)

	// The laptop creates the vault; the till, which holds nothing, gets it
	// (header and keyring) from the hub, and its records by syncing.
	laptop, err := openDevice(ctx, "laptop", dir+"/laptop", &switchable{hub: hub}, "shop", o)
	if err != nil {
		return err
	}
	defer laptop.close()
	if err := laptop.customers.Put(ctx, "acme", Customer{Name: "ACME", City: "Milano"}); err != nil {
		return err
	}
	if err := laptop.customers.Put(ctx, "bolt", Customer{Name: "Bolt", City: "Torino"}); err != nil {
		return err
	}
	till, err := openDevice(ctx, "till", dir+"/till", &switchable{hub: hub}, "shop", o)
	if err != nil {
		return err
	}
	defer till.close()
	fmt.Fprintln(w, "\nboth online:")
	for _, d := range []*device{laptop, till} {
		if err := d.sync(ctx, w); err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nboth offline:")
	laptop.link.off.Store(true)
	till.link.off.Store(true)
	if err := laptop.customers.Put(ctx, "acme", Customer{Name: "ACME S.p.A.", City: "Milano"}); err != nil {
		return err
	}
	fmt.Fprintln(w, "  laptop renames acme (revision 2) and adds cargo")
	if err := laptop.customers.Put(ctx, "cargo", Customer{Name: "Cargo", City: "Genova"}); err != nil {
		return err
	}
	if err := till.customers.Put(ctx, "acme", Customer{Name: "ACME", City: "Milano, via Roma 1"}); err != nil {
		return err
	}
	if _, err := till.customers.Update(ctx, "acme", func(c *Customer) error { c.City = "Milano, via Roma 10"; return nil }); err != nil {
		return err
	}
	fmt.Fprintln(w, "  till fixes acme's address twice (revision 3)")
	seq, err := till.v.Sequence("receipts", sequence.Options{})
	if err != nil {
		return err
	}
	if _, err := seq.Next(ctx); errors.Is(err, sequence.ErrOffline) {
		fmt.Fprintln(w, "  till cannot take a number: sequence.ErrOffline (numbers live on the hub)")
	} else {
		return fmt.Errorf("till took a number offline: %v", err)
	}
	sales := []struct {
		id, item string
		total    int
	}{{"s-1", "espresso", 120}, {"s-2", "croissant", 150}, {"s-3", "orange juice", 350}}
	for _, s := range sales {
		r, err := till.receipts.Put(ctx, s.id, Receipt{Item: s.item, Total: s.total})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  till sells %-12s %6.2f: receipt %s pending: %t\n", s.item, float64(s.total)/100, s.id, r.Pending)
	}

	fmt.Fprintln(w, "\nback online, sync:")
	laptop.link.off.Store(false)
	till.link.off.Store(false)
	for _, d := range []*device{laptop, till, laptop} {
		if err := d.sync(ctx, w); err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nthe till numbers its receipts: a pass on the hub, then sync:")
	rep, err := till.receipts.Settle(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  pass on the hub: batch %d, numbers %d to %d, %d receipts stamped\n", rep.Batch, rep.First, rep.Last, rep.Assigned)
	for _, d := range []*device{till, laptop} {
		if err := d.sync(ctx, w); err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nwhere they stand:")
	for _, d := range []*device{laptop, till} {
		acme, err := d.customers.Get(ctx, "acme")
		if err != nil {
			return err
		}
		var nums []string
		for r, err := range vault.CollectionOf[Receipt](d.v, "receipts").List(ctx) {
			if err != nil {
				return err
			}
			nums = append(nums, r.Value.Number)
		}
		slices.Sort(nums)
		fmt.Fprintf(w, "  %-6s acme: %s, %s; receipts %s\n", d.name, acme.Name, acme.City, strings.Join(nums, " "))
	}
	ls, err := laptop.state(ctx)
	if err != nil {
		return err
	}
	ts, err := till.state(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  both hold the same %d records, at the same revisions: %t\n", len(ls), maps(ls, ts))
	for _, d := range []*device{laptop, till} {
		v, err := d.v.Audit().Verify(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", d.name, err)
		}
		fmt.Fprintf(w, "  %-6s ledger: %d entries, intact: %t\n", d.name, v.Entries, v.OK())
	}
	return nil
}

// maps reports whether a and b hold the same keys and values.
func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
