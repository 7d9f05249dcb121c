package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// WaitGranting waits, at most within, until b grants a lease: a new store,
// schema, namespace or root refuses grants for a while under its amnesia
// guard (the refusals wrap [backends.ErrRecovering]). It opens a session
// with TTL ttl, acquires and releases a lease named "probe" until that
// succeeds, renewing the session between tries, and fails the test on any
// other error.
func WaitGranting(t testing.TB, b backends.Backend, within, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: ttl})
	if err != nil {
		t.Fatalf("waiting for grants: OpenSession: %v", err)
	}
	defer s.Close(ctx)
	for {
		g, err := s.Acquire(ctx, "probe")
		if err == nil {
			s.Release(ctx, "probe", g.Token)
			return
		}
		if !errors.Is(err, backends.ErrRecovering) {
			t.Fatalf("waiting for grants: Acquire: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
		if _, err := s.KeepAlive(ctx); err != nil {
			t.Fatalf("waiting for grants: KeepAlive: %v", err)
		}
	}
}
