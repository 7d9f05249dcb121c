package testservers

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Java classpath of the Debian zookeeper package, as scripts/services.sh
// uses it: without the two logging jars ZooKeeper logs nothing.
const zkJar = "/usr/share/java/zookeeper.jar"

var zkClasspath = strings.Join([]string{"/etc/zookeeper/conf", zkJar,
	"/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"}, ":")

// ZooKeeperConfig configures a private ZooKeeper server or ensemble.
type ZooKeeperConfig struct {
	TickTime          time.Duration // default 500ms, as the shared server
	MaxSessionTimeout time.Duration // default 60s
	MinSessionTimeout time.Duration // default 2 × TickTime (ZooKeeper's)
	SyncLimit         int           // ticks a follower may lag the leader; default 5
	InitLimit         int           // default 10
}

func (c ZooKeeperConfig) withDefaults() ZooKeeperConfig {
	if c.TickTime == 0 {
		c.TickTime = 500 * time.Millisecond
	}
	if c.MaxSessionTimeout == 0 {
		c.MaxSessionTimeout = 60 * time.Second
	}
	if c.SyncLimit == 0 {
		c.SyncLimit = 5
	}
	if c.InitLimit == 0 {
		c.InitLimit = 10
	}
	return c
}

// ZooKeeperServer is a ZooKeeper server a test started itself, on a free
// loopback port, so that it can stop, freeze, restart or wipe it; the shared
// server is never touched. It is one process of QuorumPeerMain: standalone,
// or one member of an ensemble ([StartZooKeeperEnsemble]).
type ZooKeeperServer struct {
	t    testing.TB
	ID   int    // the server's id (myid) in an ensemble; 0 standalone
	Addr string // the client address, 127.0.0.1:port
	Dir  string // its directory: zoo.cfg, data/, zookeeper.log

	proc child
}

// zkAvailable skips or fails t (see required) unless java and the Debian
// zookeeper package are installed.
func zkAvailable(t testing.TB) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("java"); err != nil {
		missing = append(missing, "java")
	}
	if _, err := os.Stat(zkJar); err != nil {
		missing = append(missing, zkJar)
	}
	if len(missing) == 0 {
		return
	}
	what := fmt.Sprintf("a private ZooKeeper server needs %s; install the zookeeper package (`make services` does)", strings.Join(missing, " and "))
	if must, why := required(); must {
		t.Fatalf("testservers: %s; %s requires it", what, why)
	}
	t.Skipf("testservers: %s", what)
}

// StartZooKeeper starts a standalone ZooKeeper server with cfg on a free
// loopback port and waits until it serves. It is killed when the test ends.
// Without java and the zookeeper package the test is skipped, or fails where
// services are required (CI=true, SIMBA_REQUIRE_SERVICES=1).
func StartZooKeeper(t testing.TB, cfg ZooKeeperConfig) *ZooKeeperServer {
	t.Helper()
	zkAvailable(t)
	cfg = cfg.withDefaults()
	s := &ZooKeeperServer{t: t, Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), Dir: t.TempDir()}
	s.writeConfig(cfg, "")
	s.Start()
	t.Cleanup(s.Kill)
	return s
}

