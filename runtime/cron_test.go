package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// cronRun is one run of a cron schedule, as its function saw it.
type cronRun struct {
	node  int
	token runtime.Token
	slot  time.Time // runtime.ScheduledSlot
	start time.Time // time.Now() in the bubble: the store's clock
}

// cronLog records the runs of one cron schedule across nodes.
type cronLog struct {
	mu   sync.Mutex
	runs []cronRun
	bad  []string
}

func (l *cronLog) fn(node int) runtime.TaskFunc {
	return func(ctx context.Context, t *runtime.Term) error {
		slot, ok := runtime.ScheduledSlot(ctx)
		l.mu.Lock()
		defer l.mu.Unlock()
		if !ok {
			l.bad = append(l.bad, fmt.Sprintf("node %d: a cron run without a slot in its context", node))
		}
		if !t.Valid() {
			l.bad = append(l.bad, fmt.Sprintf("node %d ran slot %v with an invalid term", node, slot))
		}
		l.runs = append(l.runs, cronRun{node: node, token: t.Token(), slot: slot, start: time.Now()})
		return nil
	}
}

func (l *cronLog) snapshot() []cronRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

// once checks that no slot ran twice, and returns how many ran.
func (l *cronLog) once(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.bad {
		t.Error(b)
	}
	seen := map[int64]cronRun{}
	for _, r := range l.runs {
		if first, dup := seen[r.slot.UnixMilli()]; dup {
			t.Errorf("slot %v ran twice: on node %d (token %d) at %v and on node %d (token %d) at %v",
				r.slot.UTC(), first.node, first.token, first.start.UTC(), r.node, r.token, r.start.UTC())
		}
		seen[r.slot.UnixMilli()] = r
	}
	return len(seen)
}

// resumePoint is an instant a node took up a schedule: elected, or resumed
// from a pause with its term still valid.
type resumePoint struct {
	node  int
	at    time.Time
	token runtime.Token
	why   string
}

