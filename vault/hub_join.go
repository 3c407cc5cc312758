package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// ErrHubBehind: the device took numbers before its vault was on the hub,
// and the hub, which holds the vault already, is behind the device in one
// of those series: continuing there would give again numbers the device
// gave. The device did not join (nothing was written on the hub); the
// error is a *HubBehindError naming the series. Seed each on the hub to
// the device's head (sequence.Sequence.SeedTo, or SeedPeriod for a
// period) from another device of the hub, then open again.
var ErrHubBehind = errors.New("the hub's series are behind this device's")

// BehindSeries is one series of a HubBehindError: the device's counter of
// Series, Partition and Period stands at Device, the hub's at Hub, below.
type BehindSeries struct {
	// Series is the series name.
	Series string
	// Partition is the counter's partition, nil for none (without the
	// period).
	Partition []string
	// Period is the counter's period label, "" for a series without periods.
	Period string
	// Device is the device's head: the last number it gave.
	Device uint64
	// Hub is the hub's head, below Device.
	Hub uint64
}

// String names the counter as the CLI does: the series, its partition
// joined by commas and its period, then both heads.
func (b BehindSeries) String() string {
	s := b.Series
	if len(b.Partition) > 0 {
		s += " " + strings.Join(b.Partition, ",")
	}
	if b.Period != "" {
		s += " period " + b.Period
	}
	return fmt.Sprintf("%s: the device is at %d, the hub at %d", s, b.Device, b.Hub)
}

// HubBehindError is the error of a device whose vault the hub holds with a
// series behind the device's (it matches ErrHubBehind). Series lists every
// such counter, in the order of their keys.
type HubBehindError struct {
	// Series are the counters the hub is behind in.
	Series []BehindSeries
}

