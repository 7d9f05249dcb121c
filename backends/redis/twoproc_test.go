package simbaredis

import (
	"bufio"
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

	"github.com/simba-go/simba/runtime"
)

// The test binary doubles as a node process: with childEnv set, TestMain
// runs childMain instead of the tests. The child runs one election on the
// lease "leader" and writes a line to stdout for each event, with times read
// from CLOCK_MONOTONIC, which on Linux is one clock for every process of the
// machine, so that the parent can compare the children's terms:
//
//	ready
//	elected TOKEN NOW DEADLINE   the term began (at most) NOW and is valid until DEADLINE
//	valid TOKEN NOW DEADLINE     a renewal moved the term's deadline to DEADLINE
//	ended TOKEN NOW              the term's Done channel was seen closed at NOW
//	revoked TOKEN NOW REASON     the revoked callback ran (after the release, H1)
//	closed
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
		now := monotonic()
		left := t.Remaining()
		if left > 0 {
			say("%s %d %d %d", kind, t.Token(), now, now+int64(left))
		}
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
	_, err = c.StartElection("leader", runtime.ListenerFuncs{
		OnElected: func(_ context.Context, t *runtime.Term) {
			current.Store(t)
			report("elected", t)
			go func() {
				<-t.Done()
				say("ended %d %d", t.Token(), monotonic())
			}()
		},
		OnRevoked: func(_ context.Context, t *runtime.Term, r runtime.Reason) {
			current.CompareAndSwap(t, nil)
			say("revoked %d %d %s", t.Token(), monotonic(), strings.ReplaceAll(r.String(), " ", "-"))
		},
	})
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

// event is one line of a child, parsed.
type event struct {
	child    string
	kind     string
	token    int64
	at       int64 // CLOCK_MONOTONIC ns
	deadline int64
	reason   string
}

func startChild(t *testing.T, name, addr, prefix string, lease time.Duration, events chan<- event) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", childAddrEnv+"="+addr, childPrefixEnv+"="+prefix,
		childLeaseEnv+"="+lease.String(),
		"GORACE=atexit_sleep_ms=0") // a -race binary otherwise sleeps 1 s at exit
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child %s: %v", name, err)
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
				e.token, e.at, e.deadline = num(1), num(2), num(3)
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
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

func (c *child) stop() { io.WriteString(c.stdin, "stop\n") }

func (c *child) kill(t *testing.T) int64 {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing child %s: %v", c.name, err)
	}
	return monotonic()
}

// TestTwoProcesses runs three node processes against the real Redis (§11):
// the leader is killed with SIGKILL and another process takes over after
// about LeaseDuration; that one stops gracefully and the last takes over at
// once (A1, H1). Every term's interval — from when it was adopted to the
// last deadline it had (a killed process) or to when it was revoked — is
// recorded on CLOCK_MONOTONIC, which the processes share, and no two
// intervals may overlap (T2); tokens increase from term to term (F5).
//
// The ends of the intervals are observed, not exact: a term starts a little
// before its elected callback runs, and ends a little before a goroutine
// waiting on Done notices (the revoked callback comes only after the
// release, H1, too late to be an end); a killed child may die between a
// renewal and its report of the new deadline. The check allows lag for
// these observations, far less than the overlap a broken take-over would
// show (up to a whole lease), and than the gap a crash take-over keeps (at
// least Drift × LeaseDuration + Margin).
func TestTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr, admin := sharedRedis(t)
	const lease = 2 * time.Second
	cfg := runtime.ConfigFor(lease)
	prefix := newBackend(t, admin, admin, WithMaxLease(lease)).Prefix() // waits for the amnesia guard

	events := make(chan event, 256)
	children := map[string]*child{}
	for _, name := range []string{"a", "b", "c"} {
		children[name] = startChild(t, name, addr, prefix, lease, events)
	}
	var all, unread []event // every event; those next has not returned
	next := func(kind string, within time.Duration) event {
		t.Helper()
		timeout := time.After(within)
		for {
			for i, e := range unread {
				if e.kind == kind {
					unread = slices.Delete(unread, i, i+1)
					return e
				}
			}
			select {
			case e := <-events:
				all = append(all, e)
				unread = append(unread, e)
			case <-timeout:
				t.Fatalf("no %q event within %v; events so far: %+v", kind, within, all)
			}
		}
	}
	for range children {
		next("ready", 20*time.Second)
	}
	first := next("elected", 10*time.Second)

	// Crash: the leader dies without a word. Redis expires its session
	// LeaseDuration after its last renewal; a candidate then takes over at
	// its next attempt, or at once when a script reaps the session and
	// publishes the release.
	time.Sleep(cfg.RenewInterval) // a renewal or two in the term
	killedAt := children[first.child].kill(t)
	second := next("elected", lease+2*cfg.RenewInterval+2*time.Second)
	crash := time.Duration(second.at - killedAt)
	t.Logf("take-over after SIGKILL: %v (LeaseDuration %v)", crash, lease)
	if crash < lease-cfg.RenewInterval-100*time.Millisecond {
		t.Errorf("take-over %v after the leader was killed; want about LeaseDuration %v, at least %v after its last renewal",
			crash, lease, lease)
	}

	// Graceful: the new leader stops; the last node takes over at once.
	stoppedAt := monotonic()
	children[second.child].stop()
	third := next("elected", 5*time.Second)
	graceful := time.Duration(third.at - stoppedAt)
	t.Logf("take-over after a graceful stop: %v", graceful)
	if graceful > time.Second {
		t.Errorf("take-over %v after a graceful stop; want it prompt (a few round trips)", graceful)
	}
	children[third.child].stop()
	for range 2 {
		next("closed", 10*time.Second)
	}
	for _, c := range children {
		<-c.done
	}
	for len(events) > 0 {
		all = append(all, <-events)
	}

	// One interval per term: [elected, ended] or, for the killed child,
	// [elected, last deadline reported].
	type interval struct {
		child      string
		token      int64
		start, end int64
	}
	byToken := map[int64]*interval{}
	for _, e := range all {
		switch e.kind {
		case "elected":
			byToken[e.token] = &interval{child: e.child, token: e.token, start: e.at, end: e.deadline}
		case "valid":
			if iv := byToken[e.token]; iv != nil {
				iv.end = max(iv.end, e.deadline)
			}
		case "ended":
			if iv := byToken[e.token]; iv != nil {
				iv.end = e.at
			}
		}
	}
	var terms []*interval
	for _, iv := range byToken {
		terms = append(terms, iv)
	}
	slices.SortFunc(terms, func(a, b *interval) int { return int(a.start - b.start) })
	if len(terms) != 3 {
		t.Errorf("%d terms; want 3 (one per node): %+v", len(terms), all)
	}
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		const lag = 20 * time.Millisecond // observation lag, see above
		if cur.start <= prev.end-int64(lag) {
			t.Errorf("term %d of %s began %v before term %d of %s ended: two valid terms (T2)",
				cur.token, cur.child, time.Duration(prev.end-cur.start), prev.token, prev.child)
		}
		if cur.token <= prev.token {
			t.Errorf("term of %s has token %d after token %d; want increasing (F5)", cur.child, cur.token, prev.token)
		}
		t.Logf("%s (token %d) → %s (token %d): gap %v", prev.child, prev.token, cur.child, cur.token, time.Duration(cur.start-prev.end))
	}
}