// R2, R3: a cron schedule across fail-overs (a leader's link cut until
// another node takes the lease), pauses of the leader's process shorter
// than its lease, and step-downs: no slot runs twice; a run starts at its
// slot, or late by at most CatchUp; and wherever a node takes the schedule
// up, the latest slot not run yet runs there and then if it is at most
// CatchUp old, and never otherwise.
func TestCronFailOversPausesAndCatchUp(t *testing.T) {
	const (
		every   = 10 * time.Second
		catchUp = 4 * time.Second
	)
	// A 30s lease: pauses up to 18s keep the term, fail-overs take 30s or
	// more, so a missed slot's age at a resumption spans [0, 10s).
	cronCfg := runtime.ConfigFor(30 * time.Second)
	var lateRuns, skippedAtResume, caughtUpAtResume int
	for seed := range uint64(4) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 26))
			store := memory.New()
			var log cronLog
			var (
				mu      sync.Mutex
				resumes []resumePoint
			)
			const nodes = 3
			links := make([]*link, nodes)
			clients := make([]*runtime.Client, nodes)
			tasks := make([]*runtime.ScheduledTask, nodes)
			for i := range nodes {
				links[i] = newLink(store)
				c, err := runtime.NewClient(links[i], cronCfg, runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
					if e.Kind == runtime.EventElected {
						mu.Lock()
						resumes = append(resumes, resumePoint{node: i, at: time.Now(), token: e.Token, why: "elected"})
						mu.Unlock()
					}
				})))
				if err != nil {
					t.Fatal(err)
				}
				clients[i] = c
				tasks[i], err = c.StartSchedule("report", runtime.Schedule{Cron: "*/10 * * * * *", CatchUp: catchUp}, log.fn(i))
				if err != nil {
					t.Fatal(err)
				}
			}
			leader := func() int {
				for i, task := range tasks {
					if term := task.Term(); term != nil && term.Valid() {
						return i
					}
				}
				return -1
			}
			// A random instant that is not a slot's, so that no fault
			// lands on the instant a run starts.
			offset := func(lo, hi time.Duration) time.Duration {
				return lo + time.Duration(rng.Int64N(int64(hi-lo)/int64(time.Millisecond)))*time.Millisecond + 7*time.Millisecond
			}
			for range 12 {
				time.Sleep(offset(5*time.Second, 25*time.Second))
				n := leader()
				if n < 0 {
					continue
				}
				switch rng.IntN(3) {
				case 0: // fail-over: n is cut off until another node leads
					links[n].Cut()
					time.Sleep(offset(35*time.Second, 50*time.Second))
					links[n].Heal()
				case 1: // a pause of n's process, shorter than its lease
					token := tasks[n].Term().Token()
					links[n].Freeze()
					synctest.Wait()
					clients[n].PauseEngine()
					time.Sleep(offset(time.Second, 18*time.Second))
					links[n].Thaw()
					resumedAt := time.Now()
					clients[n].ResumeEngine()
					synctest.Wait()
					if term := tasks[n].Term(); term != nil && term.Token() == token {
						mu.Lock()
						resumes = append(resumes, resumePoint{node: n, at: resumedAt, token: token, why: "resumed"})
						mu.Unlock()
					}
				case 2:
					if err := tasks[n].StepDown(context.Background(), 20*time.Second); err != nil {
						t.Fatal(err)
					}
				}
			}
			time.Sleep(30 * time.Second)
			for _, c := range clients {
				closeClient(t, c)
			}

			if n := log.once(t); n < 15 {
				t.Fatalf("seed %d: %d slots ran; the test exercised too little", seed, n)
			}
			runs := log.snapshot()
			for _, r := range runs {
				late := r.start.Sub(r.slot)
				if late < 0 || late > catchUp {
					t.Errorf("seed %d: slot %v ran %v after it, want within [0, CatchUp=%v]", seed, r.slot.UTC(), late, catchUp)
				}
				if late > 0 {
					lateRuns++
					// Only the latest slot is caught up.
					if next := r.slot.Add(every); !next.After(r.start) {
						t.Errorf("seed %d: slot %v caught up at %v, after the later slot %v", seed, r.slot.UTC(), r.start.UTC(), next.UTC())
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range resumes {
				latest := p.at.Truncate(every)
				var done bool // latest ran before p
				var ranHere bool
				for _, r := range runs {
					if r.slot.Equal(latest) && (r.start.Before(p.at) || r.node != p.node) {
						done = true
					}
					if r.slot.Equal(latest) && r.node == p.node && r.token == p.token && r.start.Equal(p.at) {
						ranHere = true
					}
				}
				switch age := p.at.Sub(latest); {
				case done:
				case age <= catchUp:
					caughtUpAtResume++
					if !ranHere && latest.Before(p.at) {
						t.Errorf("seed %d: node %d %s at %v; slot %v, %v old and not run, was not caught up there",
							seed, p.node, p.why, p.at.UTC(), latest.UTC(), age)
					}
				default:
					skippedAtResume++
					if ranHere {
						t.Errorf("seed %d: node %d %s at %v caught up slot %v, %v old: beyond CatchUp", seed, p.node, p.why, p.at.UTC(), latest.UTC(), age)
					}
				}
			}
		})
	}
	t.Logf("late runs %d, slots skipped at a resumption %d, caught up %d", lateRuns, skippedAtResume, caughtUpAtResume)
	if lateRuns == 0 || skippedAtResume == 0 || caughtUpAtResume == 0 {
		t.Errorf("late runs %d, slots skipped at a resumption %d, caught up %d: the seeds do not exercise the catch-up window",
			lateRuns, skippedAtResume, caughtUpAtResume)
	}
}

// Bad cron schedules are refused with an error that names the field at
// fault (of the Schedule, and of the cron expression).
func TestCronBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		ok := func(context.Context, *runtime.Term) error { return nil }
		paris := mustLocation(t, "Europe/Paris")
		for _, tc := range []struct {
			s    runtime.Schedule
			want string
		}{
			{runtime.Schedule{Cron: "0 */5 25 * * *"}, `hour field "25"`},
			{runtime.Schedule{Cron: "61 * * * *"}, `minute field "61"`},
			{runtime.Schedule{Cron: "* * * *"}, "4 fields; want 5"},
			{runtime.Schedule{Cron: "TZ=Europe/Paris 0 * * * *"}, "time zone prefix is not accepted"},
			{runtime.Schedule{Cron: "CRON_TZ="}, "time zone prefix is not accepted"},
			{runtime.Schedule{Cron: "@every 5s"}, "unknown descriptor"},
			{runtime.Schedule{Cron: "@daily", Rate: time.Second}, "more than one of Rate, Delay, Cron and Timetable"},
			{runtime.Schedule{Cron: "@daily", Timetable: everyMinute{}}, "more than one of"},
			{runtime.Schedule{Rate: time.Second, Location: paris}, "Schedule.Location = Europe/Paris; want nil unless Schedule.Cron is set"},
			{runtime.Schedule{Cron: "@daily", CatchUp: -time.Second}, "Schedule.CatchUp = -1s"},
			{runtime.Schedule{Cron: "@daily", CatchUp: runtime.MaxDuration + 1}, "Schedule.CatchUp = "},
			{runtime.Schedule{Rate: time.Second, CatchUp: time.Second}, "Schedule.CatchUp = 1s; want 0 unless"},
			{runtime.Schedule{Rate: time.Second, Overlap: runtime.OverlapAfter}, "Schedule.Overlap = after; want OverlapSkip unless"},
			{runtime.Schedule{Cron: "@daily", Overlap: 7}, "Schedule.Overlap = Overlap(7)"},
		} {
			_, err := c.StartSchedule("report", tc.s, ok)
			if !errors.Is(err, runtime.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("StartSchedule(%+v) = %v, want an error containing %q", tc.s, err, tc.want)
			}
		}
		if _, err := c.StartGroup("g", 2, runtime.Schedule{Cron: "0 0 0 32 * *"}, func(context.Context, *runtime.Term, int) error { return nil }); !errors.Is(err, runtime.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), `day-of-month field "32"`) {
			t.Errorf("StartGroup with a bad cron = %v", err)
		}
		if _, err := runtime.ParseCron("0 0 0 32 * *", nil); err == nil || !strings.Contains(err.Error(), "day-of-month") {
			t.Errorf("ParseCron = %v, want an error naming day-of-month", err)
		}
	})
}

