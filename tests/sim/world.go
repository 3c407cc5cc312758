package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// errCrashed is what a store gives a process that has died: nothing more
// reaches it.
var errCrashed = errors.New("sim: the process crashed")

// cheapKDF keeps key derivation out of the simulation's time.
var cheapKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

const (
	vaultName = "sim"
	owner     = "alice"
	guest     = "bob"
)

var (
	ownerSecret = []byte("alice-secret")
	guestSecret = []byte("bob-secret")
)

// Note is a plain record.
type Note struct {
	Val int `json:"val"`
}

// Invoice is a record numbered by PutNumbered.
type Invoice struct {
	N      uint64 `json:"n"`
	Period string `json:"period"`
	Number string `json:"number"`
}

// Receipt is a record numbered by NumberingOf.
type Receipt struct {
	Val    int    `json:"val"`
	Number string `json:"number"`
}

// storeCtl injects the faults of one store (a device's or the hub) through
// faultstore's hooks and commands its adversary.
type storeCtl struct {
	name  string
	adv   *faultstore.Adversary
	stats *Stats

	mu          sync.Mutex
	rng         *rand.Rand
	storm       float64 // probability of an injected conflict on a CAS or transaction
	ambig       float64 // probability that a write commits and reports an error
	before      float64 // probability that a write fails before reaching the store
	down, slow  atomic.Bool
	snap        faultstore.Snapshot
	lose        faultstore.Snapshot // FLoseCommits: put back after the batch
	losePrefix  string
	losePending bool
}

func newCtl(name string, inner stores.Store, seed uint64, stats *Stats) *storeCtl {
	return &storeCtl{name: name, adv: faultstore.NewAdversary(inner), stats: stats,
		rng: rand.New(rand.NewPCG(seed, 77))}
}

func (c *storeCtl) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64() < p
}

// wrap returns the store a process sees; dead (may be nil) is its
// incarnation's crash flag.
func (c *storeCtl) wrap(dead *atomic.Bool) stores.Store {
	return faultstore.New(c.adv.Store(), faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if dead != nil && dead.Load() {
				return errCrashed
			}
			if c.down.Load() {
				c.stats.Injected.Add(1)
				return fmt.Errorf("sim: %s does not answer: %w", c.name, stores.ErrUnavailable)
			}
			if c.slow.Load() {
				time.Sleep(200 * time.Microsecond)
			}
			c.mu.Lock()
			storm, before := c.storm, c.before
			c.mu.Unlock()
			if (op == faultstore.OpCompareAndSwap || op == faultstore.OpUpdate) && c.chance(storm) {
				c.stats.Injected.Add(1)
				return stores.ErrConflict
			}
			if op.IsWrite() && c.chance(before) {
				c.stats.Injected.Add(1)
				return faultstore.ErrInjected
			}
			return nil
		},
		After: func(op faultstore.Op, key string) error {
			c.mu.Lock()
			ambig := c.ambig
			c.mu.Unlock()
			if c.chance(ambig) {
				c.stats.Injected.Add(1)
				return faultstore.ErrInjectedAfter
			}
			return nil
		},
	})
}

func (c *storeCtl) set(storm, ambig, before float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.storm, c.ambig, c.before = storm, ambig, before
}

// device is one device: its own store (kept across crashes), its state
// folder, and the vault it has open now.
type device struct {
	idx      int
	kind     string
	inner    stores.Store
	ctl      *storeCtl
	stateDir string
	onHub    bool
	hub      *splitHub // the hub as this device is served it

	mu     sync.Mutex
	h      *handles
	dead   *atomic.Bool
	ctx    context.Context
	cancel context.CancelFunc
	guest  *handles
}

// handles are what an open vault gives the workers.
type handles struct {
	v     *vault.Vault
	notes *vault.Collection[Note]
	inv   *vault.Collection[Invoice]
	rc    *vault.Numbered[Receipt]
	seqs  map[string]*sequence.Sequence // by series+region
}