func (s *ZooKeeperServer) writeConfig(cfg ZooKeeperConfig, servers string) {
	s.t.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\n", cfg.TickTime.Milliseconds())
	fmt.Fprintf(&b, "maxSessionTimeout=%d\n", cfg.MaxSessionTimeout.Milliseconds())
	if cfg.MinSessionTimeout > 0 {
		fmt.Fprintf(&b, "minSessionTimeout=%d\n", cfg.MinSessionTimeout.Milliseconds())
	}
	fmt.Fprintf(&b, "initLimit=%d\nsyncLimit=%d\n", cfg.InitLimit, cfg.SyncLimit)
	fmt.Fprintf(&b, "dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\n", filepath.Join(s.Dir, "data"), port)
	b.WriteString("maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr,stat,mntr,conf,cons,ruok\n")
	// Containers are reaped every few seconds, not every minute.
	b.WriteString("znode.container.checkIntervalMs=2000\n")
	b.WriteString(servers)
	if err := os.MkdirAll(filepath.Join(s.Dir, "data"), 0o755); err != nil {
		s.t.Fatalf("testservers: %v", err)
	}
	if s.ID > 0 {
		if err := os.WriteFile(filepath.Join(s.Dir, "data", "myid"), fmt.Appendf(nil, "%d\n", s.ID), 0o644); err != nil {
			s.t.Fatalf("testservers: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "zoo.cfg"), []byte(b.String()), 0o644); err != nil {
		s.t.Fatalf("testservers: %v", err)
	}
}

// Start starts the server process (again) with its configuration and data,
// and waits until it serves (standalone) or its process runs (ensemble
// member: see ZooKeeperEnsemble.WaitQuorum).
func (s *ZooKeeperServer) Start() {
	s.t.Helper()
	s.start()
	if s.ID == 0 {
		s.WaitServing(30 * time.Second)
	}
}

// Launch starts the server process (again) and returns at once, while it is
// still starting.
func (s *ZooKeeperServer) Launch() {
	s.t.Helper()
	s.start()
}

func (s *ZooKeeperServer) start() {
	s.t.Helper()
	cmd := exec.Command("java", "-Xms32m", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Dzookeeper.log.dir="+s.Dir, "-Dzookeeper.root.logger=INFO,CONSOLE",
		"-cp", zkClasspath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.Dir, "zoo.cfg"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if _, err := s.proc.start(cmd, filepath.Join(s.Dir, "zookeeper.log")); err != nil {
		s.t.Fatalf("testservers: starting ZooKeeper: %v", err)
	}
}

// Mode returns the server's mode from the srvr command ("standalone",
// "leader", "follower"), or "" if it does not serve.
func (s *ZooKeeperServer) Mode() string {
	out := FourLetter(s.Addr, "srvr")
	for line := range strings.SplitSeq(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// WaitServing waits until the server serves clients (srvr reports a mode).
func (s *ZooKeeperServer) WaitServing(within time.Duration) {
	s.t.Helper()
	end := time.Now().Add(within)
	for s.Mode() == "" {
		if time.Now().After(end) {
			s.t.Fatalf("testservers: ZooKeeper on %s not serving after %v; log:\n%s", s.Addr, within, s.logTail())
		}
		select {
		case <-s.proc.exited():
			s.t.Fatalf("testservers: ZooKeeper on %s exited; log:\n%s", s.Addr, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *ZooKeeperServer) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "zookeeper.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop stops the server with SIGTERM and waits for it to exit. Its data
// stays: Start brings back its sessions and nodes.
func (s *ZooKeeperServer) Stop() { s.proc.signal(syscall.SIGTERM) }

// Kill kills the server with SIGKILL and waits for it to exit.
func (s *ZooKeeperServer) Kill() { s.proc.signal(syscall.SIGKILL) }

// Freeze stops the server process with SIGSTOP: its port still accepts
// connections, but nothing answers. Thaw resumes it.
func (s *ZooKeeperServer) Freeze() { s.proc.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *ZooKeeperServer) Thaw() { s.proc.signal(syscall.SIGCONT) }

// Wipe kills the server and deletes its data (its ensemble id stays), so
// that the next Start begins from nothing: no sessions, no nodes, zxids
// from zero.
func (s *ZooKeeperServer) Wipe() {
	s.t.Helper()
	s.Kill()
	data := filepath.Join(s.Dir, "data")
	entries, _ := os.ReadDir(data)
	for _, e := range entries {
		if e.Name() != "myid" {
			if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
				s.t.Fatalf("testservers: wiping %s: %v", data, err)
			}
		}
	}
}

// FourLetter sends a four-letter command to the ZooKeeper server at addr
// and returns its answer, or "" if it does not answer within a second.
func FourLetter(addr, cmd string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return ""
	}
	var b bytes.Buffer
	b.ReadFrom(c)
	return b.String()
}