// everyMinute is a Timetable of the user's own: every minute on the
// minute.
type everyMinute struct{}

func (everyMinute) Next(t time.Time) time.Time { return t.Truncate(time.Minute).Add(time.Minute) }

// panickyTimetable panics after its first answers.
type panickyTimetable struct{ calls *int }

func (p panickyTimetable) Next(t time.Time) time.Time {
	*p.calls++
	if *p.calls > 3 {
		panic("timetable broke")
	}
	return t.Truncate(time.Minute).Add(time.Minute)
}

// R1: a Timetable of the user's own runs as Cron does; one that panics
// stops planning, reported as a failed run, and crashes nothing.
func TestTimetable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		c := newClient(t, memory.New(), runtime.WithObserver(&ev))
		var log, broken cronLog
		if _, err := c.StartSchedule("own", runtime.Schedule{Timetable: everyMinute{}}, log.fn(0)); err != nil {
			t.Fatal(err)
		}
		calls := 0
		if _, err := c.StartSchedule("broken", runtime.Schedule{Timetable: panickyTimetable{&calls}}, broken.fn(0)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5*time.Minute + time.Second)
		closeClient(t, c)
		log.once(t)
		runs := log.snapshot()
		if len(runs) != 6 { // the bubble starts on a minute: its slot, then five more
			t.Fatalf("%d runs in five minutes, want 6", len(runs))
		}
		for _, r := range runs {
			if r.slot.Truncate(time.Minute) != r.slot || !r.start.Equal(r.slot) {
				t.Errorf("run of slot %v at %v, want on the minute", r.slot, r.start)
			}
		}
		var panics int
		for _, e := range ev.of(runtime.EventRunFailed) {
			var pe *runtime.PanicError
			if e.Name == "broken" && errors.As(e.Err, &pe) && pe.Value == "timetable broke" {
				panics++
			}
		}
		if panics != 1 || len(broken.snapshot()) == 0 {
			t.Errorf("the panicking timetable: %d panics reported, %d runs; want 1 panic after a run", panics, len(broken.snapshot()))
		}
	})
}

// R1, R2: a partition group on a cron schedule claims each partition's
// slots in the partition's own lease; a member's step-down moves
// partitions without a slot of any partition running twice.
func TestCronGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		type key struct {
			part int
			slot int64
		}
		var mu sync.Mutex
		runs := map[key]int{}
		fn := func(ctx context.Context, _ *runtime.Term, part int) error {
			slot, ok := runtime.ScheduledSlot(ctx)
			if !ok {
				t.Error("a partition's cron run without a slot")
			}
			mu.Lock()
			runs[key{part, slot.UnixMilli()}]++
			mu.Unlock()
			return nil
		}
		var groups []*runtime.Group
		var clients []*runtime.Client
		for range 2 {
			c := newClient(t, store)
			clients = append(clients, c)
			g, err := c.StartGroup("nightly", 4, runtime.Schedule{Cron: "*/5 * * * * *", CatchUp: 5 * time.Second}, fn)
			if err != nil {
				t.Fatal(err)
			}
			groups = append(groups, g)
		}
		time.Sleep(22 * time.Second)
		if err := groups[0].StepDown(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		for _, c := range clients {
			closeClient(t, c)
		}
		perPart := map[int]int{}
		for k, n := range runs {
			if n != 1 {
				t.Errorf("partition %d ran slot %v %d times", k.part, time.UnixMilli(k.slot).UTC(), n)
			}
			perPart[k.part]++
		}
		for p := range 4 {
			if perPart[p] < 8 {
				t.Errorf("partition %d ran %d slots in 52s of 5s slots; want at least 8", p, perPart[p])
			}
		}
	})
}
