package testservers

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClearRedis deletes the keys matching pattern in database db of the Redis
// at addr, before the test and again when it ends. Use it for keys a test
// cannot give a name of its own, such as a backend's default namespace on a
// server that other checkouts of this module share.
func ClearRedis(t testing.TB, addr string, db int, pattern string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DB: db})
	clear := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var keys []string
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("testservers: scanning Redis db %d for %q: %v", db, pattern, err)
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Fatalf("testservers: deleting %d keys %q from Redis db %d: %v", len(keys), pattern, db, err)
			}
		}
	}
	clear()
	t.Cleanup(func() { clear(); c.Close() })
}

// The Redis Cluster tests use, as `make services` starts it.
const (
	redisClusterEnv     = "SIMBA_TEST_REDIS_CLUSTER"
	redisClusterDefault = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
)

// RedisCluster returns the seed addresses (host:port each) of the Redis
// Cluster tests use, from the comma-separated list in
// SIMBA_TEST_REDIS_CLUSTER or 127.0.0.1:7001-7003, and checks that the
// cluster says its state is ok. If not, it skips the test, or fails it when
// services are required.
func RedisCluster(t testing.TB) []string {
	t.Helper()
	list := setting(redisClusterEnv, redisClusterDefault)
	var addrs []string
	var eps []endpoint
	for a := range strings.SplitSeq(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			t.Fatalf("testservers: %s=%q: want host:port[,host:port...]: %v", redisClusterEnv, list, err)
			return nil
		}
		addrs = append(addrs, a)
		eps = append(eps, endpoint{"tcp", a})
	}
	if len(addrs) == 0 {
		t.Fatalf("testservers: %s=%q names no server", redisClusterEnv, list)
		return nil
	}
	if !reachable(t, "Redis Cluster", redisClusterEnv, eps) {
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: addrs[0], MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err == nil && !strings.Contains(info, "cluster_state:ok") {
		err = fmt.Errorf("cluster_state is not ok")
	}
	if err != nil {
		what := fmt.Sprintf("the Redis Cluster at %s is not usable: %v", list, err)
		if must, why := required(); must {
			t.Fatalf("testservers: %s; %s requires it: start it with `make services`", what, why)
		}
		t.Skipf("testservers: %s; start it with `make services` (scripts/services.sh up redis-cluster)", what)
		return nil
	}
	return addrs
}
