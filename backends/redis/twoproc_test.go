package simbaredis

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/simba-go/simba/internal/testkit/termcheck"
	"github.com/simba-go/simba/runtime"
)

// The test binary doubles as a node process: with childEnv set, TestMain
// runs childMain instead of the tests. The child runs one election on the
// lease "leader" and writes a line to stdout for each event, with times read
// from CLOCK_MONOTONIC, which on Linux is one clock for every process of the
// machine (Go's time.Time carries a monotonic reading too, but one that only
// its own process can compare), so that the parent can compare the
// children's terms. T0 and T1 are read just before and just after LEFT, the
// term's Remaining, so its local deadline lies in [T0+LEFT, T1+LEFT] (Go's
// monotonic clock is CLOCK_MONOTONIC):
//
//	ready
//	elected TOKEN T0 T1 LEFT   in the elected callback, after the term began
//	valid TOKEN T0 T1 LEFT     after a renewal (the observer's event)
//	ended TOKEN AT             the term's task saw its context end, at AT
//	revoked TOKEN AT REASON    the revoked callback ran (after the release, H1)
//	closed
//
// The term's task only waits for its context and reports: the engine
// revokes the term and cancels the context, waits for the task to return,
// and only then releases the lease (H1), so "ended" is written after the
// term stopped being valid and before anyone else can win the lease.
//
// It stops gracefully (Client.Close) when its stdin says "stop" or closes.
const (
	childEnv       = "SIMBAREDIS_CHILD"
	childAddrEnv   = "SIMBAREDIS_CHILD_ADDR"
	childPrefixEnv = "SIMBAREDIS_CHILD_PREFIX"
	childLeaseEnv  = "SIMBAREDIS_CHILD_LEASE"
)

// monotonic reads CLOCK_MONOTONIC, the clock Go's monotonic readings come
// from, in nanoseconds.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func childMain() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	lease, err := time.ParseDuration(os.Getenv(childLeaseEnv))
	if err != nil {
		return fail(err)
	}
	client := redis.NewClient(clientOptions(os.Getenv(childAddrEnv)))
	defer client.Close()
	// MaxLease is the lease: the parent waits for the amnesia guard with
	// the same value (every node of a namespace must use one value).
	b, err := New(client, WithPrefix(os.Getenv(childPrefixEnv)), WithMaxLease(lease))
	if err != nil {
		return fail(err)
	}
	defer b.Close()

	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	var current atomic.Pointer[runtime.Term]
	report := func(kind string, t *runtime.Term) {
		t0 := monotonic()
		left := t.Remaining()
		t1 := monotonic()
		say("%s %d %d %d %d", kind, t.Token(), t0, t1, int64(left))
	}
	observer := runtime.ObserverFunc(func(e runtime.Event) {
		if e.Kind == runtime.EventSessionRenewed {
			if t := current.Load(); t != nil {
				report("valid", t)
			}
		}
	})
	c, err := runtime.NewClient(b, runtime.ConfigFor(lease), runtime.WithObserver(observer))
	if err != nil {
		return fail(err)
	}
	task := func(ctx context.Context, t *runtime.Term) error {
		<-ctx.Done()
		say("ended %d %d", t.Token(), monotonic())
		return nil
	}
	_, err = c.StartElection("leader", runtime.ListenerFuncs{
		OnElected: func(_ context.Context, t *runtime.Term) {
			current.Store(t)
			report("elected", t)
		},
		OnRevoked: func(_ context.Context, t *runtime.Term, r runtime.Reason) {
			current.CompareAndSwap(t, nil)
			say("revoked %d %d %s", t.Token(), monotonic(), strings.ReplaceAll(r.String(), " ", "-"))
		},
	}, runtime.WithTask(task))
	if err != nil {
		return fail(err)
	}
	say("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() != "stop" {
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		return fail(err)
	}
	say("closed")
	return 0
}

