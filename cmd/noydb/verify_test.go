package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// progressRun runs noydb in this process with env as the environment and
// standard error taken for a terminal (progress bars drawn); it returns
// the exit status, standard output and standard error.
func progressRun(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	data := t.TempDir()
	code := run(context.Background(), args, stdio{
		in: strings.NewReader(""), out: &out, err: &errs, errTerminal: true,
		lookupEnv:     func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		userConfigDir: func() (string, error) { return data, nil },
		userStateDir:  func() (string, error) { return data, nil },
		userDataDir:   func() (string, error) { return data, nil },
	})
	return code, out.String(), errs.String()
}

// TestVerifyOnTerminalSignatures: a writer's entry in the owner's name,
// sealed and chained with the data key every person holds but signed with
// the writer's own key, chains like any other entry: only its signature
// is wrong. 'ledger verify' must refuse it on a terminal (the progress
// bar's path) as it does off one. Before the fix the terminal path
// walked the ledger with Read, which checks no signature, and said the
// ledger was intact.
func TestVerifyOnTerminalSignatures(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	st, err := badgerstore.Open(data, nil)
	require.NoError(t, err)
	open := func(user, secret string) *vault.Vault {
		t.Helper()
		db, err := noydb.Open(ctx, noydb.Config{User: user, Secret: []byte(secret), Store: st, KDF: testKDF, InsecureAllowWeakKDF: true})
		require.NoError(t, err)
		v, err := db.OpenVault(ctx, "default")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return v
	}
	owner := open("olga", "o")
	require.NoError(t, owner.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	writer := open("will", "w")
	forger := wire.Hook[func(*vault.Vault) wire.Ledger[ledger.Entry, ledger.Head, ledger.Report]]("VaultLedger", wire.VaultLedger)(writer)
	head, err := forger.Append(ctx, ledger.Entry{Actor: "olga", Kind: ledger.AppEvent, Reason: "forged"})
	require.NoError(t, err)
	for _, e := range []error{writer.Close(), owner.Close(), st.Close()} {
		require.NoError(t, e)
	}

	env := map[string]string{envTestKDF: "1", envUser: "olga", envSecret: "o",
		envStore: "badger:" + data, envStateDir: filepath.Join(dir, "state")}
	want := fmt.Sprintf("first bad: entry %d", head.Seq)
	for _, terminal := range []bool{false, true} {
		var code int
		var stdout, stderr string
		if terminal {
			code, stdout, stderr = progressRun(t, env, "ledger", "verify")
		} else {
			code, stdout, stderr = terminalRun(t, env, nil, "ledger", "verify")
		}
		assert.Equal(t, exitFailure, code, "terminal %v: %s%s", terminal, stdout, stderr)
		assert.NotContains(t, stdout, "intact", "terminal %v", terminal)
		assert.Contains(t, stderr, "does not verify", "terminal %v", terminal)
		assert.Contains(t, stderr, want, "terminal %v", terminal)
		assert.Contains(t, stderr, "signature", "terminal %v", terminal)
	}
}
