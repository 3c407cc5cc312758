// Package noydb is the entry point of the noydb SDK: encrypted collections in
// vaults, gap-free numbered series, and a hash-chained audit ledger, on a store
// of the caller's choice.
//
// # Usage
//
//	db, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: secret})
//	v, err := db.OpenVault(ctx, "books")
//	invoices := vault.CollectionOf[Invoice](v, "invoices")
//	seq, err := v.Sequence("invoice-2026", sequence.Options{})
//	inv, err := invoices.PutNumbered(ctx, "inv-7", seq, build)
//
// A nil Config.Store gives a fresh in-memory store. For data that must
// survive the process use stores/badgerstore (one process, on disk) or
// stores/pgstore (many processes and machines).
//
// # Concurrency
//
// A DB and the vaults it opens are safe for concurrent use.
package noydb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Errors returned by Open and OpenVault; test them with errors.Is.
var (
	// ErrWrongSecret: the secret does not unlock the vault for this user.
	ErrWrongSecret = vault.ErrWrongSecret
	// ErrNoAccess: the vault holds no key for this user.
	ErrNoAccess = vault.ErrNoAccess
	// ErrWeakKDF: the vault header's key-derivation cost is out of bounds.
	ErrWeakKDF = vault.ErrWeakKDF
	// ErrKDFTooCostly: the key-derivation cost is above Config.MaxKDF; it
	// comes with ErrWeakKDF, before any derivation.
	ErrKDFTooCostly = vault.ErrKDFTooCostly
	// ErrTampered: stored data failed authentication.
	ErrTampered = vault.ErrTampered
	// ErrClosed: the DB (or the vault) was closed. Every handle obtained from
	// it (sequences, the audit view, numbering series, collections) refuses with it.
	ErrClosed = stores.ErrClosed
	// ErrInvalidName: a vault, collection or user name is empty, too long,
	// not valid UTF-8, or holds '/' or a control character.
	ErrInvalidName = vault.ErrInvalidName
	// ErrReservedName: a name starts with '_', kept for the SDK's own data.
	ErrReservedName = vault.ErrReservedName
	// ErrRollback: the store served a counter or a ledger older than this
	// device has already seen (a restored snapshot, a dropped tail). Nothing
	// is issued or trusted from it.
	ErrRollback = pins.ErrRollback
	// ErrVaultLost: with a StateDir, the store holds no vault by a name this
	// device has used, or another vault under that name (a replaced header).
	// It also matches ErrRollback. DB.ForgetVault accepts the loss.
	ErrVaultLost = vault.ErrVaultLost
	// ErrStateLost: the StateDir records that this device used the vault but
	// its pins there are missing or damaged beyond the last good copy.
	// Restore the folder, or call DB.ForgetVault to start over.
	ErrStateLost = vault.ErrStateLost
	// ErrPinsNotSaved: a pin could not be written to the StateDir (disk full
	// or failing, folder removed). The call whose pin failed returns it, with
	// the number it took when it took one, and so does every later call of
	// the vault until it is reopened on a working folder.
	ErrPinsNotSaved = vault.ErrPinsNotSaved
	// ErrUnsafeStateFolder: the StateDir, or a file in it, is a symbolic
	// link, not a folder, or owned by another user: refused, with the
	// reason (a *vault.StateFolderError). A StateDir the user owns is
	// tightened to mode 0700.
	ErrUnsafeStateFolder = vault.ErrUnsafeStateFolder
	// ErrBadRecoveryCode: DB.RecoverVault was given text that is not a
	// recovery code (a typo, caught by its checksum before any key work).
	ErrBadRecoveryCode = vault.ErrBadRecoveryCode
	// ErrRecoveryCodeUsed: the recovery code opened the vault once already.
	ErrRecoveryCodeUsed = vault.ErrRecoveryCodeUsed
	// ErrRecoveryCodeRefused: the recovery code was revoked, replaced by a
	// later set, or never issued to this user.
	ErrRecoveryCodeRefused = vault.ErrRecoveryCodeRefused
	// ErrUnpinned marks, among errors matching ErrPinsNotSaved, those of a
	// call that committed (its number taken, its record written) although the
	// pin covering it was not saved; later calls, refused before writing, do
	// not match it.
	ErrUnpinned = vault.ErrUnpinned
)