// child is the parent's handle on a node process.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// event is one line of a child, parsed. Times are CLOCK_MONOTONIC ns.
type event struct {
	child string
	kind  string
	token int64
	at    int64 // T0 of elected and valid, AT of ended and revoked
	// The term's local deadline lies in [deadlineLo, deadlineHi] (elected
	// and valid only).
	deadlineLo, deadlineHi int64
	reason                 string
}

func startChild(tb testing.TB, name, addr, prefix string, lease time.Duration, events chan<- event) *child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childAddrEnv+"="+addr, childPrefixEnv+"="+prefix,
		childLeaseEnv+"="+lease.String(),
		"GORACE=atexit_sleep_ms=0") // a -race binary otherwise sleeps 1 s at exit
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting child %s: %v", name, err)
	}
	c := &child{name: name, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			e := event{child: name, kind: f[0], at: monotonic()}
			num := func(i int) int64 {
				if i >= len(f) {
					return 0
				}
				n, _ := strconv.ParseInt(f[i], 10, 64)
				return n
			}
			switch e.kind {
			case "elected", "valid":
				e.token, e.at = num(1), num(2)
				left := max(num(4), 0)
				e.deadlineLo, e.deadlineHi = num(2)+left, num(3)+left
			case "ended":
				e.token, e.at = num(1), num(2)
			case "revoked":
				e.token, e.at = num(1), num(2)
				if len(f) > 3 {
					e.reason = f[3]
				}
			}
			events <- e
		}
		cmd.Wait()
	}()
	tb.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

func (c *child) stop() { io.WriteString(c.stdin, "stop\n") }

func (c *child) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("sending %v to child %s: %v", sig, c.name, err)
	}
}

// freeze stops the child with SIGSTOP and returns once the kernel reports
// it stopped: from then on it runs no code.
func (c *child) freeze(tb testing.TB) {
	tb.Helper()
	c.signal(tb, syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid)
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			tb.Fatalf("child %s: %v", c.name, err)
		}
		// "pid (comm) state ...": comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		if time.Now().After(end) {
			tb.Fatalf("child %s not stopped 5s after SIGSTOP: %s", c.name, b)
		}
	}
}

// nodes are the node processes of one scenario and what they reported.
type nodes struct {
	tb       testing.TB
	children map[string]*child
	events   chan event
	all      []event // every event received
	unread   []event // those next has not returned
}

func startNodes(tb testing.TB, addr, prefix string, lease time.Duration, names ...string) *nodes {
	tb.Helper()
	n := &nodes{tb: tb, children: map[string]*child{}, events: make(chan event, 256)}
	for _, name := range names {
		n.children[name] = startChild(tb, name, addr, prefix, lease, n.events)
	}
	return n
}

// next returns the first unread event of kind from child (any child if
// from is ""), waiting for it up to within.
func (n *nodes) next(kind, from string, within time.Duration) event {
	n.tb.Helper()
	timeout := time.After(within)
	for {
		for i, e := range n.unread {
			if e.kind == kind && (from == "" || e.child == from) {
				n.unread = slices.Delete(n.unread, i, i+1)
				return e
			}
		}
		select {
		case e := <-n.events:
			n.all = append(n.all, e)
			n.unread = append(n.unread, e)
		case <-timeout:
			n.tb.Fatalf("no %q event from %q within %v; events so far: %+v", kind, from, within, n.all)
		}
	}
}

// skip marks every event of kind from child received so far as read.
func (n *nodes) skip(kind, from string) {
	for {
		select {
		case e := <-n.events:
			n.all = append(n.all, e)
			n.unread = append(n.unread, e)
			continue
		default:
		}
		break
	}
	n.unread = slices.DeleteFunc(n.unread, func(e event) bool { return e.kind == kind && e.child == from })
}

