package simbamysql

import (
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// TestConformance runs the shared conformance suite against real MariaDB
// servers (§12), with every hook. Each case gets a table prefix of its own in
// the shared server's database, except: the amnesia guard runs on a private
// server, whose restart wipes its data directory and initialises a new one
// (mariadb-install-db), so that the tables are created anew and their guard
// runs; the durable restart runs on a private server too (killed and started
// again with its data); and the unreachable case reaches the shared server
// through a faultnet link (the pool's dialer), which it cuts. The shared
// server is never restarted.
//
// TTL is the suite's unit of time: 2 s, as for Redis and PostgreSQL.
// MaxLease is no longer than TTL, since the amnesia case waits for it after
// the restart.
func TestConformance(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	const (
		ttl      = 2 * time.Second
		maxLease = ttl
	)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, newDB(t, url, nil), admin, WithMaxLease(maxLease))
		},
		TTL:      ttl,
		MaxLease: maxLease,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, admin, b.(*Backend).Prefix(), id)
		},
		NewRestartable: func(t *testing.T) (backends.Backend, func() time.Duration) {
			srv := testservers.StartMariaDB(t)
			db := newDB(t, srv.URL(), nil)
			b := newBackend(t, db, db, WithMaxLease(maxLease))
			return b, func() time.Duration { srv.Wipe(); return b.MaxLease() }
		},
		NewDurable: func(t *testing.T) (backends.Backend, func()) {
			srv := testservers.StartMariaDB(t)
			db := newDB(t, srv.URL(), nil)
			b := newBackend(t, db, db, WithMaxLease(maxLease))
			return b, srv.Restart
		},
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			link := faultnet.New()
			b := newBackend(t, newDB(t, url, link), admin, WithMaxLease(maxLease))
			return b, func() func() { link.Cut(); return link.Heal }
		},
	})
}

// The engine end to end on the real MariaDB, with the fault scenarios: a
// node's path is a faultnet link in its pool's dialer; a session is expired
// behind its client's back by setting its expiry in the past
// (expireSession).
func TestEngine(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	backendtest.RunEngine(t, backendtest.EngineHarness{
		New: func(t *testing.T) backends.Backend { return newBackend(t, newDB(t, url, nil), admin) },
		Same: func(t *testing.T, b backends.Backend) backends.Backend {
			return samePrefix(t, b.(*Backend), newDB(t, url, nil))
		},
		Lease: testConfig.LeaseDuration,
		NewPath: func(t *testing.T, b backends.Backend) (backends.Backend, backendtest.Path) {
			link := faultnet.New()
			return samePrefix(t, b.(*Backend), newDB(t, url, link)), link
		},
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, admin, b.(*Backend).Prefix(), id)
		},
	})
}

// TestConformanceBells runs the conformance suite again with bells (as
// Open's backends have them: on pools of their own), where they could
// change an answer: everything but the private servers' restarts, which
// TestConformance runs (a bell holds nothing a restart would keep).
func TestConformanceBells(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	const ttl = 2 * time.Second
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, newDB(t, url, nil), admin, WithMaxLease(ttl), withBellDB(newDB(t, url, nil)))
		},
		TTL:      ttl,
		MaxLease: ttl,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, admin, b.(*Backend).Prefix(), id)
		},
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			link := faultnet.New()
			b := newBackend(t, newDB(t, url, link), admin, WithMaxLease(ttl), withBellDB(newDB(t, url, link)))
			return b, func() func() { link.Cut(); return link.Heal }
		},
		Skip: map[string]string{
			"AmnesiaGuard":   "TestConformance runs it; bells keep nothing a restart could lose",
			"DurableRestart": "TestConformance runs it; bells keep nothing a restart could lose",
		},
	})
}

// TestEngineBells runs the engine scenarios again with bells, on pools of
// their own that take a node's path where it has one (so a cut or a delay
// reaches its bells too).
func TestEngineBells(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	bells := func(t *testing.T, link *faultnet.Link) Option { return withBellDB(newDB(t, url, link)) }
	backendtest.RunEngine(t, backendtest.EngineHarness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, newDB(t, url, nil), admin, bells(t, nil))
		},
		Same: func(t *testing.T, b backends.Backend) backends.Backend {
			return samePrefix(t, b.(*Backend), newDB(t, url, nil), bells(t, nil))
		},
		Lease: testConfig.LeaseDuration,
		NewPath: func(t *testing.T, b backends.Backend) (backends.Backend, backendtest.Path) {
			link := faultnet.New()
			return samePrefix(t, b.(*Backend), newDB(t, url, link), bells(t, link)), link
		},
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			expireSession(t, admin, b.(*Backend).Prefix(), id)
		},
	})
}
