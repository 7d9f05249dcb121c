package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// Benchmarks against the shared MariaDB:
//
//	go test -run='^$' -bench=. -benchtime=500x ./backends/mysql/

// commandCounter counts the commands a pool sends: MySQL packets that start
// a command (sequence number 0), each one round trip.
type commandCounter struct{ n atomic.Int64 }

// dial is a go-sql-driver DialFunc whose connections count the commands
// written.
func (c *commandCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c}, nil
}

type countingConn struct {
	net.Conn
	c *commandCounter
}

func (cc *countingConn) Write(p []byte) (int, error) {
	for b := p; len(b) >= 4; {
		size := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if b[3] == 0 {
			cc.c.n.Add(1)
		}
		if 4+size > len(b) {
			break
		}
		b = b[4+size:]
	}
	return cc.Conn.Write(p)
}

// countedDB returns a pool of the shared database whose commands c counts.
func countedDB(b *testing.B, rawURL string, c *commandCounter) *sql.DB {
	cfg := driverCfg(b, rawURL)
	cfg.DialFunc = c.dial
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		b.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxIdleConns(8)
	b.Cleanup(func() { db.Close() })
	return db
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// S1: a keep-alive is one statement (one round trip: one CALL) whatever the
// number of leases held, and its time is flat in it: it touches the
// session's row and the groups it joined, never its leases. Reported:
// statements/op (commands counted on the wire) and the median keep-alive.
func BenchmarkKeepAlive(b *testing.B) {
	url := sharedURL(b)
	admin := newDB(b, url, nil)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			var count commandCounter
			bk := newBackend(b, countedDB(b, url, &count), admin, WithMaxLease(time.Minute))
			ctx := context.Background()
			s, _, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			for i := range n {
				if _, err := s.Acquire(ctx, fmt.Sprintf("lease-%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := s.KeepAlive(ctx); err != nil { // prepared on this connection
				b.Fatal(err)
			}
			times := make([]time.Duration, 0, b.N)
			count.n.Store(0)
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				r, err := s.KeepAlive(ctx)
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
				if r.Digest.Leases != n {
					b.Fatalf("digest counts %d leases; want %d", r.Digest.Leases, n)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(count.n.Load())/float64(b.N), "statements/op")
			b.ReportMetric(float64(median(times).Microseconds()), "p50-µs")
		})
	}
}

// Acquire+release beside the raw floor: two single-row conditional UPDATEs
// (durable commits: each changes the row, since InnoDB writes nothing for
// an UPDATE that changes nothing), each pair measured next to the other. Reported: the
// medians and their ratio.
func BenchmarkAcquireRelease(b *testing.B) {
	url := sharedURL(b)
	admin := newDB(b, url, nil)
	db := newDB(b, url, nil)
	db.SetMaxOpenConns(1) // the backend's calls and the raw pair on one connection
	bk := newBackend(b, db, admin, WithMaxLease(time.Minute))
	ctx := context.Background()
	s, _, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	table := bk.Prefix() + "_raw"
	mustExec(b, admin, "CREATE TABLE "+table+" (id INT PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB")
	defer mustExec(b, admin, "DROP TABLE "+table)
	mustExec(b, admin, "INSERT INTO "+table+" VALUES (1, 0)")
	raw, err := db.PrepareContext(ctx, "UPDATE "+table+" SET token = ? WHERE id = 1 AND token <= ?")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	ours := make([]time.Duration, 0, b.N)
	raws := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%100 == 99 { // the session's TTL is clamped to the lease: renew it, untimed
			if _, err := s.KeepAlive(ctx); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		g, err := s.Acquire(ctx, "lease")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Release(ctx, "lease", g.Token); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for k := range int64(2) { // each changes the row, so each commit is durable
			if _, err := raw.ExecContext(ctx, 2*int64(i)+k, 2*int64(i)+k); err != nil {
				b.Fatal(err)
			}
		}
		ours, raws = append(ours, t1.Sub(t0)), append(raws, time.Since(t1))
	}
	b.StopTimer()
	o, r := median(ours), median(raws)
	b.ReportMetric(float64(o.Microseconds()), "pair-p50-µs")
	b.ReportMetric(float64(r.Microseconds()), "raw-pair-p50-µs")
	b.ReportMetric(float64(o)/float64(r), "ratio")
}

