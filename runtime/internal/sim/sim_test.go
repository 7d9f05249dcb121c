package sim

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	schedules = flag.Int("sim.schedules", 0, "how many seeded schedules TestSim runs (default: 2000, or 300 under -race)")
	first     = flag.Uint64("sim.first", 1, "the first seed TestSim runs")
	seedFlag  = flag.Uint64("seed", 0, "replay one schedule, with its trace")
	failFast  = flag.Bool("sim.failfast", false, "stop at the first schedule that breaks a rule")
)

// outcome is what one schedule found.
type outcome struct {
	seed       uint64
	violations []string
	faults     map[string]int
	gap        time.Duration
	events     int
	accepts    int
	refused    int
	virtual    time.Duration
}

func runOne(seed uint64, beyond bool, trace bool) (outcome, string) {
	w := newWorld(seed, beyond)
	if trace {
		w.trace = &strings.Builder{}
		fmt.Fprintf(w.trace, "seed %d: %+v\n", seed, w.p)
	}
	w.run()
	o := outcome{seed: seed, violations: w.check.violations, faults: w.check.faults, gap: w.check.gap,
		events: w.events, accepts: w.check.accepts, refused: w.check.refused, virtual: w.p.end}
	if trace {
		return o, w.trace.String()
	}
	return o, ""
}

// summary adds up outcomes.
type summary struct {
	schedules, violating, violations, events, accepts, refused int
	faults                                                     map[string]int
	byRule                                                     map[string]int
	gap                                                        time.Duration
	virtual                                                    time.Duration
	firstBad                                                   []outcome
}

func (s *summary) add(o outcome) {
	s.schedules++
	s.events += o.events
	s.accepts += o.accepts
	s.refused += o.refused
	s.virtual += o.virtual
	s.gap = max(s.gap, o.gap)
	for k, v := range o.faults {
		s.faults[k] += v
	}
	if len(o.violations) > 0 {
		s.violating++
		s.violations += len(o.violations)
		for _, v := range o.violations {
			rule, _, _ := strings.Cut(v, " ")
			s.byRule[rule]++
		}
		if len(s.firstBad) < 5 {
			s.firstBad = append(s.firstBad, o)
		}
	}
}

func (s *summary) String() string {
	var faults []string
	for _, k := range slices.Sorted(maps.Keys(s.faults)) {
		faults = append(faults, fmt.Sprintf("%s=%d", k, s.faults[k]))
	}
	var rules []string
	for _, k := range slices.Sorted(maps.Keys(s.byRule)) {
		rules = append(rules, fmt.Sprintf("%s=%d", k, s.byRule[k]))
	}
	return fmt.Sprintf("schedules=%d violating=%d violations=%d (%s) faults: %s; fenced writes accepted=%d refused-stale=%d; worst-gap-after-faults=%v; virtual=%v events=%d",
		s.schedules, s.violating, s.violations, strings.Join(rules, " "), strings.Join(faults, " "), s.accepts, s.refused,
		s.gap, s.virtual.Round(time.Second), s.events)
}

// runMany runs n schedules from first on every core, stopping early with
// failFast once one breaks a rule.
func runMany(first uint64, n int, beyond, failFast bool) *summary {
	sum := &summary{faults: map[string]int{}, byRule: map[string]int{}}
	var mu sync.Mutex
	seeds := make(chan uint64)
	stop := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				o, _ := runOne(seed, beyond, false)
				mu.Lock()
				sum.add(o)
				mu.Unlock()
				if failFast && len(o.violations) > 0 {
					once.Do(func() { close(stop) })
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case seeds <- first + uint64(i):
		case <-stop:
			break feed
		}
	}
	close(seeds)
	wg.Wait()
	slices.SortFunc(sum.firstBad, func(a, b outcome) int { return int(a.seed) - int(b.seed) })
	return sum
}

func replayCommand(seed uint64) string {
	tags := ""
	if tag := buildTag(); tag != "" {
		tags = " -tags " + tag
	}
	return fmt.Sprintf("go test%s ./runtime/internal/sim -run 'TestSim$' -seed=%d -v", tags, seed)
}