// world is the system one schedule runs on.
type world struct {
	sched *Schedule
	opts  RunOptions
	dir   string
	hub   *storeCtl
	hubSt stores.Store // what devices are given: the hub through its faults
	devs  []*device    // the devices the checks look at
	all   []*device    // every device, to close
	stats *Stats
	hist  *history

	conflicts []Failure   // set by logical: one id answered with two numbers
	joined    atomic.Bool // the late device has joined the hub

	step     int       // the step running
	fork     *forkSpan // the run's FFork, nil when none
	forkCtl  *storeCtl // the hub's copy a forked device is served
	forkEnd  int       // the step at whose start the fork ends (-1: at the final sync)
	cleanups []func()  // run when the world closes (a copy of a PostgreSQL hub)
}

// errNotJoined: a device other than the late one waits for its join.
var errNotJoined = errors.New("sim: the vault has not joined the hub yet")

// RunOptions say where a schedule runs.
type RunOptions struct {
	// Dir is a scratch folder for on-disk stores and state folders.
	Dir string
	// Hub, if set, makes the hub's store (PostgreSQL in the slow mode);
	// nil means a memstore.
	Hub func(ctx context.Context) (stores.Store, func(), error)
	// Durable puts badger and file devices on disk with fsync.
	Durable bool
	// OpTimeout bounds one operation; zero means 20 s.
	OpTimeout time.Duration
	// Stats, if set, accumulates counts across runs.
	Stats *Stats
}

// Stats counts what runs did.
type Stats struct {
	Schedules, Ops, Faults, Injected, Failures atomic.Int64
}

func (w *world) close() {
	for _, d := range w.all {
		d.mu.Lock()
		if d.guest != nil {
			_ = d.guest.v.Close()
			d.guest = nil
		}
		if d.h != nil {
			_ = d.h.v.Close()
			d.h = nil
		}
		d.mu.Unlock()
		if d.cancel != nil {
			d.cancel()
		}
		_ = d.inner.Close()
	}
	if w.forkCtl != nil {
		_ = w.forkCtl.adv.Close()
	}
	for _, c := range w.cleanups {
		c()
	}
}

func newWorld(ctx context.Context, s *Schedule, o RunOptions) (*world, func(), error) {
	stats := o.Stats
	if stats == nil {
		stats = &Stats{}
	}
	w := &world{sched: s, opts: o, stats: stats, dir: o.Dir, hist: newHistory()}
	w.hist.lateJoin = s.LateJoin
	var hubInner stores.Store = memstore.New()
	cleanup := func() {}
	if o.Hub != nil {
		st, done, err := o.Hub(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("open hub: %w", err)
		}
		hubInner, cleanup = st, done
	}
	w.hub = newCtl("hub", hubInner, s.Seed^1, stats)
	w.hubSt = w.hub.wrap(nil)
	for i, spec := range s.Devices {
		inner, err := openStore(spec.Kind, filepath.Join(o.Dir, fmt.Sprintf("d%d", i)), o.Durable)
		if err != nil {
			w.close()
			cleanup()
			return nil, nil, err
		}
		sd := filepath.Join(o.Dir, fmt.Sprintf("state%d", i))
		if err := os.MkdirAll(sd, 0o700); err != nil {
			return nil, nil, err
		}
		w.devs = append(w.devs, &device{idx: i, kind: spec.Kind, inner: inner, stateDir: sd,
			ctl:   newCtl(fmt.Sprintf("device %d", i), inner, s.Seed^uint64(i+2)*0x9e37, stats),
			onHub: !(s.LateJoin && i == 0), hub: &splitHub{view: w.hubSt}})
	}
	w.all = w.devs
	return w, func() { w.close(); cleanup() }, nil
}

