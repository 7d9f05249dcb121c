package simbaredis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	if os.Getenv(backendtest.WatchTurnsEnv) != "" {
		os.Exit(watchTurnsChild())
	}
	// go-redis logs failed dials to a package-global logger; the fault
	// tests cause plenty of them.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// waitGuard waits until b grants leases: on a namespace in a Redis that
// booted less than MaxLease ago the amnesia guard refuses them (§15).
func waitGuard(t testing.TB, b *Backend) {
	t.Helper()
	backendtest.WaitGranting(t, b, b.MaxLease()+5*time.Second, time.Minute)
}

// clientOptions are the go-redis options of the tests' clients: deadlines
// from contexts (D2), and few retries, so that a fault shows up at once
// rather than after go-redis's dial retries (5 × 100 ms by default).
func clientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		DialerRetries:         1,
		DialTimeout:           time.Second,
	}
}

// newClient returns a client of addr, closed when the test ends.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(clientOptions(addr))
	t.Cleanup(func() { c.Close() })
	return c
}

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "simbatest-" + hex.EncodeToString(b[:])
}

// newBackend returns a backend on client with a fresh prefix, ready to grant
// leases. When the test ends it is closed and its keys are deleted (through
// admin, a client that reaches Redis directly, since client may go through a
// cut proxy).
//
// Its MaxLease is testConfig's LeaseDuration unless opts say otherwise. A
// new namespace on a Redis that booted less than MaxLease ago grants nothing
// until then (the amnesia guard, §15), and CI starts Redis just before
// the tests: with DefaultMaxLease (60 s) every test would time out waiting
// for its first term. newBackend waits for the guard, so that no test
// depends on how long Redis has been up.
func newBackend(t testing.TB, client redis.UniversalClient, admin *redis.Client, opts ...Option) *Backend {
	t.Helper()
	prefix := uniquePrefix()
	b, err := New(client, append([]Option{WithPrefix(prefix), WithMaxLease(testConfig.LeaseDuration)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		b.Close()
		deleteKeys(t, admin, b.keys)
	})
	waitGuard(t, b)
	return b
}

// deleteKeys deletes every key of a namespace.
func deleteKeys(t testing.TB, c *redis.Client, l layout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, l.pattern(), 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("scanning the keys of %s: %v", l, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Logf("deleting the keys of %s: %v", l, err)
			return
		}
		keys = keys[n:]
	}
}

// sharedRedis returns the address of the shared Redis and a client of it.
func sharedRedis(t testing.TB) (string, *redis.Client) {
	t.Helper()
	addr := testservers.Redis(t)
	return addr, newClient(t, addr)
}

// redisServer is a private redis-server a test starts itself, so that it can
// stop and restart it; the shared one on 6379 is never restarted.
type redisServer struct {
	*testservers.RedisServer
	t testing.TB
}

// startRedis starts a redis-server on a free loopback port, without
// persistence unless a test asks for snapshots with SAVE (they go to a
// private directory, and a start loads them). It is killed when the test
// ends. Without a redis-server program the test is skipped, or fails where
// services are required (see testservers).
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	return &redisServer{testservers.StartRedisServer(t, "--appendonly", "no"), t}
}

// shutdownNoSave stops the server with SHUTDOWN NOSAVE (losing everything
// since the last SAVE) and waits until the process has exited.
func (s *redisServer) shutdownNoSave() {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.ShutdownNoSave(ctx) // the connection drops: the error says nothing
	if !s.WaitExited(10 * time.Second) {
		s.t.Fatalf("redis-server on %s did not exit after SHUTDOWN NOSAVE", s.Addr)
	}
}

// restart is SHUTDOWN NOSAVE and a start on the same port.
func (s *redisServer) restart() {
	s.t.Helper()
	s.shutdownNoSave()
	s.Start()
}

// runID returns the server's run id.
func runID(t testing.TB, c *redis.Client) string {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	t.Fatalf("INFO server has no run_id:\n%s", info)
	return ""
}

// proxy is the network path of a test's client to Redis (a faultnet.Link in
// its dialer), to cut it (connections closed, new ones refused), heal it, or
// slow it.
type proxy struct {
	upstream string
	link     *faultnet.Link
}

func newProxy(t *testing.T, upstream string) *proxy {
	return &proxy{upstream: upstream, link: faultnet.New()}
}

// client returns a client of the upstream Redis through the path, closed
// when the test ends.
func (p *proxy) client(t testing.TB) *redis.Client {
	t.Helper()
	o := clientOptions(p.upstream)
	o.Dialer = p.link.Dial
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// cut closes every connection of the path and refuses new ones.
func (p *proxy) cut() { p.link.Cut() }

// heal accepts connections again.
func (p *proxy) heal() { p.link.Heal() }
