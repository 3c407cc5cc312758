package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitInterrupt is 128+SIGINT, what a shell reports for a command an
	// interrupt ended.
	exitInterrupt = 130
	// exitOffline: the hub could not be reached, so a command that needs
	// it (sync, numbers on a device) did nothing; try again later.
	exitOffline = 3
)

// Environment variables the command reads.
const (
	envSecret = "NOYDB_SECRET"
	// envRecoveryCode is read only when recovering (--recover, 'vault
	// recover'), so a stale one cannot take over every command.
	envRecoveryCode = "NOYDB_RECOVERY_CODE"
	envStore        = "NOYDB_STORE"
	envVault        = "NOYDB_VAULT"
	envUser         = "NOYDB_USER"
	envTestKDF      = "NOYDB_INSECURE_TEST_KDF"
	envStateDir     = "NOYDB_STATE_DIR"
	defaultUser     = "owner"
	// defaultWait is --wait's default: long enough for another command's
	// write to finish, short enough to tell a stuck store.
	defaultWait = 5 * time.Second
)

// testKDF is the cost NOYDB_INSECURE_TEST_KDF selects: cheap enough for a
// test suite that opens a vault in every command.
var testKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

// stdio is where a run reads and writes, and what it knows of the terminal.
type stdio struct {
	in           io.Reader
	out, err     io.Writer
	inTerminal   bool // standard input is a terminal (secret prompts)
	errTerminal  bool // standard error is a terminal (progress bars)
	readPassword func() ([]byte, error)
	lookupEnv    func(string) (string, bool)
	// userConfigDir is the per-user configuration folder, which holds the
	// config file (os.UserConfigDir).
	userConfigDir func() (string, error)
	// userStateDir is the per-user state folder, under which the state
	// folders (rollback pins) live by default (see userStateDir).
	userStateDir func() (string, error)
	// userDataDir is the per-user data folder, under which the default
	// store lives (see userDataDir).
	userDataDir func() (string, error)
}

func osStdio() stdio {
	inFD, errFD := int(os.Stdin.Fd()), int(os.Stderr.Fd())
	return stdio{
		in:            os.Stdin,
		out:           os.Stdout,
		err:           os.Stderr,
		inTerminal:    term.IsTerminal(inFD),
		errTerminal:   term.IsTerminal(errFD),
		readPassword:  func() ([]byte, error) { return term.ReadPassword(inFD) },
		lookupEnv:     os.LookupEnv,
		userConfigDir: os.UserConfigDir,
		userDataDir:   func() (string, error) { return userDataDir(runtime.GOOS, os.LookupEnv, os.UserHomeDir) },
		userStateDir:  func() (string, error) { return userStateDir(runtime.GOOS, os.LookupEnv, os.UserHomeDir) },
	}
}

