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

// node is a runtime client contending for one lease.
type node struct {
	t    *testing.T
	name string
	c    *runtime.Client
	e    *runtime.Election

	mu      sync.Mutex
	terms   []*term
	elected chan *term
}

type term struct {
	node      string
	t         *runtime.Term
	electedAt time.Time
	endedAt   time.Time
	reason    runtime.Reason
	ended     chan struct{}
}

func startNode(t *testing.T, name string, b backends.Backend, lease string) *node {
	t.Helper()
	n := &node{t: t, name: name, elected: make(chan *term, 16)}
	c, err := runtime.NewClient(b, testConfig, runtime.WithIdentity(name))
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	n.e, err = c.StartElection(lease, runtime.ListenerFuncs{OnElected: func(_ context.Context, rt *runtime.Term) {
		rec := &term{node: name, t: rt, electedAt: time.Now(), ended: make(chan struct{})}
		go func() {
			<-rt.Done()
			rec.endedAt, rec.reason = time.Now(), rt.Reason()
			close(rec.ended)
		}()
		n.mu.Lock()
		n.terms = append(n.terms, rec)
		n.mu.Unlock()
		n.elected <- rec
	}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) waitElected(within time.Duration) *term {
	n.t.Helper()
	select {
	case rec := <-n.elected:
		return rec
	case <-time.After(within):
		n.t.Fatalf("node %s not elected within %v (%+v)", n.name, within, n.c.Snapshot())
		return nil
	}
}

func (n *node) waitLive(within time.Duration) runtime.Snapshot {
	n.t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		if s := n.c.Snapshot(); s.State == runtime.SessionLive {
			return s
		}
		if time.Now().After(end) {
			n.t.Fatalf("node %s not live within %v (%+v)", n.name, within, n.c.Snapshot())
		}
	}
}

// ended reports whether the term has ended, and when.
func (rec *term) endedBy() (time.Time, bool) {
	select {
	case <-rec.ended:
		return rec.endedAt, true
	default:
		return time.Time{}, false
	}
}

// noOverlap fails the test if two terms of the nodes were valid at once.
func noOverlap(t *testing.T, nodes ...*node) {
	t.Helper()
	var all []*term
	for _, n := range nodes {
		n.mu.Lock()
		all = append(all, n.terms...)
		n.mu.Unlock()
	}
	for i, a := range all {
		aEnd, ok := a.endedBy()
		if !ok {
			aEnd = time.Now()
		}
		for _, b := range all[i+1:] {
			bEnd, ok := b.endedBy()
			if !ok {
				bEnd = time.Now()
			}
			if a.electedAt.Before(bEnd) && b.electedAt.Before(aEnd) {
				t.Errorf("two valid terms: %s's (token %d) and %s's (token %d)", a.node, a.t.Token(), b.node, b.t.Token())
			}
		}
	}
}

// onFollower starts a node on the ensemble whose session is on a
// follower, starting it again (with a new client) until it is: go-zookeeper
// picks a server at random.
func onFollower(t *testing.T, e *ensemble, b backends.Backend, name, lease string) (*node, *testservers.ZooKeeperServer) {
	t.Helper()
	for range 20 {
		n := startNode(t, name, b, lease)
		s := n.waitLive(10 * time.Second)
		srv := e.ServerOf(string(s.Session))
		if srv != nil && srv.Mode() == "follower" {
			return n, srv
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.c.Close(ctx)
		cancel()
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

type quiet struct{}

func (quiet) Printf(string, ...any) {}
