package testservers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a standalone Redis server that a test started for itself on
// a free loopback port, with a directory of its own, so that it can restart
// or kill it; the shared server is never touched. It writes every command to
// its append-only file before answering (appendfsync always), so that a
// restart, even after SIGKILL, keeps every acknowledged write: a restart
// is a pause of the server, not a loss of its data.
//
// Its methods fail the test when a step fails; they are safe for concurrent
// use. The server is killed when the test ends.
type RedisServer struct {
	Addr string // the client address, 127.0.0.1:port
	Dir  string // its directory: the append-only file and redis.log

	t       testing.TB
	args    []string   // options after the defaults
	start   sync.Mutex // held by Start until the server answers
	proc    child
	cluster bool // a one-node cluster: Start waits until its state is ok
}

// StartRedisServer starts a Redis server on a free loopback port and waits
// until it answers PING. args are more redis-server options, after the
// defaults (a later option wins: "--appendonly", "no" makes a server that
// keeps only what SAVE wrote). Without redis-server the test is skipped, or
// fails where services are required (CI=true, SIMBA_REQUIRE_SERVICES=1).
func StartRedisServer(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing(t, fmt.Sprintf("redis-server is not installed (%v)", err), "install redis-server (`make services` does)")
		return nil
	}
	s := &RedisServer{t: t, Addr: redisFreeAddr(t), Dir: t.TempDir(), args: args}
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// Start starts the server (again, with its data) if it is not running, and
// waits until it answers PING.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.start.Lock()
	defer s.start.Unlock()
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", redisPort(s.Addr), "--dir", s.Dir,
		"--protected-mode", "no", "--save", "", "--appendonly", "yes", "--appendfsync", "always")
	cmd.Args = append(cmd.Args, s.args...)
	started, err := s.proc.start(cmd, s.Dir+"/redis.log")
	if err != nil {
		s.t.Fatalf("testservers: starting redis-server: %v", err)
	}
	if !started {
		return // running
	}
	done := s.proc.exited()

	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		if err == nil && s.cluster {
			err = clusterOK(ctx, c)
		}
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			out, _ := os.ReadFile(s.Dir + "/redis.log")
			s.t.Fatalf("testservers: redis-server on %s exited: %s", s.Addr, bytes.TrimSpace(out))
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("testservers: redis-server on %s not answering: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the server with SIGTERM (it closes its connections) until
// [RedisServer.Start].
func (s *RedisServer) Stop() { s.proc.signal(syscall.SIGTERM) }

// Kill kills the server with SIGKILL, as a crash would.
func (s *RedisServer) Kill() { s.proc.signal(syscall.SIGKILL) }

// WaitExited waits up to d for the server's process to exit (after a
// SHUTDOWN, say) and reports whether it did.
func (s *RedisServer) WaitExited(d time.Duration) bool {
	select {
	case <-s.proc.exited():
		return true
	case <-time.After(d):
		return false
	}
}

// Restart kills the server and starts it again on the same port with its
// data, and returns once it answers.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Kill()
	s.Start()
}

// StartRedisCluster starts a Redis Cluster of one node on a free loopback
// port, which serves every slot, and waits until the cluster's state is ok.
// args are more redis-server options, as for [StartRedisServer]: by default
// the node writes every command to its append-only file, so that a restart
// keeps its data; "--appendonly", "no" makes one whose restart loses it. A
// restart keeps the cluster's configuration (nodes.conf in Dir: the node's
// id and its slots), so that the node serves every slot again once it
// answers, with or without its data.
func StartRedisCluster(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	s := StartRedisServer(t, append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}, args...)...)
	if s == nil {
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("testservers: assigning every slot to the cluster node on %s: %v", s.Addr, err)
	}
	s.start.Lock()
	s.cluster = true
	s.start.Unlock()
	for {
		err := clusterOK(ctx, c)
		if err == nil {
			return s
		}
		if ctx.Err() != nil {
			t.Fatalf("testservers: the one-node cluster on %s: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clusterOK returns nil if the node says the cluster's state is ok.
func clusterOK(ctx context.Context, c *redis.Client) error {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("cluster_state is not ok")
	}
	return nil
}
