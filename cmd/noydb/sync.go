package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// policyNames maps the names --policy takes to the policies.
var policyNames = map[string]vault.SyncPolicy{}

func init() {
	for p := vault.HigherRevisionWins; p <= vault.Manual; p++ {
		policyNames[p.String()] = p
	}
}

// policyList names the policies --policy takes, for messages.
func policyList() string {
	names := make([]string, 0, len(policyNames))
	for n := range policyNames {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return policyNames[names[i]] < policyNames[names[j]] })
	return strings.Join(names, ", ")
}

// parsePolicies parses --policy COLLECTION=POLICY values.
func parsePolicies(vals []string) (map[string]vault.SyncPolicy, error) {
	out := map[string]vault.SyncPolicy{}
	for _, v := range vals {
		coll, name, ok := strings.Cut(v, "=")
		if !ok || coll == "" {
			return nil, usagef("--policy %q: want COLLECTION=POLICY, as in invoices=manual", v)
		}
		if err := vault.CheckCollectionName(coll); err != nil {
			return nil, usagef("--policy %q: %v", v, err)
		}
		p, ok := policyNames[name]
		if !ok {
			return nil, usagef("--policy %q: unknown policy %q (known: %s)", v, name, policyList())
		}
		out[coll] = p
	}
	return out, nil
}

// syncReportJSON is a sync's report as --json prints it.
type syncReportJSON struct {
	Vault   string `json:"vault"`
	Hub     string `json:"hub"`
	Fetched bool   `json:"fetched,omitempty"`
	// Joined: the vault, held by this device alone until then, was put on
	// the hub by this sync.
	Joined    bool               `json:"joined,omitempty"`
	Pulled    int                `json:"pulled"`
	Pushed    int                `json:"pushed"`
	Conflicts []syncConflictJSON `json:"conflicts"`
	Rejected  []syncRejectedJSON `json:"rejected"`
}

type syncConflictJSON struct {
	Collection     string `json:"collection"`
	ID             string `json:"id"`
	Policy         string `json:"policy"`
	Outcome        string `json:"outcome"` // "hub", "device", "kept" or "merged"
	DeviceRevision uint64 `json:"device_revision"`
	HubRevision    uint64 `json:"hub_revision"`
	DeviceDeleted  bool   `json:"device_deleted,omitempty"`
	HubDeleted     bool   `json:"hub_deleted,omitempty"`
}

type syncRejectedJSON struct {
	Collection string `json:"collection"`
	ID         string `json:"id"`
	Reason     string `json:"reason"`
}

// outcome names who won a conflict.
func outcome(c vault.SyncConflict) string {
	switch {
	case c.Kept:
		return "kept"
	case c.Merged:
		return "merged"
	case c.HubWon:
		return "hub"
	}
	return "device"
}

func reportJSON(name, hub string, rep vault.SyncReport) syncReportJSON {
	out := syncReportJSON{Vault: name, Hub: hub, Pulled: rep.Pulled, Pushed: rep.Pushed,
		Conflicts: []syncConflictJSON{}, Rejected: []syncRejectedJSON{}}
	for _, c := range rep.Conflicts {
		out.Conflicts = append(out.Conflicts, syncConflictJSON{c.Collection, c.ID, c.Policy.String(), outcome(c),
			c.DeviceRevision, c.HubRevision, c.DeviceDeleted, c.HubDeleted})
	}
	for _, r := range rep.Rejected {
		out.Rejected = append(out.Rejected, syncRejectedJSON{r.Collection, r.ID, r.Reason})
	}
	return out
}

// side names one side of a conflict for people: "revision 3" or "deleted
// (after revision 3)".
func side(rev uint64, deleted bool) string {
	if deleted {
		return fmt.Sprintf("deleted (after revision %d)", rev)
	}
	return fmt.Sprintf("revision %d", rev)
}

