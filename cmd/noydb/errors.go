package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// isUsage reports whether err is bad input the user typed (a name, a format,
// a partition), which exits with status 2 like a wrong flag. A refusal is
// not, whatever it wraps.
func isUsage(err error) bool {
	var r *refusal
	if errors.As(err, &r) {
		return false
	}
	var ue *usageError
	return errors.As(err, &ue) ||
		errors.Is(err, sequence.ErrInvalid) ||
		errors.Is(err, sequence.ErrNoSuchSeries) ||
		errors.Is(err, numbering.ErrInvalid) ||
		errors.Is(err, vault.ErrInvalidName) ||
		errors.Is(err, vault.ErrReservedName)
}

// refusal marks the error of a vault operation on people and keys
// (Grant, SetCollections, RotateKeys …) whose arguments the command has
// checked already: the vault refused it because of what it holds (the
// person is an owner, the keyring is full), so it exits with status 1 like
// every other refusal (vault.ErrNotPermitted, vault.ErrNotFound), not with
// the usage status 2, which vault.ErrInvalidArgument (being
// sequence.ErrInvalid) would otherwise get: no other spelling of the
// command would do.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refused marks err, if any, as a refusal.
func refused(err error) error {
	if err == nil {
		return nil
	}
	return &refusal{err: err}
}

// isOffline reports whether err says the hub could not be reached (or a
// device of a hub was used without one): exit status 3, nothing done.
func (a *app) isOffline(err error) bool {
	return errors.Is(err, sequence.ErrOffline) && (a.hub != nil || a.spec.kind != "file")
}

// hubError marks an error of a sync, so explain says "the hub" rather than
// "the store" (its message is the error's own).
type hubError struct{ err error }

func (e *hubError) Error() string { return e.err.Error() }
func (e *hubError) Unwrap() error { return e.err }

func fromHub(err error) bool {
	var he *hubError
	return errors.As(err, &he)
}

