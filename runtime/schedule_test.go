package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// runLog records the runs of a schedule across nodes. The memory store's
// clock is the bubble's clock, so time.Now() here is store time too.
type runLog struct {
	mu         sync.Mutex
	runs       []*run
	violations []string
}

type run struct {
	node       int
	key        string // the lease (schedule name or partition lease)
	term       *runtime.Term
	start, end time.Time
	remaining  time.Duration // the term's validity when the run started
}

func (l *runLog) fn(node int, d time.Duration, hook func(context.Context, *runtime.Term, *run) error) runtime.TaskFunc {
	return func(ctx context.Context, t *runtime.Term) error {
		r := &run{node: node, key: t.Name(), term: t, start: time.Now(), remaining: t.Remaining()}
		l.mu.Lock()
		if !t.Valid() {
			l.violations = append(l.violations, fmt.Sprintf("node %d ran %v with an invalid term", node, t))
		}
		l.runs = append(l.runs, r)
		l.mu.Unlock()
		var err error
		if hook != nil {
			err = hook(ctx, t, r)
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		l.mu.Lock()
		r.end = time.Now()
		select {
		case <-t.Done():
			// The run's context is cancelled before Done is closed, so a
			// run can see that its term ended (T2).
			if ctx.Err() == nil {
				l.violations = append(l.violations, fmt.Sprintf("%v ended, but its run's context was not cancelled", t))
			}
		default:
		}
		l.mu.Unlock()
		return err
	}
}

// check: runs of one key never overlap; each run started while its term was
// valid (recorded by fn).
func (l *runLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
	byKey := map[string][]*run{}
	for _, r := range l.runs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	for key, rs := range byKey {
		for i := 1; i < len(rs); i++ {
			if rs[i].start.Before(rs[i-1].end) {
				t.Errorf("%s: run on node %d from %v overlaps node %d's run [%v, %v)",
					key, rs[i].node, rs[i].start, rs[i-1].node, rs[i-1].start, rs[i-1].end)
			}
		}
	}
}

func (l *runLog) snapshot() []run {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]run, len(l.runs))
	for i, r := range l.runs {
		out[i] = *r
	}
	return out
}

func slotOf(t time.Time, rate time.Duration) int64 { return t.UnixMilli() / rate.Milliseconds() }

// §13: a fixed-rate schedule runs only on the leader, once per slot of the
// store's clock, at the slot's start, never overlapping, never after its term
// ended; a leader that steps down or stops mid-period hands over without a
// slot running twice or being skipped.
func TestScheduleFixedRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		const rate = 10 * time.Second
		var log runLog
		var elections []*runtime.ScheduledTask
		var clients []*runtime.Client
		slotOK := func(ctx context.Context, _ *runtime.Term, r *run) error {
			// The run's slot, from its context, is the slot it started in
			// (runs here start at their slot's start, or mid-slot after an
			// interrupted run).
			if start, ok := runtime.ScheduledSlot(ctx); !ok || slotOf(start, rate) != slotOf(r.start, rate) {
				t.Errorf("ScheduledSlot = %v, %v; want the slot of %v", start, ok, r.start)
			}
			return nil
		}
		for i := range 3 {
			c := newClient(t, store)
			clients = append(clients, c)
			e, err := c.StartSchedule("report", runtime.Schedule{Rate: rate}, log.fn(i, 2*time.Second, slotOK))
			if err != nil {
				t.Fatal(err)
			}
			elections = append(elections, e)
		}
		leader := func() *runtime.ScheduledTask {
			for _, e := range elections {
				if e.Term() != nil {
					return e
				}
			}
			t.Fatal("no leader")
			return nil
		}
		time.Sleep(35 * time.Second) // mid-slot 3
		if err := leader().StepDown(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second + 500*time.Millisecond) // 1s into slot 4's run
		if err := leader().Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Second)
		for _, c := range clients {
			closeClient(t, c)
		}
		log.check(t)

		runs := log.snapshot()
		slots := map[int64]int{}
		for _, r := range runs {
			slots[slotOf(r.start, rate)]++
		}
		first, last := slotOf(runs[0].start, rate), slotOf(runs[len(runs)-1].start, rate)
		for s := first; s <= last; s++ {
			if slots[s] != 1 {
				t.Errorf("slot %d ran %d times, want once", s, slots[s])
			}
		}
		nodes := map[int]bool{}
		for i, r := range runs {
			nodes[r.node] = true
			interrupted := i > 0 && runs[i-1].end.Sub(runs[i-1].start) < 2*time.Second
			if off := r.start.Sub(time.UnixMilli(slotOf(r.start, rate) * rate.Milliseconds())); off != 0 && !interrupted {
				t.Errorf("run %d started %v into its slot, want at the slot's start", i, off)
			}
		}
		if len(nodes) != 3 || last-first < 8 {
			t.Errorf("runs on %d nodes over %d slots; the test exercised too little", len(nodes), last-first+1)
		}
	})
}