func (a *app) syncCmd() *cobra.Command {
	var policies []string
	sc := &cobra.Command{
		Use:   "sync",
		Short: "Sync this device's vault with its hub (pull, then push)",
		Long: `Sync converges this device's vault with its hub: it pulls the changes the
hub accepted since the last sync, then pushes this device's own, and prints
what it did: records pulled and pushed, conflicts (records changed on both
sides since they last synced, with who won) and rejected changes, with why.
A sync that is cut short (Ctrl-C, a lost connection) leaves both sides
consistent; the next one continues where it stopped. On a terminal a
progress bar follows a long pull or push.

The hub is --hub, else $NOYDB_HUB, else the config file's hub ('noydb config
set hub …'): badger:DIR (one process at a time, such as a server folder)
or a postgres:// URL (a fleet). A file: folder cannot be a hub: it has no
atomic compare-and-swap. The hub holds only sealed values; it never sees
the secret. Every command opens a vault set up with a hub as a device of
it: numbers ('seq next', 'put --seq' with --partition) are taken on the
hub, and 'number pass' runs on the hub. Records are always written here
first, online or not.

A device that does not hold the vault yet gets it from the hub (with the
secret of a user the vault knows), and its records with the first sync.
When the hub cannot be reached (a folder that does not exist or another
process holds, a server that does not answer), sync and the commands that
take numbers say "offline" and exit with status 3, doing nothing; others
work on this device and note that they work offline.

Conflicts are decided per collection by its policy, which --policy
COLLECTION=POLICY stores with the collection (here and on the hub), so
every later sync of every device decides so until another is stored:
higher-revision-wins by default; device-wins, hub-wins, last-writer-wins,
first-writer-wins, or manual: the conflict is kept, 'noydb sync
conflicts' lists it and 'noydb sync resolve' settles it. 'noydb sync
status' shows the stored policies. The losing side is never lost
silently: it is in the report and in this device's ledger, and its value
stays readable ('noydb sync conflicts --lost').

With --json it prints {"vault", "hub", "pulled", "pushed", "conflicts":
[{"collection", "id", "policy", "outcome": "hub"|"device"|"kept"|"merged",
"device_revision", "hub_revision", …}], "rejected": [{"collection", "id",
"reason"}]}. Exit status 3: the hub could not be reached.`,
		Example: `  noydb config set hub postgres://noydb@db.example/books
  noydb sync
  noydb sync --hub badger:/srv/hub --policy invoices=manual
  noydb sync status`,
		Args: a.noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			pols, err := parsePolicies(policies)
			if err != nil {
				return err
			}
			if _, ok, err := a.parsedHub(); err != nil {
				return err
			} else if !ok {
				return usagef("no hub: pass --hub STORE, set $%s, or keep one with 'noydb config set hub STORE'", envHub)
			}
			a.quietOffline = true
			a.offlineHint = "nothing was synced; run 'noydb sync' again when the hub is back (this device keeps working meanwhile)"
			a.ownsHubNote = true
			v, err := a.openVault(ctx)
			if err != nil {
				return err
			}
			if a.hub.offline != nil {
				err := fmt.Errorf("%w: %w", sequence.ErrOffline, a.hub.offline)
				a.noteSync(v.Name(), vault.SyncReport{}, err)
				return err
			}
			for coll, p := range pols {
				// Stored with the collection (on this device and the
				// hub): every later sync, of every device, decides so.
				if err := v.StoreConflictPolicy(ctx, coll, p); err != nil {
					return err
				}
			}
			rep, err := v.SyncWith(ctx, vault.SyncOptions{Progress: a.syncProgress()})
			a.endSyncProgress()
			a.noteSync(v.Name(), rep, err)
			if err != nil {
				err = &hubError{err}
				if rep.Pulled+rep.Pushed > 0 {
					err = fmt.Errorf("sync stopped after pulling %d and pushing %d (the next sync continues from there): %w", rep.Pulled, rep.Pushed, err)
				}
				return err
			}
			if a.json {
				out := reportJSON(v.Name(), a.hub.String(), rep)
				out.Fetched, out.Joined = a.fetched, a.joined
				return a.printJSON(out)
			}
			switch {
			case a.fetched:
				fmt.Fprintf(a.io.out, "vault %s was not on this device: fetched from hub %s\n", v.Name(), a.hub)
			case a.joined:
				fmt.Fprintf(a.io.out, "vault %s joined hub %s: this device syncs with it from now on, and takes numbers there\n", v.Name(), a.hub)
			}
			a.printReport(v.Name(), rep)
			return nil
		},
	}
	sc.Flags().StringArrayVar(&policies, "policy", nil, "COLLECTION=POLICY: how conflicts of a collection are decided ("+policyList()+"; default higher-revision-wins), stored with the collection for every later sync; repeatable")
	sc.AddCommand(a.syncStatusCmd(), a.syncConflictsCmd(), a.syncResolveCmd())
	return sc
}