func openStore(kind, dir string, durable bool) (stores.Store, error) {
	switch kind {
	case "mem":
		return memstore.New(), nil
	case "badger":
		if !durable {
			return badgerstore.Open("", &badgerstore.Options{InMemory: true})
		}
		return badgerstore.Open(dir, nil)
	case "file":
		return filestore.Open(dir, &filestore.Options{NoSync: !durable})
	}
	return nil, fmt.Errorf("unknown store kind %q", kind)
}

// open opens d's vault on a new incarnation of its process.
func (w *world) open(ctx context.Context, d *device) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h != nil {
		return nil
	}
	if d.cancel != nil {
		d.cancel()
	}
	d.dead = new(atomic.Bool)
	d.ctx, d.cancel = context.WithCancel(context.Background())
	cfg := vault.Config{Store: d.ctl.wrap(d.dead), Name: vaultName, User: owner, Secret: ownerSecret,
		KDF: cheapKDF, InsecureAllowWeakKDF: true, StateDir: d.stateDir, HubTimeout: 5 * time.Second}
	if d.onHub {
		cfg.Hub = d.hub
	}
	v, err := vault.Open(ctx, cfg)
	if err != nil {
		return err
	}
	h, err := makeHandles(v)
	if err != nil {
		_ = v.Close()
		return err
	}
	d.h = h
	return nil
}

// openGuest opens the guest's handle on d's store, once per incarnation.
func (w *world) openGuest(ctx context.Context, d *device) (*handles, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.guest != nil {
		return d.guest, nil
	}
	if d.dead == nil {
		return nil, stores.ErrClosed
	}
	cfg := vault.Config{Store: d.ctl.wrap(d.dead), Name: vaultName, User: guest, Secret: guestSecret,
		KDF: cheapKDF, InsecureAllowWeakKDF: true, StateDir: d.stateDir, HubTimeout: 5 * time.Second}
	if d.onHub {
		cfg.Hub = d.hub
	}
	v, err := vault.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	h, err := makeHandles(v)
	if err != nil {
		_ = v.Close()
		return nil, err
	}
	d.guest = h
	return h, nil
}

func (d *device) dropGuest() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.guest != nil {
		_ = d.guest.v.Close()
		d.guest = nil
	}
}

func makeHandles(v *vault.Vault) (*handles, error) {
	h := &handles{v: v, notes: vault.CollectionOf[Note](v, "notes"),
		inv: vault.CollectionOf[Invoice](v, "invoices"), seqs: map[string]*sequence.Sequence{}}
	rc, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "rcpt",
		sequence.Options{Format: "R-{seq:05}"}, func(r *Receipt, s sequence.Serial) { r.Number = s.Formatted })
	if err != nil {
		return nil, err
	}
	h.rc = rc
	for _, r := range regions {
		q, err := v.Sequence("inv", sequence.Options{Partition: []any{r}, Period: sequence.PeriodMonth,
			Format: "INV-{partition.0}-{seq:04}"})
		if err != nil {
			return nil, err
		}
		h.seqs["inv/"+r] = q
	}
	for _, def := range []struct {
		name string
		opts sequence.Options
	}{
		{"tick", sequence.Options{}},
		{"clm", sequence.Options{}},
		{"cn", sequence.Options{Period: sequence.PeriodMonth, Corrects: "inv"}},
	} {
		q, err := v.Sequence(def.name, def.opts)
		if err != nil {
			return nil, err
		}
		h.seqs[def.name] = q
	}
	return h, nil
}

// handles returns d's open vault, opening it when it is closed.
func (w *world) handles(ctx context.Context, d *device) (*handles, context.Context, error) {
	if w.sched.LateJoin && d.idx > 0 && !w.joined.Load() {
		// Opened before the vault reached the hub, it would make another
		// vault of the same name there.
		return nil, nil, errNotJoined
	}
	d.mu.Lock()
	h, dctx := d.h, d.ctx
	d.mu.Unlock()
	if h != nil {
		return h, dctx, nil
	}
	if err := w.open(ctx, d); err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h, d.ctx, nil
}

