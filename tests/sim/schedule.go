package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Kind names an operation a worker runs on a device's vault.
type Kind uint8

// The operations of a schedule.
const (
	KNext        Kind = iota + 1 // Next on a series (a dated handle for a series with periods)
	KNextN                       // NextN
	KPutNumbered                 // Collection.PutNumbered of an invoice
	KCorrect                     // NextCorrecting of a credit note, for an invoice issued earlier
	KVoid                        // Void of a number issued earlier
	KClose                       // ClosePeriod of the first month
	KNumPut                      // Numbered.Put of a receipt (NumberingOf)
	KSettle                      // Numbered.Settle
	KPut                         // Collection.Put of a note
	KDelete                      // Collection.Delete of a note
	KUpdate                      // Collection.Update of a note
	KTx                          // Vault.Update writing two notes
	KSync                        // Vault.Sync
	KRotate                      // Vault.RotateKeys, waited for
	KGrant                       // Vault.Grant of a writer
	KRevoke                      // Vault.Revoke of that writer
	KGuestNext                   // Next by the granted writer, on their own handle
	KClaim                       // Claim with a request id (idempotent allocation)
)

var kindNames = map[Kind]string{
	KNext: "next", KNextN: "nextn", KPutNumbered: "put-numbered", KCorrect: "correct",
	KVoid: "void", KClose: "close-period", KNumPut: "numbered-put", KSettle: "settle",
	KPut: "put", KDelete: "delete", KUpdate: "update", KTx: "tx", KSync: "sync",
	KRotate: "rotate", KGrant: "grant", KRevoke: "revoke", KGuestNext: "guest-next",
	KClaim: "claim",
}

// String returns the operation's name.
func (k Kind) String() string { return kindNames[k] }

// Op is one operation of a schedule. Which of its fields matter depends on
// Kind.
type Op struct {
	Kind   Kind
	Dev    int    // device index
	Series string // "inv", "tick", "cn"
	Region string // partition of "inv" and "cn"
	Month  int    // 1..3: the document date's month for a series with periods
	K      int    // count of NextN
	ID     string // record id (notes, invoices, receipts) or claim request id
	ID2    string // second note of a Tx
	Val    int    // a value to write
	Pick   int    // which earlier number Void and Correct pick
}

// String renders op for a history.
func (o Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "d%d %s", o.Dev, o.Kind)
	if o.Series != "" {
		fmt.Fprintf(&b, " %s", counterKey(o.Series, o.Region, o.Month))
	}
	if o.K > 1 {
		fmt.Fprintf(&b, " k=%d", o.K)
	}
	if o.ID != "" {
		fmt.Fprintf(&b, " %s", o.ID)
	}
	if o.ID2 != "" {
		fmt.Fprintf(&b, "+%s", o.ID2)
	}
	return b.String()
}

// FaultKind names a fault injected between or during batches.
type FaultKind uint8

// The faults. The first ones are honest: what a busy, crashing or
// unreachable system does. From FRollback on they are hostile: what a
// store or hub that lies does.
const (
	FCrash     FaultKind = iota + 1 // a device's process dies: nothing more reaches its store; reopened
	FReopen                         // a device's vault is closed and opened again
	FHubDown                        // the hub stops answering (stores.ErrUnavailable)
	FHubUp                          // the hub answers again
	FHubSlow                        // every hub call waits a little
	FStorm                          // a conflict storm on a store: half of the CAS and transactions fail with a conflict
	FAmbiguous                      // a store commits writes and reports an error for some of them
	FCalm                           // a store stops storming and lying about commits
	FSnapshot                       // a copy of a store is kept (for a later rollback)
	FJoin                           // the late device joins the hub

	FRollback    // a store puts back its snapshot under a prefix
	FDrop        // a store deletes every key under a prefix
	FReplay      // a store puts back the older value of one key of a prefix
	FInjectList  // a store's List yields a key outside the asked prefix
	FInjectHub   // the hub holds a record copied under a new id, with no feed entry
	FLoseCommits // a store reports the next writes committed and withholds them (rolls back to before them)
	// FFork: the hub serves one device (Target) a copy of itself taken
	// now, the others the real hub: a split view, for Span steps (0: until
	// the final sync), after which that device is served the real hub
	// again. Only one fork at a time; it is never a During fault.
	FFork
)