func (a *app) printReport(name string, rep vault.SyncReport) {
	fmt.Fprintf(a.io.out, "synced vault %s with hub %s: pulled %d, pushed %d, %s, %d rejected\n",
		name, a.hub, rep.Pulled, rep.Pushed, plural(len(rep.Conflicts), "conflict", "conflicts"), len(rep.Rejected))
	for _, c := range rep.Conflicts {
		sides := fmt.Sprintf("this device: %s, hub: %s", side(c.DeviceRevision, c.DeviceDeleted), side(c.HubRevision, c.HubDeleted))
		switch outcome(c) {
		case "kept":
			fmt.Fprintf(a.io.out, "conflict %s/%s: kept for you to resolve (%s; %s): see 'noydb sync conflicts'\n", c.Collection, c.ID, c.Policy, sides)
		case "merged":
			fmt.Fprintf(a.io.out, "conflict %s/%s: merged (%s; %s)\n", c.Collection, c.ID, c.Policy, sides)
		case "hub":
			fmt.Fprintf(a.io.out, "conflict %s/%s: the hub's side won (%s; %s)\n", c.Collection, c.ID, c.Policy, sides)
		default:
			fmt.Fprintf(a.io.out, "conflict %s/%s: this device's side won (%s; %s)\n", c.Collection, c.ID, c.Policy, sides)
		}
	}
	for _, r := range rep.Rejected {
		fmt.Fprintf(a.io.out, "rejected %s/%s: %s\n", r.Collection, r.ID, r.Reason)
	}
}

// syncProgress returns the progress callback of a sync on a terminal: a
// bar per phase, shown once the phase lasts (nil off a terminal).
func (a *app) syncProgress() func(vault.SyncProgress) {
	if !a.io.errTerminal {
		return nil
	}
	return func(p vault.SyncProgress) {
		label := p.Phase.String()
		if a.syncBar == nil || a.syncBar.label != label {
			a.endSyncProgress()
			a.syncBar = a.progress(label, p.Total)
			a.syncBar.counts = func(n, total uint64) string { return fmt.Sprintf("%d/%d changes", n, total) }
		}
		a.syncBar.total = p.Total
		a.syncBar.set(p.Done)
	}
}

func (a *app) endSyncProgress() {
	if a.syncBar != nil {
		a.syncBar.done()
		a.syncBar = nil
	}
}

// lastSync is what this device remembers of its syncs of a vault, in its
// state folder, for 'noydb sync status'. It is informational: nothing
// relies on it.
type lastSync struct {
	Hub string `json:"hub"`
	// Attempt is when the last sync ended, Error why it failed ("": it
	// succeeded).
	Attempt time.Time `json:"attempt"`
	Error   string    `json:"error,omitempty"`
	// OK is when the last successful sync ended, and what it did.
	OK        time.Time `json:"ok,omitzero"`
	Pulled    int       `json:"pulled"`
	Pushed    int       `json:"pushed"`
	Conflicts int       `json:"conflicts"`
	Rejected  int       `json:"rejected"`
}

// lastSyncPath is where the state folder keeps the vault's lastSync.
func (a *app) lastSyncPath(name string) (string, error) {
	dir, err := a.stateDir()
	if err != nil || dir == "" {
		return "", err
	}
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(dir, "sync-"+hex.EncodeToString(sum[:12])+".json"), nil
}

func (a *app) readLastSync(name string) (lastSync, bool) {
	var ls lastSync
	path, err := a.lastSyncPath(name)
	if err != nil || path == "" {
		return ls, false
	}
	data, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(data, &ls) != nil {
		return lastSync{}, false
	}
	return ls, true
}

// noteSync records a sync's outcome in the state folder. A failure to
// write it is only reported: the sync itself is done.
func (a *app) noteSync(name string, rep vault.SyncReport, serr error) {
	path, err := a.lastSyncPath(name)
	if err != nil || path == "" {
		return
	}
	ls, _ := a.readLastSync(name)
	ls.Hub = a.hub.String()
	ls.Attempt = time.Now().UTC().Truncate(time.Second)
	ls.Error = ""
	if serr != nil {
		ls.Error = a.scrub(oneLine(a.explain(serr)))
	} else {
		ls.OK = ls.Attempt
		ls.Pulled, ls.Pushed, ls.Conflicts, ls.Rejected = rep.Pulled, rep.Pushed, len(rep.Conflicts), len(rep.Rejected)
	}
	data, err := json.Marshal(ls)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(path), 0o700)
	}
	if err == nil {
		tmp := path + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		fmt.Fprintf(a.io.err, "note: could not record this sync in the state folder: %v\n", err)
	}
}