// crash kills d's process: from now on nothing it does reaches its store,
// its calls in flight end, and a new process opens the vault again.
func (w *world) crash(ctx context.Context, d *device) error {
	d.mu.Lock()
	if d.dead != nil {
		d.dead.Store(true)
	}
	if d.cancel != nil {
		d.cancel()
	}
	h, g := d.h, d.guest
	d.h, d.guest = nil, nil
	d.mu.Unlock()
	if g != nil {
		_ = g.v.Close()
	}
	if h != nil {
		_ = h.v.Close()
	}
	return w.open(ctx, d)
}

// reopen closes d's vault cleanly and opens it again.
func (w *world) reopen(ctx context.Context, d *device) error {
	d.mu.Lock()
	h, g := d.h, d.guest
	d.h, d.guest = nil, nil
	d.mu.Unlock()
	if g != nil {
		_ = g.v.Close()
	}
	if h != nil {
		if err := h.v.Close(); err != nil {
			return err
		}
	}
	return w.open(ctx, d)
}

// target returns the controller of a fault's target.
func (w *world) target(t int) *storeCtl {
	if t == Hub {
		return w.hub
	}
	return w.devs[t].ctl
}

// fullPrefix is the store prefix of a part of the vault.
func fullPrefix(p string) string {
	return "v/" + vaultName + "/" + p
}

// inject applies one fault. It returns what it did, for the history.
func (w *world) inject(ctx context.Context, f Fault) string {
	msg := w.inject1(ctx, f)
	if f.Restart {
		for i, d := range w.devs {
			d.mu.Lock()
			open := d.h != nil
			if open && i == len(w.devs)-1 {
				// The last device also starts with a new state folder: no
				// pin protects it, the ledger check alone must.
				d.stateDir += "-new"
				_ = os.MkdirAll(d.stateDir, 0o700)
			}
			d.mu.Unlock()
			if !open {
				continue
			}
			if err := w.crash(ctx, d); err != nil {
				msg += fmt.Sprintf("; d%d restart: %v", d.idx, err)
			}
		}
	}
	return msg
}

