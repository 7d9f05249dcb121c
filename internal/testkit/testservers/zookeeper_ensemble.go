package testservers

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// ZooKeeperEnsemble is a ZooKeeper ensemble of servers a test started on
// loopback ports, after ../shared's zk-ensemble.sh: each server a process of
// its own, with its own client, quorum and election ports. Each server has a
// configuration of its own, so that the addresses by which it reaches its
// peers can be proxies a test controls (see [StartZooKeeperEnsemble]).
type ZooKeeperEnsemble struct {
	t       testing.TB
	Servers []*ZooKeeperServer // Servers[i] has ID i+1
	Peers   []ZooKeeperPeer    // the real quorum and election addresses, by index
}

// ZooKeeperPeer is where a member of an ensemble listens for its peers.
type ZooKeeperPeer struct {
	Quorum   string // 127.0.0.1:port: followers connect to the leader's
	Election string // 127.0.0.1:port: leader election
}

// Route says by which address server from (an index) reaches the peer
// address addr of server to: addr itself, or a proxy in front of it.
type Route func(from, to int, addr string) string

// StartZooKeeperEnsemble starts n servers (3 for a quorum that survives
// one loss) with cfg, on free loopback ports, and waits until every one
// serves and one leads. route, if not nil, gives the addresses each server
// uses for its peers' quorum and election ports; it is called for every
// ordered pair before any server starts. The servers are killed when the
// test ends. Without java and the zookeeper package the test is skipped,
// or fails where services are required.
func StartZooKeeperEnsemble(t testing.TB, cfg ZooKeeperConfig, n int, route Route) *ZooKeeperEnsemble {
	t.Helper()
	zkAvailable(t)
	cfg = cfg.withDefaults()
	if route == nil {
		route = func(_, _ int, addr string) string { return addr }
	}
	e := &ZooKeeperEnsemble{t: t}
	for i := range n {
		e.Peers = append(e.Peers, ZooKeeperPeer{
			Quorum:   fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
			Election: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		})
		e.Servers = append(e.Servers, &ZooKeeperServer{t: t, ID: i + 1,
			Addr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)), Dir: t.TempDir()})
	}
	for i, s := range e.Servers {
		var b strings.Builder
		for j, p := range e.Peers {
			q, el := p.Quorum, p.Election
			if i != j {
				q, el = route(i, j, q), route(i, j, el)
			}
			fmt.Fprintf(&b, "server.%d=%s:%s\n", j+1, q, portOf(el))
			if host(q) != host(el) {
				t.Fatalf("testservers: a peer's quorum (%s) and election (%s) routes must share a host", q, el)
			}
		}
		s.writeConfig(cfg, b.String())
	}
	var wg sync.WaitGroup
	for _, s := range e.Servers {
		wg.Go(s.start)
		t.Cleanup(s.Kill)
	}
	wg.Wait()
	e.WaitQuorum(60 * time.Second)
	return e
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
func host(addr string) string   { return addr[:strings.LastIndexByte(addr, ':')] }

// ClientAddrs returns the servers' client addresses.
func (e *ZooKeeperEnsemble) ClientAddrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		addrs[i] = s.Addr
	}
	return addrs
}

// Leader returns the server that leads now, or nil.
func (e *ZooKeeperEnsemble) Leader() *ZooKeeperServer {
	for _, s := range e.Servers {
		if s.Mode() == "leader" {
			return s
		}
	}
	return nil
}

// WaitQuorum waits until every running server serves and exactly one
// leads, and returns the leader.
func (e *ZooKeeperEnsemble) WaitQuorum(within time.Duration) *ZooKeeperServer {
	e.t.Helper()
	end := time.Now().Add(within)
	for {
		var leader *ZooKeeperServer
		leaders, ok := 0, true
		for _, s := range e.Servers {
			if !s.running() {
				continue
			}
			switch s.Mode() {
			case "":
				ok = false
			case "leader":
				leaders++
				leader = s
			}
		}
		if ok && leaders == 1 {
			return leader
		}
		if time.Now().After(end) {
			e.t.Fatalf("testservers: the ZooKeeper ensemble has no quorum after %v; logs:\n%s", within, e.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *ZooKeeperEnsemble) logs() string {
	var b strings.Builder
	for _, s := range e.Servers {
		fmt.Fprintf(&b, "--- server %d (%s):\n%s\n", s.ID, s.Addr, s.logTail())
	}
	return b.String()
}

// ServerOf returns the server that has a client connection of the session
// with the hexadecimal id sid (as the cons command lists it), or nil.
func (e *ZooKeeperEnsemble) ServerOf(sid string) *ZooKeeperServer {
	want := "sid=0x" + strings.TrimLeft(strings.ToLower(sid), "0")
	for _, s := range e.Servers {
		if !s.running() {
			continue
		}
		for line := range strings.SplitSeq(FourLetter(s.Addr, "cons"), "\n") {
			if strings.Contains(line, want+",") || strings.Contains(line, want+")") {
				return s
			}
		}
	}
	return nil
}

// running reports whether the server's process runs.
func (s *ZooKeeperServer) running() bool { return s.proc.running() }
