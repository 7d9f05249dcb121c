package simbaredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// clusterOptions are the go-redis options of the tests' cluster clients, as
// clientOptions are for a single server.
func clusterOptions(addrs []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                 addrs,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		DialerRetries:         1,
		DialTimeout:           time.Second,
	}
}

// newClusterBackend returns a backend on a fresh namespace of the Redis
// Cluster, through client; its keys (one slot) are deleted from the master
// that holds them when the test ends.
func newClusterBackend(t *testing.T, addrs []string, client *redis.ClusterClient) *Backend {
	t.Helper()
	prefix := uniquePrefix()
	b, err := New(client, WithPrefix(prefix), WithMaxLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClusterClient(clusterOptions(addrs))
	t.Cleanup(func() {
		b.Close()
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		node, err := admin.MasterForKey(ctx, b.keys.meta())
		if err != nil {
			t.Logf("finding the master of %s: %v", b.keys, err)
			return
		}
		deleteKeys(t, node, b.keys)
	})
	waitGuard(t, b)
	return b
}

// TestConformanceCluster runs the conformance suite against a three-master
// Redis Cluster: every namespace lives in one slot (the hash tag {prefix}),
// scripts route by their first key and build the others in the same slot,
// PUBLISH reaches every node, and the armed scripts are loaded on the
// master of the namespace's slot. The restarts run on private one-node
// clusters (every slot on one node, which a restart keeps): without
// persistence for the amnesia guard, with an append-only file for the
// durable restart. A cluster's fail-over is the Sentinel test's business.
func TestConformanceCluster(t *testing.T) {
	addrs := testservers.RedisCluster(t)
	newClient := func(t *testing.T, o *redis.ClusterOptions) *redis.ClusterClient {
		c := redis.NewClusterClient(o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	const ttl = 2 * time.Second
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend {
			return newClusterBackend(t, addrs, newClient(t, clusterOptions(addrs)))
		},
		TTL:      ttl,
		MaxLease: 2 * time.Second,
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			rb := b.(*Backend)
			expireSession(t, rb.client, rb.keys, string(id))
		},
		NewRestartable: func(t *testing.T) (backends.Backend, func() time.Duration) {
			srv := testservers.StartRedisCluster(t, "--appendonly", "no")
			b := newClusterBackend(t, []string{srv.Addr}, newClient(t, clusterOptions([]string{srv.Addr})))
			return b, func() time.Duration { srv.Restart(); return b.MaxLease() }
		},
		NewDurable: func(t *testing.T) (backends.Backend, func()) {
			srv := testservers.StartRedisCluster(t)
			b := newClusterBackend(t, []string{srv.Addr}, newClient(t, clusterOptions([]string{srv.Addr})))
			return b, srv.Restart
		},
		RestartEndsSessions: true,
		NewCuttable: func(t *testing.T) (backends.Backend, func() func()) {
			link := faultnet.New()
			o := clusterOptions(addrs)
			o.Dialer = link.Dial
			b := newClusterBackend(t, addrs, newClient(t, o))
			return b, func() func() { link.Cut(); return link.Heal }
		},
	})
}

// The engine end to end on the Redis Cluster, with the fault scenarios (a
// node's path is a faultnet link in its cluster client's dialer).
func TestEngineCluster(t *testing.T) {
	addrs := testservers.RedisCluster(t)
	newClient := func(t *testing.T, o *redis.ClusterOptions) *redis.ClusterClient {
		c := redis.NewClusterClient(o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	backendtest.RunEngine(t, backendtest.EngineHarness{
		New: func(t *testing.T) backends.Backend {
			return newClusterBackend(t, addrs, newClient(t, clusterOptions(addrs)))
		},
		Same: func(t *testing.T, b backends.Backend) backends.Backend {
			return sameNamespace(t, b.(*Backend), newClient(t, clusterOptions(addrs)))
		},
		Lease: 2 * time.Second,
		NewPath: func(t *testing.T, b backends.Backend) (backends.Backend, backendtest.Path) {
			link := faultnet.New()
			o := clusterOptions(addrs)
			o.Dialer = link.Dial
			return sameNamespace(t, b.(*Backend), newClient(t, o)), link
		},
		ExpireSession: func(t *testing.T, b backends.Backend, id backends.SessionID) {
			rb := b.(*Backend)
			expireSession(t, rb.client, rb.keys, string(id))
		},
	})
}

// The armed scripts on a cluster are loaded on the master of the
// namespace's slot, and used.
func TestArmedCluster(t *testing.T) {
	addrs := testservers.RedisCluster(t)
	c := redis.NewClusterClient(clusterOptions(addrs))
	t.Cleanup(func() { c.Close() })
	b := newClusterBackend(t, addrs, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	set := b.armed.set.Load()
	if set == nil {
		t.Fatal("a backend on a Redis 7 cluster is not armed after its first guarded call")
	}
	node, err := c.MasterForKey(ctx, b.keys.meta())
	if err != nil {
		t.Fatal(err)
	}
	exists, err := node.ScriptExists(ctx, set.sha[scriptAcquire]).Result()
	if err != nil || len(exists) != 1 || !exists[0] {
		t.Errorf("the armed acquire script on the namespace's master: %v, %v; want it loaded", exists, err)
	}
	if _, err := s.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
}