// Config configures a DB. The zero value of every optional field means the
// documented default.
type Config struct {
	// User names the caller's key slot in each vault and the actor in ledgers. Required.
	User string
	// Secret unlocks the user's key slots. Required unless Identity is set.
	// Open keeps a copy until Close. DB.RecoverVault sets it as the new
	// secret of the vault it recovers.
	Secret []byte
	// Identity unlocks the key slots of a user granted to an X25519 public
	// key (vault.PublicKey; see vault.Config.Identity), without a secret.
	// It stays the caller's: the DB does not wipe it.
	Identity *crypto.Identity
	// Store holds the vaults. Nil means a fresh in-memory store, closed by DB.Close;
	// a store given here stays open after DB.Close and is the caller's to close.
	Store stores.Store
	// KDF is the key-derivation cost for vaults this DB creates; the zero value
	// means crypto.DefaultKDF (Argon2id, t=3, 64 MiB, p=4).
	KDF crypto.KDFParams
	// MaxKDF is the most key derivation OpenVault pays for: a vault header
	// (which the store can rewrite) asking for more time, memory or threads
	// is refused with ErrKDFTooCostly before any derivation. A zero field
	// means the field of crypto.DefaultMaxKDF (10 passes, 1 GiB, 16 threads).
	MaxKDF crypto.KDFParams
	// InsecureAllowWeakKDF accepts key-derivation costs below the safe minimum.
	// For tests only: with it a store can make guessing the secret cheap.
	InsecureAllowWeakKDF bool
	// StateDir is a device-local folder, outside the store, where the SDK
	// keeps sealed rollback pins: per vault, the highest number this device
	// saw per series and the last ledger head it saw. A store that later
	// serves anything older makes Next and ledger reads fail with
	// ErrRollback. Empty keeps the pins in memory, for the life of the
	// opened vault: a vault closed and opened again starts with none.
	//
	// The folder also records which vaults this device has used: a store
	// that later loses one (wiped, or its header replaced) fails OpenVault
	// with ErrVaultLost instead of silently starting over; DB.ForgetVault is
	// the explicit way to start over. A number is returned only once the pin
	// covering it is on disk (fsynced; concurrent callers share one write);
	// if that write fails, the number comes with an error wrapping
	// ErrPinsNotSaved.
	// Use one StateDir per store (processes of one device may share it).
	StateDir string
	// Hub, if set, makes every vault opened a device of that hub: a store
	// with atomic compare-and-swap that devices sync through (see
	// vault.Config.Hub). The hub stays the caller's to close.
	Hub stores.Store
	// HubTimeout bounds each operation of the hub; see vault.Config.HubTimeout.
	HubTimeout time.Duration
}

// DB is an open connection to a store on behalf of one user. It is safe for
// concurrent use.
type DB struct {
	cfg       Config
	ownsStore bool

	// closing ends when Close starts; opens in flight run under it, so Close
	// does not wait for a key derivation that has not started yet.
	closing     context.Context
	startClose  context.CancelFunc
	openersDone sync.WaitGroup

	mu        sync.Mutex
	vaults    map[string]*vault.Vault
	opening   map[string]*opening // opens in flight, by name
	closed    bool
	closeDone chan struct{} // closed once Close has closed everything
}

// opening is one OpenVault in flight: callers asking for the same name while
// it runs wait for it instead of unlocking the vault a second time.
type opening struct {
	done    chan struct{} // closed when v and err are set
	v       *vault.Vault
	err     error
	waiting int // callers waiting for it (under DB.mu; for tests)
}

