package simbazk

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// Benchmarks against the shared ZooKeeper. Each says what it reports; run
// them with
//
//	go test -run='^$' -bench=. -benchtime=200x ./backends/zookeeper/
//
// (BenchmarkHandOff: 200 hand-offs of each kind; the others: 200 ops).

// counter is a dialer that counts what the client writes: requests and
// go-zookeeper's pings (xid -2), told apart by their header.
type counter struct{ requests, pings atomic.Int64 }

func (c *counter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: conn, c: c}, nil
}

type countedConn struct {
	net.Conn
	c *counter
}

func (cc *countedConn) Write(p []byte) (int, error) {
	// A packet: length (4), xid (4), opcode (4), …; go-zookeeper writes one
	// packet per Write.
	if len(p) >= 8 {
		if int32(binary.BigEndian.Uint32(p[4:8])) == -2 {
			cc.c.pings.Add(1)
		} else {
			cc.c.requests.Add(1)
		}
	}
	return cc.Conn.Write(p)
}

func (c *counter) snapshot() (int64, int64) { return c.requests.Load(), c.pings.Load() }

// S1: a keep-alive is one request whatever the number of leases held, and
// the backend sends no ping of its own. Reported: requests/op and pings/op
// counted at the dialer (go-zookeeper's own pings, every third of the
// session timeout, show as a fraction), and the latency.
func BenchmarkKeepAlive(b *testing.B) {
	servers := sharedZK(b)
	var c counter
	bk := newBackend(b, servers, WithDialer(c.dial), WithMaxLease(time.Minute))
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, _, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: 30 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			for i := range n {
				if _, err := s.Acquire(ctx, "lease-"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			r0, p0 := c.snapshot()
			for b.Loop() {
				r, err := s.KeepAlive(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if r.Digest.Leases != n {
					b.Fatalf("digest counts %d leases; want %d", r.Digest.Leases, n)
				}
			}
			r1, p1 := c.snapshot()
			b.ReportMetric(float64(r1-r0)/float64(b.N), "requests/op")
			b.ReportMetric(float64(p1-p0)/float64(b.N), "pings/op")
		})
	}
}

// §12: an acquisition and its release, against the floor of one raw
// Create and Delete of an ephemeral node on the same server, in the same
// run. Reported: µs/op of each, and the backend's requests per
// acquire+release.
func BenchmarkAcquireRelease(b *testing.B) {
	servers := sharedZK(b)
	var c counter
	bk := newBackend(b, servers, WithDialer(c.dial), WithMaxLease(time.Minute))
	ctx := context.Background()
	b.Run("simba", func(b *testing.B) {
		s, _, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: 30 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		r0, _ := c.snapshot()
		for b.Loop() {
			g, err := s.Acquire(ctx, "lease")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Release(ctx, "lease", g.Token); err != nil {
				b.Fatal(err)
			}
		}
		r1, _ := c.snapshot()
		b.ReportMetric(float64(r1-r0)/float64(b.N), "requests/op")
	})
	b.Run("raw-create-delete", func(b *testing.B) {
		conn := directConn(b, servers)
		path := bk.Root() + "/raw"
		for b.Loop() {
			if _, err := conn.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				b.Fatal(err)
			}
			if err := conn.Delete(path, -1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A1: a graceful hand-off between two nodes — from the leader's Stop to the
// other node's elected callback — against go-zookeeper's own lock recipe
// (zk.NewLock: from the holder's Unlock to the waiter's Lock returning),
// both on the shared server in the same run. Reported: p50, p99 and max in
// µs.
func BenchmarkHandOff(b *testing.B) {
	servers := sharedZK(b)
	cfg := runtime.DefaultConfig()
	bk := newBackend(b, servers, WithMaxLease(cfg.LeaseDuration))
	b.Run("simba", func(b *testing.B) {
		ctx := context.Background()
		var nodes [2]*handOffNode
		for i := range nodes {
			c, err := runtime.NewClient(sameRoot(b, bk, servers), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close(ctx) })
			nodes[i] = &handOffNode{c: c, elected: make(chan time.Time, 1)}
		}
		nodes[0].start(b)
		<-nodes[0].elected
		nodes[1].start(b)
		leader := 0
		var lat []time.Duration
		for b.Loop() {
			// Let the restarted candidate's first attempt (refused) finish, so
			// that each hand-off starts from a candidate woken only by the
			// watch.
			time.Sleep(20 * time.Millisecond)
			other := 1 - leader
			t0 := time.Now()
			if err := nodes[leader].e.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			select {
			case at := <-nodes[other].elected:
				lat = append(lat, at.Sub(t0))
			case <-time.After(10 * time.Second):
				b.Fatalf("hand-off %d: the other node was not elected within 10s", len(lat))
			}
			nodes[leader].start(b)
			leader = other
		}
		reportLatencies(b, lat)
	})
	b.Run("zk.Lock", func(b *testing.B) {
		path := bk.Root() + "/zklock"
		var locks [2]*zk.Lock
		for i := range locks {
			locks[i] = zk.NewLock(directConn(b, servers), path, zk.WorldACL(zk.PermAll))
		}
		if err := locks[0].Lock(); err != nil {
			b.Fatal(err)
		}
		holder := 0
		var lat []time.Duration
		for b.Loop() {
			other := 1 - holder
			got := make(chan time.Time, 1)
			go func() {
				if err := locks[other].Lock(); err != nil {
					b.Error(err)
				}
				got <- time.Now()
			}()
			// Let the waiter queue and watch its predecessor.
			time.Sleep(20 * time.Millisecond)
			t0 := time.Now()
			if err := locks[holder].Unlock(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, (<-got).Sub(t0))
			holder = other
		}
		locks[holder].Unlock()
		reportLatencies(b, lat)
	})
}

type handOffNode struct {
	c       *runtime.Client
	e       *runtime.Election
	elected chan time.Time
}

func (n *handOffNode) start(b *testing.B) {
	b.Helper()
	e, err := n.c.StartElection("lease", runtime.ListenerFuncs{
		OnElected: func(context.Context, *runtime.Term) { n.elected <- time.Now() },
	})
	if err != nil {
		b.Fatal(err)
	}
	n.e = e
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[min(int(f*float64(len(lat))), len(lat)-1)] }
	b.ReportMetric(float64(q(0.5).Microseconds()), "p50-µs")
	b.ReportMetric(float64(q(0.99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}
