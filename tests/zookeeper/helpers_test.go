// Package zookeeper tests the ZooKeeper backend on a three-server ensemble
// on loopback, with TCP proxies (toxiproxy, in process) between the
// servers' quorum and election ports, so that a test can cut one server off
// from the others while its clients still reach it.
package zookeeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
	simbazk "github.com/simba-go/simba/backends/zookeeper"
	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// The ensemble's timing: tickTime 500 ms as on the shared server, and a
// syncLimit of 10 ticks, longer than the session timeout (3 s), so that a
// follower cut off from the quorum goes on answering its clients' pings for
// longer than the quorum keeps their sessions: the case B1's lag is for.
const (
	tick      = 500 * time.Millisecond
	syncLimit = 10
)

// testConfig is the engine's timing: a 3 s lease, renewed every second.
var testConfig = runtime.ConfigFor(3 * time.Second)

// ensemble is a three-server ensemble whose servers reach one another only
// through proxies.
type ensemble struct {
	*testservers.ZooKeeperEnsemble
	t       *testing.T
	api     *toxiproxy.ApiServer
	mu      sync.Mutex
	proxies map[[2]int][]*toxiproxy.Proxy // (from, to) → quorum and election proxies
}

func startEnsemble(t *testing.T) *ensemble {
	t.Helper()
	e := &ensemble{t: t, proxies: make(map[[2]int][]*toxiproxy.Proxy),
		api: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())}
	route := func(from, to int, addr string) string {
		p := toxiproxy.NewProxy(e.api, fmt.Sprintf("%d-%d-%s", from, to, addr), "127.0.0.1:0", addr)
		if err := p.Start(); err != nil {
			t.Fatalf("starting a proxy to %s: %v", addr, err)
		}
		t.Cleanup(p.Stop)
		e.mu.Lock()
		e.proxies[[2]int{from, to}] = append(e.proxies[[2]int{from, to}], p)
		e.mu.Unlock()
		return p.Listen
	}
	e.ZooKeeperEnsemble = testservers.StartZooKeeperEnsemble(t,
		testservers.ZooKeeperConfig{TickTime: tick, SyncLimit: syncLimit}, 3, route)
	return e
}

// isolate cuts server i (an index) off from the others: every byte between
// it and its peers is dropped, in both directions, while connections stay
// open (a partition, not a crash: nobody is told). It returns the function
// that heals it.
func (e *ensemble) isolate(i int) (heal func()) {
	e.t.Helper()
	var cut []*toxiproxy.Proxy
	for k, ps := range e.proxies {
		if k[0] == i || k[1] == i {
			cut = append(cut, ps...)
		}
	}
	for _, p := range cut {
		for _, stream := range []string{"upstream", "downstream"} {
			js := fmt.Sprintf(`{"name":"drop-%s","type":"timeout","stream":"%s","attributes":{"timeout":0}}`, stream, stream)
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				e.t.Fatalf("cutting %s: %v", p.Name, err)
			}
		}
	}
	return sync.OnceFunc(func() {
		for _, p := range cut {
			for _, stream := range []string{"upstream", "downstream"} {
				p.Toxics.RemoveToxic(context.Background(), "drop-"+stream)
			}
		}
	})
}

// index returns the index of server s.
func (e *ensemble) index(s *testservers.ZooKeeperServer) int {
	for i, x := range e.Servers {
		if x == s {
			return i
		}
	}
	return -1
}

func uniqueRoot() string {
	var b [6]byte
	rand.Read(b[:])
	return "/simbatest-" + hex.EncodeToString(b[:])
}

// newBackend returns a backend on the ensemble with a fresh root, ready to
// grant leases, closed when the test ends.
func newBackend(t *testing.T, servers []string, root string) *simbazk.Backend {
	t.Helper()
	b, err := simbazk.New(servers, simbazk.WithRoot(root), simbazk.WithMaxLease(testConfig.LeaseDuration),
		simbazk.WithTickTime(tick))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// waitGuard waits until the root grants leases (a new root's amnesia guard).
func waitGuard(t *testing.T, b *simbazk.Backend) {
	t.Helper()
	backendtest.WaitGranting(t, b, 30*time.Second, 10*time.Second)
}

// newCluster returns the nodes of a test, with testConfig: every term they
// hold is recorded, and checked when the test ends — never two valid terms
// at once, tokens rising, callbacks paired (package termcheck).
func newCluster(t *testing.T) *enginetest.Cluster { return enginetest.NewCluster(t, testConfig) }

// onFollower starts a node on the ensemble whose session is on a
// follower, starting it again (with a new client) until it is: go-zookeeper
// picks a server at random.
func onFollower(t *testing.T, e *ensemble, cl *enginetest.Cluster, b backends.Backend, name, lease string) (*enginetest.Node, *testservers.ZooKeeperServer) {
	t.Helper()
	for range 20 {
		n := cl.Start(name, b, lease)
		s := n.WaitState(runtime.SessionLive, 10*time.Second)
		srv := e.ServerOf(string(s.Session))
		if srv != nil && srv.Mode() == "follower" {
			return n, srv
		}
		n.Close()
	}
	t.Fatal("no node's session landed on a follower in 20 tries")
	return nil, nil
}

// deleteWatch reports, on the returned channel, when ZooKeeper deletes path,
// watched by a client of the servers given.
func deleteWatch(t *testing.T, servers []string, path string) <-chan time.Time {
	t.Helper()
	c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	at := make(chan time.Time, 1)
	go func() {
		for {
			ok, _, ch, err := c.ExistsW(path)
			if err != nil {
				return
			}
			if !ok {
				at <- time.Now()
				return
			}
			ev := <-ch
			if ev.Type == zk.EventNodeDeleted {
				at <- time.Now()
				return
			}
		}
	}()
	return at
}

// leaseNode is the node whose deletion frees name under root: its lease
// node, or without one the first reservation of its queue (simbazk's
// queue.go), which a holder that waited before holds it through.
func leaseNode(t *testing.T, servers []string, root, name string) string {
	t.Helper()
	c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _, err := c.Exists(root + "/l/" + name); err != nil || ok {
		return root + "/l/" + name
	}
	children, _, err := c.Children(root + "/q/" + name)
	if err != nil || len(children) == 0 {
		t.Fatalf("%s is held by no lease node and no reservation (%v)", name, err)
	}
	slices.SortFunc(children, func(a, b string) int { // by sequence number: "<sid>-<seq>"
		return strings.Compare(a[strings.IndexByte(a, '-'):], b[strings.IndexByte(b, '-'):])
	})
	return root + "/q/" + name + "/" + children[0]
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
