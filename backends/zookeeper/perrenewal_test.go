package simbazk

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// S1 on ZooKeeper: a node that holds leases and waits for none writes
// exactly one request per renewal period, its keep-alive: no watch (only a
// refused candidate watches) and no ping (the wire pings only an idle
// connection, and go-zookeeper's own pings are dropped). Counted at the
// dialer. The renewal interval is a quarter of the lease, as the package
// documentation advises: B1's bound then leaves room for two renewals in
// the local validity, and the engine renews at its interval (C2 does not
// shorten it).
func TestHolderRequestsPerRenewal(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	var cnt counter
	b := newBackend(t, servers, WithDialer(cnt.dial), WithMaxLease(3*time.Second))
	cfg := runtime.Config{LeaseDuration: 3 * time.Second, RenewInterval: 750 * time.Millisecond}
	c, renewals := enginetest.StartHolder(t, b, cfg, 3)
	r0, p0 := cnt.snapshot()
	n0 := renewals.Load()
	start := time.Now()
	time.Sleep(8 * cfg.RenewInterval)
	r1, p1 := cnt.snapshot()
	ren := renewals.Load() - n0
	elapsed := time.Since(start)
	// The window may cut a keep-alive in flight: written, not yet renewed.
	if req := r1 - r0; req < ren || req > ren+1 {
		t.Errorf("%d requests written for %d renewals; want one per renewal", req, ren)
	}
	if p1 != p0 {
		t.Errorf("%d pings written by a node renewed every %v; want none", p1-p0, cfg.RenewInterval)
	}
	if periods := float64(elapsed) / float64(cfg.RenewInterval); float64(ren) > periods+1 {
		t.Errorf("%d renewals in %.1f renewal intervals; want one per interval (C2 shortened the period: %v)",
			ren, periods, c.Snapshot().RenewPeriod)
	}
}
