package simbaredis

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
)

// TestConformance runs the shared conformance suite against the real Redis
// (§12). Every case gets its own prefix on the shared server, except two:
// the AmnesiaGuard case gets a private redis-server, which its Restart hook
// shuts down with SHUTDOWN NOSAVE and starts again (the shared server is
// never restarted), and the Unreachable case reaches the shared server
// through a TCP proxy, which its hook cuts.
func TestConformance(t *testing.T) {
	addr, admin := sharedRedis(t)
	const (
		ttl      = time.Second
		maxLease = 2 * time.Second
	)
	var (
		mu      sync.Mutex
		servers = map[backends.Backend]*redisServer{}
		proxies = map[backends.Backend]*proxy{}
	)
	backendOf := func(t *testing.T, b backends.Backend) *Backend {
		t.Helper()
		rb, ok := b.(*Backend)
		if !ok {
			t.Fatalf("backend is %T, want *simbaredis.Backend", b)
		}
		return rb
	}
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			switch {
			case strings.HasSuffix(t.Name(), "/AmnesiaGuard"):
				srv := startRedis(t)
				c := newClient(t, srv.addr)
				b := newBackend(t, c, c, WithMaxLease(maxLease))
				waitGuard(t, b) // the server just booted
				mu.Lock()
				servers[b] = srv
				mu.Unlock()
				return b
			case strings.HasSuffix(t.Name(), "/Unreachable"):
				p := newProxy(t, addr)
				b := newBackend(t, newClient(t, p.addr()), admin, WithMaxLease(maxLease))
				mu.Lock()
				proxies[b] = p
				mu.Unlock()
				return b
			}
			return newBackend(t, newClient(t, addr), admin, WithMaxLease(maxLease))
		},
		TTL:      ttl,
		MaxLease: maxLease,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			rb := backendOf(t, b)
			expireSession(t, rb.client, rb.keys, string(id))
		},
		Restart: func(t *testing.T, b backends.Backend) time.Duration {
			mu.Lock()
			srv := servers[b]
			mu.Unlock()
			if srv == nil {
				t.Fatal("Restart: the backend has no private server")
			}
			srv.restart()
			return backendOf(t, b).MaxLease()
		},
		Unreachable: func(t *testing.T, b backends.Backend) func() {
			mu.Lock()
			p := proxies[b]
			mu.Unlock()
			if p == nil {
				t.Fatal("Unreachable: the backend has no proxy")
			}
			p.cut()
			return p.heal
		},
	})
}

// expireSession sets the session's expiry in the past, behind its client's
// back: Redis treats it as expired from now on, and the next script that
// meets it ends it (releasing its leases, ending its memberships).
func expireSession(t testing.TB, c redis.UniversalClient, l layout, id string) {
	t.Helper()
	n, err := c.ZAddXX(context.Background(), l.sessions(), redis.Z{Score: 0, Member: id}).Result()
	if err != nil {
		t.Fatalf("expiring session %s: %v", id, err)
	}
	_ = n // ZADD XX reports added members only: 0 either way
	if s, err := c.ZScore(context.Background(), l.sessions(), id).Result(); err != nil || s != 0 {
		t.Fatalf("expiring session %s: score %v, %v; want it live and set to 0", id, s, err)
	}
}
