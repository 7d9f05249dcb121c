package simbaredis

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/runtime"
)

// BenchmarkHeldLeases measures one client leading many elections on Redis
// with the default timings (15 s lease): how long until every lease is held
// after the first StartElection, the slowest renewal meanwhile and in the
// steady state that follows (two renewal intervals), and how long Close
// takes to hand them all over. The number of leases is SIMBA_BENCH_LEASES
// (default 10,000):
//
//	SIMBA_BENCH_LEASES=1000000 go test -run='^$' -bench=HeldLeases -benchtime=1x -timeout=30m ./backends/redis/
func BenchmarkHeldLeases(b *testing.B) {
	n := 10_000
	if v := os.Getenv("SIMBA_BENCH_LEASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SIMBA_BENCH_LEASES=%q; want a positive integer", v)
		}
	}
	cfg := runtime.DefaultConfig()
	for range b.N {
		b.StopTimer()
		addr, admin := sharedRedis(b)
		bk := newBackend(b, newClient(b, addr), admin, WithMaxLease(cfg.LeaseDuration))
		var worst atomic.Int64
		obs := runtime.ObserverFunc(func(e runtime.Event) {
			if e.Kind == runtime.EventSessionRenewed && int64(e.Duration) > worst.Load() {
				worst.Store(int64(e.Duration))
			}
		})
		c, err := runtime.NewClient(bk, cfg, runtime.WithObserver(obs))
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for i := range n {
			if _, err := c.StartElection("lease-"+strconv.Itoa(i), nil); err != nil {
				b.Fatal(err)
			}
		}
		for leading(c) < n {
			if time.Since(t0) > 10*time.Minute {
				b.Fatalf("%d of %d leases held after 10 minutes", leading(c), n)
			}
			time.Sleep(time.Second)
		}
		held := time.Since(t0)
		time.Sleep(2 * cfg.RenewInterval)
		b.StartTimer()
		t1 := time.Now()
		if err := c.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		closed := time.Since(t1)
		b.StopTimer()
		b.ReportMetric(held.Seconds(), "s-to-hold-all")
		b.ReportMetric(time.Duration(worst.Load()).Seconds()*1000, "worst-renewal-ms")
		b.ReportMetric(closed.Seconds(), "s-to-close")
	}
}

// leading counts the leases c leads.
func leading(c *runtime.Client) int {
	n := 0
	for _, l := range c.Snapshot().Leases {
		if l.Role == runtime.RoleLeader {
			n++
		}
	}
	return n
}