// app holds the global flags of one run and what it opened.
type app struct {
	io stdio

	storeSpec string
	// noDefaultStore says why there is no default store, when --store and
	// $NOYDB_STORE are both unset and the user has no data folder.
	noDefaultStore error
	vaultName      string
	// user is --user, else $NOYDB_USER; "" until pickUser settles it.
	// userFrom says where pickUser found it, for init's confirmation.
	user, userFrom string
	// flags are the global flags, to tell a --user '' from none.
	flags      *pflag.FlagSet
	secretFile string
	// insecureSecretFile accepts a --secret-file open to group or others.
	insecureSecretFile bool
	stateRoot          string
	json               bool
	// wait is how long a command waits for a store another process holds
	// (--wait); waited says that it waited that long in vain.
	wait   time.Duration
	waited bool
	// create lets the command create a vault that does not exist (--create;
	// init sets it); created says that openVault did.
	create, created bool
	// fetched says that openVault opened a vault this device did not hold
	// from its hub (its header and keyring; 'noydb sync' brings records).
	fetched bool
	// joined says that openVault put the vault on its hub: a new vault
	// created on both, or one this device held alone until now.
	joined bool
	// ownsHubNote: the command says itself that the vault was fetched or
	// joined its hub (init, sync), so openVault prints no note about it.
	ownsHubNote bool
	// role is the role of --user in the vault openVault opened, "" before.
	role string
	// quietOffline drops the note that the hub cannot be reached ('noydb
	// sync' fails with it instead).
	quietOffline bool
	// readOnly: the command only reads (openVaultToRead sets it), so the
	// store is opened read-only where the kind allows.
	readOnly bool
	// shortLived: the command reads or writes a record or a number and
	// ends (shortCommand).
	shortLived bool

	// fixedSecret, when set, is used instead of asking for one (the demo's
	// own secret, a throwaway for a benchmark in memory).
	fixedSecret []byte
	// identityFile is --identity-file: open with an X25519 identity
	// instead of a secret (recovery.go).
	identityFile string
	// recover is --recover (set by 'vault recover' and by
	// --recovery-code-file too): open with a recovery code instead of the
	// secret, setting a new secret: fixedSecret ('vault recover'), else
	// read from recoverySecretFile (--recovery-new-secret-file) or asked
	// twice. The code comes from recoveryCodeFile, else
	// $NOYDB_RECOVERY_CODE, else a no-echo prompt; recoveryCode is the
	// code once read and checked (recovery.go).
	recoverFlag        bool
	recoveryCodeFile   string
	recoveryCode       string
	recoverySecretFile string
	// oldRecoveryCode is the removed --recovery-code CODE, kept hidden to
	// send whoever types it to the new way (recovery.go).
	oldRecoveryCode string
	// quietMem drops the note that mem: keeps nothing (the demo says it itself).
	quietMem bool

	// deriveForAgent: 'noydb unlock' opens with the identity it derives
	// from the secret (vault.DeriveIdentity), kept in unlocked for the
	// agent. agentID is the identity an agent gave (agent.go), nil when
	// the command derived the key itself.
	deriveForAgent bool
	unlocked       *crypto.Identity
	agentID        *crypto.Identity

	// config is the config file's settings; configErr says why it could
	// not be read (every command but config then fails with it).
	config    configFile
	configErr error

	store stores.Store
	spec  storeSpec
	db    *noydb.DB

	// hubSpec is --hub ($NOYDB_HUB, the config file's hub): the store this
	// device syncs through, "" for none; hub is what openHub made of it.
	hubSpec string
	hub     *hubState
	// noHub: the command reads or writes this device's store only (sync
	// status, conflicts), so the hub is not opened.
	noHub bool
	// offlineHint is what explain adds to "offline" (default: about numbers).
	offlineHint string
	// writeTime: the command numbers a record as it writes it (put --seq
	// with a period, partition, date or correction), which passes cannot.
	writeTime bool
	// syncBar is the progress bar of the sync phase under way.
	syncBar *progressBar
	// clock, when set, is the progress bars' clock (tests); else time.Now.
	clock func() time.Time
}

func (a *app) env(name string) string {
	v, _ := a.io.lookupEnv(name)
	return v
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// run executes one command line and returns its exit status.
func run(ctx context.Context, args []string, sio stdio) int {
	a := &app{io: sio}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetIn(sio.in)
	root.SetOut(sio.out)
	root.SetErr(sio.err)
	cmd, err := root.ExecuteContextC(ctx)
	if cerr := a.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		return exitOK
	}
	// ctx ends only on an interrupt (main cancels it on the first SIGINT):
	// a command that failed after one was stopped by it.
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		msg := "interrupted"
		if !errors.Is(err, context.Canceled) {
			msg += ": " + a.explain(err)
		}
		fmt.Fprintf(sio.err, "noydb: %s\n", a.scrub(oneLine(msg)))
		return exitInterrupt
	}
	if isUsage(err) {
		see := "'" + cmd.CommandPath() + " --help'"
		if ve := (*sequence.ValidationError)(nil); errors.As(err, &ve) && ve.Field == "format" {
			see = "'noydb help formats'"
		}
		fmt.Fprintf(sio.err, "%s: %s (see %s)\n", cmd.CommandPath(), a.scrub(oneLine(err.Error())), see)
		return exitUsage
	}
	fmt.Fprintf(sio.err, "noydb: %s\n", a.scrub(oneLine(a.explain(err))))
	if a.isOffline(err) {
		return exitOffline
	}
	return exitFailure
}