// A graceful hand-off at the backend level, without the runtime: a waiter
// on a node of its own was refused the lease and watches it; after an idle
// span like a candidate's, the holder releases, and the waiter acquires as
// soon as its watch fires (the release poll, every 50 ms). Beside each, after
// the same idle, the floor: a raw pair of durable UPDATEs on two idle
// connections. Reported: the medians of the hand-off, of the floor, and of
// the hand-off's parts (the release's round trip, then the wait for the
// poll, then the acquire's round trip).
//
//	go test -run='^$' -bench=HandOff -benchtime=40x ./backends/mysql/
func BenchmarkHandOff(b *testing.B) {
	const idle = 200 * time.Millisecond // the compare tool's is 150–250 ms
	url := sharedURL(b)
	admin := newDB(b, url, nil)
	holderNode := newBackend(b, newDB(b, url, nil), admin, WithMaxLease(time.Minute))
	waiterNode := samePrefix(b, holderNode, newDB(b, url, nil))
	ctx := context.Background()
	open := func(bk *Backend) backends.Session {
		s, _, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	holder, waiter := open(holderNode), open(waiterNode)
	woke := make(chan struct{}, 1)
	for _, s := range []backends.Session{holder, waiter} { // each waits in turn
		stop := s.(backends.Notifier).Watch("lease", func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
		b.Cleanup(stop)
	}
	g, err := holder.Acquire(ctx, "lease")
	if err != nil {
		b.Fatal(err)
	}
	table := holderNode.Prefix() + "_raw"
	mustExec(b, admin, "CREATE TABLE "+table+" (id INT PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB")
	defer mustExec(b, admin, "DROP TABLE "+table)
	mustExec(b, admin, "INSERT INTO "+table+" VALUES (1, 0)")
	raw := newDB(b, url, nil)
	var conns [2]*sql.Conn
	for i := range conns {
		c, err := raw.Conn(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	var handOffs, floors, releases, wakes, acquires []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%50 == 49 { // untimed renewals, well within the minute
			for _, s := range []backends.Session{holder, waiter} {
				if _, err := s.KeepAlive(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
		time.Sleep(idle)
		t0 := time.Now()
		for k, c := range conns { // each changes the row: two durable commits
			if _, err := c.ExecContext(ctx, "UPDATE "+table+" SET token = ? WHERE id = 1 AND token <= ?", 2*int64(i)+int64(k), 2*int64(i)+int64(k)); err != nil {
				b.Fatal(err)
			}
		}
		floors = append(floors, time.Since(t0))

		if _, err := waiter.Acquire(ctx, "lease"); !errors.Is(err, backends.ErrLeaseHeld) {
			b.Fatalf("the waiter's Acquire = %v; want ErrLeaseHeld", err)
		}
		select {
		case <-woke:
		default:
		}
		time.Sleep(idle)
		t0 = time.Now()
		if _, err := holder.Release(ctx, "lease", g.Token); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		<-woke
		t2 := time.Now()
		if g, err = waiter.Acquire(ctx, "lease"); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		handOffs, releases, wakes, acquires = append(handOffs, t3.Sub(t0)), append(releases, t1.Sub(t0)),
			append(wakes, t2.Sub(t1)), append(acquires, t3.Sub(t2))
		holder, waiter = waiter, holder
	}
	b.StopTimer()
	us := func(d []time.Duration) float64 { return float64(median(d).Microseconds()) }
	b.ReportMetric(us(handOffs), "hand-off-p50-µs")
	b.ReportMetric(us(floors), "raw-two-conns-p50-µs")
	b.ReportMetric(us(releases), "release-p50-µs")
	b.ReportMetric(us(wakes), "wake-p50-µs")
	b.ReportMetric(us(acquires), "acquire-p50-µs")
}

// A graceful hand-off through the engine, with the release poll (every
// 50 ms) and without it (plain polling: the candidate's own attempts, every
// RenewInterval/2 plus jitter): the leader stops its election, and the time
// until the other node's term begins. Reported: the median and the worst.
//
//	go test -run='^$' -bench=EngineHandOff -benchtime=10x ./backends/mysql/
func BenchmarkEngineHandOff(b *testing.B) {
	url := sharedURL(b)
	admin := newDB(b, url, nil)
	for _, poll := range []time.Duration{DefaultPollInterval, 0} {
		b.Run(fmt.Sprintf("poll=%v", poll), func(b *testing.B) {
			bk := newBackend(b, newDB(b, url, nil), admin, WithPollInterval(poll))
			var times []time.Duration
			nodes := [2]*benchNode{newBenchNode(b, bk), newBenchNode(b, samePrefix(b, bk, newDB(b, url, nil)))}
			nodes[0].start(b)
			nodes[0].waitElected(b, 5*time.Second)
			nodes[1].start(b)
			time.Sleep(testConfig.RenewInterval) // the candidate was refused, and waits
			b.ResetTimer()
			for i := range b.N {
				leader, next := nodes[i%2], nodes[(i+1)%2]
				t0 := time.Now()
				leader.stop(b)
				next.waitElected(b, 3*testConfig.LeaseDuration)
				times = append(times, time.Since(t0))
				leader.start(b)
				time.Sleep(testConfig.RenewInterval / 2) // refused, waiting
			}
			b.StopTimer()
			b.ReportMetric(float64(median(times).Milliseconds()), "hand-off-p50-ms")
			b.ReportMetric(float64(slices.Max(times).Milliseconds()), "hand-off-max-ms")
		})
	}
}

// benchNode is one runtime client contending for "lease".
type benchNode struct {
	c       *runtime.Client
	e       *runtime.Election
	elected chan struct{}
}

func newBenchNode(b *testing.B, bk *Backend) *benchNode {
	c, err := runtime.NewClient(bk, testConfig)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return &benchNode{c: c, elected: make(chan struct{}, 16)}
}

func (n *benchNode) start(b *testing.B) {
	e, err := n.c.StartElection("lease", runtime.ListenerFuncs{
		OnElected: func(context.Context, *runtime.Term) { n.elected <- struct{}{} },
	})
	if err != nil {
		b.Fatal(err)
	}
	n.e = e
}

func (n *benchNode) stop(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

func (n *benchNode) waitElected(b *testing.B, within time.Duration) {
	select {
	case <-n.elected:
	case <-time.After(within):
		b.Fatalf("not elected within %v", within)
	}
}
