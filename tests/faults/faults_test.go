package faults

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestFaults runs -faults.schedules seeded fault schedules on each landed
// backend, the backends side by side, and logs the figures (a line starting
// "faults figures" per backend).
func TestFaults(t *testing.T) {
	base := *flagSeed
	if base == 0 {
		base = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("first seed %d (-faults.seed=%d replays this run)", base, base)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			runBackend(t, k, base)
		})
	}
}

func runBackend(t *testing.T, k backendKind, base int64) {
	lease := *flagLease
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	fe := startFence(t)
	seeds := make(chan int64)
	go func() {
		for i := range *flagSchedules {
			seeds <- base + int64(i)
		}
		close(seeds)
	}()
	var (
		mu      sync.Mutex
		reports []*report
		wg      sync.WaitGroup
		sampled atomic.Bool // a foreign race report was logged
	)
	lanes := max(1, min(*flagParallel, *flagSchedules))
	start := time.Now()
	for lane := range lanes {
		wg.Go(func() {
			// Each lane has a server of its own, so that a schedule's
			// restart hits that schedule alone.
			ok := t.Run(fmt.Sprintf("lane%d", lane), func(t *testing.T) {
				srv := k.start(t, lease)
				prime(t, srv, lease)
				for seed := range seeds {
					p := newPlan(seed, *flagFaults, *flagNodes, lease)
					r := runSchedule(t, api, srv, fe, p, *flagNodes, lease)
					t.Logf("schedule %v\n  ran: %s", p, r.describe())
					if r.raceSample != "" && !sampled.Swap(true) {
						t.Logf("a race report outside this module's code (counted, not failed):\n%s", r.raceSample)
					}
					mu.Lock()
					reports = append(reports, r)
					mu.Unlock()
					if len(r.violations) > 0 || len(r.ourRaces) > 0 {
						t.Errorf("schedule %v\n%s\nthe nodes' logs: %s\nreplay: cd tests && go test ./faults -run 'TestFaults/%s' -faults.seed=%d -faults.schedules=1 -faults.faults=%d -faults.nodes=%d -faults.lease=%v -v",
							p, strings.Join(append(r.violations, r.ourRaces...), "\n"), r.kept, k.name, seed, *flagFaults, *flagNodes, lease)
					}
				}
			})
			if !ok {
				for range seeds { // drain: the other lanes stop too
				}
			}
		})
	}
	wg.Wait()
	t.Log(summary(k.name, reports, time.Since(start)))
}

// summary is the figures of a backend's schedules, one line per figure.
func summary(name string, rs []*report, wall time.Duration) string {
	var terms, writes, refused, late, overlaps, stale, races, violations int
	byKind := map[string][]faultFigure{}
	for _, r := range rs {
		terms += r.terms
		writes += r.writes
		refused += r.refused
		late += r.late
		overlaps += r.overlaps
		stale += r.stale
		races += r.races
		violations += len(r.violations)
		for _, f := range r.faults {
			byKind[f.kind] = append(byKind[f.kind], f)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "faults figures %s: %d schedules in %v; %d terms, %d fenced writes accepted, %d stale refused, %d late (after a newer term began, accepted: fenced, none lower than the highest accepted)",
		name, len(rs), wall.Round(time.Second), terms, writes, refused, late)
	fmt.Fprintf(&b, "\nfaults figures %s: overlaps %d, stale writes accepted %d, violations %d, go-zookeeper-internal race reports %d", name, overlaps, stale, violations, races)
	ks := make([]string, 0, len(byKind))
	for k := range byKind {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for _, k := range ks {
		var gap, rec time.Duration
		for _, f := range byKind[k] {
			gap, rec = max(gap, f.gap), max(rec, f.recovery)
		}
		fmt.Fprintf(&b, "\nfaults figures %s: %-9s ×%-3d worst gap with no holder %v, worst time from the fault's end to a holder of every name %v",
			name, k, len(byKind[k]), gap.Round(time.Millisecond), rec.Round(time.Millisecond))
	}
	return b.String()
}