// forgetSync removes what the state folder remembers of the vault's syncs.
func (a *app) forgetSync(name string) error {
	path, err := a.lastSyncPath(name)
	if err != nil || path == "" {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// syncStatusJSON is 'sync status --json'.
type syncStatusJSON struct {
	Vault         string     `json:"vault"`
	Hub           string     `json:"hub"`
	LastSync      *time.Time `json:"last_sync"`
	LastAttempt   *time.Time `json:"last_attempt"`
	LastError     string     `json:"last_error,omitempty"`
	LastPulled    int        `json:"last_pulled"`
	LastPushed    int        `json:"last_pushed"`
	LastConflicts int        `json:"last_conflicts"`
	LastRejected  int        `json:"last_rejected"`
	PulledThrough uint64     `json:"pulled_through"`
	PushedThrough uint64     `json:"pushed_through"`
	LedgerHead    uint64     `json:"ledger_head"`
	Pending       int        `json:"pending"`
	Conflicts     int        `json:"conflicts"`
	// Policies are the sync policies stored with collections.
	Policies map[string]string `json:"policies"`
}

func (a *app) syncStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "What this device knows of its syncs: last sync, positions, pending changes, conflicts",
		Long: `Status prints what this device knows of its syncs of --vault, from its own
store and state folder, without reaching the hub: the hub set, when the last
sync ended (and what it did, or why it failed), how far it has applied the
hub's change feed, how far its own ledger was pushed, how many records were
changed here since and wait for the next sync, and how many conflicts are
kept for you to resolve ('noydb sync conflicts').

With --json it prints {"vault", "hub", "last_sync", "last_attempt",
"last_error", "last_pulled", "last_pushed", "last_conflicts",
"last_rejected", "pulled_through", "pushed_through", "ledger_head",
"pending", "conflicts", "policies"}; last_sync is null before the first
sync, and policies maps each collection with a stored policy to it.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			hubName := "(none)"
			if spec, ok, err := a.parsedHub(); err != nil {
				return err
			} else if ok {
				hubName = spec.String()
			}
			// The device's own store only: status works offline.
			a.noHub = true
			v, err := a.openVaultToRead(ctx)
			if err != nil {
				return err
			}
			st, err := v.SyncState(ctx)
			if err != nil {
				return err
			}
			ls, known := a.readLastSync(v.Name())
			stored, err := v.StoredConflictPolicies(ctx)
			if err != nil {
				return err
			}
			out := syncStatusJSON{Vault: v.Name(), Hub: hubName, PulledThrough: st.PulledThrough, PushedThrough: st.PushedThrough,
				LedgerHead: st.LedgerHead, Pending: st.Pending, Conflicts: st.Conflicts, Policies: map[string]string{}}
			for coll, p := range stored {
				out.Policies[coll] = p.String()
			}
			if known {
				out.LastAttempt, out.LastError = &ls.Attempt, ls.Error
				if !ls.OK.IsZero() {
					out.LastSync = &ls.OK
					out.LastPulled, out.LastPushed, out.LastConflicts, out.LastRejected = ls.Pulled, ls.Pushed, ls.Conflicts, ls.Rejected
				}
			}
			if a.json {
				return a.printJSON(out)
			}
			w := a.io.out
			fmt.Fprintf(w, "vault:           %s\n", out.Vault)
			fmt.Fprintf(w, "hub:             %s\n", out.Hub)
			switch {
			case out.LastSync != nil:
				fmt.Fprintf(w, "last sync:       %s: pulled %d, pushed %d, %s, %d rejected\n", out.LastSync.Local().Format(time.DateTime),
					out.LastPulled, out.LastPushed, plural(out.LastConflicts, "conflict", "conflicts"), out.LastRejected)
			case st.PulledThrough > 0 || st.PushedThrough > 0:
				fmt.Fprintf(w, "last sync:       not recorded in this state folder\n")
			default:
				fmt.Fprintf(w, "last sync:       never\n")
			}
			if out.LastError != "" {
				fmt.Fprintf(w, "last attempt:    %s: failed: %s\n", out.LastAttempt.Local().Format(time.DateTime), out.LastError)
			}
			fmt.Fprintf(w, "pulled through:  hub change %d\n", st.PulledThrough)
			fmt.Fprintf(w, "pushed through:  ledger entry %d of %d\n", st.PushedThrough, st.LedgerHead)
			fmt.Fprintf(w, "pending:         %s changed here, not pushed yet\n", plural(st.Pending, "record", "records"))
			if st.Conflicts > 0 {
				fmt.Fprintf(w, "conflicts:       %d kept for you to resolve: see 'noydb sync conflicts'\n", st.Conflicts)
			} else {
				fmt.Fprintf(w, "conflicts:       none\n")
			}
			if len(out.Policies) == 0 {
				fmt.Fprintf(w, "policies:        none stored (higher-revision-wins): 'noydb sync --policy COLLECTION=POLICY' stores one\n")
			} else {
				var each []string
				for _, coll := range slices.Sorted(maps.Keys(out.Policies)) {
					each = append(each, coll+"="+out.Policies[coll])
				}
				fmt.Fprintf(w, "policies:        %s (others higher-revision-wins)\n", strings.Join(each, ", "))
			}
			return nil
		},
	}
}

// conflictJSON is one kept conflict as 'sync conflicts --json' prints it.
type conflictJSON struct {
	Collection     string          `json:"collection"`
	ID             string          `json:"id"`
	DeviceRevision uint64          `json:"device_revision"`
	DeviceDeleted  bool            `json:"device_deleted"`
	Device         json.RawMessage `json:"device"`
	HubRevision    uint64          `json:"hub_revision"`
	HubDeleted     bool            `json:"hub_deleted"`
	Hub            json.RawMessage `json:"hub"`
}

// keptConflicts lists the vault's kept conflicts with both sides.
func keptConflicts(ctx context.Context, v *vault.Vault) ([]conflictJSON, error) {
	pending, err := v.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	out := []conflictJSON{}
	for _, p := range pending {
		dev, hub, err := records(v, p.Collection).ConflictSides(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		c := conflictJSON{Collection: p.Collection, ID: p.ID, HubRevision: p.HubRevision, HubDeleted: p.HubDeleted,
			Device: json.RawMessage("null"), Hub: json.RawMessage("null"), DeviceDeleted: dev == nil}
		if dev != nil {
			c.DeviceRevision, c.Device = dev.Revision, unescapeHTML(dev.Value)
		}
		if hub != nil {
			c.Hub = unescapeHTML(hub.Value)
		}
		out = append(out, c)
	}
	return out, nil
}

// lostJSON is a conflict a policy decided, as 'sync conflicts --lost
// --json' prints it: the side that lost, and its value then.
type lostJSON struct {
	Collection string          `json:"collection"`
	ID         string          `json:"id"`
	Seq        uint64          `json:"seq"`
	Policy     string          `json:"policy"`
	Lost       string          `json:"lost"` // "device" or "hub"
	Revision   uint64          `json:"revision"`
	Deleted    bool            `json:"deleted"`
	Value      json.RawMessage `json:"value"`
}

// lostConflicts lists the conflicts policies decided on this device, with
// each losing side's value.
func lostConflicts(ctx context.Context, v *vault.Vault) ([]lostJSON, error) {
	all, err := v.LostConflicts(ctx)
	if err != nil {
		return nil, err
	}
	out := []lostJSON{}
	for _, lc := range all {
		l := lostJSON{Collection: lc.Collection, ID: lc.ID, Seq: lc.Seq, Policy: lc.Policy, Lost: "device",
			Revision: lc.Revision, Deleted: lc.Deleted, Value: json.RawMessage("null")}
		if lc.HubLost {
			l.Lost = "hub"
		}
		if !lc.Deleted {
			r, err := records(v, lc.Collection).LostValue(ctx, lc)
			switch {
			case err == nil:
				l.Value = unescapeHTML(r.Value)
			case errors.Is(err, vault.ErrNotFound):
				// Decided before losing sides were kept.
			default:
				return nil, err
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// printLost prints the conflicts policies decided.
func (a *app) printLost(all []lostJSON) error {
	if a.json {
		return a.printJSON(all)
	}
	if len(all) == 0 {
		_, err := fmt.Fprintln(a.io.out, "no sync conflict was decided against a side on this device")
		return err
	}
	for _, l := range all {
		who := "this device's side"
		if l.Lost == "hub" {
			who = "the hub's side"
		}
		value := string(l.Value)
		switch {
		case l.Deleted:
			value = "(a deletion)"
		case value == "null":
			value = "(not kept: decided before losing sides were kept)"
		}
		fmt.Fprintf(a.io.out, "%s/%s: %s lost (%s; revision %d; ledger entry %d): %s\n", l.Collection, l.ID, who, l.Policy, l.Revision, l.Seq, value)
	}
	_, err := fmt.Fprintf(a.io.out, "%s decided by a policy; to bring a losing value back, put it again ('noydb put COLLECTION ID …')\n",
		plural(len(all), "conflict", "conflicts"))
	return err
}

func (a *app) syncConflictsCmd() *cobra.Command {
	var lost bool
	cmd := &cobra.Command{
		Use:   "conflicts",
		Short: "List the sync conflicts kept for you to resolve, with both sides",
		Long: `Conflicts lists the records whose sync conflict is kept for you (policy
manual): this device's side and the hub's side, each with its revision and
value, or "deleted". Until resolved the device keeps its side and does not
push it. Settle one with 'noydb sync resolve COLLECTION ID --keep
device|hub'. It reads this device's store only.

With --json it prints [{"collection", "id", "device_revision",
"device_deleted", "device", "hub_revision", "hub_deleted", "hub"}], the
values as JSON (null for a deleted side).

With --lost it lists instead the conflicts a policy decided on this device,
oldest first: the record, which side lost, by which policy, and the losing
side's value as it was (the ledger's record of it checks it). With --json:
[{"collection", "id", "seq", "policy", "lost": "device"|"hub", "revision",
"deleted", "value"}].`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a.noHub = true
			v, err := a.openVaultToRead(ctx)
			if err != nil {
				return err
			}
			if lost {
				all, err := lostConflicts(ctx, v)
				if err != nil {
					return err
				}
				return a.printLost(all)
			}
			all, err := keptConflicts(ctx, v)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(all)
			}
			if len(all) == 0 {
				_, err := fmt.Fprintln(a.io.out, "no sync conflicts kept")
				return err
			}
			for _, c := range all {
				fmt.Fprintf(a.io.out, "%s/%s\n", c.Collection, c.ID)
				fmt.Fprintf(a.io.out, "  this device: %s", side(c.DeviceRevision, c.DeviceDeleted))
				if !c.DeviceDeleted {
					fmt.Fprintf(a.io.out, " %s", c.Device)
				}
				fmt.Fprintf(a.io.out, "\n  hub:         %s", side(c.HubRevision, c.HubDeleted))
				if !c.HubDeleted {
					fmt.Fprintf(a.io.out, " %s", c.Hub)
				}
				fmt.Fprintln(a.io.out)
			}
			_, err = fmt.Fprintf(a.io.out, "%s: settle each with 'noydb sync resolve COLLECTION ID --keep device|hub'\n", plural(len(all), "conflict", "conflicts"))
			return err
		},
	}
	cmd.Flags().BoolVar(&lost, "lost", false, "list the conflicts a policy decided, with the losing side's value")
	return cmd
}

func (a *app) syncResolveCmd() *cobra.Command {
	var keep string
	rc := &cobra.Command{
		Use:   "resolve COLLECTION ID --keep device|hub",
		Short: "Settle a kept sync conflict by keeping one side",
		Long: `Resolve settles the sync conflict kept for the record ID of COLLECTION: the
record becomes the side --keep names (this device's, or the hub's; a
deleted side deletes it), written here above both sides' revisions, and the
next 'noydb sync' pushes it. A record without a kept conflict is an error
and nothing changes. It works offline.

With --json it prints {"collection", "id", "kept", "deleted"}.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if keep != "device" && keep != "hub" {
				return usagef("--keep %q: want device or hub", keep)
			}
			coll, id := args[0], args[1]
			a.noHub = true
			v, err := a.openVault(ctx)
			if err != nil {
				return err
			}
			c := records(v, coll)
			dev, hub, err := c.ConflictSides(ctx, id)
			if err != nil {
				return err
			}
			chosen := dev
			if keep == "hub" {
				chosen = hub
			}
			var value *json.RawMessage
			if chosen != nil {
				value = &chosen.Value
			}
			if err := c.Resolve(ctx, id, value); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Collection string `json:"collection"`
					ID         string `json:"id"`
					Kept       string `json:"kept"`
					Deleted    bool   `json:"deleted"`
				}{coll, id, keep, value == nil})
			}
			who := "this device's"
			if keep == "hub" {
				who = "the hub's"
			}
			what := "kept"
			if value == nil {
				what = "deleted the record, as"
			}
			_, err = fmt.Fprintf(a.io.out, "resolved %s/%s: %s %s side; the next 'noydb sync' pushes it\n", coll, id, what, who)
			return err
		},
	}
	rc.Flags().StringVar(&keep, "keep", "", "the side to keep: device or hub")
	return rc
}
