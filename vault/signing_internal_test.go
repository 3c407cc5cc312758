package vault

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// signingCfg opens the vault "team" on st as user with secret.
func signingCfg(st stores.Store, user, secret string) Config {
	return Config{Store: st, Name: "team", User: user, Secret: []byte(secret),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true}
}

// TestSigningForgedWithTheDataKey: rita, a reader, holds the data key, so
// she can seal ledger entries and compute their chain MACs, and write them
// with the raw store (her vault's own store refuses her writes). Each
// entry she makes that way fails Verify, from the owner's handle, at its
// position, as a *ledger.SignatureError matching ErrBadSignature and
// ErrTampered: unsigned in the owner's name, signed with her key in the
// owner's name, signed as herself (a reader's record, a reader's grant),
// and her own secret change once she is revoked.
func TestSigningForgedWithTheDataKey(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (st stores.Store, owner, reader *Vault, head uint64) {
		t.Helper()
		st = memstore.New()
		owner = openSigning(t, signingCfg(st, "olga", "o"))
		_, err := owner.Record(ctx, "opened", nil)
		require.NoError(t, err)
		require.NoError(t, owner.Grant(ctx, "rita", Secret([]byte("r")), RoleReader))
		reader = openSigning(t, signingCfg(st, "rita", "r"))
		rep, err := owner.Audit().Verify(ctx)
		require.NoError(t, err)
		return st, owner, reader, rep.Head.Seq
	}
	// forger is a ledger on the raw store with the reader's data key
	// (its seal and chain MAC), writing as actor, signing with signer.
	forger := func(st stores.Store, reader *Vault, actor string, signer wire.LedgerSigner) writableLedger {
		return newLedger()(st, reader.seal, reader.macer, reader.prefix, wire.LedgerOptions{Actor: actor, Signer: signer})
	}
	record := ledger.Entry{Kind: ledger.RecordPut, Collection: "notes", ID: "forged", Revision: 1, CipherHash: []byte{1}}
	cases := []struct {
		name    string
		actor   string
		signed  bool
		entry   ledger.Entry
		revoke  bool
		problem ledger.SignatureProblem
	}{
		{"unsigned, in the owner's name", "olga", false, record, false, ledger.Unsigned},
		{"signed by the reader in the owner's name", "olga", true, record, false, ledger.BadSignature},
		{"a reader's record", "rita", true, record, false, ledger.NotPermitted},
		{"a reader's number", "rita", true, ledger.Entry{Kind: ledger.NumberAllocated, Series: "inv", Number: 1}, false, ledger.NotPermitted},
		{"a reader's grant", "rita", true, ledger.Entry{Kind: ledger.PersonGranted, ID: "rita", Reason: "owner"}, false, ledger.NotPermitted},
		{"a reader's revocation", "rita", true, ledger.Entry{Kind: ledger.PersonRevoked, ID: "olga"}, false, ledger.NotPermitted},
		{"a revoked reader's own secret change", "rita", true, ledger.Entry{Kind: ledger.SecretChanged, ID: "rita"}, true, ledger.Revoked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, owner, reader, head := setup(t)
			if c.revoke {
				require.NoError(t, owner.Revoke(ctx, "rita", RevokeWithoutRotation()))
				rep, err := owner.Audit().Verify(ctx)
				require.NoError(t, err)
				head = rep.Head.Seq
			}
			var signer wire.LedgerSigner
			if c.signed {
				signer = reader.ledgerOptions().Signer
			}
			_, err := forger(st, reader, c.actor, signer).Append(ctx, c.entry)
			require.NoError(t, err)
			// An honest entry after the forgery does not hide it.
			_, err = owner.Record(ctx, "after", nil)
			require.NoError(t, err)

			rep, err := owner.Audit().Verify(ctx)
			require.ErrorIs(t, err, ledger.ErrBadSignature)
			assert.ErrorIs(t, err, ErrTampered)
			var se *ledger.SignatureError
			require.True(t, errors.As(err, &se), "%v", err)
			assert.Equal(t, head+1, se.Seq)
			assert.Equal(t, c.actor, se.Actor)
			assert.Equal(t, c.problem, se.Problem, "%v", err)
			assert.Equal(t, head+1, rep.FirstBad)
			assert.Equal(t, head, rep.Entries)
		})
	}
}

// openSigning opens cfg and closes the vault with the test.
func openSigning(t *testing.T, cfg Config) *Vault {
	t.Helper()
	v, err := Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}