var faultNames = map[FaultKind]string{
	FCrash: "crash", FReopen: "reopen", FHubDown: "hub-down", FHubUp: "hub-up", FHubSlow: "hub-slow",
	FStorm: "conflict-storm", FAmbiguous: "ambiguous-commits", FCalm: "calm", FSnapshot: "snapshot",
	FJoin: "join-hub", FRollback: "rollback", FDrop: "drop", FReplay: "replay",
	FInjectList: "inject-list", FInjectHub: "inject-hub-record", FLoseCommits: "lose-commits",
	FFork: "fork",
}

// String returns the fault's name.
func (f FaultKind) String() string { return faultNames[f] }

// Hostile reports whether the fault is a lie of a store or hub.
func (f FaultKind) Hostile() bool { return f >= FRollback }

// Hub is the Target of a fault on the hub.
const Hub = -1

// Fault is one injected fault.
type Fault struct {
	Kind   FaultKind
	Target int    // device index, or Hub
	Prefix string // part of the vault's key space, for the hostile faults: "_sequences/", "_ledger/", "" (everything), "notes/"
	// Restart makes every device's process start again right after the
	// fault (each is crashed and its vault opened again), the last one
	// with a new, empty state folder.
	Restart bool
	// Span is how many steps an FFork lasts, counted from the step of
	// the fault; 0 means until the final sync.
	Span int `json:",omitempty"`
}

// ClaimRecords is the Prefix of the claim records of the series "clm".
const ClaimRecords = "_sequences/clm\x01h\x00"

// String renders f for a history.
func (f Fault) String() string {
	t := fmt.Sprintf("d%d", f.Target)
	if f.Target == Hub {
		t = "hub"
	}
	s := fmt.Sprintf("FAULT %s %s", f.Kind, t)
	if f.Kind == FFork {
		if f.Span > 0 {
			s += fmt.Sprintf(" (the hub serves it a copy for %d steps)", f.Span)
		} else {
			s += " (the hub serves it a copy until the final sync)"
		}
	}
	if f.Kind.Hostile() && f.Kind != FInjectHub && f.Kind != FInjectList && f.Kind != FFork {
		p := f.Prefix
		if p == "" {
			p = "(all)"
		}
		s += " " + printable(p)
	}
	if f.Restart {
		s += ", then every device restarts"
	}
	return s
}

// Step is one step of a schedule: a fault, then a batch of workers that run
// at once, each its list of operations in order, and optionally a fault
// fired while the batch runs, once Trigger of its operations have started.
type Step struct {
	Faults  []Fault
	Workers [][]Op
	During  *Fault
	Trigger int
}

// Device describes one device of a schedule.
type Device struct {
	Kind string // "mem", "badger", "file"
}

// Schedule is everything a run does, generated from its seed.
type Schedule struct {
	Seed     uint64
	Hostile  bool
	Devices  []Device
	LateJoin bool // device 0 starts without the hub and joins it with FJoin
	Known    bool // the triggers of known defects are on (Params.Known)
	Steps    []Step
}

// Ops counts the operations of the schedule.
func (s *Schedule) Ops() int {
	n := 0
	for _, st := range s.Steps {
		for _, w := range st.Workers {
			n += len(w)
		}
	}
	return n
}

// Faults counts the faults of the schedule.
func (s *Schedule) Faults() int {
	n := 0
	for _, st := range s.Steps {
		n += len(st.Faults)
		if st.During != nil {
			n++
		}
	}
	return n
}

// Params shape the schedules Generate makes.
type Params struct {
	Ops     int  // operations per schedule, about
	Hostile bool // include hostile faults
	// Known includes the triggers of the defects found and reported but
	// not fixed yet (see the package documentation): counters rolled back
	// under a ledger that keeps their numbers, without a restart after, and
	// grants of one person on several devices.
	Known bool
}

// regions are the partitions of the invoice series.
var regions = []string{"EU", "US"}

