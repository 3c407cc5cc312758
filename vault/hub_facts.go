package vault

import (
	"cmp"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// The facts a join carries (see joinSeries).
//
// A device that took numbers before its vault was on the hub (a vault that
// joins late, or a copy of one) brings them to the hub when it joins, as
// facts in the hub's ledger: one SeriesSeeded entry per run of numbers the
// device allocated, whose Reason is wire.SeedBroughtReason, Revision the
// position in the device's ledger of the allocation of the run's last
// number, and CipherHash the device ledger's chain MAC there. For the
// hub's sequences these numbers are issued, not skipped (wire.FactBrought):
// they may be voided and corrected there. A number the device gave to a
// Claim is brought by an entry of its own, of that number alone, whose
// RequestID is the claim's: the hub's sequences answer a later Claim of
// that id with it (from the ledger, should the hub lose its claim
// records), and a join whose claim the hub answered with another number
// is refused with the HubDivergedError of that number.
//
// Before it brings anything a device proves that none of its numbers was
// given on the hub too. The chain MAC at a position names a ledger up to
// it, so a device whose ledger holds the MAC a brought run names shares
// that history: every number it allocated up to that position is the
// other device's allocation, brought already. Its shared position is the
// furthest such one; every number it allocated after it is its own, and
// must be neither brought by another join nor issued by the hub (at or
// below the hub's counter and not in a range a plain seed skipped, which
// is room an owner made for numbers given elsewhere). Otherwise the join
// fails with a *HubDivergedError naming them, and writes nothing on
// either side.
//
// Joins take turns through the hub key joinsKey, which each join that
// brings numbers replaces in the commit of its facts: a join whose check
// raced another's checks again. Other writers need no turn: a number the
// hub gives after the check is above the hub's counter as the check read
// it, and a device with a number there is behind the hub's counter no
// more: it is refused with ErrHubBehind (or, joining a fresh hub, which
// no other device writes yet, seeds the counter past it).
//
// The device keeps, in joinedKey, the heads its counters had when its
// join succeeded: its counters take no number after (a device's numbers
// are the hub's), so at every later open the proof is skipped while they
// still stand there.

const (
	// joinsKey, on a hub, is replaced by every join that brings numbers.
	joinsKey = "_joins"
	// joinedKey, on a device, holds its counters' heads at its last join.
	joinedKey = "_joined"
	// joinedVersion is the layout of joinedKey's value:
	//
	//	1 || uvarint n || n × (lp series || uvarint k || k × lp component || uvarint head)
	joinedVersion = 1
	// joinAttempts bounds the checks of a join racing other joins.
	joinAttempts = 16
)

// NumberRange is the numbers From to To, both included.
type NumberRange struct {
	// From and To are the first and last numbers.
	From, To uint64
}

// String writes r as "4" or "4-5".
func (r NumberRange) String() string {
	if r.From == r.To {
		return fmt.Sprint(r.From)
	}
	return fmt.Sprintf("%d-%d", r.From, r.To)
}

// counterKey names a counter: its series and its partition as the ledger
// records it (a period's label last).
type counterKey struct{ series, part string }

func keyOf(series string, partition []string) counterKey {
	var b []byte
	for _, p := range partition {
		b = codec.AppendString(b, p)
	}
	return counterKey{series, string(b)}
}

// keyOfInfo is the counterKey of c, a counter as listCounters lists it.
func keyOfInfo(c SeriesInfo) counterKey { return keyOf(c.Name, fullPartition(c)) }

// fullPartition is c's partition with its period's label last.
func fullPartition(c SeriesInfo) []string {
	if c.Period == "" {
		return c.Partition
	}
	return append(c.Partition[:len(c.Partition):len(c.Partition)], c.Period)
}

// broughtRun is a run of numbers a join brought to the hub, with where the
// joining device allocated its last number (pos) and its ledger's chain
// MAC there.
type broughtRun struct {
	NumberRange
	pos uint64
	mac []byte
}

// hubFacts is what a join needs of the hub's ledger: the runs joins
// brought, and the ranges plain seeds skipped, by counter, read through
// position through.
type hubFacts struct {
	through uint64
	brought map[counterKey][]broughtRun
	rooms   map[counterKey][]NumberRange
	// claims holds, by counter, the number of each request id the hub's
	// ledger records a claim of (the first one).
	claims map[counterKey]map[string]uint64
}

// read reads l from where the last read stopped.
func (f *hubFacts) read(ctx context.Context, l writableLedger) error {
	if f.brought == nil {
		f.brought, f.rooms = map[counterKey][]broughtRun{}, map[counterKey][]NumberRange{}
		f.claims = map[counterKey]map[string]uint64{}
	}
	for e, err := range l.Read(ctx, f.through+1) {
		if err != nil {
			return feedErr(err)
		}
		f.through = e.Seq
		if e.RequestID != "" && e.Series != "" && e.Number > 0 &&
			(e.Kind == ledger.NumberAllocated || e.Kind == ledger.SeriesSeeded && e.Reason == wire.SeedBroughtReason) {
			k := keyOf(e.Series, e.Partition)
			if f.claims[k] == nil {
				f.claims[k] = map[string]uint64{}
			}
			if _, ok := f.claims[k][e.RequestID]; !ok {
				f.claims[k][e.RequestID] = e.Number
			}
		}
		if e.Kind != ledger.SeriesSeeded || e.Number <= e.From {
			continue
		}
		k, r := keyOf(e.Series, e.Partition), NumberRange{e.From + 1, e.Number}
		if e.Reason == wire.SeedBroughtReason {
			f.brought[k] = append(f.brought[k], broughtRun{NumberRange: r, pos: e.Revision, mac: e.CipherHash})
		} else {
			f.rooms[k] = append(f.rooms[k], r)
		}
	}
	return nil
}

// deviceRun is a run of numbers a device allocated, the last at position
// pos of its ledger.
type deviceRun struct {
	NumberRange
	pos uint64
}

// deviceVoid is a number the device voided.
type deviceVoid struct {
	n      uint64
	reason string
}

// deviceClaim is a number the device gave to a Claim of request id, at
// position pos of its ledger.
type deviceClaim struct {
	n   uint64
	id  string
	pos uint64
}

// deviceFacts is what a device's ledger records of its counters' numbers
// after a position: the runs it allocated, those of the runs' numbers it
// gave to claims, and the numbers it voided.
type deviceFacts struct {
	runs   map[counterKey][]deviceRun
	claims map[counterKey][]deviceClaim
	voids  map[counterKey][]deviceVoid
}

// readDeviceFacts reads the numbers dev allocated and voided after
// position after (its own work since then).
func readDeviceFacts(ctx context.Context, dev *Vault, after uint64) (deviceFacts, error) {
	f := deviceFacts{runs: map[counterKey][]deviceRun{}, claims: map[counterKey][]deviceClaim{},
		voids: map[counterKey][]deviceVoid{}}
	for e, err := range dev.ledger.Read(ctx, after+1) {
		if err != nil {
			return deviceFacts{}, fmt.Errorf("the device's ledger: %w", err)
		}
		switch {
		case e.Kind == ledger.NumberAllocated && e.Series != "" && e.Number > 0:
			k := keyOf(e.Series, e.Partition)
			rs := f.runs[k]
			if n := len(rs); n > 0 && rs[n-1].To+1 == e.Number {
				rs[n-1].To, rs[n-1].pos = e.Number, e.Seq
			} else {
				rs = append(rs, deviceRun{NumberRange: NumberRange{e.Number, e.Number}, pos: e.Seq})
			}
			f.runs[k] = rs
			if e.RequestID != "" {
				f.claims[k] = append(f.claims[k], deviceClaim{n: e.Number, id: e.RequestID, pos: e.Seq})
			}
		case e.Kind == ledger.NumberVoided && e.Series != "" && e.Collection == "":
			// (A void naming a record is a numbering pass's.)
			k := keyOf(e.Series, e.Partition)
			f.voids[k] = append(f.voids[k], deviceVoid{n: e.Number, reason: e.Reason})
		}
	}
	return f, nil
}

// checkDeviceCounters reads what dev's ledger records of its counters'
// numbers, and fails with ErrRollback when a counter stands below it
// (countersBehindLedger), before a fresh join seeds the hub from them:
// the seeds would start the hub's series below numbers the device gave.
func checkDeviceCounters(ctx context.Context, dev *Vault) (*deviceFacts, error) {
	local, err := dev.listCounters(ctx, "", false)
	if err != nil {
		return nil, fmt.Errorf("the device's series: %w", err)
	}
	f, err := readDeviceFacts(ctx, dev, 0)
	if err != nil {
		return nil, err
	}
	if err := countersBehindLedger(local, f); err != nil {
		return nil, err
	}
	return &f, nil
}

// countersBehindLedger fails with ErrRollback, naming the first such
// counter, when one of the device's counters (local, as listCounters lists
// them) is missing or below a number f, its ledger's facts, says it
// allocated: its store dropped it or put an older value back, and a hub
// seeded from it would give those numbers again.
func countersBehindLedger(local []SeriesInfo, f deviceFacts) error {
	heads := make(map[counterKey]uint64, len(local))
	for _, c := range local {
		if !c.Passes {
			heads[keyOfInfo(c)] = c.Head
		}
	}
	var bad []counterKey
	top := make(map[counterKey]uint64)
	for k, runs := range f.runs {
		for _, r := range runs {
			top[k] = max(top[k], r.To)
		}
		if heads[k] < top[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.SortFunc(bad, func(a, b counterKey) int {
		return cmp.Or(strings.Compare(a.series, b.series), strings.Compare(a.part, b.part))
	})
	k := bad[0]
	return fmt.Errorf("join the hub: the device's counter of series %q is at %d but its ledger records number %d: %w",
		k.series, heads[k], top[k], ErrRollback)
}

// sharedPosition returns the furthest position of dev's ledger at which it
// holds the chain MAC a run brought by a join names (0: none): dev's
// ledger is that device's up to there.
func sharedPosition(ctx context.Context, dev *Vault, f *hubFacts) (uint64, error) {
	var marks []broughtRun
	for _, rs := range f.brought {
		marks = append(marks, rs...)
	}
	slices.SortFunc(marks, func(a, b broughtRun) int {
		switch {
		case a.pos > b.pos:
			return -1
		case a.pos < b.pos:
			return 1
		}
		return 0
	})
	head, err := dev.ledger.Head(ctx)
	if err != nil {
		return 0, fmt.Errorf("the device's ledger: %w", err)
	}
	tried := map[uint64][]byte{}
	for _, m := range marks {
		if m.pos == 0 || m.pos > head.Seq {
			continue
		}
		mac, ok := tried[m.pos]
		if !ok {
			if mac, err = dev.ledger.MACAt(ctx, m.pos); err != nil {
				return 0, fmt.Errorf("the device's ledger: %w", err)
			}
			tried[m.pos] = mac
		}
		if mac != nil && hmac.Equal(mac, m.mac) {
			return m.pos, nil
		}
	}
	return 0, nil
}

// clashes returns the numbers of runs (a device's, after its shared
// position) that were given on the hub too: brought by a join (brought),
// or at or below head and in no range a plain seed skipped (rooms).
func clashes(runs []deviceRun, brought []broughtRun, rooms []NumberRange, head uint64) []NumberRange {
	var out []NumberRange
	free := mergeRanges(slices.Clone(rooms))
	for _, r := range runs {
		for _, b := range brought {
			if x, ok := intersect(r.NumberRange, b.NumberRange); ok {
				out = append(out, x)
			}
		}
		if x, ok := intersect(r.NumberRange, NumberRange{1, head}); ok && head > 0 {
			out = append(out, subtract(x, free)...)
		}
	}
	return mergeRanges(out)
}

// intersect returns the numbers a and b share.
func intersect(a, b NumberRange) (NumberRange, bool) {
	x := NumberRange{max(a.From, b.From), min(a.To, b.To)}
	return x, x.From <= x.To
}

// subtract returns the numbers of r in none of free (sorted, disjoint).
func subtract(r NumberRange, free []NumberRange) []NumberRange {
	var out []NumberRange
	from := r.From
	for _, f := range free {
		if f.To < from || f.From > r.To {
			continue
		}
		if f.From > from {
			out = append(out, NumberRange{from, f.From - 1})
		}
		if f.To >= r.To {
			return out
		}
		from = f.To + 1
	}
	return append(out, NumberRange{from, r.To})
}

// mergeRanges sorts rs and merges those that overlap or touch.
func mergeRanges(rs []NumberRange) []NumberRange {
	slices.SortFunc(rs, func(a, b NumberRange) int {
		switch {
		case a.From < b.From:
			return -1
		case a.From > b.From:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1].To == ^uint64(0) || r.From <= out[n-1].To+1) {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	return out
}

// joinPlan is what a join brings: the runs and voids of each counter the
// device allocated after its shared position, and the hub's heads of those
// counters as the check read them.
type joinPlan struct {
	token   []byte // joinsKey's value when the check began (nil: none)
	shared  uint64
	dev     deviceFacts
	heads   map[counterKey]uint64
	entries []ledger.Entry // the brought runs' entries
}

// planJoin reads the hub's facts (from where f stopped), finds dev's
// shared position, and checks every number dev allocated after it against
// them: a *HubDivergedError when some were given on the hub too. local
// are dev's counters to check; fresh says the hub holds no vault yet (its
// counters are all at 0 and take no number before the join ends). Only
// numbers at or below the hub's counter are brought on a hub that holds
// the vault; above it the device is behind the hub's counter check
// (checkBehind) or in a closed period that gives no number again.
func (v *Vault) planJoin(ctx context.Context, dev *Vault, local []SeriesInfo, f *hubFacts, whole *deviceFacts) (*joinPlan, error) {
	fresh := whole != nil
	p := &joinPlan{heads: map[counterKey]uint64{}}
	switch it, err := v.store.Get(ctx, v.prefix+joinsKey); {
	case err == nil:
		p.token = it.Value
	case !errors.Is(err, stores.ErrNotFound):
		return nil, err
	}
	if err := f.read(ctx, v.ledger); err != nil {
		return nil, fmt.Errorf("the hub's ledger: %w", err)
	}
	shared, err := sharedPosition(ctx, dev, f)
	if err != nil {
		return nil, err
	}
	p.shared = shared
	if shared == 0 && whole != nil {
		p.dev = *whole
	} else if p.dev, err = readDeviceFacts(ctx, dev, shared); err != nil {
		return nil, err
	}
	counterInfo := wire.Hook[counterInfoFunc]("SequenceCounterInfo", wire.SequenceCounterInfo)
	var diverged []DivergedSeries
	for _, c := range local {
		k := keyOfInfo(c)
		runs := p.dev.runs[k]
		if len(runs) == 0 {
			continue
		}
		// On a fresh hub the counter is at 0, unless a join of another
		// copy of the vault, at the same time, went further.
		q, err := v.counterHandle(c)
		if err != nil {
			return nil, err
		}
		head, _, _, _, err := counterInfo(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("series %s on the hub: %w", c.Name, err)
		}
		p.heads[k] = head
		bad := clashes(runs, f.brought[k], f.rooms[k], head)
		// A request id the device claimed that the hub answered with
		// another number.
		for _, cl := range p.dev.claims[k] {
			if n, ok := f.claims[k][cl.id]; ok && n != cl.n {
				bad = mergeRanges(append(bad, NumberRange{cl.n, cl.n}))
			}
		}
		if len(bad) > 0 {
			diverged = append(diverged, DivergedSeries{Series: c.Name, Partition: c.Partition, Period: c.Period, Numbers: bad})
			continue
		}
		full := fullPartition(c)
		brought := func(n uint64) bool { return fresh || n <= head }
		for _, r := range runs {
			if !fresh {
				if r.From > head {
					continue
				}
				r.To = min(r.To, head)
			}
			mac, err := dev.ledger.MACAt(ctx, r.pos)
			if err != nil {
				return nil, fmt.Errorf("the device's ledger: %w", err)
			}
			p.entries = append(p.entries, ledger.Entry{Kind: ledger.SeriesSeeded, Series: c.Name, Partition: full,
				From: r.From - 1, Number: r.To, Reason: wire.SeedBroughtReason, Revision: r.pos, CipherHash: mac})
		}
		for _, cl := range p.dev.claims[k] {
			if _, ok := f.claims[k][cl.id]; ok || !brought(cl.n) {
				continue // brought already (the hub holds the same number), or not brought
			}
			mac, err := dev.ledger.MACAt(ctx, cl.pos)
			if err != nil {
				return nil, fmt.Errorf("the device's ledger: %w", err)
			}
			p.entries = append(p.entries, ledger.Entry{Kind: ledger.SeriesSeeded, Series: c.Name, Partition: full,
				From: cl.n - 1, Number: cl.n, Reason: wire.SeedBroughtReason, RequestID: cl.id, Revision: cl.pos, CipherHash: mac})
		}
	}
	if len(diverged) > 0 {
		return nil, &HubDivergedError{Series: diverged}
	}
	return p, nil
}

// errJoinRaced: another join brought numbers while this one checked.
var errJoinRaced = errors.New("another join brought numbers meanwhile")

// bring writes p's entries in the hub's ledger, with joinsKey replaced, in
// one hub commit that fails with errJoinRaced when joinsKey is no longer
// what the check read.
func (v *Vault) bring(ctx context.Context, p *joinPlan) error {
	if len(p.entries) == 0 {
		return nil
	}
	key := v.prefix + joinsKey
	token, err := v.seal.Seal(key, []byte{1})
	if err != nil {
		return err
	}
	return v.ledger.UpdateKeys(ctx, []string{key}, func(tx stores.Tx) error {
		switch it, err := tx.Get(key); {
		case errors.Is(err, stores.ErrNotFound):
			if p.token != nil {
				return errJoinRaced
			}
		case err != nil:
			return err
		case p.token == nil || !hmac.Equal(it.Value, p.token):
			return errJoinRaced
		}
		if err := tx.Put(key, token); err != nil {
			return err
		}
		for es := p.entries; len(es) > 0; {
			n := min(len(es), 1024)
			if _, err := v.ledger.AppendTx(ctx, tx, es[:n]...); err != nil {
				return err
			}
			es = es[n:]
		}
		return nil
	})
}

// voidBrought voids on the hub the numbers p brings that the device
// voided, skipping any voided there already.
func (v *Vault) voidBrought(ctx context.Context, p *joinPlan, local []SeriesInfo) error {
	for _, c := range local {
		k := keyOfInfo(c)
		voids := p.dev.voids[k]
		if len(voids) == 0 {
			continue
		}
		q, err := v.voidHandle(ctx, c)
		if err != nil {
			return fmt.Errorf("void %s numbers on the hub: %w", c.Name, err)
		}
		for _, d := range voids {
			if !p.brings(k, d.n) {
				continue
			}
			err := q.Void(ctx, d.n, d.reason)
			if err != nil && !errors.Is(err, sequence.ErrAlreadyVoided) {
				return fmt.Errorf("void %s number %d on the hub: %w", c.Name, d.n, err)
			}
		}
	}
	return nil
}

// brings reports whether p brings number n of counter k: one the device
// allocated after its shared position, which the join writes as brought
// (a void of a number it shares with another device's join is that
// device's to make).
func (p *joinPlan) brings(k counterKey, n uint64) bool {
	for _, e := range p.entries {
		if keyOf(e.Series, e.Partition) == k && e.From < n && n <= e.Number {
			return true
		}
	}
	return false
}

// voidHandle returns a handle of v's series c.Name that voids in c's
// counter: for a counter of a period, one of the series' definition at a
// date in that period (a handle naming the period's label in its
// partition would count the period twice).
func (v *Vault) voidHandle(ctx context.Context, c SeriesInfo) (*sequence.Sequence, error) {
	if c.Period == "" {
		return v.counterHandle(c)
	}
	opts, err := optionsOf(c.Definition, c.Partition)
	if err != nil {
		return nil, err
	}
	q, err := v.seqs.Sequence(c.Name, opts)
	if err != nil {
		return nil, err
	}
	date, err := periodDate(c.Definition, opts.Location, c.Period)
	if err != nil {
		return nil, err
	}
	q = q.At(date)
	if label, err := q.PeriodLabel(ctx); err != nil {
		return nil, err
	} else if label != c.Period {
		return nil, fmt.Errorf("period %q: no date found in it (%q): %w", c.Period, label, ErrInvalidArgument)
	}
	return q, nil
}

// periodDate returns a day of the period labelled label of a series
// defined as d (noon on its first day, in loc): 2026-03-15 (day), 2026-03
// (month), 2026 (year), FY2026-27 or FY2026 (a fiscal year, starting on
// d.FiscalStart of its first year).
func periodDate(d sequence.Definition, loc *time.Location, label string) (time.Time, error) {
	if loc == nil {
		loc = time.UTC
	}
	bad := fmt.Errorf("period label %q of a %s series: %w", label, d.Period, ErrInvalidArgument)
	switch d.Period {
	case sequence.PeriodDay:
		t, err := time.Parse("2006-01-02", label)
		if err != nil {
			return time.Time{}, bad
		}
		return time.Date(t.Year(), t.Month(), t.Day(), 12, 0, 0, 0, loc), nil
	case sequence.PeriodMonth:
		t, err := time.Parse("2006-01", label)
		if err != nil {
			return time.Time{}, bad
		}
		return time.Date(t.Year(), t.Month(), 1, 12, 0, 0, 0, loc), nil
	case sequence.PeriodYear:
		y, err := strconv.Atoi(label)
		if err != nil {
			return time.Time{}, bad
		}
		return time.Date(y, time.January, 1, 12, 0, 0, 0, loc), nil
	case sequence.PeriodFiscalYear:
		first, _, _ := strings.Cut(strings.TrimPrefix(label, "FY"), "-")
		y, err := strconv.Atoi(first)
		if err != nil || !strings.HasPrefix(label, "FY") {
			return time.Time{}, bad
		}
		start := d.FiscalStart
		if start.Month == 0 {
			start = sequence.MonthDay{Month: time.January, Day: 1}
		}
		return time.Date(y, start.Month, start.Day, 12, 0, 0, 0, loc), nil
	}
	return time.Time{}, bad
}

// counterHandle returns a handle of v's counter c (its partition with the
// period's label), as Series reads a counter.
func (v *Vault) counterHandle(c SeriesInfo) (*sequence.Sequence, error) {
	var opts sequence.Options
	for _, s := range fullPartition(c) {
		opts.Partition = append(opts.Partition, s)
	}
	return v.seqs.Sequence(c.Name, opts)
}

// joinedHeads reads what dev's last join recorded (nil: none).
func joinedHeads(ctx context.Context, dev *Vault) (map[counterKey]uint64, error) {
	plain, err := dev.getSealedValue(ctx, joinedKey)
	if err != nil || plain == nil {
		return nil, err
	}
	r := codec.NewReader(plain)
	r.Version(joinedVersion)
	n := r.Count(1<<24, 2)
	out := make(map[counterKey]uint64, n)
	for range n {
		series := r.String(maxKeyringName)
		parts := make([]string, r.Count(64, 1))
		for i := range parts {
			parts[i] = r.String(64 << 10)
		}
		out[keyOf(series, parts)] = r.Uvarint()
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("the device's join record: %w", ErrTampered)
	}
	return out, nil
}

// coveredBy reports whether every counter of local stands where heads
// (joinedHeads) has it, or below.
func coveredBy(local []SeriesInfo, heads map[counterKey]uint64) bool {
	if heads == nil {
		return false
	}
	for _, c := range local {
		h, ok := heads[keyOfInfo(c)]
		if !ok || c.Head > h {
			return false
		}
	}
	return true
}

// recordJoined writes on dev's store the heads of its counters local, as
// its join left them.
func recordJoined(ctx context.Context, dev *Vault, local []SeriesInfo) error {
	b := []byte{joinedVersion}
	b = codec.AppendUvarint(b, uint64(len(local)))
	for _, c := range local {
		b = codec.AppendString(b, c.Name)
		full := fullPartition(c)
		b = codec.AppendUvarint(b, uint64(len(full)))
		for _, p := range full {
			b = codec.AppendString(b, p)
		}
		b = codec.AppendUvarint(b, c.Head)
	}
	key := dev.prefix + joinedKey
	sealed, err := dev.seal.Seal(key, b)
	if err != nil {
		return err
	}
	_, err = dev.store.Put(ctx, key, sealed)
	return err
}

// ErrHubDiverged: numbers this device gave on its own, before its vault
// was on the hub (a copy of the vault that went on numbering by itself),
// were given on the hub too: by the hub, or by another device whose join
// brought them; or a request id this device claimed, the hub answered with
// another number (the error names the device's). Joining would carry each
// of them twice. Nothing was
// written on the hub or on the device; the error is a *HubDivergedError
// naming the series and the numbers. There is no seed that mends it: the
// records that carry those numbers on this device must get other numbers
// (written again from a device of the hub), and this copy must not join.
var ErrHubDiverged = errors.New("numbers this device gave were given on the hub too")

// DivergedSeries is one counter of a HubDivergedError.
type DivergedSeries struct {
	// Series is the series name.
	Series string
	// Partition is the counter's partition, nil for none (without the
	// period).
	Partition []string
	// Period is the counter's period label, "" for a series without
	// periods.
	Period string
	// Numbers are the device's numbers that were given on the hub too,
	// in order.
	Numbers []NumberRange
}

// String names the counter as the CLI does, then the numbers.
func (d DivergedSeries) String() string {
	s := d.Series
	if len(d.Partition) > 0 {
		s += " " + strings.Join(d.Partition, ",")
	}
	if d.Period != "" {
		s += " period " + d.Period
	}
	ns := make([]string, len(d.Numbers))
	for i, r := range d.Numbers {
		ns[i] = r.String()
	}
	return s + ": " + strings.Join(ns, ", ")
}

// HubDivergedError is the error of a device whose numbers were given on
// the hub too (it matches ErrHubDiverged). Series lists every such
// counter, in the order of their keys.
type HubDivergedError struct {
	// Series are the counters and their numbers given twice.
	Series []DivergedSeries
}

// Error implements error.
func (e *HubDivergedError) Error() string {
	if len(e.Series) == 0 {
		return ErrHubDiverged.Error()
	}
	s := fmt.Sprintf("%v: %s", ErrHubDiverged, e.Series[0])
	if n := len(e.Series) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more series)", n)
	}
	return s
}

// Unwrap returns ErrHubDiverged.
func (e *HubDivergedError) Unwrap() error { return ErrHubDiverged }