// scrub hides in a message every password of --store and --hub, whatever
// form they were written in: the last guard of what an error prints, after
// each location was already printed redacted (redactLocation).
func (a *app) scrub(msg string) string {
	return scrubSecrets(msg, a.storeSpec, a.hubSpec)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "noydb",
		Short: "Encrypted vaults with gap-free numbering and an audit ledger",
		Long: `noydb works with noydb vaults: encrypted records in collections, gap-free
numbered series (1, 2, 3 … never a number skipped or issued twice), and a
hash-chained audit ledger that can be verified.

Start with 'noydb demo': it needs no setup. 'noydb init' creates a vault;
every other command refuses a vault that does not exist (naming the vaults
the store holds) unless --create is given, so a misspelt --vault never
starts a series again from 1.

Where the data is (--store, or $NOYDB_STORE):
  badger:DIR         BadgerDB on disk, one process at a time (another waits
                     up to --wait, 5s by default, for it); the default is
                     badger:<user data folder>/noydb/store, one store per
                     person whatever the working folder ($XDG_DATA_HOME or
                     ~/.local/share on Linux, ~/Library/Application Support
                     on macOS, %LocalAppData% on Windows)
  file:DIR           one file per record, safe in a synced folder; no atomic
                     compare-and-swap, so numbers come from 'noydb number'
  mem:               in memory, gone when the command ends (for bench and demo)
  postgres://…       PostgreSQL, shared by many processes and machines;
                     tables in schema "noydb", or the one named by a
                     schema=NAME parameter

This device remembers, per store, the highest number it has seen in each
series, the ledger head, and which vaults it has used, in a state folder
outside the store: a store restored from an old backup, wiped, or with a
vault replaced is then refused instead of issuing numbers again. The folder
is <state root>/<hash of the store's location>; the root is --state-dir, or
$NOYDB_STATE_DIR, or noydb in the user's state folder ($XDG_STATE_HOME or
~/.local/state on Linux; the data folder elsewhere). mem: stores keep no
state. After a store was really deleted or re-created, 'noydb forget'
erases what this device knew of the vault.

The secret is read from $NOYDB_SECRET, from the file named by --secret-file,
or from a prompt (no echo) when standard input is a terminal. It is never
taken from a flag value and never printed. A --secret-file that group or
others may read or write is refused (chmod 600 it), as ssh refuses such
keys, unless --insecure-secret-file is given.

A lost secret: --recover opens with a one-time recovery code instead (see
'noydb vault recover'), read like a secret: from --recovery-code-file
(checked the same way), else $NOYDB_RECOVERY_CODE, else a prompt (no
echo); never from a flag value. The new secret comes from
--recovery-new-secret-file or is asked twice.

Local-first sync (--hub, or $NOYDB_HUB): each device keeps the vault on its
own --store and converges with a hub, another store (badger:DIR or a
postgres:// URL) that holds only sealed values: 'noydb sync' pulls and
pushes, 'noydb sync status' tells what waits, and numbers are taken on the
hub, so they stay gap-free across devices. Records are always written on
the device first, online or not; what needs the hub says "offline" when it
cannot be reached. See 'noydb sync --help'.

Defaults for --store, --hub, --vault, --user, --state-dir and --wait may be
kept in a config file, noydb/config in the user's configuration folder
(~/.config on Linux) or the file $NOYDB_CONFIG names: 'noydb config set
store badger:/srv/books' writes it, 'noydb config' shows what is used and
why.
A flag beats its environment variable, which beats the config file.

Commands accept --json for scripts; every write confirms what it did in
one line, or one JSON object with --json. Exit status: 0 on success, 1 on
failure, 2 on a usage error, 3 when the hub could not be reached (offline:
nothing was done), 130 when an interrupt (Ctrl-C) stopped it.

For tests only: NOYDB_INSECURE_TEST_KDF=1 creates and accepts vaults with a
cheap key-derivation cost. Never set it for real data.`,
		Args:          a.noArgs,
		RunE:          a.groupRun,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       version(),
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	// A command with subcommands runs only to report a usage error, so its
	// usage shows "noydb seq [command]", not "noydb seq [flags]".
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	root.SetFlagErrorFunc(a.flagError)

	a.config, a.configErr = a.loadConfig()
	// setting is a global flag's default: its environment variable, else the
	// config file's value, else def.
	setting := func(env, key, def string) string {
		if v := a.env(env); env != "" && v != "" {
			return v
		}
		if v := a.config.values[key]; v != "" {
			return v
		}
		return def
	}
	storeDefault := setting(envStore, "store", "")
	if storeDefault == "" {
		storeDefault, a.noDefaultStore = a.defaultStore()
	}
	vaultDefault := setting(envVault, "vault", "default")
	waitDefault := defaultWait
	if w := a.config.values["wait"]; w != "" {
		waitDefault, _ = time.ParseDuration(w) // checked by loadConfig
	}
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if a.configErr != nil && cmd.Name() != "config" && (cmd.Parent() == nil || cmd.Parent().Name() != "config") {
			return a.configErr
		}
		return a.checkOldRecoveryFlag() // recovery.go
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.storeSpec, "store", storeDefault, "where the data is: badger:DIR, file:DIR, mem: or a postgres:// URL ($"+envStore+"; default a badger store in the user data folder)")
	// Help shows the default: a PostgreSQL URL from $NOYDB_STORE or the
	// config file without its password.
	pf.Lookup("store").DefValue = redactLocation(storeDefault)
	pf.StringVar(&a.vaultName, "vault", vaultDefault, "vault name ($"+envVault+")")
	pf.StringVar(&a.hubSpec, "hub", setting(envHub, "hub", ""), "the hub this device syncs through and takes numbers from: badger:DIR or a postgres:// URL ($"+envHub+"; default none)")
	pf.Lookup("hub").DefValue = redactLocation(pf.Lookup("hub").DefValue)
	pf.StringVar(&a.user, "user", setting(envUser, "user", ""), "user whose key opens the vault ($"+envUser+"; default the vault's only user, and $USER for a new vault)")
	a.flags = pf
	pf.StringVar(&a.secretFile, "secret-file", "", "read the secret from this file (else $"+envSecret+", else a prompt)")
	pf.StringVar(&a.identityFile, "identity-file", "", "open with the X25519 identity in this file (see 'noydb vault keygen') instead of a secret")
	pf.BoolVar(&a.recoverFlag, "recover", false, "open with a one-time recovery code instead of the lost secret, and set a new secret; the code comes from --recovery-code-file, else $"+envRecoveryCode+", else a prompt (see 'noydb vault recover')")
	pf.StringVar(&a.recoveryCodeFile, "recovery-code-file", "", "read the recovery code from this file (checked like --secret-file); implies --recover")
	pf.StringVar(&a.recoverySecretFile, "recovery-new-secret-file", "", "with --recover: read the new secret from this file (else it is asked twice)")
	pf.StringVar(&a.oldRecoveryCode, "recovery-code", "", "removed: use --recover")
	_ = pf.MarkHidden("recovery-code")
	pf.BoolVar(&a.insecureSecretFile, "insecure-secret-file", false, "accept a --secret-file (or --recovery-code-file, --identity-file, a new-secret file) that group or others may read or write")
	pf.StringVar(&a.stateRoot, "state-dir", setting(envStateDir, "state-dir", ""), "root of this device's state folders (rollback pins), one per store ($"+envStateDir+"; default noydb in the user state folder)")
	pf.BoolVar(&a.create, "create", false, "create the vault if it does not exist (else only 'noydb init' does)")
	pf.BoolVar(&a.json, "json", false, "print machine-readable JSON")
	pf.DurationVar(&a.wait, "wait", waitDefault, "how long to wait for a store another process is using (badger: serves one process at a time); 0 fails at once")

	root.AddGroup(
		&cobra.Group{ID: "records", Title: "Records:"},
		&cobra.Group{ID: "people", Title: "People, keys and sync:"},
		&cobra.Group{ID: "numbers", Title: "Numbering and audit:"},
		&cobra.Group{ID: "tools", Title: "Tools:"},
	)
	initCmd := a.initCmd()
	initCmd.GroupID = "records"
	root.AddCommand(initCmd)
	for _, c := range append(a.recordCmds(), a.importCmd()) {
		c.GroupID = "records"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.peopleCmd(), a.vaultCmd()} { // people.go
		c.GroupID = "people"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.seqCmd(), a.numberCmd(), a.ledgerCmd()} {
		c.GroupID = "numbers"
		root.AddCommand(c)
	}
	syncCmd := a.syncCmd()
	syncCmd.GroupID = "people"
	root.AddCommand(syncCmd)
	for _, c := range []*cobra.Command{a.unlockCmd(), a.lockCmd()} {
		c.GroupID = "people"
		root.AddCommand(c)
	}
	root.AddCommand(a.agentServeCmd())
	for _, c := range []*cobra.Command{a.benchCmd(), a.demoCmd(), a.configCmd(), a.forgetCmd()} {
		c.GroupID = "tools"
		root.AddCommand(c)
	}
	root.AddCommand(formatsTopic())
	root.SetHelpCommand(a.helpCmd())
	root.SetHelpCommandGroupID("tools")
	root.SetCompletionCommandGroupID("tools")
	return root
}

