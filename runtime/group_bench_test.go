package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// BenchmarkGroupJoin measures a 1,024-partition group on the memory store:
// with 7 members balanced, an 8th joins; each iteration is the time and the
// backend calls until the assignment is fair again (then the 8th leaves,
// untimed). It also measures the steady state with all 8 members, once they
// have converged: backend calls per member per renewal interval, which must
// be exactly one keep-alive each (S1), with no Acquire, Members or any
// other call (no polling).
//
// Real time, with a 600ms lease (renewals every 200ms): a join converges
// after the existing members' next keep-alive, so the time is dominated by
// the renewal interval.
func BenchmarkGroupJoin(b *testing.B) {
	const n, members, window = 1024, 8, 10 // window: renewal intervals measured in the steady state
	cfg := runtime.ConfigFor(600 * time.Millisecond)
	store := memory.New()
	ctx := context.Background()
	task := func(ctx context.Context, _ *runtime.Term, _ int) error { <-ctx.Done(); return nil }
	type node struct {
		c *runtime.Client
		g *runtime.Group
	}
	join := func() node {
		c, err := runtime.NewClient(store, cfg)
		if err != nil {
			b.Fatal(err)
		}
		g, err := c.StartGroup("billing", n, runtime.Schedule{}, task)
		if err != nil {
			b.Fatal(err)
		}
		return node{c, g}
	}
	fair := func(nodes []node) bool {
		total, lo, hi := 0, n/len(nodes), (n+len(nodes)-1)/len(nodes)
		for _, x := range nodes {
			k := len(x.g.Partitions())
			if k < lo || k > hi {
				return false
			}
			total += k
		}
		return total == n
	}
	waitFair := func(nodes []node) {
		deadline := time.Now().Add(30 * time.Second)
		for !fair(nodes) {
			if time.Now().After(deadline) {
				b.Fatal("no fair assignment after 30s")
			}
			time.Sleep(time.Millisecond)
		}
	}
	var nodes []node
	for range members - 1 {
		nodes = append(nodes, join())
	}
	waitFair(nodes)
	defer func() {
		for _, x := range nodes {
			_ = x.c.Close(ctx)
		}
	}()

	var calls int64
	b.ResetTimer()
	for b.Loop() {
		store.Faults().ResetCalls()
		newcomer := join()
		all := append(nodes[:len(nodes):len(nodes)], newcomer)
		waitFair(all)
		calls += store.Faults().Calls().Total()
		b.StopTimer()
		if err := newcomer.c.Close(ctx); err != nil {
			b.Fatal(err)
		}
		waitFair(nodes)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(calls)/float64(b.N), "calls/join")

	// The steady state, with all 8 members converged.
	nodes = append(nodes, join())
	waitFair(nodes)
	time.Sleep(3 * cfg.RenewInterval) // the tail of convergence: one digest re-read each
	store.Faults().ResetCalls()
	time.Sleep(window * cfg.RenewInterval)
	steady := store.Faults().Calls()
	perMember := float64(window * len(nodes))
	b.ReportMetric(float64(steady.KeepAlive)/perMember, "keepalives/member/interval")
	b.ReportMetric(float64(steady.Total()-steady.KeepAlive)/perMember, "other-calls/member/interval")
	// Each member renews once per interval; where the window cuts its
	// renewal phase decides whether it gets window-1, window or window+1 in.
	if lo, hi := int64((window-1)*len(nodes)), int64((window+1)*len(nodes)); steady.KeepAlive < lo || steady.KeepAlive > hi {
		b.Errorf("steady state, %d members over %d intervals: %d keep-alives, want %d to %d (one per member per interval)",
			len(nodes), window, steady.KeepAlive, lo, hi)
	}
	if other := steady.Total() - steady.KeepAlive; other != 0 {
		b.Errorf("steady state, %d members over %d intervals: %d calls besides keep-alives (%+v), want none", len(nodes), window, other, steady)
	}
}
