package faultnet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// One node's path to an in-process store: a cut fails its calls at once, a
// blackhole holds them until their context ends, delays hold requests and
// replies; the other node on the same store is never touched, and the
// node's notifications are lost while the link is down.
func TestBackendPath(t *testing.T) {
	store := memory.New()
	link := faultnet.New()
	node := link.Backend(store)
	if _, ok := node.(backends.StoreClock); !ok {
		t.Error("the path to a store with a clock offers no StoreClock")
	}
	ctx := context.Background()
	s, _, err := node.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := store.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g, err := other.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	woken := make(chan struct{}, 4)
	stop := s.(backends.Notifier).Watch("lease", func() { woken <- struct{}{} })
	defer stop()
	if _, err := s.Acquire(ctx, "lease"); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("Acquire of a held lease = %v; want ErrLeaseHeld", err)
	}

	link.Cut()
	start := time.Now()
	if _, err := s.KeepAlive(ctx); !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, faultnet.ErrCut) {
		t.Errorf("KeepAlive through a cut link = %v; want ErrUnavailable wrapping ErrCut", err)
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("KeepAlive through a cut link took %v; want it to fail at once", took)
	}
	if _, err := other.Release(ctx, "lease", g.Token); err != nil {
		t.Fatalf("the other node's Release while the link is cut: %v", err)
	}
	select {
	case <-woken:
		t.Error("a release notified through a cut link")
	case <-time.After(50 * time.Millisecond):
	}

	link.Blackhole()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = s.KeepAlive(cctx)
	if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("KeepAlive through a blackhole = %v; want ErrUnavailable wrapping the context's error", err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("KeepAlive through a blackhole returned after %v; want it held until its context ended", took)
	}

	link.Heal()
	link.DelayRequests(80 * time.Millisecond)
	link.DelayReplies(40 * time.Millisecond)
	start = time.Now()
	if _, err := s.KeepAlive(ctx); err != nil {
		t.Fatalf("KeepAlive through a healed, slow link: %v", err)
	}
	if took := time.Since(start); took < 120*time.Millisecond {
		t.Errorf("KeepAlive through a link that holds requests 80ms and replies 40ms took %v; want ≥ 120ms", took)
	}
	// A reply held past the call's deadline is lost; the store acted.
	cctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.Acquire(cctx, "lease"); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Acquire whose reply came after its deadline = %v; want ErrUnavailable", err)
	}
	if h, err := other.Holder(ctx, "lease"); err != nil || h.Session != s.ID() {
		t.Errorf("Holder after the acquire whose reply was lost = %+v, %v; want the node's session", h, err)
	}
	link.DelayRequests(0)
	link.DelayReplies(0)
}
