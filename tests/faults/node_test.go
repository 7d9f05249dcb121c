package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	_ "github.com/simba-go/simba/backends/all" // every store a URL may name
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/runtime"
)

// The environment of a node process: nodeEnv set selects node mode, the
// others say what it contends for and where it logs.
const (
	nodeEnv      = "SIMBA_FAULTS_NODE"  // the node's id, e.g. "n1.0" (node 1, first incarnation)
	nodeURLEnv   = "SIMBA_FAULTS_URL"   // the backend URL, through the node's proxy
	nodeNamesEnv = "SIMBA_FAULTS_NAMES" // the lease names, comma-separated
	nodeLeaseEnv = "SIMBA_FAULTS_LEASE" // the lease duration
	nodeFenceEnv = "SIMBA_FAULTS_FENCE" // the fenced resource's base URL
	nodeLogEnv   = "SIMBA_FAULTS_LOG"   // the file the node appends its events to

	// nodeMutantEnv set to "overclaim" makes the node log deadlines a
	// lease later than its terms have: a node that trusts its terms too
	// long, which the checker must catch (TestCheckerCatchesOverclaim).
	nodeMutantEnv = "SIMBA_FAULTS_MUTANT"
)

// The node's step: a fenced write starts only if the term stays valid for
// longer than this (EnsureValid), and the writer waits this long between
// checkpoints.
const (
	writeStep  = 100 * time.Millisecond
	checkEvery = 25 * time.Millisecond
)

// event is one line of a node's log. Mono and Until are CLOCK_MONOTONIC
// readings in nanoseconds, comparable across the processes of one host.
type event struct {
	Ev     string `json:"ev"`               // "start", "begin", "valid", "write", "end"
	Node   string `json:"node"`             // the process: node and incarnation
	Name   string `json:"name,omitempty"`   // the lease name
	Token  int64  `json:"token,omitempty"`  // the term's fencing token
	Mono   int64  `json:"mono"`             // when the event was recorded
	Until  int64  `json:"until,omitempty"`  // begin, valid, write: the term's local deadline as read at Mono
	Seq    int    `json:"seq,omitempty"`    // write: the write's number within the term
	Result string `json:"result,omitempty"` // write: "accepted", "stale" or "error: …"; end, rt: the reason or error

	// rt: an event of the runtime's observer, for the record of a failure
	// (sessions opened, renewed and ended, terms elected and revoked,
	// backend errors).
	Kind    string `json:"kind,omitempty"`
	Session string `json:"session,omitempty"`
	Dur     int64  `json:"dur,omitempty"` // its Duration, in ns
}

// mono reads CLOCK_MONOTONIC, the clock of the runtime's deadlines (Go's
// monotonic clock on Linux), shared by every process of the host.
func mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// nodeLog appends events to a file, one write(2) per line, so that a line
// logged before SIGKILL is in the file.
type nodeLog struct {
	mu    sync.Mutex
	f     *os.File
	id    string
	extra time.Duration // the mutant's overclaim
}

func (l *nodeLog) log(e event) {
	e.Node = l.id
	if e.Mono == 0 {
		e.Mono = mono()
	}
	b, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Write(append(b, '\n'))
}

// checkpoint logs that the term is valid now, with its deadline, and
// returns whether it is. The clock is read before Remaining, so that Mono +
// Remaining is not later than the deadline the runtime holds: read after,
// a pause (SIGSTOP, or the thread off its CPU) between the two reads would
// push the logged deadline later by the pause, and the checker would see
// an overlap the node never had.
func (l *nodeLog) checkpoint(ev string, t *runtime.Term, seq int, result string) bool {
	now := mono()
	r := t.Remaining()
	if r <= 0 {
		return false
	}
	l.log(event{Ev: ev, Name: t.Name(), Token: int64(t.Token()), Mono: now, Until: now + int64(r+l.extra), Seq: seq, Result: result})
	return true
}

// nodeMain is a node process: a runtime client that contends for every
// name, and while it leads one, logs checkpoints of its term's validity and
// writes (token, seq) to the fenced resource. It runs until it is killed.
func nodeMain() int {
	id := os.Getenv(nodeEnv)
	f, err := os.OpenFile(os.Getenv(nodeLogEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	l := &nodeLog{f: f, id: id}
	lease, err := time.ParseDuration(os.Getenv(nodeLeaseEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 2
	}
	if os.Getenv(nodeMutantEnv) == "overclaim" {
		l.extra = lease
	}
	fence := os.Getenv(nodeFenceEnv)
	hc := &http.Client{Timeout: 2 * writeStep}
	ctx := context.Background()
	l.log(event{Ev: "start"})

	// The backend may be unreachable when the node starts (a restart during
	// a cut): try until it opens.
	var c *runtime.Client
	for {
		octx, cancel := context.WithTimeout(ctx, lease)
		b, _, err := backendurl.Open(octx, os.Getenv(nodeURLEnv))
		cancel()
		if err == nil {
			c, err = runtime.NewClient(b, runtime.ConfigFor(lease), runtime.WithIdentity(id),
				runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
					ev := event{Ev: "rt", Kind: e.Kind.String(), Name: e.Name, Session: string(e.Session), Dur: int64(e.Duration)}
					if e.Kind == runtime.EventElected || e.Kind == runtime.EventRevoked {
						ev.Token = int64(e.Token)
					}
					if e.Err != nil {
						ev.Result = e.Err.Error()
					} else if e.Reason != 0 {
						ev.Result = e.Reason.String()
					}
					l.log(ev)
				})))
		}
		if err == nil {
			break
		}
		fmt.Fprintln(os.Stderr, "node: opening the backend:", err)
		time.Sleep(100 * time.Millisecond)
	}

	task := func(ctx context.Context, t *runtime.Term) error {
		l.checkpoint("begin", t, 0, "")
		seq := 0
		tick := time.NewTicker(checkEvery)
		defer tick.Stop()
		last := time.Time{}
		for {
			if l.checkpoint("valid", t, 0, "") && time.Since(last) >= writeStep && t.EnsureValid(writeStep) == nil {
				last = time.Now()
				seq++
				l.log(event{Ev: "write", Name: t.Name(), Token: int64(t.Token()), Seq: seq, Result: write(hc, fence, id, t, seq)})
			}
			select {
			case <-ctx.Done():
				// Logged before the task returns: a hand-off waits for it
				// before it releases the lease (H1).
				l.log(event{Ev: "end", Name: t.Name(), Token: int64(t.Token()), Result: context.Cause(ctx).Error()})
				return nil
			case <-tick.C:
			}
		}
	}
	for _, name := range strings.Split(os.Getenv(nodeNamesEnv), ",") {
		go func() {
			if err := c.RunWhileLeader(ctx, name, task); err != nil {
				fmt.Fprintln(os.Stderr, "node: RunWhileLeader:", err)
				os.Exit(3)
			}
		}()
	}
	select {}
}

// write posts (token, seq) to the fenced resource and returns what it said.
func write(hc *http.Client, fence, id string, t *runtime.Term, seq int) string {
	q := url.Values{"name": {t.Name()}, "token": {fmt.Sprint(t.Token())}, "seq": {fmt.Sprint(seq)}, "node": {id}}
	resp, err := hc.Post(fence+"/write?"+q.Encode(), "text/plain", nil)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return "accepted"
	case http.StatusConflict:
		return "stale"
	}
	return "error: " + resp.Status
}