// §13: a slot recorded complete is never started again by a later term; a
// run that failed (or was interrupted) before it was recorded runs again on
// the next leader within the same slot.
func TestScheduleSlotRecordedAcrossFailOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		const rate = time.Minute
		var log runLog
		var ev events
		fail := true
		var mu sync.Mutex
		// The first run fails and steps down from inside; the next leader
		// reruns the slot, succeeds and steps down too; the third node must
		// then wait for the next slot.
		var elections []*runtime.ScheduledTask
		hook := func(ctx context.Context, term *runtime.Term, r *run) error {
			mu.Lock()
			f := fail
			fail = false
			els := slices.Clone(elections)
			mu.Unlock()
			for _, e := range els {
				if e.Name() == term.Name() && e.Term() == term {
					if err := e.StepDown(ctx, time.Hour); err != nil {
						t.Error(err)
					}
				}
			}
			if f {
				return errors.New("flaky downstream")
			}
			return nil
		}
		var clients []*runtime.Client
		for i := range 3 {
			c := newClient(t, store, runtime.WithObserver(&ev))
			clients = append(clients, c)
			mu.Lock() // the hook may run before StartSchedule returns
			e, err := c.StartSchedule("report", runtime.Schedule{Rate: rate}, log.fn(i, 0, hook))
			if err != nil {
				t.Fatal(err)
			}
			elections = append(elections, e)
			mu.Unlock()
		}
		time.Sleep(rate - time.Second)
		runs := log.snapshot()
		if len(runs) != 2 || runs[0].node == runs[1].node || slotOf(runs[0].start, rate) != slotOf(runs[1].start, rate) {
			t.Fatalf("runs in the first slot: %+v; want the failed run, then one rerun on another node", runs)
		}
		if errs := ev.of(runtime.EventRunFailed); len(errs) != 1 || errs[0].Err.Error() != "flaky downstream" {
			t.Fatalf("run failures reported: %+v", errs)
		}
		if ok := ev.of(runtime.EventRunSucceeded); len(ok) != 1 || ok[0].Name != "report" || ok[0].Token == 0 || ok[0].Group != "" {
			t.Fatalf("run successes reported: %+v; want the rerun's, with its lease and token", ok)
		}
		time.Sleep(2 * time.Second)
		runs = log.snapshot()
		if len(runs) != 3 || slotOf(runs[2].start, rate) != slotOf(runs[0].start, rate)+1 {
			t.Fatalf("third node's first run: %+v; want it in the next slot", runs[2:])
		}
		for _, c := range clients {
			closeClient(t, c)
		}
		log.check(t)
	})
}

// §13: fixed delay waits Delay after each run ends, also across a fail-over
// (the completion time is recorded in the lease's value).
func TestScheduleFixedDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		const delay, work = 5 * time.Second, 2 * time.Second
		var log runLog
		a, b := newClient(t, store), newClient(t, store)
		ea, err := a.StartSchedule("report", runtime.Schedule{Delay: delay}, log.fn(0, work, nil))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := b.StartSchedule("report", runtime.Schedule{Delay: delay}, log.fn(1, work, nil)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second)
		if err := ea.Stop(context.Background()); err != nil { // between runs
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second)
		closeClient(t, a)
		closeClient(t, b)
		log.check(t)
		runs := log.snapshot()
		handover := false
		for i := 1; i < len(runs); i++ {
			gap := runs[i].start.Sub(runs[i-1].end)
			if runs[i].node != runs[i-1].node {
				handover = true
			}
			if gap != delay {
				t.Errorf("run %d (node %d) started %v after run %d ended, want %v", i, runs[i].node, gap, i-1, delay)
			}
		}
		if !handover {
			t.Error("no hand-off happened")
		}
	})
}

