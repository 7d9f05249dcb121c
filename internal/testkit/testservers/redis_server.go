package testservers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
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

	t     testing.TB
	args  []string   // options after the defaults
	start sync.Mutex // held by Start until the server answers
	proc  child
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
