package simbapg

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// TestConformance runs the shared conformance suite against real PostgreSQL
// servers (§12), with every hook. Each case gets a schema of its own on the
// shared server, except: the amnesia guard runs on a private server, whose
// restart wipes its data directory and initialises a new cluster there
// (initdb), so that the schema is created anew and its guard runs; the
// durable restart runs on a private server too (pg_ctl restart -m fast); and
// the unreachable case reaches the shared server through a faultnet link (in
// the pool's dialer, which the LISTEN connection shares), which it cuts. The
// shared server is never restarted.
//
// TTL is the suite's unit of time: 2 s, as for Redis, keeps the cases that
// wait for expiries well clear of a loaded machine's hiccups. MaxLease is no
// longer than TTL, since the amnesia case waits for it after the restart.
func TestConformance(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	const (
		ttl      = 2 * time.Second
		maxLease = ttl
	)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, newPool(t, dsn, nil), admin, WithMaxLease(maxLease))
		},
		TTL:      ttl,
		MaxLease: maxLease,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, admin, b.(*Backend).Schema(), id)
		},
		NewRestartable: func(t *testing.T) (backends.Backend, func() time.Duration) {
			srv := testservers.StartPostgres(t)
			pool := newPool(t, srv.DSN(), nil)
			b := newBackend(t, pool, pool, WithMaxLease(maxLease))
			return b, func() time.Duration { srv.Wipe(); return b.MaxLease() }
		},
		NewDurable: func(t *testing.T) (backends.Backend, func()) {
			srv := testservers.StartPostgres(t)
			pool := newPool(t, srv.DSN(), nil)
			b := newBackend(t, pool, pool, WithMaxLease(maxLease))
			return b, srv.Restart
		},
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			link := faultnet.New()
			b := newBackend(t, newPool(t, dsn, link), admin, WithMaxLease(maxLease))
			return b, func() func() { link.Cut(); return link.Heal }
		},
	})
}

// The engine end to end on the real PostgreSQL, with the fault scenarios: a
// node's path is a faultnet link in its pool's dialer, which its LISTEN
// connection shares; a session is expired behind its client's back by
// setting its expiry in the past (expireSession).
func TestEngine(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	backendtest.RunEngine(t, backendtest.EngineHarness{
		New: func(t *testing.T) backends.Backend { return newBackend(t, newPool(t, dsn, nil), admin) },
		Same: func(t *testing.T, b backends.Backend) backends.Backend {
			return sameSchema(t, b.(*Backend), newPool(t, dsn, nil))
		},
		Lease: testConfig.LeaseDuration,
		NewPath: func(t *testing.T, b backends.Backend) (backends.Backend, backendtest.Path) {
			link := faultnet.New()
			return sameSchema(t, b.(*Backend), newPool(t, dsn, link)), link
		},
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, admin, b.(*Backend).Schema(), id)
		},
	})
}
