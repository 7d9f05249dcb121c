package backendtest

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
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// The watcher process of [BenchmarkWatchHolderTurns]: a test binary that
// doubles as it runs [WatchTurnsChild] when WatchTurnsEnv names the lease
// (its TestMain checks). It writes a line per holder its WatchHolder
// reports, with the wall clock (which, unlike Go's monotonic clock, every
// process of the machine reads alike) in ns:
//
//	held TOKEN NS
//	free NS
//
// and ends when its stdin closes.
const WatchTurnsEnv = "SIMBA_WATCH_TURNS_CHILD"

// WatchTurnsChild runs the watcher process on bk, watching the lease named
// by WatchTurnsEnv with a runtime client of default timings, and returns
// the process's exit code.
func WatchTurnsChild(bk backends.Backend) int {
	name := os.Getenv(WatchTurnsEnv)
	c, err := runtime.NewClient(bk, runtime.DefaultConfig(), runtime.WithIdentity("watcher"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "watcher:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.WatchHolder(ctx, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "watcher:", err)
		return 1
	}
	go func() {
		io.Copy(io.Discard, os.Stdin) // until the parent closes it
		cancel()
	}()
	out := bufio.NewWriter(os.Stdout)
	for h := range ch {
		at := time.Now().UnixNano()
		if h.Free() {
			fmt.Fprintf(out, "free %d\n", at)
		} else {
			fmt.Fprintf(out, "held %d %d\n", h.Token, at)
		}
		out.Flush()
	}
	c.Close(context.Background())
	return 0
}

// BenchmarkWatchHolderTurns measures what a watcher in another process
// sees of short holds: a runtime client on bk locks and unlocks a lease
// once per iteration, holding it 2 ms, while [runtime.Client.WatchHolder]
// runs in a second process started by child (the test binary with
// WatchTurnsEnv set to the lease's name, see [WatchTurnsChild]). Reported:
// the turns the watcher reported (seen, of turns), whether it reported
// every change in order (in-order, 1 or 0), and the latency from the start
// of the Lock call that made a grant to the watcher's report of it (p50 and
// p99, µs). Run it with -benchtime=100x for 100 turns. A watcher that
// misses a turn or reorders fails the benchmark.
func BenchmarkWatchHolderTurns(b *testing.B, bk backends.Backend, child func(name string) *exec.Cmd) {
	const name = "turns"
	ctx := context.Background()
	locker, err := runtime.NewClient(bk, runtime.DefaultConfig(), runtime.WithIdentity("locker"))
	if err != nil {
		b.Fatal(err)
	}
	defer locker.Close(ctx)
	cmd := child(name)
	cmd.Env = append(cmd.Env, WatchTurnsEnv+"="+name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(within time.Duration) (string, bool) {
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(within):
			return "", false
		}
	}
	if l, ok := next(30 * time.Second); !ok || !strings.HasPrefix(l, "free") {
		b.Fatalf("the watcher's first report = %q; want the lease free", l)
	}
	// The watcher's store subscription may start late: hold the lease
	// until the watcher reports it, then let it report the release.
	term, err := locker.Lock(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	if l, ok := next(30 * time.Second); !ok || l != fmt.Sprintf("held %d", term.Token())+l[strings.LastIndexByte(l, ' '):] {
		b.Fatalf("the watcher reported %q for a lease held with token %d", l, term.Token())
	}
	if err := locker.Unlock(ctx, term); err != nil {
		b.Fatal(err)
	}
	if l, ok := next(30 * time.Second); !ok || !strings.HasPrefix(l, "free") {
		b.Fatalf("the watcher reported %q after the release; want free", l)
	}
	var (
		tokens []runtime.Token
		starts []time.Time
	)
	for b.Loop() {
		t0 := time.Now()
		term, err := locker.Lock(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		if err := locker.Unlock(ctx, term); err != nil {
			b.Fatal(err)
		}
		tokens, starts = append(tokens, term.Token()), append(starts, t0)
	}
	b.StopTimer()
	var got []string
	var lat []time.Duration
	want := make([]string, 0, 2*len(tokens))
	for _, tok := range tokens {
		want = append(want, "held "+strconv.FormatInt(int64(tok), 10), "free")
	}
	for len(got) < len(want) {
		l, ok := next(10 * time.Second)
		if !ok {
			break
		}
		f := strings.Fields(l)
		at, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
		got = append(got, strings.Join(f[:len(f)-1], " "))
		if f[0] == "held" {
			if i := slices.Index(want, got[len(got)-1]); i >= 0 {
				lat = append(lat, time.Unix(0, at).Sub(starts[i/2]))
			}
		}
	}
	seen := 0
	for _, g := range got {
		if strings.HasPrefix(g, "held ") && slices.Contains(want, g) {
			seen++
		}
	}
	inOrder := slices.Equal(got, want)
	b.ReportMetric(float64(seen), "seen")
	b.ReportMetric(float64(len(tokens)), "turns")
	b.ReportMetric(map[bool]float64{true: 1}[inOrder], "in-order")
	reportMicros(b, lat, 0.5, "report-p50-µs")
	reportMicros(b, lat, 0.99, "report-p99-µs")
	if !inOrder {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		b.Errorf("the watcher reported %d holders for %d turns (%d grants seen); want %d in order; first difference at %d: %q, want %q",
			len(got), len(tokens), seen, len(want), i, got[i:min(i+4, len(got))], want[i:min(i+4, len(want))])
	}
}
