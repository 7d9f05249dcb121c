package runtime_test

import (
	"context"
	"os"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// BenchmarkHeldLeases measures what one client leading many elections costs
// on the memory store: the heap per held lease (client and store together,
// after a GC, against the heap before the client started), the store's share
// of it (the same leases acquired through one backend session, without a
// client) and so the client's, in the steady state (two renewals after the
// last lease was acquired), how long it takes until every lease is held,
// and how long Close takes to hand them all over. The number of leases is
// SIMBA_BENCH_LEASES (default 100,000):
//
//	SIMBA_BENCH_LEASES=1000000 go test -run='^$' -bench=HeldLeases -benchtime=1x ./runtime/
func BenchmarkHeldLeases(b *testing.B) {
	n := 100_000
	if v := os.Getenv("SIMBA_BENCH_LEASES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("SIMBA_BENCH_LEASES=%q; want a positive integer", v)
		}
	}
	heap := func() uint64 {
		goruntime.GC()
		var m goruntime.MemStats
		goruntime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for range b.N {
		b.StopTimer()
		before := heap()
		t0 := time.Now()
		c, err := runtime.NewClient(memory.New(), runtime.DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if _, err := c.StartElection("lease-"+strconv.Itoa(i), nil); err != nil {
				b.Fatal(err)
			}
		}
		for {
			held := leading(c)
			if held == n {
				break
			}
			time.Sleep(time.Second) // a snapshot of every lease is not cheap
		}
		acquired := time.Since(t0)
		// Steady state: the renewals that overlapped the acquires re-read
		// the whole list (Owned), whose replies are garbage once the next
		// renewal finds the digest it expects.
		time.Sleep(2 * runtime.DefaultConfig().RenewInterval)
		perLease := float64(heap()-before) / float64(n)
		b.StartTimer()
		t1 := time.Now()
		if err := c.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		closed := time.Since(t1)
		b.StopTimer()
		store := storePerLease(b, n, heap)
		b.ReportMetric(perLease, "B/lease")
		b.ReportMetric(store, "store-B/lease")
		b.ReportMetric(perLease-store, "client-B/lease")
		b.ReportMetric(acquired.Seconds(), "s-to-hold-all")
		b.ReportMetric(closed.Seconds(), "s-to-close")
		b.Logf("%d leases: %.0f B per lease (client %.0f, store %.0f), all held after %v, closed in %v",
			n, perLease, perLease-store, store, acquired.Round(time.Millisecond), closed.Round(time.Millisecond))
	}
}

// storePerLease returns the heap per lease of a memory store holding n
// leases named as the benchmark names them, acquired through one session
// of the backend, without a client.
func storePerLease(b *testing.B, n int, heap func() uint64) float64 {
	ctx := context.Background()
	before := heap()
	st := memory.New()
	s, _, err := st.OpenSession(ctx, backends.SessionOptions{TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if _, err := s.Acquire(ctx, "lease-"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	perLease := float64(heap()-before) / float64(n)
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	return perLease
}