// version is what --version prints after "noydb version ".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module support)"
	}
	return buildVersion(bi)
}

// buildVersion renders the main module's version ("(devel)" when built from
// a checkout) and the VCS revision the build was stamped with, if any.
func buildVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += ", revision " + rev
		if modified == "true" {
			v += " with local changes"
		}
	}
	return v
}

// helpCmd is cobra's help command, except that a topic which names no
// command is a usage error (exit 2) rather than the top-level help.
func (a *app) helpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Print the help of any command: noydb help seq next.",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil {
				return &usageError{msg: err.Error()}
			}
			if len(rest) > 0 {
				if err := a.noArgs(cmd, rest); err != nil {
					return err
				}
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

// groupRun runs a command that only groups subcommands: with no arguments it
// prints its help and fails as a usage error, as 'go mod' does.
func (a *app) groupRun(cmd *cobra.Command, args []string) error {
	cmd.SetOut(a.io.err)
	_ = cmd.Help()
	return usagef("missing command")
}

// noArgs rejects arguments of a command that has subcommands, naming the
// nearest command when there is one.
func (a *app) noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return &usageError{msg: msg}
}

// exactArgs wants n positional arguments, named in use for the message.
func exactArgs(n int) cobra.PositionalArgs {
	return rangeArgs(n, n)
}

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			want := fmt.Sprintf("%d arguments", lo)
			switch {
			case hi != lo:
				want = fmt.Sprintf("%d to %d arguments", lo, hi)
			case lo == 0:
				return usagef("takes no arguments, got %d", len(args))
			case lo == 1:
				want = "1 argument"
			}
			return usagef("wants %s (%s), got %d", want, strings.TrimPrefix(cmd.Use, cmd.Name()+" "), len(args))
		}
		return nil
	}
}