// Open checks cfg and returns a DB. It does no I/O: vaults are unlocked by OpenVault.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cfg.User == "" {
		return nil, errors.New("open: Config.User is empty")
	}
	if len(cfg.Secret) == 0 && cfg.Identity == nil {
		return nil, errors.New("open: Config.Secret is empty (and no Config.Identity)")
	}
	if cfg.KDF != (crypto.KDFParams{}) {
		if err := cfg.KDF.Check(cfg.InsecureAllowWeakKDF); err != nil {
			return nil, fmt.Errorf("open: %w: %w", ErrWeakKDF, err)
		}
		if err := cfg.KDF.CheckCeiling(cfg.MaxKDF); err != nil {
			return nil, fmt.Errorf("open: Config.KDF: %w: %w", ErrWeakKDF, err)
		}
	}
	db := &DB{cfg: cfg, vaults: make(map[string]*vault.Vault), opening: make(map[string]*opening)}
	db.closing, db.startClose = context.WithCancel(context.Background())
	db.cfg.Secret = append([]byte(nil), cfg.Secret...)
	if db.cfg.Store == nil {
		db.cfg.Store = memstore.New()
		db.ownsStore = true
	}
	return db, nil
}

// Store returns the store the DB works on.
func (db *DB) Store() stores.Store { return db.cfg.Store }

// OpenVault unlocks the named vault, creating it on first use. Opening the
// same name twice returns the same *vault.Vault, so its sequences share one
// combining queue per series; callers asking for a name while it is being
// opened wait for that one unlock (or for their ctx) and share its result.
// Opens of different names run in parallel: the DB is not held during the
// key derivation. A vault closed with its own Close leaves the DB: the next
// OpenVault of its name opens it anew, at once (its series go on where they
// stopped), and OpenVault never returns a closed vault.
func (db *DB) OpenVault(ctx context.Context, name string) (*vault.Vault, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		db.mu.Lock()
		if db.closed {
			db.mu.Unlock()
			return nil, fmt.Errorf("open vault %q: %w", name, ErrClosed)
		}
		db.dropClosedLocked()
		if v, ok := db.vaults[name]; ok {
			if !v.Closed() {
				db.mu.Unlock()
				return v, nil
			}
			// Closed with its own Close, which is still ending: open it anew
			// without waiting (a call in flight on it, which that Close
			// waits for, may be the one asking). The two handles share the
			// store as two DBs would.
			delete(db.vaults, name)
		}
		if op, ok := db.opening[name]; ok {
			op.waiting++
			db.mu.Unlock()
			select {
			case <-op.done:
			case <-ctx.Done():
				db.mu.Lock()
				op.waiting--
				db.mu.Unlock()
				return nil, ctx.Err()
			}
			if op.err == nil || !isContextErr(op.err) {
				if op.err == nil && op.v.Closed() {
					continue // closed already: open it anew
				}
				return op.v, op.err
			}
			// The caller that led the open gave up; try again with ours.
			continue
		}
		op := &opening{done: make(chan struct{})}
		db.opening[name] = op
		db.openersDone.Add(1)
		db.mu.Unlock()
		db.lead(ctx, name, op, "")
		return op.v, op.err
	}
}

// RecoverVault opens the named vault with one of the user's recovery
// codes (vault.Vault.RecoveryCodes) instead of a lost secret, and makes
// Config.Secret, which the DB was opened with, the vault's new secret: the
// code is used up, the old secret no longer opens the vault, and the
// returned vault is open in the DB as OpenVault would return it. A
// mistyped code is an error matching vault.ErrBadRecoveryCode (before
// any key derivation), a used one vault.ErrRecoveryCodeUsed, a revoked or
// unknown one vault.ErrRecoveryCodeRefused. A vault open (or being
// opened) in this DB is not recovered (vault.ErrInvalidArgument): the DB
// holds its key already. A DB opened with an Identity and no Secret has no
// new secret to set (vault.ErrInvalidArgument).
func (db *DB) RecoverVault(ctx context.Context, name, code string) (*vault.Vault, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(db.cfg.Secret) == 0 {
		return nil, fmt.Errorf("recover vault %q: %w: the DB has no Config.Secret to set", name, vault.ErrInvalidArgument)
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, fmt.Errorf("recover vault %q: %w", name, ErrClosed)
	}
	db.dropClosedLocked()
	_, inFlight := db.opening[name]
	if v, ok := db.vaults[name]; inFlight || (ok && !v.Closed()) {
		db.mu.Unlock()
		return nil, fmt.Errorf("recover vault %q: %w: it is open in this DB", name, vault.ErrInvalidArgument)
	}
	delete(db.vaults, name)
	op := &opening{done: make(chan struct{})}
	db.opening[name] = op
	db.openersDone.Add(1)
	db.mu.Unlock()
	if code == "" {
		code = "\x00" // an empty code is a bad code, not an open with the secret
	}
	db.lead(ctx, name, op, code)
	return op.v, op.err
}

