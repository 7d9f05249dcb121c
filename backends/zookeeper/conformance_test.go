package simbazk

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// TestConformance runs the shared conformance suite against the real
// ZooKeeper (§12). Every case gets a root of its own on the shared server.
func TestConformance(t *testing.T) {
	servers := sharedZK(t)
	const ttl, durableTTL = 3 * time.Second, 10 * time.Second
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, servers, WithMaxLease(ttl))
		},
		TTL:      ttl,
		MaxLease: ttl,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, b.(*Backend), id)
		},
		NewRestartable: func(t *testing.T) (backends.Backend, func() time.Duration) {
			srv := testservers.StartZooKeeper(t, testservers.ZooKeeperConfig{TickTime: testTick})
			b := newBackend(t, []string{srv.Addr}, WithMaxLease(ttl))
			return b, func() time.Duration { srv.Wipe(); srv.Start(); return b.MaxLease() }
		},
		// A JVM restarted on a loaded machine took more than 3 s to answer
		// again, and the session had expired by then (B2).
		DurableTTL: durableTTL,
		NewDurable: func(t *testing.T) (backends.Backend, func()) {
			srv := testservers.StartZooKeeper(t, testservers.ZooKeeperConfig{TickTime: testTick})
			b := newBackend(t, []string{srv.Addr}, WithMaxLease(durableTTL))
			// SIGKILL: ZooKeeper writes every transaction to its log before
			// it answers, so a kill keeps what was committed.
			return b, func() { srv.Kill(); srv.Launch() }
		},
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			link := faultnet.New()
			b := newBackend(t, servers, WithMaxLease(ttl), WithDialer(link.DialTimeout))
			return b, func() func() { link.Cut(); return link.Heal }
		},
	})
}