// E1, §13: EnsureValid(step) keeps a run from starting when the term would
// end within step; such a run waits for the next renewal within its slot.
func TestScheduleStepBlocksRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		l := newLink(store)
		c := newClient(t, l)
		const rate, step = 250 * time.Millisecond, 1500 * time.Millisecond
		var log runLog
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: rate, Step: step}, log.fn(0, 0, nil)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		before := len(log.snapshot())
		l.Cut() // renewals stop; the validity left shrinks
		time.Sleep(5 * time.Second)
		l.Heal()
		// Close mid-slot: a run that starts at the instant Close revokes its
		// term may see it ended although the engine's check passed (E2).
		time.Sleep(5*time.Second + rate/2)
		closeClient(t, c)
		log.check(t)
		runs := log.snapshot()
		for _, r := range runs {
			if r.remaining <= step {
				t.Errorf("a run started at %v with %v of validity left, want more than the step %v", r.start, r.remaining, step)
			}
		}
		if before < 30 || len(runs) <= before {
			t.Errorf("%d runs before the cut, %d in all: the schedule did not run normally", before, len(runs))
		}
	})
}

// H1, H2: stopping a schedule cancels the run in progress and waits for it.
func TestScheduleStopWaitsForRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		started := make(chan struct{})
		var cause error
		e, err := c.StartSchedule("report", runtime.Schedule{Rate: time.Minute}, func(ctx context.Context, _ *runtime.Term) error {
			close(started)
			<-ctx.Done()
			cause = context.Cause(ctx)
			time.Sleep(500 * time.Millisecond) // cleaning up
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		<-started
		begin := time.Now()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d != 500*time.Millisecond {
			t.Errorf("Stop returned after %v, want after the run's 500ms clean-up", d)
		}
		if !errors.Is(cause, runtime.ReasonStopped) {
			t.Errorf("run's context cause = %v, want stopped", cause)
		}
		closeClient(t, c)
	})
}

// Snapshot shows a schedule's next run and last result (§13).
func TestScheduleSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		calls := 0
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: time.Minute, Initial: 90 * time.Second},
			func(context.Context, *runtime.Term) error {
				calls++
				if calls == 1 {
					panic("first run panics")
				}
				return nil
			}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		st := c.Snapshot().Leases[0].Schedule
		if st == nil || st.Runs != 0 || st.Next.Sub(time.Now()) != 90*time.Second {
			t.Fatalf("before the first run: %+v; want the next run after the initial delay", st)
		}
		time.Sleep(90 * time.Second) // initial delay: mid-slot, runs at once
		synctest.Wait()
		st = c.Snapshot().Leases[0].Schedule
		var pe *runtime.PanicError
		if st.Runs != 1 || !errors.As(st.LastErr, &pe) || !strings.Contains(string(pe.Stack), "schedule_test.go") {
			t.Fatalf("after a panicking run: %+v", st)
		}
		if want := time.Unix(0, 0).Add(time.Duration(slotOf(time.Now(), time.Minute)+1) * time.Minute); !st.Next.Equal(want) {
			t.Fatalf("next run %v, want the next slot's start %v", st.Next, want)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if st = c.Snapshot().Leases[0].Schedule; st.Runs != 2 || st.LastErr != nil {
			t.Fatalf("the schedule did not go on after a panic: %+v", st)
		}
		closeClient(t, c)
	})
}

// noClock is a backend without a store clock.
type noClock struct{ backends.Backend }