// crash freezes the leader right after it reported a renewal, and kills it
// once it is sure that report holds the leader's final local deadline: it
// was frozen before its next renewal could be sent (renewals are sent one
// renewal period apart, from when the last one was sent, which its deadline
// gives away). Otherwise it lets the leader go on, and tries again at its
// next renewal. It returns when the leader stopped running (CLOCK_MONOTONIC)
// and its last report.
func (n *nodes) crash(leader string, cfg runtime.Config) (stoppedAt int64, last event) {
	n.tb.Helper()
	c := n.children[leader]
	// The local validity of a full grant (what runtime's Config gives a
	// renewal that granted LeaseDuration): deadline = sentAt + local (D1).
	local := time.Duration(float64(cfg.LeaseDuration)*(1-cfg.Drift)) - cfg.Margin
	for attempt := 1; ; attempt++ {
		n.skip("valid", leader)
		v := n.next("valid", leader, 2*cfg.RenewInterval+2*time.Second)
		c.freeze(n.tb)
		stoppedAt = monotonic()
		sentAt := v.deadlineLo - int64(local) // at the latest
		if stoppedAt < sentAt+int64(cfg.RenewInterval) {
			c.signal(n.tb, syscall.SIGKILL)
			return stoppedAt, v
		}
		c.signal(n.tb, syscall.SIGCONT)
		if attempt == 5 {
			n.tb.Fatalf("could not freeze %s within a renewal period of its renewal in 5 tries (the last %v after it): the machine is too busy",
				leader, time.Duration(stoppedAt-sentAt))
		}
	}
}

// failOver is what runFailOver measured.
type failOver struct {
	crash    time.Duration // from the leader's SIGKILL (frozen first) to the next election
	graceful time.Duration // from telling the next leader to stop to the election after it
}

// runFailOver runs three node processes against the Redis at addr (§11):
// the leader is killed with SIGKILL and another process takes over after
// about LeaseDuration; that one stops gracefully and the last takes over at
// once (A1, H1). It fails tb if two terms were valid at once (T2) or tokens
// did not increase (F5) — termcheck's checks, with the callbacks paired —
// and returns the two take-over times.
//
// Each term's interval is recorded on CLOCK_MONOTONIC, which the processes
// share, with no allowance for observation lag, since each bound is taken on
// the side that keeps the check sound:
//
//   - a term begins no later than its elected callback's time;
//   - a gracefully stopped term ends no later than "ended", which its task
//     writes after the term was revoked and before the engine releases the
//     lease (H1), so before the next holder can acquire it;
//   - a killed process's term ends at its last local deadline, which crash
//     makes sure it reported (as if it were only paused: the deadline, not
//     the death, is what the engine promises, D3).
//
// A take-over after a crash must begin after that deadline, which Redis's
// expiry of the session follows by Drift × LeaseDuration + Margin; a
// graceful one after the old term's task saw it end.
func runFailOver(tb testing.TB, addr string, admin *redis.Client, lease time.Duration) failOver {
	tb.Helper()
	cfg := runtime.ConfigFor(lease)
	prefix := newBackend(tb, admin, admin, WithMaxLease(lease)).Prefix() // waits for the amnesia guard
	n := startNodes(tb, addr, prefix, lease, "a", "b", "c")
	for range n.children {
		n.next("ready", "", 20*time.Second)
	}
	first := n.next("elected", "", 10*time.Second)

	// Crash: the leader dies without a word. Redis expires its session
	// LeaseDuration after its last renewal; a candidate then takes over at
	// its next attempt, or at once when a script reaps the session and
	// publishes the release.
	crashedAt, _ := n.crash(first.child, cfg)
	second := n.next("elected", "", lease+2*cfg.RenewInterval+2*time.Second)
	var r failOver
	r.crash = time.Duration(second.at - crashedAt)

	// Graceful: the new leader stops; the last node takes over at once.
	stoppedAt := monotonic()
	n.children[second.child].stop()
	third := n.next("elected", "", 5*time.Second)
	r.graceful = time.Duration(third.at - stoppedAt)
	n.children[third.child].stop()
	for range 2 {
		n.next("closed", "", 10*time.Second)
	}
	for _, c := range n.children {
		<-c.done
	}
	for len(n.events) > 0 {
		n.all = append(n.all, <-n.events)
	}

	// One term per token: from its elected callback to the "ended" its
	// task wrote, or, for the killed child, to its last deadline; its
	// callbacks paired once its process closed.
	byToken := map[int64]*termcheck.Term{}
	ended := map[int64]bool{} // the end is when the task saw the term end
	closed := map[string]bool{}
	for _, e := range n.all {
		if e.kind == "closed" {
			closed[e.child] = true
		}
	}
	for _, e := range n.all {
		iv := byToken[e.token]
		switch e.kind {
		case "elected":
			iv = &termcheck.Term{Name: "leader", Node: e.child, Token: e.token, Start: time.Duration(e.at),
				End: time.Duration(e.deadlineHi), Listened: true, Elected: 1, Settled: closed[e.child]}
			byToken[e.token] = iv
		case "valid":
			if iv != nil && !ended[e.token] {
				iv.End = max(iv.End, time.Duration(e.deadlineHi))
			}
		case "ended":
			if iv != nil {
				iv.End, ended[e.token] = time.Duration(e.at), true
			}
		case "revoked":
			if iv != nil {
				iv.Revoked++
			}
		}
	}
	var terms []termcheck.Term
	for _, iv := range byToken {
		terms = append(terms, *iv)
	}
	slices.SortFunc(terms, func(a, b termcheck.Term) int { return cmp.Compare(a.Start, b.Start) })
	if len(terms) != 3 {
		tb.Errorf("%d terms; want 3 (one per node): %+v", len(terms), n.all)
	}
	if err := termcheck.Check(terms, nil, termcheck.Options{}).Err(); err != nil {
		tb.Errorf("the processes' terms:\n%v", err)
	}
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		end := "its last local deadline"
		if ended[prev.Token] {
			end = "its task saw it end"
		}
		tb.Logf("%s (token %d) → %s (token %d): gap %v after %s",
			prev.Node, prev.Token, cur.Node, cur.Token, cur.Start-prev.End, end)
	}
	if len(terms) > 0 && ended[terms[0].Token] {
		tb.Errorf("the killed leader's term %d has an end from its task; want none (it was killed)", terms[0].Token)
	}
	if len(terms) > 1 && !ended[terms[1].Token] {
		tb.Errorf("the gracefully stopped term %d has no end from its task; want one before the release (H1)", terms[1].Token)
	}
	return r
}