// Generate makes the schedule of seed.
func Generate(seed uint64, p Params) *Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	s := &Schedule{Seed: seed, Hostile: p.Hostile, Known: p.Known}
	nd := 2 + r.IntN(2)
	kinds := []string{"mem", "badger", "file"}
	for i := range nd {
		k := kinds[r.IntN(len(kinds))]
		if i == 0 {
			k = kinds[r.IntN(2)] // the first device has compare-and-swap (it may join late)
		}
		s.Devices = append(s.Devices, Device{Kind: k})
	}
	s.LateJoin = r.IntN(3) == 0
	g := &gen{r: r, s: s, ops: map[int]int{}, known: p.Known}
	joinAt := -1
	if s.LateJoin {
		joinAt = 1 + r.IntN(3)
	}
	hostileLeft := 0
	if p.Hostile {
		hostileLeft = 1 + r.IntN(2)
	}
	snapshotted := map[int]bool{}
	total := 0
	for step := 0; total < p.Ops; step++ {
		var st Step
		joined := !s.LateJoin || (joinAt >= 0 && step >= joinAt)
		if step == joinAt {
			st.Faults = append(st.Faults, Fault{Kind: FJoin, Target: 0})
		} else if step > 0 && r.IntN(3) == 0 {
			st.Faults = append(st.Faults, g.honestFault(joined))
		}
		if step > 0 && step%3 == 0 && r.IntN(2) == 0 {
			t := g.target(joined)
			st.Faults = append(st.Faults, Fault{Kind: FSnapshot, Target: t})
			snapshotted[t] = true
		}
		if hostileLeft > 0 && step >= 2 && r.IntN(4) == 0 {
			f := g.hostileFault(joined, snapshotted)
			st.Faults = append(st.Faults, f)
			hostileLeft--
		}
		devs := g.active(joined)
		nw := 1 + r.IntN(4)
		for w := range nw {
			d := devs[r.IntN(len(devs))]
			n := 1 + r.IntN(6)
			var ops []Op
			for range n {
				ops = append(ops, g.op(d, w, joined))
			}
			st.Workers = append(st.Workers, ops)
			total += n
		}
		if r.IntN(5) == 0 {
			f := g.honestFault(joined)
			if f.Kind != FJoin {
				st.During = &f
				st.Trigger = r.IntN(4)
			}
		}
		s.Steps = append(s.Steps, st)
	}
	if p.Hostile {
		addFork(s, joinAt)
	}
	return s
}

// addFork makes one hostile schedule in four also fork the hub (FFork) at
// a step after every device is on it. It draws from a generator of its
// own, so the schedules without a fork are the ones the seeds made before
// FFork existed.
func addFork(s *Schedule, joinAt int) {
	r := rand.New(rand.NewPCG(s.Seed, 0xf04c))
	if r.IntN(4) != 0 {
		return
	}
	first := max(1, joinAt+1)
	if first >= len(s.Steps) {
		return
	}
	at := first + r.IntN(len(s.Steps)-first)
	f := Fault{Kind: FFork, Target: r.IntN(len(s.Devices)), Span: r.IntN(4)}
	s.Steps[at].Faults = append(s.Steps[at].Faults, f)
}

type gen struct {
	r     *rand.Rand
	s     *Schedule
	ops   map[int]int // per device: operations generated, for unique ids
	known bool
}

// active lists the devices that work at this point: only device 0 before
// a late join.
func (g *gen) active(joined bool) []int {
	if !joined {
		return []int{0}
	}
	out := make([]int, len(g.s.Devices))
	for i := range out {
		out[i] = i
	}
	return out
}

// target picks a device or the hub.
func (g *gen) target(joined bool) int {
	devs := g.active(joined)
	if joined && g.r.IntN(2) == 0 {
		return Hub
	}
	return devs[g.r.IntN(len(devs))]
}

func (g *gen) honestFault(joined bool) Fault {
	devs := g.active(joined)
	d := devs[g.r.IntN(len(devs))]
	switch n := g.r.IntN(10); {
	case n < 2:
		return Fault{Kind: FCrash, Target: d}
	case n < 3:
		return Fault{Kind: FReopen, Target: d}
	case n < 5 && joined:
		return Fault{Kind: []FaultKind{FHubDown, FHubUp, FHubSlow}[g.r.IntN(3)], Target: Hub}
	case n < 7:
		return Fault{Kind: FStorm, Target: g.target(joined)}
	case n < 9:
		return Fault{Kind: FAmbiguous, Target: g.target(joined)}
	default:
		return Fault{Kind: FCalm, Target: g.target(joined)}
	}
}

