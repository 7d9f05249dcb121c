package simbapg

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/simba-go/simba/backends"
)

// Benchmarks against the shared PostgreSQL:
//
//	go test -run='^$' -bench=. -benchtime=500x ./backends/postgres/

// statementCounter is a pgx tracer that counts the statementCounter a pool sends.
type statementCounter struct{ n atomic.Int64 }

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}
func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// S1: a keep-alive is one statement whatever the number of leases held, and
// its time is flat in it: it touches the session's row and the groups it
// joined, never its leases. Reported: statements/op (counted by a pgx
// tracer) and the median keep-alive.
func BenchmarkKeepAlive(b *testing.B) {
	dsn := sharedDSN(b)
	admin := newPool(b, dsn, nil)
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			var count statementCounter
			cfg := poolConfig(b, dsn, nil)
			cfg.ConnConfig.Tracer = &count
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			bk := newBackend(b, pool, admin, WithMaxLease(time.Minute)) // acquiring 10,000 takes seconds
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
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(count.n.Load())/float64(b.N), "statements/op")
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
		})
	}
}

// Acquire+release beside the raw floor: two single-row conditional UPDATEs
// (durable commits), each pair measured next to the other. Reported: the
// medians and their ratio.
func BenchmarkAcquireRelease(b *testing.B) {
	dsn := sharedDSN(b)
	admin := newPool(b, dsn, nil)
	pool := newPool(b, dsn, nil)
	bk := newBackend(b, pool, admin)
	ctx := context.Background()
	s, _, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	table := pgx.Identifier{bk.Schema() + "_raw"}.Sanitize()
	mustExec(b, admin, "CREATE TABLE "+table+" (id int PRIMARY KEY, token bigint NOT NULL)")
	defer mustExec(b, admin, "DROP TABLE "+table)
	mustExec(b, admin, "INSERT INTO "+table+" VALUES (1, 0)")
	ours := make([]time.Duration, 0, b.N)
	raw := make([]time.Duration, 0, b.N)
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
			if _, err := pool.Exec(ctx, "UPDATE "+table+" SET token = $1 WHERE id = 1 AND token <= $1", int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		ours, raw = append(ours, t1.Sub(t0)), append(raw, time.Since(t1))
	}
	b.StopTimer()
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	o, r := med(ours), med(raw)
	b.ReportMetric(float64(o.Microseconds()), "pair-p50-µs")
	b.ReportMetric(float64(r.Microseconds()), "raw-pair-p50-µs")
	b.ReportMetric(float64(o)/float64(r), "ratio")
}

// A graceful hand-off at the backend level, without the runtime: a waiter
// on a node of its own was refused the lease and watches it; after an idle
// span like a candidate's, the holder releases, and the waiter acquires as
// soon as its watch fires. Beside each, after the same idle, a raw pair of
// durable UPDATEs: on even rounds both on one connection (the comparison's
// floor, where the second round trip finds the connection warm), on odd
// rounds one on each of two connections, both idle like the holder's and
// the waiter's: the hand-off's floor. Reported: the medians of the
// hand-off, of the two raw pairs, and of the hand-off's parts (the
// release's round trip, then the wait for the watch, then the acquire's
// round trip).
//
//	go test -run='^$' -bench=HandOff -benchtime=100x ./backends/postgres/
func BenchmarkHandOff(b *testing.B) {
	const idle = 200 * time.Millisecond // the compare tool's is 150–250 ms
	dsn := sharedDSN(b)
	admin := newPool(b, dsn, nil)
	holderNode := newBackend(b, newPool(b, dsn, nil), admin, WithMaxLease(time.Minute))
	waiterNode := sameSchema(b, holderNode, newPool(b, dsn, nil))
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
	waitListening(b, waiterNode)
	waitListening(b, holderNode)
	g, err := holder.Acquire(ctx, "lease")
	if err != nil {
		b.Fatal(err)
	}
	table := pgx.Identifier{holderNode.Schema() + "_raw"}.Sanitize()
	mustExec(b, admin, "CREATE TABLE "+table+" (id int PRIMARY KEY, token bigint NOT NULL)")
	defer mustExec(b, admin, "DROP TABLE "+table)
	mustExec(b, admin, "INSERT INTO "+table+" VALUES (1, 0)")
	raw := newPool(b, dsn, nil)
	var conns [2]*pgxpool.Conn
	for i := range conns {
		c, err := raw.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Release()
		conns[i] = c
	}
	var (
		handOffs, releases, wakes, acquires []time.Duration
		raws                                [2][]time.Duration // by round parity: one connection, two
	)
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
		for _, c := range []*pgxpool.Conn{conns[0], conns[i%2]} {
			if _, err := c.Exec(ctx, "UPDATE "+table+" SET token = $1 WHERE id = 1 AND token <= $1", int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		raws[i%2] = append(raws[i%2], time.Since(t0))

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
	med := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(med(handOffs), "hand-off-p50-µs")
	b.ReportMetric(med(raws[0]), "raw-pair-p50-µs")
	if len(raws[1]) > 0 {
		b.ReportMetric(med(raws[1]), "raw-two-conns-p50-µs")
	}
	b.ReportMetric(med(releases), "release-p50-µs")
	b.ReportMetric(med(wakes), "wake-p50-µs")
	b.ReportMetric(med(acquires), "acquire-p50-µs")
}
