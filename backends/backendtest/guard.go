package backendtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// WaitGranting waits, at most within, until b grants a lease: a new store,
// schema, namespace or root refuses grants for a while under its amnesia
// guard (the refusals wrap [backends.ErrRecovering]). It opens a session
// with TTL ttl, acquires and releases a lease named "probe" until that
// succeeds, renewing the session between tries; a session that expires
// meanwhile, or whose connection drops (a store still settling, such as an
// ensemble electing its leader on a loaded machine), is replaced by a new
// one. It fails the test on any other error.
func WaitGranting(t testing.TB, b backends.Backend, within, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		granted, err := probeGrant(ctx, b, ttl)
		if granted {
			return
		}
		// A store that just started (a ZooKeeper ensemble electing its
		// leader) may also drop a connection now and then: try again
		// with a new session, up to within.
		if !errors.Is(err, backends.ErrSessionExpired) && !errors.Is(err, backends.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("waiting for grants: %v", err)
		}
	}
}

// probeGrant tries the probe lease in one session until a grant, the
// session's end or another error.
func probeGrant(ctx context.Context, b backends.Backend, ttl time.Duration) (bool, error) {
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: ttl})
	if err != nil {
		return false, fmt.Errorf("OpenSession: %w", err)
	}
	defer s.Close(ctx)
	for {
		g, err := s.Acquire(ctx, "probe")
		if err == nil {
			s.Release(ctx, "probe", g.Token)
			return true, nil
		}
		if !errors.Is(err, backends.ErrRecovering) {
			return false, fmt.Errorf("Acquire: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
		if _, err := s.KeepAlive(ctx); err != nil {
			return false, fmt.Errorf("KeepAlive: %w", err)
		}
	}
}