// explain turns err into one line that says what happened and what to do.
func (a *app) explain(err error) string {
	var mismatch *numbering.MismatchError
	var behind *vault.HubBehindError
	switch {
	case errors.Is(err, vault.ErrWrongSecret) && a.agentID != nil:
		return fmt.Sprintf("the key the agent keeps for vault %q (user %q) no longer opens it (re-created, or the person granted anew): run 'noydb lock', then 'noydb unlock'", a.vaultName, a.user)
	case errors.Is(err, vault.ErrWrongSecret) && a.identityFile != "":
		return fmt.Sprintf("the identity in --identity-file does not open vault %q for user %q", a.vaultName, a.user)
	case errors.Is(err, vault.ErrWrongSecret):
		return fmt.Sprintf("wrong secret for vault %q (user %q): check $%s or --secret-file", a.vaultName, a.user, envSecret)
	case errors.Is(err, vault.ErrNoAccess):
		return fmt.Sprintf("user %q has no key in vault %q: pass another --user, or ask an owner to run 'noydb people add %s'", a.user, a.vaultName, a.user)
	case errors.Is(err, vault.ErrWeakKDF):
		if a.env(envTestKDF) == "1" {
			return fmt.Sprintf("vault %q: %v", a.vaultName, err)
		}
		return fmt.Sprintf("vault %q has a key-derivation cost outside the safe bounds (a test vault, or a store that changed it): refusing to open it", a.vaultName)
	case errors.Is(err, vault.ErrVaultLost):
		return fmt.Sprintf("%v: the store lost vault %q or holds another one under its name, but this device has used it; "+
			"restore the store from a backup, or if the vault was really deleted or re-created run `noydb forget` to start over", err, a.vaultName)
	case errors.Is(err, vault.ErrStateLost):
		return fmt.Sprintf("%v: restore this device's state folder (see --state-dir) from a backup, or run `noydb forget` to start over without that protection", err)
	case errors.Is(err, vault.ErrRollback):
		return fmt.Sprintf("%v: the store serves older data than this device has seen (restored from an old backup?); nothing was issued", err)
	case errors.Is(err, vault.ErrHubTampered):
		return fmt.Sprintf("%v: the hub was changed outside noydb (or is hostile); nothing after the first bad change was applied here", err)
	case errors.Is(err, vault.ErrHubDiverged):
		return fmt.Sprintf("%v: this device gave numbers the hub gave too, so it did not join and nothing was written; no seed mends that: "+
			"write the records carrying those numbers again from a device of the hub (they get new numbers), and do not use this copy with the hub", err)
	case errors.As(err, &behind):
		var each []string
		for _, b := range behind.Series {
			each = append(each, b.String())
		}
		return fmt.Sprintf("the hub %s is behind this device (%s): the hub would give again numbers this device gave on its own, "+
			"before it used the hub, so it did not join and nothing was written; check the numbers the hub gave already, then seed each "+
			"series on the hub to the device's number from another device (`noydb --store badger:OTHER --hub %s seq seed SERIES N`, "+
			"with --partition, and for a period a --date in it) and run this again",
			a.hub, strings.Join(each, "; "), a.hub)
	case errors.Is(err, vault.ErrHubMismatch):
		return fmt.Sprintf("%v: the hub %s holds another vault named %q; use another --hub, or another --vault", err, a.hub, a.vaultName)
	case errors.Is(err, vault.ErrRollback) && fromHub(err):
		return fmt.Sprintf("%v: the hub %s serves older data than this device has seen (restored from an old backup?); nothing was taken from it", err, a.hub)
	case errors.Is(err, sequence.ErrOffline) && a.hub != nil:
		hint := a.offlineHint
		if hint == "" {
			hint = "nothing was done; numbers are taken on the hub, so retry when it is back " +
				"(records are written here meanwhile, and `noydb put --seq` writes one to be numbered later)"
		}
		// sequence.ErrOffline's own text is about stores without atomic
		// compare-and-swap: "offline" says it here.
		msg := a.hub.reason // known when the command began: the whole story
		if msg == "" {
			msg = strings.ReplaceAll(err.Error(), sequence.ErrOffline.Error()+": ", "")
			msg = strings.TrimSuffix(strings.ReplaceAll(msg, sequence.ErrOffline.Error(), ""), ": ")
		}
		return fmt.Sprintf("offline: %s: %s", msg, hint)
	case errors.Is(err, sequence.ErrOffline) && a.spec.kind != "file":
		return fmt.Sprintf("offline: vault %q is a device of a hub, and no hub is set: pass --hub, set $%s or `noydb config set hub …` "+
			"(records are written here meanwhile, and `noydb put --seq` writes one to be numbered later)", a.vaultName, envHub)
	case errors.Is(err, sequence.ErrOffline) && a.writeTime:
		return fmt.Sprintf("store %s has no atomic compare-and-swap, so it cannot number a record as it is written, which --period, --partition, --date "+
			"and --correcting need: keep this series on a badger or postgres store (or a hub); here, `noydb put --seq SERIES` without them "+
			"hands records to `noydb number pass`", a.spec)
	case errors.Is(err, sequence.ErrOffline):
		return fmt.Sprintf("store %s has no atomic compare-and-swap: write numbered records with `noydb put --seq`, numbered by `noydb number pass`", a.spec)
	case errors.Is(err, errClosedLeft):
		return fmt.Sprintf("%v: a closed period takes no more numbers, and its records stay pending; delete them, or put them again dated into an open period", err)
	case errors.Is(err, sequence.ErrPeriodClosed):
		return fmt.Sprintf("%v: it takes no more numbers; date the document into an open period (--date), or see `noydb seq list`", err)
	case errors.Is(err, sequence.ErrDefinitionMismatch):
		return fmt.Sprintf("%v: pass the stored definition's flags, or none (the stored definition is used); see `noydb seq list`", err)
	case errors.Is(err, sequence.ErrCorrectionNeeded):
		return fmt.Sprintf("%v: name the corrected number with --correcting N (and --correcting-period LABEL)", err)
	case errors.Is(err, sequence.ErrNotCorrecting):
		return fmt.Sprintf("%v: only a series defined with --corrects takes --correcting", err)
	case errors.Is(err, vault.ErrNoConflict):
		return fmt.Sprintf("%v: see 'noydb sync conflicts'", err)
	case errors.As(err, &mismatch) && mismatch.Collection:
		return fmt.Sprintf("%v: a numbering series numbers the records of one collection, the one it was first used for (%q); "+
			"number the records of %q with a series of their own (another series name)", err, mismatch.Stored, mismatch.Asked)
	case errors.As(err, &mismatch):
		return fmt.Sprintf("%v: a numbering series keeps the format its first numbers were given with; "+
			"leave --format out to use the series' own (%q), or start a series of another name for the new format", err, mismatch.Stored)
	case errors.Is(err, numbering.ErrMismatch):
		return fmt.Sprintf("%v: a numbering series keeps the collection and the format it was first used with; "+
			"leave --format out to use the series' own, and number only the collection 'noydb seq list' shows for it", err)
	case errors.Is(err, numbering.ErrAlreadyNumbered):
		return fmt.Sprintf("%v: see `noydb number lookup`", err)
	case errors.Is(err, numbering.ErrPassRunning):
		return fmt.Sprintf("%v: let it finish, then run the pass again", err)
	case errors.Is(err, numbering.ErrNotObject):
		return fmt.Sprintf("%v: only JSON objects can carry a number field", err)
	case errors.Is(err, sequence.ErrContention), errors.Is(err, ledger.ErrContention):
		return fmt.Sprintf("%v: other writers kept winning the race; try again", err)
	case errors.Is(err, vault.ErrNotPermitted):
		return a.notPermitted(err)
	case errors.Is(err, vault.ErrTampered), errors.Is(err, ledger.ErrTampered):
		return fmt.Sprintf("%v: stored data was changed outside noydb; run `noydb ledger verify` and restore from a backup", err)
	case errors.Is(err, stores.ErrLocked):
		if a.waited {
			return fmt.Sprintf("store %s is still in use by another process after waiting %s: wait for it to finish (a longer --wait) or use another --store", a.spec, a.wait)
		}
		return fmt.Sprintf("store %s is in use by another process: wait for it to finish or use another --store", a.spec)
	case errors.Is(err, stores.ErrClosed):
		return fmt.Sprintf("%v", err)
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("%v: timed out", err)
	}
	return err.Error()
}