// Bad input to schedules and groups: clear errors naming what is wrong.
func TestScheduleAndGroupBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		ok := func(context.Context, *runtime.Term) error { return nil }
		part := func(context.Context, *runtime.Term, int) error { return nil }
		limit := time.Duration(float64(cfg.LeaseDuration)*(1-cfg.Drift)) - cfg.Margin - cfg.RenewInterval
		for _, tc := range []struct {
			s    runtime.Schedule
			want string
		}{
			{runtime.Schedule{}, "Schedule.Rate = 0; want > 0, or Schedule.Delay > 0"},
			{runtime.Schedule{Rate: -time.Second}, "Schedule.Rate = -1s"},
			{runtime.Schedule{Rate: time.Microsecond}, "Schedule.Rate = 1µs; want >= 1ms"},
			{runtime.Schedule{Delay: -time.Second}, "Schedule.Delay = -1s"},
			{runtime.Schedule{Rate: time.Second, Delay: time.Second}, "exactly one of Rate and Delay"},
			{runtime.Schedule{Rate: time.Second, Initial: -time.Second}, "Schedule.Initial = -1s"},
			{runtime.Schedule{Rate: time.Second, Step: -time.Second}, "Schedule.Step = -1s"},
			{runtime.Schedule{Rate: time.Second, Step: limit}, "a longer step could never start"},
		} {
			_, err := c.StartSchedule("report", tc.s, ok)
			if !errors.Is(err, runtime.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"report"`) {
				t.Errorf("StartSchedule(%+v) = %v, want an error containing %q", tc.s, err, tc.want)
			}
		}
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: time.Second, Step: limit - time.Millisecond}, ok); err != nil {
			t.Errorf("a step just under the limit was rejected: %v", err)
		}
		if _, err := c.StartSchedule("a/b", runtime.Schedule{Rate: time.Second}, ok); !errors.Is(err, runtime.ErrInvalidName) {
			t.Errorf("invalid name: %v", err)
		}
		if _, err := c.StartSchedule("x", runtime.Schedule{Rate: time.Second}, nil); err == nil {
			t.Error("nil function accepted")
		}
		nc := newClient(t, noClock{memory.New()})
		defer closeClient(t, nc)
		if _, err := nc.StartSchedule("x", runtime.Schedule{Rate: time.Second}, ok); err == nil || !strings.Contains(err.Error(), "no store clock") {
			t.Errorf("schedule on a backend without a store clock: %v", err)
		}
		if _, err := nc.StartGroup("g", 4, runtime.Schedule{Rate: time.Second}, part); err == nil || !strings.Contains(err.Error(), "no store clock") {
			t.Errorf("scheduled group on a backend without a store clock: %v", err)
		}
		if _, err := nc.StartGroup("g", 4, runtime.Schedule{}, part); err != nil {
			t.Errorf("a once-per-term group needs no store clock: %v", err)
		}

		for _, tc := range []struct {
			name string
			n    int
			want string
		}{
			{"billing", 0, "0 partitions; want 1 to 65536"},
			{"billing", -3, "-3 partitions"},
			{"billing", 65537, "65537 partitions"},
			{"bill/ing", 4, "invalid"},
			{strings.Repeat("b", 126), 100, "too long for 100 partitions"},
		} {
			if _, err := c.StartGroup(tc.name, tc.n, runtime.Schedule{}, part); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StartGroup(%q, %d) = %v, want an error containing %q", tc.name, tc.n, err, tc.want)
			}
		}
		if _, err := c.StartGroup("billing", 4, runtime.Schedule{Delay: -1}, part); !errors.Is(err, runtime.ErrInvalidConfig) {
			t.Errorf("group with a negative delay: %v", err)
		}
		if _, err := c.StartGroup("billing", 4, runtime.Schedule{}, nil); err == nil {
			t.Error("nil partition function accepted")
		}
		// L8: a group reserves its partition leases.
		if _, err := c.StartGroup("billing", 4, runtime.Schedule{}, part); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"billing.0", "billing.3"} {
			if _, err := c.StartElection(name, nil); !errors.Is(err, runtime.ErrNameInUse) {
				t.Errorf("StartElection(%q) inside a group = %v, want ErrNameInUse", name, err)
			}
		}
		if _, err := c.StartElection("billing.4", nil); err != nil {
			t.Errorf("billing.4 is not a partition of a 4-partition group: %v", err)
		}
		if _, err := c.StartGroup("billing", 4, runtime.Schedule{}, part); !errors.Is(err, runtime.ErrNameInUse) {
			t.Errorf("second StartGroup = %v, want ErrNameInUse", err)
		}
		if _, err := c.StartGroup("billing", 8, runtime.Schedule{}, part); !errors.Is(err, runtime.ErrNameInUse) {
			t.Errorf("StartGroup reserving billing.4 = %v, want ErrNameInUse", err)
		}
	})
}

// §13: partitions can run on a schedule; each partition's slots are
// recorded in its own lease, so a rebalance never reruns a slot.
func TestGroupScheduledPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		const n, rate = 4, 10 * time.Second
		var log runLog
		fn := func(node int) runtime.PartitionFunc {
			run := log.fn(node, time.Second, nil)
			return func(ctx context.Context, t *runtime.Term, _ int) error { return run(ctx, t) }
		}
		a := newClient(t, store)
		if _, err := a.StartGroup("billing", n, runtime.Schedule{Rate: rate}, fn(0)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(25 * time.Second)
		b := newClient(t, store)
		if _, err := b.StartGroup("billing", n, runtime.Schedule{Rate: rate}, fn(1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Second)
		closeClient(t, a)
		closeClient(t, b)
		log.check(t)
		perSlot := map[string]map[int64]int{}
		nodes := map[string]map[int]bool{}
		for _, r := range log.snapshot() {
			if perSlot[r.key] == nil {
				perSlot[r.key], nodes[r.key] = map[int64]int{}, map[int]bool{}
			}
			perSlot[r.key][slotOf(r.start, rate)]++
			nodes[r.key][r.node] = true
		}
		moved := 0
		for key, slots := range perSlot {
			keys := slices.Collect(func(yield func(int64) bool) {
				for s := range slots {
					if !yield(s) {
						return
					}
				}
			})
			slices.Sort(keys)
			for s := keys[0]; s <= keys[len(keys)-1]; s++ {
				if slots[s] != 1 {
					t.Errorf("%s: slot %d ran %d times, want once", key, s, slots[s])
				}
			}
			if len(nodes[key]) == 2 {
				moved++
			}
		}
		if len(perSlot) != n || moved != n/2 {
			t.Errorf("%d partitions ran, %d moved between members; want %d and %d", len(perSlot), moved, n, n/2)
		}
	})
}

// slotStart returns the start of the fixed-rate slot t falls in.
func slotStart(t time.Time, rate time.Duration) time.Time {
	return time.UnixMilli(slotOf(t, rate) * rate.Milliseconds())
}

// slotHook records each run's ScheduledSlot, by run start.
type slotHook struct {
	mu    sync.Mutex
	slots map[time.Time]time.Time
}

func (h *slotHook) hook(ctx context.Context, _ *runtime.Term, r *run) error {
	slot, _ := runtime.ScheduledSlot(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.slots == nil {
		h.slots = make(map[time.Time]time.Time)
	}
	h.slots[r.start] = slot
	return nil
}

func (h *slotHook) of(start time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.slots[start]
}

// §13: a fixed-rate run longer than the rate delays the next start to the
// slot current when it ends; the slots missed meanwhile are skipped, never
// run in a burst. The slot rule: after the run of slot k ends at e, the next
// run starts at max(e, start of slot k+1), for the slot current then. With
// a rate of 1s and runs of 3.5s that is every 3.5s (0, 3.5, 7, 10.5, … from
// the first run).
func TestScheduleSkipsMissedSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate, work, window = time.Second, 3500 * time.Millisecond, 20 * time.Second
		store := memory.New()
		c := newClient(t, store)
		var log runLog
		var slots slotHook
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: rate}, log.fn(0, work, slots.hook)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(window)
		closedAt := time.Now()
		closeClient(t, c)
		log.check(t)

		runs := log.snapshot()
		if len(runs) == 0 {
			t.Fatal("no run")
		}
		var want []time.Time
		for s := runs[0].start; s.Before(closedAt); {
			want = append(want, s)
			s = maxTime(s.Add(work), slotStart(s, rate).Add(rate))
		}
		var got []time.Time
		for i, r := range runs {
			got = append(got, r.start)
			if slot := slots.of(r.start); !slot.Equal(slotStart(r.start, rate)) {
				t.Errorf("run %d at %v: ScheduledSlot %v, want the slot current at its start %v", i, r.start, slot, slotStart(r.start, rate))
			}
			if i > 0 && r.start.Sub(runs[i-1].start) < rate {
				t.Errorf("runs %d and %d started %v apart, less than the rate %v: a burst", i-1, i, r.start.Sub(runs[i-1].start), rate)
			}
		}
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			t.Errorf("runs started at %v, want %v (each at the end of the previous one)", got, want)
		}
		var offsets []time.Duration
		for _, s := range got {
			offsets = append(offsets, s.Sub(got[0]))
		}
		t.Logf("runs started at %v from the first", offsets)
	})
}

// E1, §13: a run whose EnsureValid(step) fails at its slot's start (the
// link is cut, renewals fail, the validity left shrinks under the step) is
// tried again after the next successful renewal, within the same slot.
func TestScheduleRetriesAfterRenewalWithinSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rate, step = 10 * time.Second, 1500 * time.Millisecond
		store := memory.New()
		l := newLink(store)
		var ev events
		c := newClient(t, l, runtime.WithObserver(&ev))
		var log runLog
		var slots slotHook
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: rate, Step: step}, log.fn(0, 0, slots.hook)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		runs := log.snapshot()
		if len(runs) != 1 {
			t.Fatalf("%d runs at the election, want 1", len(runs))
		}
		next := slotStart(runs[0].start, rate).Add(rate)

		// Cut the link step before the next slot: the last renewal that
		// succeeds leaves a deadline less than step after the slot's start.
		time.Sleep(time.Until(next.Add(-step)))
		l.Cut()
		deadline := c.Snapshot().Deadline
		if !deadline.After(next) || deadline.Sub(next) > step {
			t.Fatalf("setup: deadline %v after the slot's start, want in (0, %v]", deadline.Sub(next), step)
		}
		time.Sleep(time.Until(next))
		synctest.Wait()
		if n := len(log.snapshot()); n != 1 {
			t.Fatalf("a run started at the slot's start with %v of validity left, under the step %v", deadline.Sub(next), step)
		}
		healAt := time.Now()
		l.Heal()
		time.Sleep(time.Until(deadline))
		synctest.Wait()

		var renewed time.Time
		for _, at := range ev.at(runtime.EventSessionRenewed) {
			if at.After(healAt) {
				renewed = at
				break
			}
		}
		if renewed.IsZero() || !renewed.Before(deadline) {
			t.Fatalf("no renewal succeeded between the heal at %v and the deadline %v", healAt, deadline)
		}
		runs = log.snapshot()
		if len(runs) != 2 {
			t.Fatalf("%d runs, want the retried one", len(runs))
		}
		r := runs[1]
		t.Logf("slot at %v; link cut at %v, healed at %v; renewal at %v; run at %v with %v left",
			next, next.Add(-step), healAt, renewed, r.start, r.remaining)
		if !r.start.Equal(renewed) {
			t.Errorf("the retried run started at %v, want at the renewal at %v", r.start, renewed)
		}
		if !slotStart(r.start, rate).Equal(next) || !slots.of(r.start).Equal(next) {
			t.Errorf("the retried run started at %v for slot %v, want within the slot %v", r.start, slots.of(r.start), next)
		}
		if r.remaining <= step {
			t.Errorf("the retried run started with %v left, want more than the step %v", r.remaining, step)
		}
		closeClient(t, c)
		log.check(t)
	})
}

// §13: the lease's value, read straight from the store by the next
// acquirer, records the store-clock time of the last run that succeeded —
// "simba/v1 rate <unix ms of its slot's start>" or "simba/v1 delay <unix ms
// of its end>"; a failed run is not recorded.
func TestScheduleRecordsCompletedSlot(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    runtime.Schedule
	}{
		{"rate", runtime.Schedule{Rate: 10 * time.Second}},
		{"delay", runtime.Schedule{Delay: 5 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const work = time.Second
				store := memory.New()
				c := newClient(t, store)
				defer closeClient(t, c)
				var mu sync.Mutex
				runs := 0
				var recorded time.Time
				failed := make(chan struct{})
				e, err := c.StartSchedule("report", tc.s, func(ctx context.Context, _ *runtime.Term) error {
					mu.Lock()
					runs++
					n := runs
					mu.Unlock()
					<-time.After(work)
					if n == 4 {
						close(failed)
						return errors.New("the fourth run fails")
					}
					mu.Lock()
					defer mu.Unlock()
					if slot, ok := runtime.ScheduledSlot(ctx); ok {
						recorded = slot
					} else {
						recorded = time.Now() // the store's clock is the bubble's
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				<-failed
				synctest.Wait() // the schedule has handled the failure
				if err := e.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}

				ctx := context.Background()
				s, _, err := store.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close(ctx)
				g, err := s.Acquire(ctx, "report")
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				want := fmt.Sprintf("simba/v1 %s %d", tc.name, recorded.UnixMilli())
				mu.Unlock()
				if string(g.Value) != want {
					t.Errorf("the lease's value is %q, want %q (the last run that succeeded)", g.Value, want)
				}
				t.Logf("recorded %q after 4 runs, the last one failed", g.Value)
			})
		})
	}
}

// §13, H3: a run in progress when its term ends is cancelled with the
// reason, and no run of that term starts at or after the term's end, even
// while the run takes a while to clean up; the schedule goes on in the
// node's next term.
func TestScheduleNeverRunsAfterTermEnded(t *testing.T) {
	for _, tc := range []struct {
		reason runtime.Reason
		end    func(*memory.Store, *link, *runtime.Client)
	}{
		{runtime.ReasonSessionExpired, func(s *memory.Store, _ *link, c *runtime.Client) {
			s.Faults().ExpireSession(c.Snapshot().Session)
		}},
		{runtime.ReasonDeadlinePassed, func(_ *memory.Store, l *link, _ *runtime.Client) { l.Cut() }},
	} {
		t.Run(tc.reason.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const rate, work, cleanup = time.Second, 5 * time.Second, 500 * time.Millisecond
				store := memory.New()
				l := newLink(store)
				c := newClient(t, l)
				type runRec struct {
					term             *runtime.Term
					start, cancelled time.Time
					cause            error
				}
				var mu sync.Mutex
				var runs []*runRec
				if _, err := c.StartSchedule("report", runtime.Schedule{Rate: rate}, func(ctx context.Context, term *runtime.Term) error {
					r := &runRec{term: term, start: time.Now()}
					mu.Lock()
					runs = append(runs, r)
					mu.Unlock()
					select {
					case <-time.After(work):
						return nil
					case <-ctx.Done():
					}
					mu.Lock()
					r.cancelled, r.cause = time.Now(), context.Cause(ctx)
					mu.Unlock()
					<-time.After(cleanup) // ignores the cancellation for a while
					return ctx.Err()
				}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2*work + work/2) // in the third run
				mu.Lock()
				first := runs[len(runs)-1]
				mu.Unlock()
				tc.end(store, l, c)
				<-first.term.Done()
				ended := time.Now()
				l.Heal()
				time.Sleep(2 * cfg.LeaseDuration)
				closeClient(t, c)

				mu.Lock()
				defer mu.Unlock()
				if first.term.Reason() != tc.reason || !first.cancelled.Equal(ended) || !errors.Is(first.cause, tc.reason) {
					t.Errorf("the run in progress: term ended with %v at %v, run cancelled at %v with cause %v; want %v at once",
						first.term.Reason(), ended, first.cancelled, first.cause, tc.reason)
				}
				earlier, later := 0, 0
				for _, r := range runs {
					switch {
					case r.term == first.term:
						earlier++
						if !r.start.Before(ended) {
							t.Errorf("a run of %v started at %v, at or after the term ended at %v", r.term, r.start, ended)
						}
					case r.term != first.term:
						later++
						if r.start.Before(ended) || r.term.Token() <= first.term.Token() {
							t.Errorf("a run of %v started at %v; want a later term, after %v ended at %v", r.term, r.start, first.term, ended)
						}
					}
				}
				if later == 0 {
					t.Error("the schedule did not go on in the next term")
				}
				if earlier != 3 {
					t.Errorf("%d runs of %v, want 3 (the term ends in the third)", earlier, first.term)
				}
				t.Logf("%v ended %v into its third run; %d runs of later terms", first.term, ended.Sub(first.start), later)
			})
		})
	}
}
