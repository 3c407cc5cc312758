package numbering

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/noydb-go/noydb/stores"
)

// handoff seals the handoff entry of record id under provisional (see
// deferred.Hooks.Handoff). It does no I/O.
func (s *Series) handoff(provisional, id string) (string, []byte, error) {
	if err := checkID(id); err != nil {
		return "", nil, s.errorf("handoff", err)
	}
	if u, err := uuid.Parse(provisional); err != nil || u.String() != provisional || u.Version() != 7 {
		return "", nil, s.errorf("handoff "+id, fmt.Errorf("provisional id %q is not a canonical UUIDv7: %w", provisional, ErrInvalid))
	}
	key := s.pendingKey(provisional, id)
	sealed, err := s.b.Sealer.Seal(key, encodeHandoff(id))
	if err != nil {
		return "", nil, s.errorf("handoff "+id, err)
	}
	return key, sealed, nil
}

// storedFormat returns the series' stored format, storing want (with the
// series' collection) first when the series has no config yet. A want that
// is not empty and differs from the stored format, or a config of another
// collection, is ErrMismatch. Once read, the config is kept: it never
// changes.
func (s *Series) storedFormat(ctx context.Context, want string) (string, error) {
	f, err := s.configFormat(ctx, want)
	if err != nil {
		return "", s.errorf("config", err)
	}
	return f, nil
}

// configFormat is storedFormat with its errors unwrapped.
func (s *Series) configFormat(ctx context.Context, want string) (string, error) {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if !s.cfgLoaded {
		c, err := s.loadConfig(ctx, want)
		if err != nil {
			return "", fmt.Errorf("config: %w", err)
		}
		s.cfg, s.cfgLoaded = c, true
	}
	switch {
	case s.cfg.collection != s.opts.Collection:
		return "", &MismatchError{Collection: true, Stored: s.cfg.collection, Asked: s.opts.Collection}
	case want != "" && want != s.cfg.format:
		return "", &MismatchError{Stored: s.cfg.format, Asked: want}
	}
	return s.cfg.format, nil
}

// peekFormat is deferred.Hooks.StoredFormat: the stored format checked
// against want (as configFormat does), or want and ok false when the
// series has no config yet, which it does not store.
func (s *Series) peekFormat(ctx context.Context, want string) (string, bool, error) {
	s.cfgMu.Lock()
	loaded := s.cfgLoaded
	s.cfgMu.Unlock()
	if !loaded {
		_, err := s.b.Store.Get(ctx, s.configKey())
		if errors.Is(err, stores.ErrNotFound) {
			return want, false, nil
		}
		if err != nil {
			return "", false, s.errorf("config", err)
		}
	}
	f, err := s.storedFormat(ctx, want) // stored: read, never written
	return f, err == nil, err
}

func (s *Series) loadConfig(ctx context.Context, want string) (seriesConfig, error) {
	key := s.configKey()
	read := func() (seriesConfig, error) {
		it, err := s.b.Store.Get(ctx, key)
		if err != nil {
			return seriesConfig{}, err
		}
		p, err := s.b.Sealer.Open(key, it.Value)
		if err != nil {
			return seriesConfig{}, ErrTampered
		}
		return decodeConfig(p)
	}
	c, err := read()
	if !errors.Is(err, stores.ErrNotFound) {
		return c, err
	}
	c = seriesConfig{collection: s.opts.Collection, format: want}
	sealed, err := s.b.Sealer.Seal(key, c.encode())
	if err != nil {
		return seriesConfig{}, err
	}
	_, err = s.b.Store.CompareAndSwap(ctx, key, 0, sealed)
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, stores.ErrConflict) {
		return seriesConfig{}, err
	}
	// Another handle stored it first: read theirs. The config is written
	// once and never changes, so a conflict with nothing to read is the
	// store's doing, reported as the conflict it claimed.
	c, rerr := read()
	if errors.Is(rerr, stores.ErrNotFound) {
		return seriesConfig{}, err
	}
	return c, rerr
}

// LookupProvisional tells which record the provisional id (returned by
// vault.Numbered.Put on a store without atomic compare-and-swap) was given
// to and which number it got: ok is false while the record waits for a pass
// (or for an unknown provisional id). A record in a batch that is recorded
// but not yet fully stamped already has its number, as with Lookup.
func (s *Series) LookupProvisional(ctx context.Context, provisional string) (Assignment, bool, error) {
	exit, err := s.enter(ctx)
	if err != nil {
		return Assignment{}, false, s.errorf("lookup", err)
	}
	defer exit()
	if len(provisional) != provisionalLen {
		return Assignment{}, false, s.errorf("lookup", fmt.Errorf("provisional id %q: %w", provisional, ErrInvalid))
	}
	key := s.provisionalKey(provisional)
	it, err := s.b.Store.Get(ctx, key)
	switch {
	case err == nil:
		p, err := s.b.Sealer.Open(key, it.Value)
		if err != nil {
			return Assignment{}, false, s.errorf("lookup "+provisional, ErrTampered)
		}
		id, err := decodeProvisional(p)
		if err != nil {
			return Assignment{}, false, s.errorf("lookup "+provisional, err)
		}
		a, ok, err := s.readAssigned(ctx, id)
		if err != nil {
			return Assignment{}, false, s.errorf("lookup "+provisional, err)
		}
		return a, ok, nil
	case !errors.Is(err, stores.ErrNotFound):
		return Assignment{}, false, s.errorf("lookup "+provisional, err)
	}
	// Not indexed yet: it may be in the batch in flight.
	for range 3 {
		a, ok, err := s.inFlight(ctx, func(it item) bool { return it.provisional == provisional })
		if errors.Is(err, errStaleBatch) {
			continue
		}
		if err != nil {
			return Assignment{}, false, s.errorf("lookup "+provisional, err)
		}
		return a, ok, nil
	}
	return Assignment{}, false, s.errorf("lookup "+provisional, ErrPassRunning)
}
