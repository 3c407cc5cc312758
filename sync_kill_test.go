package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// syncKillChildEnv, when set to "<device dir>|<pg url>|<schema>|<kill at>|<hub side>|<settle>",
// makes TestSyncKillChild sync the vault on that device with that hub
// (settle "1": SyncAndSettle, with the receipts' numbering handle open, so
// the kill may strike the numbering pass on the hub too) and send itself
// SIGKILL at its kill-at-th store operation on the hub's side (hub side
// "1") or the device's, just after a write applied or before an operation
// ran (odd kill-at).
const syncKillChildEnv = "NOYDB_SYNC_KILL_CHILD"

// openSyncSession opens vault "shop" on device st synced through hub.
func openSyncSession(ctx context.Context, st, hub stores.Store) (*noydb.DB, *vault.Vault, error) {
	db, err := noydb.Open(ctx, noydb.Config{User: "alice", Secret: []byte("s3cret"), Store: st, Hub: hub,
		KDF: cheapKDF, InsecureAllowWeakKDF: true})
	if err != nil {
		return nil, nil, err
	}
	v, err := db.OpenVault(ctx, "shop")
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, v, nil
}

// TestSyncKillChild is the child of TestSyncSurvivesKill. It prints
// "synced" after its sync returns, then kills itself anyway.
func TestSyncKillChild(t *testing.T) {
	spec := os.Getenv(syncKillChildEnv)
	if spec == "" {
		t.Skip("runs only as the child process of TestSyncSurvivesKill")
	}
	parts := strings.Split(spec, "|")
	if len(parts) != 6 {
		t.Fatalf("bad %s", syncKillChildEnv)
	}
	killAt, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bst := openKillDevice(t, parts[0])
	pg, err := pgstore.Open(ctx, parts[1], &pgstore.Options{Schema: parts[2]})
	if err != nil {
		t.Fatal(err)
	}
	var ops atomic.Int64
	armed := atomic.Bool{}
	hook := func(faultstore.Op, string) error {
		if armed.Load() && ops.Add(1) == killAt {
			killSelf()
		}
		return nil
	}
	opts := faultstore.Options{Before: hook}
	if killAt%2 == 0 {
		opts = faultstore.Options{After: hook}
	}
	var dev, hub stores.Store = bst, pg
	if parts[4] == "1" {
		hub = faultstore.New(pg, opts)
	} else {
		dev = faultstore.New(bst, opts)
	}
	_, v, err := openSyncSession(ctx, dev, hub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipt", sequence.Options{}, setReceiptNumber); err != nil {
		t.Fatal(err)
	}
	sync := v.Sync
	if parts[5] == "1" {
		sync = v.SyncAndSettle
	}
	armed.Store(true)
	if _, err := sync(ctx); err != nil {
		t.Fatal(err)
	}
	fmt.Println("synced")
	killSelf()
}

