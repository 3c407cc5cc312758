package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/vault"
)

// TestDescribeEveryKind: 'ledger tail' says what every kind of entry
// records; before, the entries of people, keys, recovery codes and syncs
// printed with an empty description.
func TestDescribeEveryKind(t *testing.T) {
	want := map[ledger.Kind]struct {
		e    ledger.Entry
		text string
	}{
		ledger.RecordPut:            {ledger.Entry{Collection: "notes", ID: "a", Revision: 2}, "notes/a rev 2"},
		ledger.RecordDelete:         {ledger.Entry{Collection: "notes", ID: "a", Revision: 2}, "notes/a (was rev 2)"},
		ledger.NumberAllocated:      {ledger.Entry{Series: "inv", Number: 3}, `"inv" #3`},
		ledger.SeriesSeeded:         {ledger.Entry{Series: "inv", From: 1, Number: 100}, `"inv" from 1 to 100`},
		ledger.NumberVoided:         {ledger.Entry{Series: "inv", Number: 3, Reason: "typo"}, `"inv" #3: "typo"`},
		ledger.NumberAssigned:       {ledger.Entry{Collection: "r", ID: "x", Series: "r", Number: 1}, `r/x gets "r" #1`},
		ledger.AppEvent:             {ledger.Entry{Reason: "login"}, `"login" (0 bytes)`},
		ledger.SeriesDefined:        {ledger.Entry{Series: "inv", Reason: "format INV-{seq}"}, `"inv": format INV-{seq}`},
		ledger.PeriodClosed:         {ledger.Entry{Series: "inv", Partition: []string{"2026"}, Number: 9}, `"inv" [2026] closed at #9`},
		ledger.SeriesBound:          {ledger.Entry{Series: "inv", Collection: "invoices"}, `"inv" bound to collection invoices`},
		ledger.RecordPulled:         {ledger.Entry{Collection: "notes", ID: "a", Revision: 3, Number: 17}, "notes/a rev 3, from the hub (its change 17)"},
		ledger.RecordPulledDelete:   {ledger.Entry{Collection: "notes", ID: "a", Revision: 3, Number: 18}, "notes/a deleted (was rev 3), from the hub (its change 18)"},
		ledger.SyncConflict:         {ledger.Entry{Collection: "notes", ID: "a", Revision: 4, Reason: "higher-revision-wins: device lost"}, "notes/a: conflict, device lost (rev 4) by higher-revision-wins"},
		ledger.PersonGranted:        {ledger.Entry{ID: "will", Reason: "writer", Partition: []string{"notes", "todo"}}, "will is a writer, limited to notes,todo"},
		ledger.PersonRevoked:        {ledger.Entry{ID: "rita"}, "rita removed (access revoked)"},
		ledger.SecretChanged:        {ledger.Entry{ID: "olga"}, "secret of olga changed"},
		ledger.KeyringUpgraded:      {ledger.Entry{ID: "olga", Reason: "owner"}, "keyring entry of olga (owner) upgraded to the current layout"},
		ledger.RecoveryCodesIssued:  {ledger.Entry{ID: "olga", Number: 10}, "10 recovery codes for olga (earlier ones no longer work)"},
		ledger.RecoveryCodeUsed:     {ledger.Entry{ID: "olga", RequestID: "ab12"}, "olga opened with recovery code ab12 and set a new secret"},
		ledger.RecoveryCodesRevoked: {ledger.Entry{ID: "olga"}, "unused recovery codes of olga revoked"},
		ledger.KeysRotated:          {ledger.Entry{Number: 3, Reason: "revoke rita"}, "new data keys, generation 3 (after removing rita)"},
		ledger.KeysResealed:         {ledger.Entry{Number: 3}, "every record re-sealed with data keys of generation 3 or later"},
		ledger.KeysRenewed:          {ledger.Entry{ID: "olga"}, "keys of olga renewed (new signing key)"},
	}
	for k := ledger.RecordPut; k.Valid(); k++ {
		w, ok := want[k]
		if !assert.True(t, ok, "no case for kind %s", k) {
			continue
		}
		w.e.Kind = k
		assert.Equal(t, w.text, describe(w.e), "kind %s", k)
	}
	// The reasons of the other key rotations, and a re-sealed record.
	for reason, text := range map[string]string{
		"rotate":           "new data keys, generation 2 (vault rotate)",
		"grant will":       "new data keys, generation 2 (for the limited grant of will)",
		"collections of w": "new data keys, generation 2 (after changing the collections of w)",
		"":                 "new data keys, generation 2",
	} {
		assert.Equal(t, text, describe(ledger.Entry{Kind: ledger.KeysRotated, Number: 2, Reason: reason}))
	}
	assert.Equal(t, "notes/a rev 2 (re-sealed with the new keys)",
		describe(ledger.Entry{Kind: ledger.RecordPut, Collection: "notes", ID: "a", Revision: 2, Reason: vault.ResealedReason}))
	assert.Equal(t, "will is a reader", describe(ledger.Entry{Kind: ledger.PersonGranted, ID: "will", Reason: "reader"}))
}