// TestTwoProcesses: fail-over between node processes on the real Redis,
// after a crash and after a graceful stop, never with two valid terms (see
// runFailOver).
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr, admin := sharedRedis(t)
	const lease = 2 * time.Second
	r := runFailOver(t, addr, admin, lease)
	t.Logf("take-over after SIGKILL: %v (LeaseDuration %v); after a graceful stop: %v", r.crash, lease, r.graceful)
	if r.graceful > time.Second {
		t.Errorf("take-over %v after a graceful stop; want it prompt (a few round trips)", r.graceful)
	}
}

// BenchmarkTwoProcess measures fail-over between node processes on the
// shared Redis with a 2 s lease: each iteration runs TestTwoProcesses's
// scenario (runFailOver, which also checks that no two terms were valid at
// once) on three fresh processes, about 3 s. Reported: the take-over time
// after the leader's SIGKILL (from when it stopped running to the next
// elected callback; about LeaseDuration, less the time since its last
// renewal, which here is at most a renewal period) and the graceful
// hand-off time (from telling the leader to stop to the next elected
// callback), median and p99:
//
//	go test -run='^$' -bench=TwoProcess -benchtime=20x ./backends/redis/
func BenchmarkTwoProcess(b *testing.B) {
	addr, admin := sharedRedis(b)
	const lease = 2 * time.Second
	var crash, graceful []time.Duration
	for b.Loop() {
		r := runFailOver(b, addr, admin, lease)
		crash = append(crash, r.crash)
		graceful = append(graceful, r.graceful)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	b.ReportMetric(ms(median(crash)), "takeover-ms")
	b.ReportMetric(ms(quantile(crash, 0.99)), "takeover-p99-ms")
	b.ReportMetric(ms(median(graceful)), "handoff-ms")
	b.ReportMetric(ms(quantile(graceful, 0.99)), "handoff-p99-ms")
}
