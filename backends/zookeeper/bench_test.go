package simbazk

import (
	"encoding/binary"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendtest"
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

// benchHarness describes ZooKeeper to the shared benchmarks: a root of its
// own on the shared server, reached through a dialer that counts what the
// client writes; the acquire/release floor, one raw Create and Delete of an
// ephemeral node on the same server.
func benchHarness() backendtest.BenchHarness {
	return backendtest.BenchHarness{
		New: func(b *testing.B, maxLease time.Duration) (backends.Backend, []backendtest.Counter) {
			if maxLease == 0 {
				maxLease = time.Minute
			}
			var c counter
			bk := newBackend(b, sharedZK(b), WithDialer(c.dial), WithMaxLease(maxLease))
			return bk, []backendtest.Counter{
				{Unit: "requests", Read: func() float64 { return float64(c.requests.Load()) }},
				{Unit: "pings", Read: func() float64 { return float64(c.pings.Load()) }},
			}
		},
		Same: func(b *testing.B, bk backends.Backend) backends.Backend {
			return sameRoot(b, bk.(*Backend), sharedZK(b))
		},
		KeepAliveLeases: []int{1, 100, 1000},
		AcquireReleaseFloor: func(b *testing.B, bk backends.Backend) backendtest.Floor {
			conn := directConn(b, sharedZK(b))
			path := bk.(*Backend).Root() + "/raw"
			return func(int) string {
				if _, err := conn.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
					b.Fatal(err)
				}
				if err := conn.Delete(path, -1); err != nil {
					b.Fatal(err)
				}
				return "raw-create-delete"
			}
		},
	}
}

// S1: a keep-alive is one request whatever the number of leases held, and
// the backend sends no ping of its own: requests/op and pings/op counted at
// the dialer (go-zookeeper's own pings, every third of the session timeout,
// show as a fraction).
func BenchmarkKeepAlive(b *testing.B) { backendtest.BenchmarkKeepAlive(b, benchHarness()) }

// §12: an acquisition and its release, beside one raw Create and Delete of
// an ephemeral node on the same server; requests per acquire+release.
func BenchmarkAcquireRelease(b *testing.B) { backendtest.BenchmarkAcquireRelease(b, benchHarness()) }

// A1: graceful hand-offs, at the backend level (a watch on the lease node)
// and through the engine, from the leader's Stop to the other node's
// elected callback.
func BenchmarkHandOff(b *testing.B) { backendtest.BenchmarkHandOff(b, benchHarness()) }

// go-zookeeper's own lock recipe, the peer of BenchmarkHandOff/engine (from
// the holder's Unlock to the waiter's Lock returning), on the shared server:
// p50, p99 and max in µs.
func BenchmarkHandOffZKLock(b *testing.B) {
	servers := sharedZK(b)
	bk := newBackend(b, servers, WithMaxLease(runtime.DefaultConfig().LeaseDuration))
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