func (w *world) inject1(ctx context.Context, f Fault) string {
	w.stats.Faults.Add(1)
	c := w.target(f.Target)
	switch f.Kind {
	case FCrash:
		if err := w.crash(ctx, w.devs[f.Target]); err != nil {
			return "reopen after crash: " + err.Error()
		}
	case FReopen:
		if err := w.reopen(ctx, w.devs[f.Target]); err != nil {
			return "reopen: " + err.Error()
		}
	case FHubDown, FHubUp, FHubSlow, FStorm, FAmbiguous, FCalm:
		ctls := []*storeCtl{c}
		if f.Target == Hub {
			ctls = w.hubCtls() // a copy the hub serves behaves as it does
		}
		for _, c := range ctls {
			honest(c, f.Kind)
		}
	case FFork:
		return w.startFork(ctx, w.step, f)
	case FSnapshot:
		snap, err := c.adv.Snapshot(ctx)
		if err != nil {
			return "snapshot: " + err.Error()
		}
		c.mu.Lock()
		c.snap = snap
		c.mu.Unlock()
	case FJoin:
		w.hist.joinAt = w.hist.tick()
		d := w.devs[0]
		d.mu.Lock()
		h := d.h
		d.h = nil
		// The guest's handle, opened before the join, is kept across it:
		// it takes no number afterwards (vault.ErrHubJoined).
		d.onHub = true
		d.mu.Unlock()
		if h != nil {
			_ = h.v.Close()
		}
		if err := w.open(ctx, d); err != nil {
			return "join: " + err.Error()
		}
		w.joined.Store(true)
		for _, o := range w.devs[1:] {
			if err := w.open(ctx, o); err != nil {
				return fmt.Sprintf("open d%d after join: %v", o.idx, err)
			}
		}
	case FRollback:
		c.mu.Lock()
		snap := c.snap
		c.mu.Unlock()
		if snap == nil {
			return "no snapshot"
		}
		if err := c.adv.Restore(ctx, snap, fullPrefix(f.Prefix)); err != nil {
			return "rollback: " + err.Error()
		}
	case FDrop:
		keys, err := c.adv.Keys(ctx, fullPrefix(f.Prefix))
		if err != nil {
			return "drop: " + err.Error()
		}
		if f.Target == Hub && (f.Prefix == "" || f.Prefix == "_ledger/") {
			d := dropSpan{from: w.hist.tick()}
			defer func() {
				d.to = w.hist.tick()
				w.hist.mu.Lock()
				w.hist.drops = append(w.hist.drops, d)
				w.hist.mu.Unlock()
			}()
		}
		n := 0
		for _, k := range keys {
			if err := c.adv.Drop(ctx, k); err != nil {
				return "drop: " + err.Error()
			}
			n++
		}
		return fmt.Sprintf("dropped %d keys", n)
	case FReplay:
		c.mu.Lock()
		snap := c.snap
		c.mu.Unlock()
		keys, _ := c.adv.Keys(ctx, fullPrefix(f.Prefix))
		for _, k := range keys {
			if old, ok := snap[k]; ok {
				cur, err := c.adv.Raw().Get(ctx, k)
				if err == nil && string(cur.Value) != string(old) {
					if err := c.adv.Set(ctx, k, old); err != nil {
						return "replay: " + err.Error()
					}
					return "replayed " + printable(k)
				}
			}
		}
		return "nothing to replay"
	case FInjectList:
		p := fullPrefix(f.Prefix)
		c.adv.InjectList(p, stores.Item{Key: "v/x", Value: []byte("x"), Version: 1}) // outside the prefix, and shorter
	case FInjectHub:
		keys, _ := c.adv.Keys(ctx, fullPrefix("notes/"))
		if len(keys) == 0 {
			return "no record to copy"
		}
		it, err := c.adv.Raw().Get(ctx, keys[0])
		if err != nil {
			return "inject: " + err.Error()
		}
		if err := c.adv.Set(ctx, fullPrefix("notes/injected"), it.Value); err != nil {
			return "inject: " + err.Error()
		}
	case FLoseCommits:
		snap, err := c.adv.Snapshot(ctx)
		if err != nil {
			return "snapshot: " + err.Error()
		}
		c.mu.Lock()
		c.lose, c.losePrefix, c.losePending = snap, fullPrefix(f.Prefix), true
		c.mu.Unlock()
	}
	return ""
}

// honest applies an honest fault of the hub or a store to c.
func honest(c *storeCtl, k FaultKind) {
	switch k {
	case FHubDown:
		c.down.Store(true)
	case FHubUp:
		c.down.Store(false)
		c.slow.Store(false)
	case FHubSlow:
		c.slow.Store(true)
	case FStorm:
		c.set(0.5, 0, 0)
	case FAmbiguous:
		c.set(0.05, 0.15, 0.05)
	case FCalm:
		c.set(0, 0, 0)
	}
}

// loseCommits puts back, after a batch, what stores told to lose commits
// held before it.
func (w *world) loseCommits(ctx context.Context) {
	for _, c := range append([]*storeCtl{w.hub}, w.ctls()...) {
		c.mu.Lock()
		snap, p, pending := c.lose, c.losePrefix, c.losePending
		c.losePending = false
		c.mu.Unlock()
		if pending {
			_ = c.adv.Restore(ctx, snap, p)
		}
	}
}

func (w *world) ctls() []*storeCtl {
	var out []*storeCtl
	for _, d := range w.devs {
		out = append(out, d.ctl)
	}
	return out
}

// calm ends every honest fault: the hub answers, no store storms or lies
// about commits.
func (w *world) calm() {
	for _, c := range append(w.hubCtls(), w.ctls()...) {
		c.set(0, 0, 0)
		c.down.Store(false)
		c.slow.Store(false)
	}
}

func printable(k string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 {
			return '.'
		}
		return r
	}, k)
}