// Error implements error.
func (e *HubBehindError) Error() string {
	if len(e.Series) == 0 {
		return ErrHubBehind.Error()
	}
	s := fmt.Sprintf("%v: %s", ErrHubBehind, e.Series[0])
	if n := len(e.Series) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// Unwrap returns ErrHubBehind.
func (e *HubBehindError) Unwrap() error { return ErrHubBehind }

// joinSeries brings the device's series to the hub when the device's
// vault reaches it (hubLink.ensure). The counters of a device live on the
// hub, so the device's own counters, which hold numbers only if it took
// some before it had a hub, are never used again: their heads must be where
// the hub's series start from, or the hub would give those numbers again.
//
// First the device proves that none of the numbers it gave on its own was
// given on the hub too, and brings their facts to the hub's ledger, so
// they are issued there (voidable, correctable) and a later copy of the
// vault that gave them again is refused (hub_facts.go): a number given
// twice fails the join with a *HubDivergedError, before anything is
// written. A device whose counters stand where its last join left them
// has nothing new to prove and skips that.
//
// fresh (the hub does not hold the vault yet): each series the device took
// numbers in is then seeded on the hub to the device's head, through the
// hub's sequences, with its definition (a period by its label, so it stays
// a period; a period closed on the device is closed on the hub too). Not
// fresh: the hub's head of each such counter is read, and one below the
// device's fails the join with a *HubBehindError, before anything is
// written; equal or above (the device joined before) is the normal case.
//
// hub is the inner hub store (its calls here are not the hub-side vault's,
// whose first call is what waits for this join). A fresh join reads the
// device's ledger once, to check its counters against it (a counter below
// the numbers its ledger records is ErrRollback, nothing written on the
// hub); a later one, of a device without counters, reads nothing more.
// Series numbered by passes are left alone: they have no head to seed
// from.
//
// whole is what checkDeviceCounters, run before a fresh join wrote
// anything on the hub, read of the device's ledger (nil: read it here).
func joinSeries(ctx context.Context, cfg Config, prefix string, dk *crypto.Key, header []byte, dev *Vault, hub stores.Store, fresh bool, whole *deviceFacts) error {
	local, err := dev.listCounters(ctx, "", false)
	if err != nil {
		return fmt.Errorf("the device's series: %w", err)
	}
	if fresh && whole == nil {
		if whole, err = checkDeviceCounters(ctx, dev); err != nil {
			return err
		}
	}
	todo := local[:0]
	for _, c := range local {
		// A counter of a series defined with periods since, outside any
		// period, takes no more numbers on any store: nothing to carry.
		if c.Definition.Period != sequence.PeriodNone && c.Period == "" {
			continue
		}
		if c.Head > 0 || c.Closed {
			todo = append(todo, c)
		}
	}
	var up *ledger.Entry
	if fresh {
		if up, err = legacyUpgrade(ctx, dev); err != nil {
			return err
		}
	}
	if len(todo) == 0 && up == nil {
		return nil
	}
	// The hub's sequences, as the hub-side vault would write them (with
	// their ledger entries, signed by the device's person), but reaching
	// the hub without the link that waits for this join. Rollback pins: the
	// device's for the hub when seeding, so the hub-side vault knows the
	// seeds; in memory for the check, which writes nothing anywhere.
	var p *pins.Set
	if fresh {
		p, err = openHubPins(cfg, header, dk)
	} else {
		p, err = pins.Open("", cfg.Name, nil, nil)
	}
	if err != nil {
		return err
	}
	jcfg := cfg
	jcfg.Store, jcfg.Hub, jcfg.StateDir = wrapHub(hub, -1, nil), nil, ""
	j := newVault(jcfg, prefix, dk, p)
	j.sharesKey = true
	j.signAs, j.keys = dev.signAs, dev.keys
	defer func() { _ = j.Close() }()
	if up != nil {
		if _, err := j.ledger.Append(ctx, *up); err != nil {
			return fmt.Errorf("introduce the upgraded keyring entry on the hub: %w", err)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if !fresh {
		// A device whose counters stand where its last join left them
		// has nothing new to prove.
		heads, err := joinedHeads(ctx, dev)
		if err != nil {
			return err
		}
		if coveredBy(todo, heads) {
			return j.checkBehind(ctx, todo)
		}
	}
	// The facts of the device's numbers: checked against the hub's, then
	// brought, in turns with other joins (see hub_facts.go).
	var facts hubFacts
	var plan *joinPlan
	for attempt := 0; ; attempt++ {
		if plan, err = j.planJoin(ctx, dev, todo, &facts, whole); err != nil {
			return err
		}
		if !fresh {
			if err := j.checkBehind(ctx, todo); err != nil {
				return err
			}
		}
		err = j.bring(ctx, plan)
		if !errors.Is(err, errJoinRaced) {
			break
		}
		if attempt+1 == joinAttempts {
			return fmt.Errorf("bring the device's numbers to the hub: %w", stores.ErrConflict)
		}
	}
	if err != nil {
		return fmt.Errorf("bring the device's numbers to the hub: %w", err)
	}
	if fresh {
		for _, c := range todo {
			if err := j.seedFrom(ctx, c); err != nil {
				return fmt.Errorf("seed series %s on the hub: %w", c.Name, err)
			}
		}
	}
	if err := j.voidBrought(ctx, plan, todo); err != nil {
		return err
	}
	return recordJoined(ctx, dev, todo)
}

// seedFrom seeds the hub's counter of c (a counter of the device, listed by
// listCounters) to c's head, with c's series definition; a closed period
// is closed.
func (v *Vault) seedFrom(ctx context.Context, c SeriesInfo) error {
	opts, err := optionsOf(c.Definition, c.Partition)
	if err != nil {
		return err
	}
	q, err := v.seqs.Sequence(c.Name, opts)
	if err != nil {
		return err
	}
	if c.Period == "" {
		return q.SeedTo(ctx, c.Head)
	}
	if err := q.SeedPeriod(ctx, c.Period, c.Head); err != nil {
		// Closed on the hub already (by a join cut short after it closed
		// the period, before it wrote the header): the period takes no
		// more numbers there, so nothing can be given twice in it.
		if errors.Is(err, sequence.ErrPeriodClosed) {
			return nil
		}
		return err
	}
	if c.Closed {
		return q.ClosePeriod(ctx, c.Period)
	}
	return nil
}

// checkBehind reads the hub's head of each counter of local (the device's)
// and returns a *HubBehindError listing those where it is lower (and not
// a closed period).
func (v *Vault) checkBehind(ctx context.Context, local []SeriesInfo) error {
	counterInfo := wire.Hook[counterInfoFunc]("SequenceCounterInfo", wire.SequenceCounterInfo)
	var behind []BehindSeries
	for _, c := range local {
		part := c.Partition
		if c.Period != "" {
			part = append(part[:len(part):len(part)], c.Period)
		}
		var opts sequence.Options
		for _, s := range part {
			opts.Partition = append(opts.Partition, s)
		}
		q, err := v.seqs.Sequence(c.Name, opts)
		if err != nil {
			return err
		}
		// The counter's own head, as Series reads it: Peek would choose
		// the period of today on a series with periods.
		head, _, closed, _, err := counterInfo(ctx, q)
		if err != nil {
			return fmt.Errorf("series %s on the hub: %w", c.Name, err)
		}
		// A period closed on the hub gives no more numbers there, so none
		// of the device's can be given again (and it cannot be seeded).
		if head < c.Head && !closed {
			behind = append(behind, BehindSeries{Series: c.Name, Partition: c.Partition, Period: c.Period, Device: c.Head, Hub: head})
		}
	}
	if len(behind) > 0 {
		return &HubBehindError{Series: behind}
	}
	return nil
}

// optionsOf returns the options that open a handle of a series defined
// as d, in partition part.
func optionsOf(d sequence.Definition, part []string) (sequence.Options, error) {
	o := sequence.Options{
		Format: d.Format, Period: d.Period, FiscalStart: d.FiscalStart,
		Meta: d.Meta, Corrects: d.Corrects,
	}
	for _, s := range part {
		o.Partition = append(o.Partition, s)
	}
	if d.Zone != "" {
		loc, err := time.LoadLocation(d.Zone)
		if err != nil {
			return sequence.Options{}, fmt.Errorf("series zone %q: %w", d.Zone, err)
		}
		o.Location = loc
	}
	return o, nil
}

// legacyUpgrade returns the KeyringUpgraded entry a fresh hub's ledger
// must begin with when the device's vault is of layout version 1 and the
// joining person upgraded their entry before the join (nil otherwise): the
// device's ledger began unsigned (or with such an upgrade), its person's
// entry is an upgraded one, granted by themselves. Begun with the upgrade,
// the hub's ledger is one of a vault of layout version 1 for Verify, which
// then accepts the upgrades of the vault's other owners of version 1 when
// they come (upgradeOnHub); begun with any other signed entry it took
// them for unknown signers.
func legacyUpgrade(ctx context.Context, dev *Vault) (*ledger.Entry, error) {
	m := dev.signAs
	if m == nil {
		return nil, nil
	}
	m.mu.Lock()
	e := m.entry
	m.mu.Unlock()
	if e == nil || e.revoked || e.grantedBy != e.user || len(e.signPub) == 0 {
		return nil, nil
	}
	legacy := false
	for first, err := range dev.ledger.Read(ctx, 1) {
		if err != nil {
			return nil, fmt.Errorf("the device's ledger: %w", err)
		}
		legacy = (len(first.Signature) == 0 && !first.Covered && !first.Chained) ||
			(first.Kind == ledger.KeyringUpgraded && first.ID == first.Actor)
		break
	}
	if !legacy {
		return nil, nil
	}
	return &ledger.Entry{Kind: ledger.KeyringUpgraded, ID: e.user, Reason: RoleOwner.String(),
		CipherHash: hashOf(e.encode()), SigningKey: e.signPub}, nil
}