// ChangeSecret changes the user's secret of the named vault from old to
// new (see vault.Vault.ChangeSecret): old must open it (ErrWrongSecret
// otherwise), new must not be empty. It uses the vault open in the DB, or
// opens it with old for the call. Afterwards old no longer opens the
// vault, here and, after Sync, on every device; the DB keeps its
// Config.Secret for its other vaults, so a DB opened later opens this
// vault with new.
func (db *DB) ChangeSecret(ctx context.Context, vaultName string, old, new []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return fmt.Errorf("change secret of vault %q: %w", vaultName, ErrClosed)
	}
	v, ok := db.vaults[vaultName]
	if ok && v.Closed() {
		v, ok = nil, false
	}
	db.mu.Unlock()
	if ok {
		return v.ChangeSecret(ctx, old, new)
	}
	if len(old) == 0 {
		return fmt.Errorf("change secret of vault %q: empty old secret: %w", vaultName, ErrWrongSecret)
	}
	cfg := db.vaultConfig(vaultName)
	cfg.Secret, cfg.Identity = old, nil
	v, err := vault.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("change secret of vault %q: %w", vaultName, err)
	}
	err = v.ChangeSecret(ctx, old, new)
	return errors.Join(err, v.Close())
}

// vaultConfig is the vault.Config of the named vault for this DB.
func (db *DB) vaultConfig(name string) vault.Config {
	return vault.Config{
		Store:                db.cfg.Store,
		Name:                 name,
		User:                 db.cfg.User,
		Secret:               db.cfg.Secret,
		Identity:             db.cfg.Identity,
		KDF:                  db.cfg.KDF,
		MaxKDF:               db.cfg.MaxKDF,
		InsecureAllowWeakKDF: db.cfg.InsecureAllowWeakKDF,
		StateDir:             db.cfg.StateDir,
		Hub:                  db.cfg.Hub,
		HubTimeout:           db.cfg.HubTimeout,
	}
}

// lead unlocks the vault for op and publishes the result to the callers
// waiting for it. A non-empty code opens with that recovery code, setting
// the DB's secret as the vault's new one.
func (db *DB) lead(ctx context.Context, name string, op *opening, code string) {
	defer db.openersDone.Done()
	openCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(db.closing, cancel)
	cfg := db.vaultConfig(name)
	if code != "" {
		cfg.RecoveryCode, cfg.NewSecret, cfg.Secret, cfg.Identity = code, cfg.Secret, nil, nil
	}
	v, err := vault.Open(openCtx, cfg)
	stop()
	cancel()

	db.mu.Lock()
	delete(db.opening, name)
	closed := db.closed
	if err == nil && !closed {
		db.vaults[name] = v
	}
	db.mu.Unlock()
	if closed {
		// Close started meanwhile: it does not see this vault, so close it
		// here (Close waits for this call) and report the DB closed.
		if err == nil {
			_ = v.Close()
		}
		v, err = nil, fmt.Errorf("open vault %q: %w", name, ErrClosed)
	}
	op.v, op.err = v, err
	close(op.done)
}

// dropClosedLocked forgets the vaults whose own Close has ended, so the DB
// does not keep them. The caller holds db.mu.
func (db *DB) dropClosedLocked() {
	for name, v := range db.vaults {
		if v.CloseEnded() {
			delete(db.vaults, name)
		}
	}
}

