package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noydb-go/noydb/internal/poll"
	"github.com/noydb-go/noydb/stores"
)

var _ stores.Locker = (*Store)(nil)

// Lock polling: a waiter tries again after lockBackoffMin, doubling up to
// lockBackoffMax.
const (
	lockBackoffMin = 500 * time.Microsecond
	lockBackoffMax = 50 * time.Millisecond
)

// unlockTimeout bounds the statement that releases a lock; past it the
// connection is closed, which releases the lock too.
const unlockTimeout = 10 * time.Second

// Lock takes the exclusive lock called name, shared by every process on
// every machine that uses the store's schema on this database: a
// session-level PostgreSQL advisory lock (pg_advisory_lock's) on a 64-bit
// hash of the schema and name, held by a connection taken from the pool for
// as long as the lock is held. The returned function releases it (calling
// it again does nothing); a holder that dies releases it too, because the
// server ends its session when its connection closes or breaks.
//
// A waiter holds no connection while it waits: it tries the lock
// (pg_try_advisory_lock) and, while another session holds it, tries again
// after a delay that grows from 0.5 ms to 50 ms, so waiters never starve
// the pool that the holder may need. It returns ctx's error if ctx ends
// first, and stores.ErrClosed on a closed Store.
//
// Two names whose hashes collide share one lock: a collision can only make
// holders of different names wait for each other, never let two holders of
// one name in at once. Advisory locks are database-wide; the schema in the
// hash keeps the locks of stores in different schemas apart (up to such
// collisions).
//
// If the holder's connection breaks while it holds the lock (the server
// restarts, the network fails), the server releases the lock and the holder
// is not told. The lock's users in noydb never depend on it for
// correctness: a numbering pass that loses it is still kept from
// committing over another by compare-and-swap. Close waits for the held
// locks to be released, as it waits for every connection in use.
func (s *Store) Lock(ctx context.Context, name string) (unlock func(), err error) {
	err = poll.Until(ctx, lockBackoffMin, lockBackoffMax, func() (bool, error) {
		u, err := s.TryLock(ctx, name)
		if errors.Is(err, stores.ErrLockHeld) {
			return false, nil
		}
		unlock = u
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return unlock, nil
}

// TryLock is Lock without waiting: it returns stores.ErrLockHeld when
// another session holds the lock.
func (s *Store) TryLock(ctx context.Context, name string) (unlock func(), err error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	key := s.lockKey(name)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.wrap(ctx, "lock", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		// The lock may have been taken before the error (a cancelled
		// ctx): only the end of the session is sure to release it.
		discard(conn)
		return nil, s.wrap(ctx, "lock", err)
	}
	if !ok {
		conn.Release()
		return nil, stores.ErrLockHeld
	}
	var once sync.Once
	return func() { once.Do(func() { release(conn, key) }) }, nil
}

// lockKey is the advisory lock key of name: the first 8 bytes of a SHA-256
// of the schema and name.
func (s *Store) lockKey(name string) int64 {
	h := sha256.New()
	h.Write([]byte("noydb pgstore lock\x00"))
	h.Write([]byte(s.schema))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// release unlocks key, held by conn's session, and returns conn to the
// pool; when the unlock fails it closes the session instead, which
// releases every lock the session holds.
func release(conn *pgxpool.Conn, key int64) {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, key).Scan(&ok); err != nil || !ok {
		discard(conn)
		return
	}
	conn.Release()
}

// discard closes conn's session and takes it out of the pool.
func discard(conn *pgxpool.Conn) {
	c := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	_ = c.Close(ctx)
}
