package simbamysql

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"database/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/simba-go/simba/backends"
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
// (durable commits), each pair measured next to the other. Reported: the
// medians and their ratio.
func BenchmarkAcquireRelease(b *testing.B) {
	url := sharedURL(b)
	admin := newDB(b, url, nil)
	db := newDB(b, url, nil)
	db.SetMaxOpenConns(1) // the backend's calls and the raw pair on one connection
	bk := newBackend(b, db, admin)
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
		for range 2 {
			if _, err := raw.ExecContext(ctx, int64(i), int64(i)); err != nil {
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

var _ = errors.Is