// shortCommand marks a command that reads or writes a record or a number
// and ends (put, get, delete, count, seq next, seq peek): a badger store is
// opened sized for that (badgerstore.Options.ShortLived), and unless $GOGC
// or $GOMEMLIMIT say otherwise the garbage collector runs only if the heap
// reaches shortHeap: such a command needs a few tens of MiB and ends
// before a collection would have freed much. Commands that write in bulk
// (import, sync) keep badger's usual sizes and Go's usual pace.
func (a *app) shortCommand() {
	a.shortLived = true
	_, gogc := os.LookupEnv("GOGC")
	_, limit := os.LookupEnv("GOMEMLIMIT")
	if !gogc && !limit {
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(shortHeap)
	}
}

// shortHeap is the heap at which a short command's garbage collector runs.
const shortHeap = 256 << 20

// openStore opens the store named by --store.
func (a *app) openStore(ctx context.Context, mustExist bool) (stores.Store, error) {
	if a.store != nil {
		return a.store, nil
	}
	spec, err := a.parsedStore()
	if err != nil {
		return nil, err
	}
	spec.readOnly = a.readOnly
	spec.shortLived = a.shortLived
	a.spec = spec
	st, err := a.openWaiting(ctx, spec, mustExist)
	if err != nil {
		return nil, err
	}
	a.store = st
	return st, nil
}

