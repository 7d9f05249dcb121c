package bench

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The environment variables that say where the shared servers are: the same
// as the root module's tests (internal/testkit/testservers), with the same defaults.
const (
	RedisEnv     = "SIMBA_TEST_REDIS"     // host:port; default 127.0.0.1:6379
	PostgresEnv  = "SIMBA_TEST_POSTGRES"  // a pgx connection string
	ZooKeeperEnv = "SIMBA_TEST_ZOOKEEPER" // host:port[,host:port…]; default 127.0.0.1:2181
	MySQLEnv     = "SIMBA_TEST_MYSQL"     // a mysql:// URL; default mysql://root@127.0.0.1:3306/test
)

// Env is where the stores are, and the servers the harness starts for itself
// (a private redis-server, an embedded etcd), each started on first use and
// stopped by [Env.Close]. It is safe for concurrent use.
type Env struct {
	// RedisAddr is the Redis every Redis row uses. Empty means a private
	// redis-server started on a free loopback port, so that INFO's CPU and
	// command counters count the rows' own work only (the shared server
	// serves other tests too); when redis-server is not installed, the
	// shared server of SIMBA_TEST_REDIS.
	RedisAddr string

	// PostgresDSN and ZooKeeper are the shared servers (SIMBA_TEST_POSTGRES,
	// SIMBA_TEST_ZOOKEEPER or their defaults).
	PostgresDSN string
	ZooKeeper   []string

	// MySQLURL is the shared MariaDB (SIMBA_TEST_MYSQL or its default).
	MySQLURL string

	// Log receives progress lines; nil discards them.
	Log *slog.Logger

	mu       sync.Mutex
	redis    *redisServer
	redisErr error
	etcd     *etcdServer
	etcdErr  error
}

// NewEnv returns an Env with the shared servers from the environment (or the
// defaults) and a private Redis.
func NewEnv() *Env {
	zk := setting(ZooKeeperEnv, "127.0.0.1:2181")
	var servers []string
	for s := range strings.SplitSeq(zk, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	return &Env{
		PostgresDSN: setting(PostgresEnv, "postgres://postgres@127.0.0.1:5432/simba?sslmode=disable"),
		ZooKeeper:   servers,
		MySQLURL:    setting(MySQLEnv, "mysql://root@127.0.0.1:3306/test"),
	}
}

func setting(env, def string) string {
	if v := strings.TrimSpace(os.Getenv(env)); v != "" {
		return v
	}
	return def
}

func (e *Env) log() *slog.Logger {
	if e.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Log
}

// Redis returns the address of the Redis the Redis rows use, and whether it
// is private to this run.
func (e *Env) Redis() (addr string, private bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.RedisAddr != "" {
		return e.RedisAddr, false, reachable("Redis", e.RedisAddr)
	}
	if e.redis == nil && e.redisErr == nil {
		if _, err := exec.LookPath("redis-server"); err != nil {
			e.RedisAddr = setting(RedisEnv, "127.0.0.1:6379")
			e.log().Info("redis-server not installed: the Redis rows use the shared server, whose INFO counters count other clients too", "addr", e.RedisAddr)
			return e.RedisAddr, false, reachable("Redis", e.RedisAddr)
		}
		e.redis, e.redisErr = startRedis()
	}
	if e.redisErr != nil {
		return "", false, e.redisErr
	}
	return e.redis.addr, true, nil
}

// Etcd returns the client URL of the embedded etcd server, started on first
// use.
func (e *Env) Etcd() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd == nil && e.etcdErr == nil {
		e.etcd, e.etcdErr = startEtcd()
	}
	if e.etcdErr != nil {
		return "", e.etcdErr
	}
	return e.etcd.clientURL, nil
}

// Close stops the servers the Env started.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.redis != nil {
		e.redis.stop()
		e.redis = nil
	}
	if e.etcd != nil {
		e.etcd.stop()
		e.etcd = nil
	}
}

// reachable checks that addr accepts TCP connections.
func reachable(server, addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return fmt.Errorf("%s at %s: %w (%v); start it with `make services`", server, addr, ErrUnavailable, err)
	}
	c.Close()
	return nil
}

// freeAddr returns a loopback address with a port no one listens on.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// unique returns a name no other run uses, for key prefixes and paths.
func unique(kind string) string {
	var b [5]byte
	rand.Read(b[:])
	return "simbabench-" + kind + "-" + hex.EncodeToString(b[:])
}
