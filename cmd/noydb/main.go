// Command noydb works with noydb vaults from the command line: encrypted
// records, gap-free numbered series, the audit ledger, deferred numbering and
// benchmarks of the numbering service on any store.
//
// # Usage
//
//	noydb demo                                    # the walkthrough, in memory, no setup
//	export NOYDB_SECRET=…                         # or --secret-file, or a prompt on a terminal
//	noydb put invoices inv-1 '{"total":120}'      # in your data folder, vault "default"
//	noydb seq next fatture --partition 2026 --format '{partition.0}/{seq:04}'
//	noydb ledger verify
//	noydb sync --hub postgres://db.example/books   # converge with a hub; also $NOYDB_HUB
//	noydb --help                                  # every command; each has its own --help
//
// Where the data is: --store badger:DIR, file:DIR, mem: or a postgres:// URL,
// else $NOYDB_STORE, else badger:<user data folder>/noydb/store, one store per
// person whatever the working folder ($XDG_DATA_HOME or ~/.local/share on
// Linux, ~/Library/Application Support on macOS, %LocalAppData% on Windows);
// which vault: --vault (default "default"); as whom: --user (default
// $NOYDB_USER, then the vault's only user; a new vault's first user is $USER,
// then "owner").
//
// This device's state (rollback pins, and which vaults it has used) is kept
// per store in <root>/<hash of the store's location>, the root being
// --state-dir, $NOYDB_STATE_DIR, or noydb/state in os.UserConfigDir; mem:
// stores keep none. 'noydb forget' erases what the device knows of a vault.
//
// The secret comes from $NOYDB_SECRET, from --secret-file, or from a no-echo
// prompt when standard input is a terminal; never from a flag value. A secret
// file open to group or others is refused unless --insecure-secret-file.
// A lost secret: 'noydb vault recover' (or --recover on any command) opens
// with a one-time recovery code instead, read the same way: from
// --recovery-code-file (checked like --secret-file), else
// $NOYDB_RECOVERY_CODE, else a no-echo prompt; the new secret comes from
// --recovery-new-secret-file or is asked twice.
//
// A device syncs with a hub (another store: badger:DIR or a postgres:// URL)
// named by --hub, $NOYDB_HUB or the config file: 'noydb sync' pulls and
// pushes, 'noydb sync status' tells what is pending, and commands that take
// numbers take them on the hub.
//
// Exit status: 0 on success, 1 on failure (including a ledger that does not
// verify), 2 on a usage error, 3 when the hub could not be reached
// (offline: nothing was done), 130 when an interrupt (SIGINT) stopped it.
//
// # Testing
//
// NOYDB_INSECURE_TEST_KDF=1 makes the command create vaults with a cheap
// key-derivation cost and accept them when opening. It exists so tests need
// not pay ~0.4 s per command; never set it for real data, since a vault made
// with it can have its secret guessed cheaply.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	// The first interrupt cancels the command, which stops cleanly (a pass
	// or a bench mid-way); a second one kills the process as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], osStdio())
	stop()
	os.Exit(code)
}
