package backendtest

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// BenchmarkHeldLeases measures one client leading many elections with the
// default timings (runtime.DefaultConfig: 15 s lease, renewed every 5 s),
// the "a million leases per process": how long until every lease is
// held after the first StartElection (s-to-hold-all), the slowest renewal
// meanwhile (worst-ramp-renewal-ms) and in the steady state of two renewal
// intervals that follows (worst-steady-renewal-ms, keep-alives-per-period),
// and how long Close takes to hand them all over (s-to-close). It counts the
// session's calls through a wrapper: the Owned reads (owned-calls; the
// engine reads the list only when a renewal's digest is not the one it
// expects, T4), and the acquire calls (acquire-calls: single acquires plus
// batches, [backends.BatchSession]) with the leases per call.
//
// The number of leases is SIMBA_BENCH_LEASES (default 10,000), at most
// h.MaxHeldLeases where set (a larger one is lowered, with a log line):
//
//	SIMBA_BENCH_LEASES=1000000 go test -run='^$' -bench=HeldLeases -benchtime=1x -timeout=30m ./backends/redis/
func BenchmarkHeldLeases(b *testing.B, h BenchHarness) {
	n := 10_000
	if v := os.Getenv("SIMBA_BENCH_LEASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SIMBA_BENCH_LEASES=%q; want a positive integer", v)
		}
	}
	if h.MaxHeldLeases > 0 && n > h.MaxHeldLeases {
		b.Logf("SIMBA_BENCH_LEASES=%d is above this store's cap: measuring %d leases", n, h.MaxHeldLeases)
		n = h.MaxHeldLeases
	}
	cfg := runtime.DefaultConfig()
	for range b.N {
		b.StopTimer()
		inner, _ := h.New(b, cfg.LeaseDuration)
		bk := &countingBackend{Backend: inner}
		var worst, phase atomic.Int64 // phase: 0 ramp, 1 steady, 2 closing
		var worstSteady, steadyRenewals, elected, revoked atomic.Int64
		all := make(chan struct{})
		obs := runtime.ObserverFunc(func(e runtime.Event) {
			switch e.Kind {
			case runtime.EventElected:
				if elected.Add(1) == int64(n) {
					close(all)
				}
				return
			case runtime.EventRevoked:
				if phase.Load() < 2 {
					revoked.Add(1)
				}
				return
			case runtime.EventSessionRenewed:
			default:
				return
			}
			switch phase.Load() {
			case 0:
				if int64(e.Duration) > worst.Load() {
					worst.Store(int64(e.Duration))
				}
			case 1:
				steadyRenewals.Add(1)
				if int64(e.Duration) > worstSteady.Load() {
					worstSteady.Store(int64(e.Duration))
				}
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
		select {
		case <-all:
		case <-time.After(10 * time.Minute):
			b.Fatalf("%d of %d leases held after 10 minutes", elected.Load(), n)
		}
		held := time.Since(t0)
		ramp := bk.counts()
		phase.Store(1)
		time.Sleep(2 * cfg.RenewInterval)
		phase.Store(2)
		total := bk.counts()
		if l := leading(c); l != n || revoked.Load() > 0 {
			b.Fatalf("%d of %d leases led after two renewal intervals, %d terms revoked", l, n, revoked.Load())
		}
		b.StartTimer()
		t1 := time.Now()
		if err := c.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		closed := time.Since(t1)
		b.StopTimer()
		checkReleased(b, inner, n)
		b.ReportMetric(held.Seconds(), "s-to-hold-all")
		b.ReportMetric(time.Duration(worst.Load()).Seconds()*1000, "worst-ramp-renewal-ms")
		b.ReportMetric(time.Duration(worstSteady.Load()).Seconds()*1000, "worst-steady-renewal-ms")
		b.ReportMetric(float64(steadyRenewals.Load())/2, "keep-alives-per-period")
		b.ReportMetric(closed.Seconds(), "s-to-close")
		b.ReportMetric(float64(total.owned), "owned-calls")
		b.ReportMetric(float64(ramp.acquireCalls), "acquire-calls")
		if ramp.acquireCalls > 0 {
			b.ReportMetric(float64(ramp.acquired)/float64(ramp.acquireCalls), "leases-per-acquire-call")
		}
		b.Logf("%d leases: held all in %v; Owned read %d times during the ramp, %d in all; %d acquire calls for %d acquisitions",
			n, held.Round(time.Millisecond), ramp.owned, total.owned, ramp.acquireCalls, ramp.acquired)
	}
}

// checkReleased fails b unless the first and the last of the n leases are
// free after Close, as a new session sees them.
func checkReleased(b *testing.B, bk backends.Backend, n int) {
	b.Helper()
	ctx := context.Background()
	s, _, err := bk.OpenSession(ctx, backends.SessionOptions{TTL: 15 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	for _, i := range []int{0, n - 1} {
		name := "lease-" + strconv.Itoa(i)
		if h, err := s.Holder(ctx, name); err != nil || !h.Free() {
			b.Fatalf("after Close, Holder(%q) = %+v, %v; want free", name, h, err)
		}
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