// notLimitedTo is the text of the vault's refusal of a collection that a
// person limited to others may not use (see 'people collections').
const notLimitedTo = "is not among those the person may use"

// notPermitted explains vault.ErrNotPermitted in at most two lines of a
// terminal: who is refused, what their role allows, and whom to ask. The
// vault's own wording (which names the operation) comes first only when
// it is short.
func (a *app) notPermitted(err error) string {
	user, name := strconv.Quote(a.user), strconv.Quote(a.vaultName)
	op := operation(err)
	switch {
	case strings.Contains(err.Error(), notLimitedTo):
		return fmt.Sprintf("%snot permitted: %s may use only some collections of vault %s; an owner can add one: 'noydb people collections %s --collections …'",
			op, user, name, a.user)
	case a.role == vault.RoleReader.String():
		return fmt.Sprintf("%snot permitted: %s is a reader of vault %s and only reads; ask an owner for another role ('noydb people list')",
			op, user, name)
	case a.role == vault.RoleWriter.String():
		return fmt.Sprintf("%snot permitted: %s is a writer of vault %s; only an owner changes people and keys ('noydb people list' names them)",
			op, user, name)
	}
	return err.Error()
}

// operation is the operation an error of the vault names first ("put
// invoices/inv-1: ", "grant \"eve\": "), or "" when that is long.
func operation(err error) string {
	op, _, ok := strings.Cut(err.Error(), ": ")
	if !ok || len(op) > 32 || strings.Contains(op, "not permitted") {
		return ""
	}
	return op + ": "
}