// lockRetry is how often a command waiting for a busy store tries again.
const lockRetry = 25 * time.Millisecond

// openWaiting opens spec; while another process holds it (a badger folder,
// stores.ErrLocked) it tries again until --wait has passed, saying once on
// standard error that it waits. An interrupt stops the wait.
func (a *app) openWaiting(ctx context.Context, spec storeSpec, mustExist bool) (stores.Store, error) {
	deadline := time.Now().Add(a.wait)
	said := false
	for {
		st, err := spec.open(ctx, mustExist)
		if err == nil || !errors.Is(err, stores.ErrLocked) || a.wait <= 0 {
			return st, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			a.waited = true
			return nil, err
		}
		if !said {
			fmt.Fprintf(a.io.err, "store %s is in use by another process; waiting up to %s\n", spec, a.wait)
			said = true
		}
		t := time.NewTimer(min(lockRetry, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// openVaultToRead is openVault for a command that only reads: the store is
// opened read-only (a badger folder then works where the user may not
// write), and the vault must exist.
func (a *app) openVaultToRead(ctx context.Context) (*vault.Vault, error) {
	a.readOnly, a.create = true, false
	return a.openVault(ctx)
}

// openVault opens --vault on --store as --user. Without --create (a.create),
// a vault that does not exist yet is an error naming the vaults the store
// holds, and nothing is created.
func (a *app) openVault(ctx context.Context) (*vault.Vault, error) {
	create := a.create
	if err := vault.CheckVaultName(a.vaultName); err != nil {
		return nil, usagef("--vault: %v", err)
	}
	if err := a.checkSecretFile(); err != nil {
		return nil, err
	}
	if err := a.checkRecoveryCode(); err != nil {
		return nil, err
	}
	stateDir, err := a.stateDir()
	if err != nil {
		return nil, err
	}
	// lost fails a read command on a store without the vault when this
	// device has used it: the store lost it, which is no typing mistake.
	lost := func(notFound error) error {
		if used, err := vault.Used(stateDir, a.vaultName); err != nil || !used {
			return errors.Join(notFound, err)
		}
		return fmt.Errorf("the store has no vault %q but this device has used it: %w", a.vaultName, vault.ErrVaultLost)
	}
	// A device of a hub: the hub first, since a device that does not hold
	// the vault yet gets it from the hub (its store is created then).
	device, err := a.parsedStore()
	if err != nil {
		return nil, err
	}
	var hub *hubState
	if !a.noHub {
		if hub, err = a.openHub(ctx, device, !create); err != nil {
			return nil, err
		}
	}
	onHub := false
	if hub != nil {
		// The vault records on the device's store that it is a device.
		a.readOnly = false
		if hub.offline == nil {
			if onHub, err = vaultExists(ctx, hub.store, a.vaultName); err != nil {
				return nil, fmt.Errorf("hub %s: %w", hub, err)
			}
		}
	}
	st, err := a.openStore(ctx, !create && !onHub)
	if err != nil {
		if missing := (*missingStoreError)(nil); errors.As(err, &missing) {
			return nil, lost(err)
		}
		return nil, err
	}
	if a.spec.kind == "mem" {
		// A mem: store starts empty in every command: refusing its vault
		// would only make it unusable.
		create = true
	}
	exists, err := vaultExists(ctx, st, a.vaultName)
	if err != nil {
		return nil, err
	}
	if !exists && !create && !onHub {
		if hub != nil && hub.offline != nil {
			return nil, fmt.Errorf("vault %q is not on this device, and its hub cannot be reached to fetch it: %w", a.vaultName, hub.offline)
		}
		return nil, lost(missingVault(ctx, st, a.spec, a.vaultName))
	}
	if !exists && !onHub && a.spec.kind == "mem" && !a.quietMem {
		fmt.Fprintf(a.io.err, "note: %s keeps nothing after this command ends\n", a.spec)
	}
	users := st
	if !exists && onHub {
		users = hub.store
	}
	if err := a.pickUser(ctx, users, exists || onHub); err != nil {
		return nil, err
	}
	cfg := noydb.Config{User: a.user, Store: st, StateDir: stateDir}
	switch {
	case a.identityFile != "":
		if cfg.Identity, err = a.identity(); err != nil {
			return nil, err
		}
	case a.recoveryCode != "" && a.fixedSecret == nil:
		s, err := a.newSecret("--recovery-new-secret-file", a.recoverySecretFile, fmt.Sprintf("Recovery code: new secret for vault %q (user %q): ", a.vaultName, a.user))
		if err != nil {
			return nil, err
		}
		defer clear(s)
		cfg.Secret = s
	default:
		if loc, err := a.spec.location(); err == nil && (exists || onHub) && !a.deriveForAgent {
			if id, ok := a.agentIdentity(ctx, loc, a.vaultName, a.user); ok {
				cfg.Identity, a.agentID = id, id
				break
			}
		}
		secret, err := a.secret(a.vaultName, !exists && !onHub)
		if err != nil {
			return nil, err
		}
		defer clear(secret)
		cfg.Secret = secret
		if a.deriveForAgent {
			if !exists && !onHub {
				return nil, usagef("unlock: vault %q does not exist yet: create it with 'noydb init' first", a.vaultName)
			}
			vcfg := vault.Config{Store: users, Name: a.vaultName, User: a.user, Secret: secret}
			if a.env(envTestKDF) == "1" {
				vcfg.InsecureAllowWeakKDF = true
			}
			id, err := vault.DeriveIdentity(ctx, vcfg)
			if err != nil {
				return nil, err
			}
			cfg.Secret, cfg.Identity, a.unlocked = nil, id, id
		}
	}
	if hub != nil {
		cfg.Hub = hub.store
		if hub.offline != nil && !a.quietOffline {
			fmt.Fprintf(a.io.err, "note: working offline: %s\n", oneLine(hub.reason))
		}
	}
	if a.env(envTestKDF) == "1" {
		cfg.KDF, cfg.InsecureAllowWeakKDF = testKDF, true
	}
	db, err := noydb.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a.db = db
	v, err := a.openNamed(ctx)
	if err == nil && a.recoveryCode != "" && a.fixedSecret == nil {
		fmt.Fprintf(a.io.err, "note: vault %q recovered with a recovery code: the secret of %s is the new one\n", a.vaultName, a.user)
	}
	if err == nil {
		a.created = !exists && !onHub
		a.fetched = !exists && onHub
		a.joined = hub != nil && hub.offline == nil && !onHub
		if !a.ownsHubNote {
			a.noteHub()
		}
		a.role = v.Role().String()
		a.noteStore(stateDir)
		if a.agentID != nil {
			a.agentNote()
		}
	}
	return v, err
}

// noteHub tells, on standard error, that the command fetched the vault
// from its hub or put it there: neither is what the command was asked for,
// and both change what later commands do.
func (a *app) noteHub() {
	switch {
	case a.fetched:
		fmt.Fprintf(a.io.err, "note: vault %q was not on this device: fetched its people and keys from hub %s; 'noydb sync' brings its records\n",
			a.vaultName, a.hub)
	case a.joined && a.created:
		fmt.Fprintf(a.io.err, "note: created vault %q here and on hub %s, which this device syncs with\n", a.vaultName, a.hub)
	case a.joined:
		fmt.Fprintf(a.io.err, "note: vault %q joined hub %s: this device syncs with it from now on, and takes numbers there; 'noydb sync' pushes its records\n",
			a.vaultName, a.hub)
	}
}

// pickUser settles a.user when neither --user nor $NOYDB_USER gave one: the
// vault's only user; for a new vault (or one whose creator left no key
// slot) $USER, then "owner". A vault with several users needs --user, and
// the error names them.
func (a *app) pickUser(ctx context.Context, st stores.Store, exists bool) error {
	if a.flags != nil && a.flags.Changed("user") && a.user == "" {
		return usagef("--user is empty: name a user, or leave --user out to use the vault's only user")
	}
	if a.user != "" {
		if err := vault.CheckCollectionName(a.user); err != nil {
			return usagef("--user %q: %v", a.user, err)
		}
		a.userFrom = a.source("user", envUser, "")
		return nil
	}
	var users []string
	if exists {
		var err error
		if users, err = vaultUsers(ctx, st, a.vaultName); err != nil {
			return err
		}
	}
	switch len(users) {
	case 0:
		a.user, a.userFrom = a.env("USER"), "$USER"
		if a.user == "" || vault.CheckCollectionName(a.user) != nil {
			a.user, a.userFrom = defaultUser, "the default, $USER being unset"
		}
		return nil
	case 1:
		a.user, a.userFrom = users[0], "the vault's only user"
		return nil
	}
	shown := users
	if len(shown) > maxVaultHint {
		shown = append(shown[:maxVaultHint:maxVaultHint], fmt.Sprintf("and %d more", len(users)-maxVaultHint))
	}
	return usagef("vault %q has %d users (%s): say which you are with --user NAME, $%s, or once for all with 'noydb config set user NAME'",
		a.vaultName, len(users), strings.Join(shown, ", "), envUser)
}

// vaultUsers lists the users with a key slot in the vault, by the keys the
// vault package documents ("v/<name>/_keyring/<user>"), sorted.
func vaultUsers(ctx context.Context, st stores.Store, name string) ([]string, error) {
	prefix := "v/" + name + "/_keyring/"
	var users []string
	for it, err := range stores.ListUnder(ctx, st, prefix) {
		if err != nil {
			return nil, err
		}
		if u := it.Key[len(prefix):]; u != "" && !strings.Contains(u, "/") {
			users = append(users, u)
		}
	}
	sort.Strings(users)
	return users, nil
}

// vaultExists reports whether the vault has a header, at the key the vault
// package documents ("v/<name>/_header").
func vaultExists(ctx context.Context, st stores.Store, name string) (bool, error) {
	_, err := st.Get(ctx, "v/"+name+"/_header")
	if errors.Is(err, stores.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (a *app) close() error {
	var err error
	if a.db != nil {
		err = a.db.Close()
	}
	if a.store != nil {
		err = errors.Join(err, a.store.Close())
	}
	if a.hub != nil && a.hub.offline == nil {
		err = errors.Join(err, a.hub.store.Close())
	}
	if a.agentID != nil {
		a.agentID.Wipe()
	}
	return err
}
