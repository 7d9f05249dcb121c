package runtime_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// heldAll waits until c holds every partition of its only group.
func heldAll(t *testing.T, c *runtime.Client, n int) runtime.GroupStatus {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		synctest.Wait()
		gs := c.Snapshot().Groups[0]
		if len(gs.Held) == n {
			return gs
		}
		if time.Since(start) > 2*cfg.RenewInterval {
			t.Fatalf("holds %v of %d partitions after %v", gs.Held, n, time.Since(start))
		}
	}
}

// Snapshot shows each held partition of a scheduled group: its term's
// token and validity, and its schedule's next run and last result (§13).
func TestSnapshotScheduledGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		const n, rate = 4, 10 * time.Second
		failed := errors.New("partition 2 failed")
		var mu sync.Mutex
		tokens := map[int]runtime.Token{}
		if _, err := c.StartGroup("billing", n, runtime.Schedule{Rate: rate},
			func(_ context.Context, term *runtime.Term, i int) error {
				mu.Lock()
				tokens[i] = term.Token()
				mu.Unlock()
				if i == 2 {
					return failed
				}
				return nil
			}); err != nil {
			t.Fatal(err)
		}
		heldAll(t, c, n)
		time.Sleep(2 * rate)
		synctest.Wait()

		gs := c.Snapshot().Groups[0]
		if got := len(gs.PerPartition); got != n || !slices.Equal(gs.Held, []int{0, 1, 2, 3}) {
			t.Fatalf("Held %v, %d partition entries; want all %d", gs.Held, got, n)
		}
		nextSlot := time.Unix(0, 0).Add(time.Duration(slotOf(time.Now(), rate)+1) * rate)
		mu.Lock()
		defer mu.Unlock()
		for k, ps := range gs.PerPartition {
			if ps.Index != gs.Held[k] {
				t.Errorf("entry %d is partition %d, want %d, in Held's order", k, ps.Index, gs.Held[k])
			}
			if ps.Token != tokens[ps.Index] || ps.Token <= 0 {
				t.Errorf("partition %d: token %d, want %d, the term its runs got", ps.Index, ps.Token, tokens[ps.Index])
			}
			if ps.Remaining <= 0 || ps.Remaining > cfg.LeaseDuration {
				t.Errorf("partition %d: remaining %v, want the term's validity, in (0, %v]", ps.Index, ps.Remaining, cfg.LeaseDuration)
			}
			st := ps.Schedule
			if st == nil {
				t.Errorf("partition %d: no schedule status", ps.Index)
				continue
			}
			if st.Runs < 2 || st.LastRun.IsZero() || !st.Next.Equal(nextSlot) {
				t.Errorf("partition %d: %+v; want 2 or 3 runs and the next at the next slot's start %v", ps.Index, *st, nextSlot)
			}
			var want error
			if ps.Index == 2 {
				want = failed
			}
			if st.LastErr != want {
				t.Errorf("partition %d: last result %v, want %v", ps.Index, st.LastErr, want)
			}
		}
		for _, ls := range c.Snapshot().Leases {
			t.Errorf("a group's partition shows as a lease of its own: %+v", ls)
		}
		closeClient(t, c)
	})
}

// A group whose task runs once per term shows its partitions' terms, with no
// schedule status.
func TestSnapshotOncePerTermGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		const n = 4
		if _, err := c.StartGroup("sweep", n, runtime.Schedule{},
			func(ctx context.Context, _ *runtime.Term, _ int) error { <-ctx.Done(); return nil }); err != nil {
			t.Fatal(err)
		}
		gs := heldAll(t, c, n)
		if len(gs.PerPartition) != n {
			t.Fatalf("%d partition entries, want %d", len(gs.PerPartition), n)
		}
		for _, ps := range gs.PerPartition {
			if ps.Token <= 0 || ps.Remaining <= 0 {
				t.Errorf("partition %d: token %d, remaining %v; want the term's", ps.Index, ps.Token, ps.Remaining)
			}
			if ps.Schedule != nil {
				t.Errorf("partition %d: schedule status %+v, want nil for a once-per-term task", ps.Index, *ps.Schedule)
			}
		}
		closeClient(t, c)
	})
}