func (g *gen) hostileFault(joined bool, snapshotted map[int]bool) Fault {
	t := g.target(joined)
	// Where the counters (and their claim records) live: the hub once
	// the devices are on it, else the late device.
	counters := Hub
	if !joined {
		counters = 0
	}
	// Each scenario is as likely as the others, so the rare ones (a claim
	// record lost) come up within a short budget.
	type scenario struct {
		kind   FaultKind
		target int
		prefix string
	}
	scenarios := []scenario{
		{FDrop, counters, "_sequences/"},
		{FReplay, counters, "_sequences/"},
		{FDrop, counters, ClaimRecords},
		{FDrop, t, "_ledger/"},
		{FReplay, t, "notes/"},
		{FDrop, t, "notes/"},
		{FDrop, t, "_numbering/"},
		{FInjectList, t, []string{"_sequences/", "_ledger/", "", "notes/", "_numbering/", "_keyring/"}[g.r.IntN(6)]},
		{FLoseCommits, t, []string{"", "_ledger/", "_sequences/", "notes/"}[g.r.IntN(4)]},
	}
	if joined {
		scenarios = append(scenarios, scenario{FInjectHub, Hub, ""})
	}
	for _, tt := range []int{t, counters} {
		if snapshotted[tt] {
			scenarios = append(scenarios,
				scenario{FRollback, tt, []string{"", "_sequences/", "_ledger/", "notes/", "_numbering/"}[g.r.IntN(5)]})
		}
	}
	sc := scenarios[g.r.IntN(len(scenarios))]
	f := Fault{Kind: sc.kind, Target: sc.target, Prefix: sc.prefix}
	return f
}

// op makes one operation for device d, worker slot w.
func (g *gen) op(d, w int, joined bool) Op {
	r := g.r
	g.ops[d]++
	n := g.ops[d]
	month := 1 + r.IntN(3)
	region := regions[r.IntN(len(regions))]
	note := fmt.Sprintf("d%dw%d-%d", d, w, r.IntN(4))
	switch x := r.IntN(100); {
	case x < 14:
		return Op{Kind: KNext, Dev: d, Series: "inv", Region: region, Month: month}
	case x < 22:
		return Op{Kind: KNext, Dev: d, Series: "tick"}
	case x < 28:
		return Op{Kind: KNextN, Dev: d, Series: "tick", K: 2 + r.IntN(4)}
	case x < 40:
		return Op{Kind: KPutNumbered, Dev: d, Series: "inv", Region: region, Month: month, ID: fmt.Sprintf("i%d-%d", d, n)}
	case x < 44:
		return Op{Kind: KCorrect, Dev: d, Series: "cn", Month: month, Pick: r.IntN(1 << 20)}
	case x < 48:
		if r.IntN(2) == 0 {
			return Op{Kind: KVoid, Dev: d, Series: "tick", Pick: r.IntN(1 << 20)}
		}
		return Op{Kind: KVoid, Dev: d, Series: "inv", Region: region, Month: month, Pick: r.IntN(1 << 20)}
	case x < 49:
		return Op{Kind: KClose, Dev: d, Series: "inv", Region: region, Month: 1}
	case x < 58:
		return Op{Kind: KNumPut, Dev: d, ID: fmt.Sprintf("r%d-%d", d, n), Val: n}
	case x < 61:
		return Op{Kind: KSettle, Dev: d}
	case x < 70:
		return Op{Kind: KPut, Dev: d, ID: note, Val: n}
	case x < 73:
		return Op{Kind: KDelete, Dev: d, ID: note}
	case x < 77:
		return Op{Kind: KUpdate, Dev: d, ID: note}
	case x < 80:
		return Op{Kind: KTx, Dev: d, ID: note, ID2: fmt.Sprintf("d%dw%d-t%d", d, w, r.IntN(2)), Val: n}
	case x < 89:
		return Op{Kind: KSync, Dev: d}
	case x < 90:
		return Op{Kind: KRotate, Dev: d}
	case x < 91:
		return Op{Kind: KGrant, Dev: d}
	case x < 92:
		return Op{Kind: KRevoke, Dev: d}
	case x < 96:
		return Op{Kind: KGuestNext, Dev: d, Series: "tick"}
	default:
		return Op{Kind: KClaim, Dev: d, Series: "clm", ID: fmt.Sprintf("c%d", r.IntN(6))}
	}
}

// Without returns a copy of s without the steps not in keep (a shrinker's
// candidate). Keep holds step indexes.
func (s *Schedule) Without(keep []int) *Schedule {
	out := *s
	out.Steps = nil
	for _, i := range keep {
		out.Steps = append(out.Steps, s.Steps[i])
	}
	return &out
}
