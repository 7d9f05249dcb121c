package simbaredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// TestConformance runs the shared conformance suite against the real Redis
// (§12). Every case gets its own prefix on the shared server, except three:
// the amnesia guard runs on a private redis-server, which its restart shuts
// down with SHUTDOWN NOSAVE and starts again (the shared server is never
// restarted); the durable restart on a private one with an append-only
// file, killed and started again; and the unreachable case reaches the
// shared server through a faultnet link in its client's dialer, which it
// cuts.
//
// TTL is the suite's unit of time: a case keeps its sessions alive every
// TTL/4 and tolerates TTL/2 of lateness (ExpiryGrace), but some stretches
// between keep-alives (a call, a notification, a Close) are not counted in
// it. With -race on a loaded 2-core machine 1 s was too tight (a Notify run
// saw its session expire); 2 s keeps the suite at about 5 s, since the
// cases run in parallel and the longest waits about 2×TTL + TTL/2.
// MaxLease is no longer than TTL, since the amnesia case waits for it twice
// (after the private server boots, and after its restart).
func TestConformance(t *testing.T) {
	addr, admin := sharedRedis(t)
	const (
		ttl      = 2 * time.Second
		maxLease = ttl
	)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newBackend(t, newClient(t, addr), admin, WithMaxLease(maxLease))
		},
		TTL:      ttl,
		MaxLease: maxLease,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			rb, ok := b.(*Backend)
			if !ok {
				t.Fatalf("backend is %T, want *simbaredis.Backend", b)
			}
			expireSession(t, rb.client, rb.keys, string(id))
		},
		NewRestartable: func(t *testing.T) (backends.Backend, func() time.Duration) {
			srv := startRedis(t)
			c := newClient(t, srv.Addr)
			b := newBackend(t, c, c, WithMaxLease(maxLease))
			return b, func() time.Duration { srv.restart(); return b.MaxLease() }
		},
		// A private server that writes every command to its append-only
		// file before it answers: SIGKILL and a start keep its data. Its
		// new run id still ends every session (§15).
		NewDurable: func(t *testing.T) (backends.Backend, func()) {
			srv := testservers.StartRedisServer(t)
			c := newClient(t, srv.Addr)
			b := newBackend(t, c, c, WithMaxLease(maxLease))
			return b, srv.Restart
		},
		RestartEndsSessions: true,
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			p := newProxy(t, addr)
			b := newBackend(t, p.client(t), admin, WithMaxLease(maxLease))
			return b, func() func() { p.cut(); return p.heal }
		},
	})
}

// expireSession sets the session's expiry in the past, behind its client's
// back, in both places it is kept (its e: field and the sessions set): Redis
// treats it as expired from now on, and the next script that meets it ends
// it (releasing its leases, ending its memberships).
func expireSession(t testing.TB, c redis.UniversalClient, l layout, id string) {
	t.Helper()
	ctx := context.Background()
	if s, err := c.ZScore(ctx, l.sessions(), id).Result(); err != nil || s == 0 {
		t.Fatalf("expiring session %s: its expiry is %v, %v; want it live", id, s, err)
	}
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddXX(ctx, l.sessions(), redis.Z{Score: 0, Member: id})
		p.HSet(ctx, l.meta(), field(fieldExpiry, id), 0)
		return nil
	})
	if err != nil {
		t.Fatalf("expiring session %s: %v", id, err)
	}
	if s, err := c.ZScore(ctx, l.sessions(), id).Result(); err != nil || s != 0 {
		t.Fatalf("expiring session %s: score %v, %v; want it set to 0", id, s, err)
	}
}