// TestSim runs seeded schedules with the store's clock within Drift: no
// rule may break. With -seed it replays one, printing its trace.
func TestSim(t *testing.T) {
	if *seedFlag != 0 {
		o, trace := runOne(*seedFlag, false, true)
		t.Log("\n" + trace)
		for _, v := range o.violations {
			t.Error(v)
		}
		return
	}
	n := *schedules
	if n == 0 {
		n = 2000
		if raceEnabled {
			n = 300
		}
	}
	start := time.Now()
	sum := runMany(*first, n, false, *failFast)
	t.Logf("sim within drift: %v; %v on %d cores", sum, time.Since(start).Round(time.Millisecond), runtime.GOMAXPROCS(0))
	for _, o := range sum.firstBad {
		t.Errorf("seed %d broke %d rules, first: %s\n\treplay: %s", o.seed, len(o.violations), o.violations[0], replayCommand(o.seed))
	}
}

// TestSimBeyondDrift runs schedules whose store clock runs faster than
// Drift allows: the claim no longer holds, and the simulator must see it
// break (if it saw nothing, it would be testing nothing).
func TestSimBeyondDrift(t *testing.T) {
	n := 400
	if raceEnabled {
		n = 100
	}
	sum := runMany(1_000_000, n, true, false)
	t.Logf("sim beyond drift: %v", sum)
	if sum.byRule["D3"] == 0 {
		t.Fatalf("no overlapping terms in %d schedules with the store's clock beyond Drift: the simulator tests nothing", n)
	}
}

// The same seed gives the same run, byte for byte: every input and effect
// of every core, at the same true time; and a replay with its trace finds
// what the untraced run of TestSim found. Seeds 7 and 42 are cron worlds.
func TestSimDeterministic(t *testing.T) {
	for _, seed := range []uint64{7, 42, 1234} {
		oa, a := runOne(seed, false, true)
		_, b := runOne(seed, false, true)
		if a != b {
			t.Fatalf("seed %d: two runs differ", seed)
		}
		if o, _ := runOne(seed, false, false); o.events != oa.events || !slices.Equal(o.violations, oa.violations) {
			t.Fatalf("seed %d: the traced replay differs from the untraced run (%d events, %d)", seed, oa.events, o.events)
		}
		if strings.Count(a, "\n") < 200 {
			t.Fatalf("seed %d: a trace of %d lines; the schedule did little", seed, strings.Count(a, "\n"))
		}
	}
}

// The mutants: each build tag breaks one rule on purpose; the simulator
// must fail every one. Each is built and run as its own go test, which
// stops at the first schedule that breaks a rule.
var mutants = []string{
	"deadline_arrival", "drift_ignored", "margin_ignored", "late_reply_revives", "release_before_revoke",
	"release_without_token", "adopt_abandoned", "token_not_above_released", "unbounded_backoff",
	"unpaired_callbacks", "read_then_write", "run_before_claim",
}

func TestMutantsCaught(t *testing.T) {
	if buildTag() != "" {
		t.Skip("a mutant build")
	}
	if testing.Short() {
		t.Skip("builds a test binary per mutant")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	caught := 0
	for _, m := range mutants {
		t.Run(m, func(t *testing.T) {
			start := time.Now()
			cmd := exec.Command(gobin, "test", "-count=1", "-tags", "mutant_"+m, "-run", "^TestSim$",
				"-sim.schedules=20000", "-sim.failfast", ".")
			cmd.Env = append(os.Environ(), "GOFLAGS=")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("mutant %s survived 20,000 schedules:\n%s", m, out)
			}
			if !strings.Contains(string(out), "replay:") {
				t.Fatalf("mutant %s: the run failed without a violation:\n%s", m, out)
			}
			caught++
			line := ""
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "broke") {
					line = strings.TrimSpace(l)
					break
				}
			}
			t.Logf("caught in %v: %s", time.Since(start).Round(time.Millisecond), line)
		})
	}
	t.Logf("mutants caught: %d/%d", caught, len(mutants))
}
