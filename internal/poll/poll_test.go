package poll_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/internal/poll"
)

func TestUntil(t *testing.T) {
	calls := 0
	err := poll.Until(t.Context(), time.Microsecond, 4*time.Microsecond, func() (bool, error) {
		calls++
		return calls == 5, nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 5, calls, "tries until true, then stops")

	boom := errors.New("boom")
	calls = 0
	err = poll.Until(t.Context(), time.Microsecond, time.Microsecond, func() (bool, error) {
		calls++
		return false, boom
	})
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, 1, calls, "an error ends it")
}

func TestUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := poll.Until(ctx, time.Hour, time.Hour, func() (bool, error) {
		calls++
		cancel() // ends the wait after this try
		return false, nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, calls)

	err = poll.Until(ctx, time.Microsecond, time.Microsecond, func() (bool, error) {
		t.Fatal("tried with an ended ctx")
		return true, nil
	})
	assert.ErrorIs(t, err, context.Canceled)
}
