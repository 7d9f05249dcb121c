package simbazk

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/faultnet"
)

// TestConformance runs the shared conformance suite against the real
// ZooKeeper (§12). Every case gets a root of its own on the shared server.
func TestConformance(t *testing.T) {
	servers := sharedZK(t)
	const ttl = 2 * time.Second
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, servers, WithMaxLease(ttl))
		},
		TTL:      ttl,
		MaxLease: ttl,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, b.(*Backend), id)
		},
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			link := faultnet.New()
			b := newBackend(t, servers, WithMaxLease(ttl), WithDialer(link.DialTimeout))
			return b, func() func() { link.Cut(); return link.Heal }
		},
	})
}