// isContextErr reports whether err is a context's cancellation or deadline.
func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Close closes every vault opened through db, forgets the secret, and closes
// the store if Open created it. Close is idempotent, and safe to call
// concurrently: every caller returns once the DB is closed, the first with
// the errors of closing.
//
// Opens in flight are cancelled (their callers get ErrClosed) and Close
// waits for them, at most one key derivation. The vaults are closed without
// holding the DB, so a call in flight on one of them, which its Close waits
// for, may still call the DB (and is refused with ErrClosed) instead of
// deadlocking.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		done := db.closeDone
		db.mu.Unlock()
		<-done
		return nil
	}
	db.closed = true
	db.closeDone = make(chan struct{})
	defer close(db.closeDone)
	vaults := make([]*vault.Vault, 0, len(db.vaults))
	for _, v := range db.vaults {
		vaults = append(vaults, v)
	}
	db.mu.Unlock()
	db.startClose()
	db.openersDone.Wait()
	db.mu.Lock()
	clear(db.cfg.Secret)
	db.mu.Unlock()

	var errs []error
	for _, v := range vaults {
		errs = append(errs, v.Close())
	}
	if db.ownsStore {
		errs = append(errs, db.cfg.Store.Close())
	}
	return errors.Join(errs...)
}

// Format implements fmt.Formatter so that no verb (%v, %+v, %#v, %s, %x,
// ...) prints the secret: it shows the user, the store's type, the costs and
// the state folder, and "REDACTED" for the secret.
func (c Config) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, c.String())
}

// String describes c without its secret.
func (c Config) String() string {
	return fmt.Sprintf("noydb.Config{User: %q, Secret: REDACTED, Store: %s, KDF: %+v, MaxKDF: %+v, StateDir: %q}",
		c.User, storeType(c.Store), c.KDF, c.MaxKDF, c.StateDir)
}

// GoString is String, so %#v does not print the secret either.
func (c Config) GoString() string { return c.String() }

// Format implements fmt.Formatter so that no verb prints the secret the DB
// keeps: it shows the user and the store's type only.
func (db *DB) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, db.String())
}

// String describes db without its secret.
func (db *DB) String() string {
	if db == nil {
		return "noydb.DB(nil)"
	}
	return fmt.Sprintf("noydb.DB{User: %q, Secret: REDACTED, Store: %s}", db.cfg.User, storeType(db.cfg.Store))
}

// GoString is String, so %#v does not print the secret either.
func (db *DB) GoString() string { return db.String() }

// storeType names a store by its type only: a store's fields may hold
// credentials (a DSN with a password).
func storeType(st stores.Store) string {
	if st == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", st)
}

// ForgetVault erases what this device knows of the named vault from
// Config.StateDir: the record that it used the vault and its rollback pins.
// Call it only to accept, after OpenVault failed with ErrVaultLost or
// ErrStateLost, that the vault was really deleted or re-created (the next
// OpenVault creates or adopts it as on first use, and rollback protection
// starts over from what the store then holds). It fails while the vault is
// open (a vault closed with its own Close is not); without a StateDir it
// does nothing.
func (db *DB) ForgetVault(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return fmt.Errorf("forget vault %q: %w", name, ErrClosed)
	}
	if _, ok := db.opening[name]; ok {
		return fmt.Errorf("forget vault %q: it is being opened in this DB", name)
	}
	if v, ok := db.vaults[name]; ok {
		if !v.Closed() {
			return fmt.Errorf("forget vault %q: it is open in this DB", name)
		}
		if !v.CloseEnded() {
			// Its pins may still be being written; waiting here could wait
			// for the caller itself (a call in flight on that vault).
			return fmt.Errorf("forget vault %q: it is still closing; try again once its Close returned", name)
		}
		delete(db.vaults, name)
	}
	if db.cfg.StateDir == "" {
		return nil
	}
	return vault.Forget(db.cfg.StateDir, name)
}
