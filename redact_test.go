package noydb_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// forbiddenForms are the ways fmt could show secret bytes: as text, as a
// decimal byte slice (%v), as a Go byte-slice literal (%#v), in hex (%x).
func forbiddenForms(secret []byte) []string {
	dec := strings.Trim(fmt.Sprint(secret[:4]), "[]")                 // "90 113 55 45"
	golit := strings.Trim(fmt.Sprintf("%#v", secret[:4]), "[]byte{}") // "0x5a, 0x71, 0x37, 0x2d"
	return []string{string(secret), string(secret[:6]), dec, golit,
		hex.EncodeToString(secret[:4]), strings.ToUpper(hex.EncodeToString(secret[:4]))}
}

func TestNothingPrintsTheSecret(t *testing.T) {
	ctx := context.Background()
	secret := []byte("Zq7-hunter2-secret")
	cfg := noydb.Config{User: "firm", Secret: secret, Store: memstore.New(), KDF: cheapKDF, InsecureAllowWeakKDF: true}
	db, err := noydb.Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	v := openVault(t, db, "books")
	vcfg := vault.Config{Store: cfg.Store, Name: "books", User: "firm", Secret: secret, KDF: cheapKDF, InsecureAllowWeakKDF: true}
	v2, err := vault.Open(ctx, vcfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v2.Close() })
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	macer := crypto.NewMACer(key)

	type holder struct {
		Cfg   noydb.Config
		VCfg  vault.Config
		DB    *noydb.DB
		Vault *vault.Vault
	}
	args := map[string]any{
		"*noydb.DB":     db,
		"noydb.Config":  cfg,
		"*noydb.Config": &cfg,
		"vault.Config":  vcfg,
		"*vault.Config": &vcfg,
		"*vault.Vault":  v,
		"opened vault":  v2,
		"crypto.Key":    *key,
		"*crypto.Key":   key,
		"*crypto.MACer": macer,
		"in a struct":   holder{Cfg: cfg, VCfg: vcfg, DB: db, Vault: v},
		"in a slice":    []any{cfg, &vcfg, db, v},
		"in a map":      map[string]any{"cfg": cfg, "db": db},
	}
	forbidden := forbiddenForms(secret)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for name, arg := range args {
			out := fmt.Sprintf(verb, arg)
			for _, f := range forbidden {
				assert.NotContains(t, out, f, "%s of %s: %s", verb, name, out)
			}
		}
	}
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		for name, arg := range args {
			assert.Contains(t, fmt.Sprintf(verb, arg), "REDACTED", "%s of %s", verb, name)
		}
	}
	// What is printed is still useful.
	assert.Contains(t, fmt.Sprint(cfg), `User: "firm"`)
	assert.Contains(t, fmt.Sprint(cfg), "*memstore.Store")
	assert.Contains(t, fmt.Sprint(v), `Name: "books"`)
	assert.Equal(t, fmt.Sprint(db), db.String())
	assert.Equal(t, fmt.Sprintf("%#v", vcfg), vcfg.GoString())
}
