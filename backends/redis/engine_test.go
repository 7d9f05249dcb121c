package simbaredis

import (
	"testing"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
)

// The engine end to end on the real Redis, with the fault scenarios: a
// node's path to Redis is a faultnet link in its client's dialer; a session
// is expired behind its client's back by writing its expiry (expireSession).
func TestEngine(t *testing.T) {
	addr, admin := sharedRedis(t)
	backendtest.RunEngine(t, backendtest.EngineHarness{
		New: func(t *testing.T) backends.Backend { return newBackend(t, newClient(t, addr), admin) },
		Same: func(t *testing.T, b backends.Backend) backends.Backend {
			return sameNamespace(t, b.(*Backend), newClient(t, addr))
		},
		Lease: testConfig.LeaseDuration,
		NewPath: func(t *testing.T, b backends.Backend) (backends.Backend, backendtest.Path) {
			p := newProxy(t, addr)
			return sameNamespace(t, b.(*Backend), p.client(t)), p.link
		},
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, admin, b.(*Backend).keys, string(id))
		},
	})
}