// openKillDevice opens the device store in dir: a file folder when dir is
// named "folder", else badger.
func openKillDevice(t testing.TB, dir string) stores.Store {
	t.Helper()
	if filepath.Base(dir) == "folder" {
		st, err := filestore.Open(dir, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	return openBadger(t, dir)
}

// TestSyncSurvivesKill: two badger devices and a PostgreSQL hub (see
// syncSurvivesKill).
func TestSyncSurvivesKill(t *testing.T) {
	syncSurvivesKill(t, false)
}

// TestSyncSurvivesKillFileFolder is TestSyncSurvivesKill with the second
// device on a file folder (no transactions: its syncs commit in steps).
func TestSyncSurvivesKillFileFolder(t *testing.T) {
	syncSurvivesKill(t, true)
}

// killSeedEnv names the variable that sets the seed of the kill points
// (and of the operations between them) of syncSurvivesKill; without it
// the seed comes from the clock.
const killSeedEnv = "NOYDB_KILL_SEED"

// killSeed returns the seed set in killSeedEnv, or one from the clock.
func killSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv(killSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "%s", killSeedEnv)
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// killKeepEnv names the variable that says where a failed syncSurvivesKill
// keeps its state (default: the system's temporary folder).
const killKeepEnv = "NOYDB_KILL_KEEP"

// keepKillState arranges that a failed run keeps, outside t.TempDir, a
// copy of the device folders and of the hub's keys and values as they were
// before the final syncs (in before-final/), as they are when the test
// ends (in final/), and every child's output (children.txt), and says
// where with t.Logf. The returned function takes a copy under the name it
// is given now (nil when copies cannot be taken).
func keepKillState(t *testing.T, seed uint64, dirs []string, hub stores.Store, children *strings.Builder, hubBefore *map[string][]byte) func(string) {
	t.Helper()
	stage, err := os.MkdirTemp("", "noydb-kill-stage-")
	if err != nil {
		t.Logf("cannot stage kill state: %v", err)
		return nil
	}
	copyNow := func(name string) {
		for i, dir := range dirs {
			dst := filepath.Join(stage, name, "device"+strconv.Itoa(i))
			if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
				t.Logf("cannot copy device %d: %v", i, err)
			}
		}
	}
	t.Cleanup(func() {
		defer func() { _ = os.RemoveAll(stage) }()
		if !t.Failed() {
			return
		}
		copyNow("final")
		writeHub := func(name string, snap map[string][]byte) {
			var b strings.Builder
			for _, k := range slices.Sorted(maps.Keys(snap)) {
				fmt.Fprintf(&b, "%q %x\n", k, snap[k])
			}
			_ = os.WriteFile(filepath.Join(stage, name, "hub.txt"), []byte(b.String()), 0o600)
		}
		if *hubBefore != nil {
			writeHub("before-final", *hubBefore)
		}
		final := map[string][]byte{}
		for it, err := range hub.List(context.Background(), "") {
			if err != nil {
				break
			}
			final[it.Key] = slices.Clone(it.Value)
		}
		writeHub("final", final)
		_ = os.WriteFile(filepath.Join(stage, "children.txt"), []byte(children.String()), 0o600)
		root := os.Getenv(killKeepEnv)
		if root == "" {
			root = os.TempDir()
		}
		dst := filepath.Join(root, fmt.Sprintf("noydb-kill-%d", seed))
		_ = os.RemoveAll(dst)
		if err := os.Rename(stage, dst); err != nil {
			if err := os.CopyFS(dst, os.DirFS(stage)); err != nil {
				t.Logf("cannot keep the state: %v", err)
				return
			}
		}
		t.Logf("state of the failed run (seed %d) kept in %s", seed, dst)
	})
	return copyNow
}

// syncSurvivesKill: two devices, badger, or badger and a file folder
// (folder), and a PostgreSQL hub. In each
// of 30 rounds, one device (in turn) gets changes on overlapping ids and
// new deferred receipts, written offline (the hub unreachable) from the
// third round on, with edits of receipts it holds and deletions of those
// it holds pending; then a child process syncs it (every other round
// SyncAndSettle: sync, numbering pass on the hub, sync) and is killed with
// SIGKILL at a random store operation of the device or the hub, before or
// just after it applied. After the rounds, a SyncAndSettle of each device
// and syncs without kills converge: both devices and the hub hold the same
// records, every ledger (the hub's too) verifies, and the receipts carry
// exactly 1..K, the same on every device, but for the numbers of a batch
// a killed pass had recorded whose pending receipt was deleted before the
// next pass finished it: those are voided in the hub's ledger, and with
// the receipts' numbers they are 1..K, each once.
//
// The kill points and the operations between them come from a seed, logged
// at the start; NOYDB_KILL_SEED runs a seed again. A failed run keeps its
// device folders, the hub's keys and values (before the final syncs and at
// the end) and every child's output, and logs where (see keepKillState).
func syncSurvivesKill(t *testing.T, folder bool) {
	if testing.Short() {
		t.Skip("kills child processes: slow")
	}
	const rounds = 30
	ctx := context.Background()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	seed := killSeed(t)
	t.Logf("kill points from seed %d (set %s=%d to run them again)", seed, killSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dirs := []string{t.TempDir(), t.TempDir()}
	if folder {
		dirs[1] = filepath.Join(t.TempDir(), "folder")
	}
	var children strings.Builder // every child's output, kept on failure
	var beforeFinal map[string][]byte
	openHub := func() *pgstore.Store {
		pg, err := pgstore.Open(ctx, url, &pgstore.Options{Schema: schema})
		require.NoError(t, err)
		t.Cleanup(func() { _ = pg.Close() })
		return pg
	}
	hub := openHub()
	keep := keepKillState(t, seed, dirs, hub, &children, &beforeFinal)
	// The hub as a device sees it when the network is down.
	down := faultstore.New(hub, faultstore.Options{Before: func(faultstore.Op, string) error {
		return fmt.Errorf("dial tcp 127.0.0.1:5432: connection refused: %w", stores.ErrUnavailable)
	}})
	synced := 0
	for round := range rounds {
		d := round % 2
		st := openKillDevice(t, dirs[d])
		reach := stores.Store(hub)
		if round >= 2 {
			reach = down
		}
		db, v, err := openSyncSession(ctx, st, reach)
		require.NoError(t, err)
		notes := vault.CollectionOf[Note](v, "notes")
		receipts := vault.CollectionOf[Receipt](v, "receipts")
		nr, err := vault.NumberingOf(receipts, "receipt", sequence.Options{}, setReceiptNumber)
		require.NoError(t, err)
		for i := range 3 {
			r, err := nr.Put(ctx, fmt.Sprintf("k%02d-%d", round, i), Receipt{Total: i})
			require.NoError(t, err)
			require.True(t, r.Pending)
		}
		var held []string
		for r, err := range receipts.List(ctx) {
			require.NoError(t, err)
			held = append(held, r.ID)
		}
		for range 2 {
			id := held[rng.IntN(len(held))]
			got, err := nr.Get(ctx, id)
			if errors.Is(err, vault.ErrNotFound) {
				continue // deleted by the first of the two
			}
			require.NoError(t, err)
			if got.Pending && rng.IntN(3) == 0 {
				require.NoError(t, nr.Delete(ctx, id))
				continue
			}
			_, err = nr.Put(ctx, id, Receipt{Total: 100 + round})
			require.NoError(t, err)
		}
		for i := range 20 {
			id := fmt.Sprintf("n%d", rng.IntN(40))
			if rng.IntN(4) == 0 {
				if err := notes.Delete(ctx, id); err != nil {
					require.ErrorIs(t, err, vault.ErrNotFound)
				}
				continue
			}
			require.NoError(t, notes.Put(ctx, id, Note{fmt.Sprintf("r%d-d%d-%d", round, d, i)}))
		}
		require.NoError(t, db.Close())
		require.NoError(t, st.Close())

		killAt := 1 + rng.IntN(10)
		side := strconv.Itoa(rng.IntN(2))
		settle := strconv.Itoa(round % 2)
		if settle == "1" {
			killAt = 1 + rng.IntN(60) // the pass's operations too
		}
		fmt.Fprintf(&children, "== round %d: device %d, kill at %d, hub side %s, settle %s\n", round, d, killAt, side, settle)
		lines := runKilledChild(t, "TestSyncKillChild", round, 0,
			syncKillChildEnv+"="+strings.Join([]string{dirs[d], url, schema, strconv.Itoa(killAt), side, settle}, "|"))
		children.WriteString(strings.Join(lines, "\n") + "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "synced" {
			synced++
		}
	}
	t.Logf("%d of %d children finished their sync before the kill point", synced, rounds)
	beforeFinal = snapshotStore(t, hub)
	if keep != nil {
		keep("before-final")
	}

	var devs []stores.Store
	var vs []*vault.Vault
	var rs []*vault.Numbered[Receipt]
	for _, dir := range dirs {
		st := openKillDevice(t, dir)
		_, v, err := openSyncSession(ctx, st, hub)
		require.NoError(t, err)
		nr, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
		require.NoError(t, err)
		devs = append(devs, st)
		vs = append(vs, v)
		rs = append(rs, nr)
	}
	resumed := 0 // numbers of a batch a killed pass left, finished now
	for round := range 3 {
		for _, v := range vs {
			sync := v.Sync
			if round == 1 {
				sync = v.SyncAndSettle
			}
			rep, err := sync(ctx)
			require.NoError(t, err)
			resumed += rep.Settled["receipt"].Resumed
		}
	}
	got := assertConverged(t, hub, devs, vs...)
	assert.NotEmpty(t, got)
	k := assertReceiptsNumbered(t, hub, devs, rs, seed, true)
	assert.Positive(t, k)
	t.Logf("%d receipts numbered; the final passes finished %d numbers of a killed pass's batch", k, resumed)
}
