package pgstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
)

// TestPutsAndDeletesLockInKeyOrder: a round trip's puts and deletes take
// their rows in one key order, together: two transactions writing the same
// two keys blindly, one putting b and deleting a, the other putting a and
// deleting b, queue instead of deadlocking (which would fail one with
// stores.ErrConflict after the server's deadlock_timeout).
func TestPutsAndDeletesLockInKeyOrder(t *testing.T) {
	s, schema := openIn(t, nil)
	ctx := guardCtx(t)
	for _, k := range []string{"a", "b"} {
		_, err := s.Put(ctx, k, []byte("old"))
		require.NoError(t, err)
	}

	// A holds b, so that both writers queue on it in a known order.
	held, release := make(chan struct{}), make(chan struct{})
	errA := make(chan error, 1)
	go func() {
		errA <- s.Update(ctx, func(tx stores.Tx) error {
			if _, err := tx.Get("b"); err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held

	write := func(put, del string) chan error {
		done := make(chan error, 1)
		go func() {
			done <- s.Update(ctx, func(tx stores.Tx) error {
				if err := tx.Put(put, []byte("put by the writer of "+put)); err != nil {
					return err
				}
				return tx.Delete(del)
			})
		}()
		return done
	}
	err1 := write("b", "a") // queues on b
	waitLockWaiters(t, schema, 1)
	err2 := write("a", "b") // locks a, queues on b
	waitLockWaiters(t, schema, 2)
	close(release)
	require.NoError(t, <-errA)

	assert.NoError(t, <-err1, "put b, delete a")
	assert.NoError(t, <-err2, "put a, delete b")
	got := contents(t, s, "")
	assert.Contains(t, []map[string]string{
		{"a": "put by the writer of a"}, // the writer of b first
		{"b": "put by the writer of b"}, // the writer of a first
	}, got, "the outcome of the writers one after the other")
}

// TestWritesTakeMissingKeysInOrder: the lock taken before crosswise writes
// covers the keys that do not exist yet too, in the same key order: a writer that locked only the existing
// rows first (b, to delete) and then waited to create a, claimed by a
// reader that goes on to read b, would deadlock with that reader.
func TestWritesTakeMissingKeysInOrder(t *testing.T) {
	s, schema := openIn(t, nil)
	ctx := guardCtx(t)
	_, err := s.Put(ctx, "b", []byte("old"))
	require.NoError(t, err)

	claimed, release := make(chan struct{}), make(chan struct{})
	errReader := make(chan error, 1)
	go func() {
		errReader <- s.Update(ctx, func(tx stores.Tx) error {
			if _, err := tx.Get("a"); !errors.Is(err, stores.ErrNotFound) { // claims a
				return fmt.Errorf("get a: %w", err)
			}
			close(claimed)
			<-release
			if _, err := tx.Get("b"); err != nil {
				return err
			}
			if err := tx.Put("a", []byte("reader")); err != nil {
				return err
			}
			return tx.Put("b", []byte("reader"))
		})
	}()
	<-claimed
	errWriter := make(chan error, 1)
	go func() {
		errWriter <- s.Update(ctx, func(tx stores.Tx) error {
			if err := tx.Put("a", []byte("writer")); err != nil {
				return err
			}
			return tx.Delete("b")
		})
	}()
	waitLockWaiters(t, schema, 1) // the writer waits for a
	close(release)
	assert.NoError(t, <-errReader, "reader")
	assert.NoError(t, <-errWriter, "writer")
	assert.Equal(t, map[string]string{"a": "writer"}, contents(t, s, ""), "the reader, then the writer")
}
