package testservers

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is a private Redis primary, its replica and one Sentinel that
// watches them, started by a test for itself on free loopback ports (the
// shared servers are never restarted or failed over). Everything is stopped
// when the test ends.
type Sentinel struct {
	Master   string // the monitored master's name, for redis.FailoverOptions
	Sentinel string // the Sentinel's address
	Primary  string // the primary's address at start
	Replica  string // the replica's address

	t     testing.TB
	mu    sync.Mutex
	procs map[string]*exec.Cmd // by address
}

// StartSentinel starts a primary, a replica of it and a Sentinel with a
// quorum of 1 that declares the primary down after 1 s, and waits until the
// replica is in sync and the Sentinel knows both. Without redis-server the
// test is skipped, or fails where services are required.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		what := fmt.Sprintf("redis-server is not installed (%v)", err)
		if must, why := required(); must {
			t.Fatalf("testservers: %s; %s requires it (`make services` installs it)", what, why)
		}
		t.Skipf("testservers: %s; install redis-server (`make services` does)", what)
	}
	s := &Sentinel{Master: "simba-test", t: t, procs: make(map[string]*exec.Cmd)}
	t.Cleanup(s.stopAll)
	dir := t.TempDir()
	s.Primary, s.Replica, s.Sentinel = redisFreeAddr(t), redisFreeAddr(t), redisFreeAddr(t)
	s.start(dir, s.Primary, "--save", "", "--appendonly", "no")
	s.start(dir, s.Replica, "--save", "", "--appendonly", "no", "--replicaof", redisHost(s.Primary), redisPort(s.Primary))
	conf := filepath.Join(dir, "sentinel.conf")
	cfg := fmt.Sprintf("port %s\nbind 127.0.0.1\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
		redisPort(s.Sentinel), s.Master, redisHost(s.Primary), redisPort(s.Primary), s.Master, s.Master, s.Master)
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.startArgs(s.Sentinel, conf, "--sentinel")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	replica := redis.NewClient(&redis.Options{Addr: s.Replica})
	defer replica.Close()
	sentinel := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel})
	defer sentinel.Close()
	for {
		info, _ := replica.Info(ctx, "replication").Result()
		replicas, _ := sentinel.Replicas(ctx, s.Master).Result()
		if bytes.Contains([]byte(info), []byte("master_link_status:up")) && len(replicas) > 0 {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testservers: the Sentinel topology did not come up: replication %q, replicas %v", info, replicas)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill kills the server at addr with SIGKILL, as a crash would.
func (s *Sentinel) Kill(addr string) {
	s.mu.Lock()
	cmd := s.procs[addr]
	delete(s.procs, addr)
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
}

// MasterAddr asks the Sentinel which address is the master now.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Sentinel})
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

func (s *Sentinel) start(dir, addr string, args ...string) {
	sub := filepath.Join(dir, redisPort(addr))
	if err := os.MkdirAll(sub, 0o755); err != nil {
		s.t.Fatal(err)
	}
	s.startArgs(addr, append([]string{"--bind", "127.0.0.1", "--port", redisPort(addr), "--dir", sub, "--protected-mode", "no"}, args...)...)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("testservers: redis-server on %s not answering", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Sentinel) startArgs(addr string, args ...string) {
	cmd := exec.Command("redis-server", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("testservers: starting redis-server %v: %v", args, err)
	}
	s.mu.Lock()
	s.procs[addr] = cmd
	s.mu.Unlock()
}

func (s *Sentinel) stopAll() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for _, cmd := range procs {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
}

func redisFreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

func redisHost(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }
func redisPort(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }
