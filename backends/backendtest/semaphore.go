package backendtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/internal/testkit/termcheck"
)

// §13, D3, T2: a semaphore of 3 permits shared by 10 nodes, each with a
// session of its own, taking turns: never more than 3 permits valid at once
// (the term checker's "at most n" over the permits), each permit's tokens
// rising, every turn granted, and more than one permit held at a time — a
// semaphore, not a mutex.
func testSemaphore(t *testing.T, h *EngineHarness) {
	const (
		nodes = 10
		size  = 3
		turns = 3
	)
	b := h.New(t)
	cl := enginetest.NewCluster(t, h.config())
	rec := termcheck.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 30*h.Lease)
	defer cancel()

	var wg sync.WaitGroup
	for i := range nodes {
		nb := b
		if i > 0 {
			nb = h.same(t, b)
		}
		n := cl.NewNode(fmt.Sprintf("node-%d", i), nb)
		sem, err := n.C.Semaphore("jobs", size)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range turns {
				p, err := sem.Acquire(ctx)
				if err != nil {
					t.Errorf("%s: Acquire: %v", n.Name, err)
					return
				}
				id := rec.Begin(p.Name(), n.Name, int64(p.Token()))
				select { // the work, cut short if the permit ends early
				case <-time.After(20 * time.Millisecond):
				case <-p.Done():
				}
				rec.End(id) // the work is over: the node no longer acts on the permit
				if err := sem.Release(ctx, p); err != nil {
					t.Errorf("%s: Release: %v", n.Name, err)
				}
			}
		})
	}
	wg.Wait()

	report := rec.Check(termcheck.Options{
		Semaphores: map[string]int{"jobs": size},
		PermitOf: func(name string) (string, bool) { // runtime.PermitName: "jobs.permit-<i>"
			sem, _, ok := strings.Cut(name, ".permit-")
			return sem, ok
		},
	})
	if err := report.Err(); err != nil {
		t.Errorf("the permits of a semaphore of %d:\n%v", size, err)
	}
	if report.Terms != nodes*turns {
		t.Errorf("%d permits granted; want %d (%d nodes × %d turns)", report.Terms, nodes*turns, nodes, turns)
	}
	if peak := peakValid(rec.Terms()); peak < 2 {
		t.Errorf("at most %d permit valid at any instant; want several at once from a semaphore of %d", peak, size)
	}
}

// peakValid returns the largest number of terms valid at one instant.
func peakValid(ts []termcheck.Term) int {
	peak := 0
	for _, t := range ts {
		n := 0
		for _, u := range ts {
			if u.Start <= t.Start && t.Start < u.End {
				n++
			}
		}
		peak = max(peak, n)
	}
	return peak
}
