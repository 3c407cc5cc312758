package overlay_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/overlay"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

func TestOverlay(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	_, err := st.Put(ctx, "a", []byte("old a"))
	require.NoError(t, err)
	_, err = st.Put(ctx, "b", []byte("old b"))
	require.NoError(t, err)
	errGuard := errors.New("guarded")
	guard := func(key string) error {
		if key == "guarded" {
			return errGuard
		}
		return nil
	}

	err = st.Update(ctx, func(tx stores.Tx) error {
		dropped := overlay.New(tx, guard)
		require.NoError(t, dropped.Put("a", []byte("dropped")))
		dropped.Close()
		// Not applied: the parent never sees it.

		ov := overlay.New(tx, guard)
		buf := []byte("new a")
		require.NoError(t, ov.Put("a", buf))
		buf[0] = 'X' // the caller may reuse its buffer
		require.NoError(t, ov.Delete("b"))
		require.NoError(t, ov.Put("c", nil))
		assert.ErrorIs(t, ov.Put("guarded", []byte("x")), errGuard)
		assert.ErrorIs(t, ov.Put("", []byte("x")), stores.ErrInvalidKey)

		it, err := ov.Get("a")
		require.NoError(t, err)
		assert.Equal(t, "new a", string(it.Value), "reads see the overlay's own writes")
		_, err = ov.Get("b")
		assert.ErrorIs(t, err, stores.ErrNotFound, "and its deletes")
		it, err = tx.Get("a")
		require.NoError(t, err)
		assert.Equal(t, "old a", string(it.Value), "the parent sees nothing before Apply")

		ov.Close()
		_, err = ov.Get("a")
		assert.ErrorIs(t, err, overlay.ErrDone)
		assert.ErrorIs(t, ov.Put("a", nil), overlay.ErrDone)
		return ov.Apply()
	})
	require.NoError(t, err)
	it, err := st.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "new a", string(it.Value))
	_, err = st.Get(ctx, "b")
	assert.ErrorIs(t, err, stores.ErrNotFound)
	it, err = st.Get(ctx, "c")
	require.NoError(t, err)
	assert.Empty(t, it.Value)
	_, err = st.Get(ctx, "guarded")
	assert.ErrorIs(t, err, stores.ErrNotFound)
}
