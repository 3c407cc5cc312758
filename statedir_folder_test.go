//go:build unix

package noydb_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/vault"
)

// TestStateDirRefusedOrTightened: a StateDir that is a symbolic link is
// refused by Open with ErrUnsafeStateFolder and the reason (a
// *vault.StateFolderError), nothing written where it points; the user's
// own folder with loose permissions is tightened to 0700.
func TestStateDirRefusedOrTightened(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			real := t.TempDir()
			link := filepath.Join(t.TempDir(), "state")
			require.NoError(t, os.Symlink(real, link))
			cfg := personCfg(newStore(t), "olga", "o")
			cfg.StateDir = link
			_, err := vault.Open(ctx, cfg)
			require.ErrorIs(t, err, vault.ErrUnsafeStateFolder)
			var fe *vault.StateFolderError
			require.True(t, errors.As(err, &fe), "%v", err)
			assert.Equal(t, link, fe.Path)
			ents, err := os.ReadDir(real)
			require.NoError(t, err)
			assert.Empty(t, ents)

			loose := filepath.Join(t.TempDir(), "state")
			require.NoError(t, os.Mkdir(loose, 0o755))
			require.NoError(t, os.Chmod(loose, 0o755))
			cfg.StateDir = loose
			openPerson(t, cfg)
			fi, err := os.Stat(loose)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
		})
	}
}
