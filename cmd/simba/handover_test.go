package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/runtime"
)

// handOverWorld is an election "lead" on an in-process store of the test's
// own, contended by nodes node-a, node-b (both accepting a hand-over) and
// node-c (not), node-a leading; requests says whether the elections
// accept hand-over requests.
func handOverWorld(t *testing.T, requests bool) (url string, elections map[string]*runtime.Election) {
	t.Helper()
	url = "memory:handover-" + strings.ReplaceAll(t.Name(), "/", "-")
	b, _, err := backendurl.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	cfg := runtime.ConfigFor(2 * time.Second)
	elections = map[string]*runtime.Election{}
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		c, err := runtime.NewClient(b, cfg, runtime.WithIdentity(n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		var opts []runtime.ElectionOption
		if n != "node-c" {
			opts = append(opts, runtime.AcceptHandOver())
		}
		if requests {
			opts = append(opts, runtime.AcceptHandOverRequests())
		}
		e, err := c.StartElection("lead", nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		elections[n] = e
		if n == "node-a" {
			waitFor(t, func() bool { return e.Term() != nil }, "node-a to lead")
		}
	}
	waitFor(t, func() bool { // every successor lease held
		return runHandOver(t, url, "status", "--lease", runtime.SuccessorName("lead", "node-b")).code == exitOK
	}, "node-b's successor lease")
	return url, elections
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
	}
}

type cmdResult struct {
	code           int
	stdout, stderr string
}

func runHandOver(t *testing.T, url string, args ...string) cmdResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append(args, "--backend", url), func(string) string { return "" }, &stdout, &stderr, false)
	return cmdResult{code, stdout.String(), stderr.String()}
}

// simba handover moves the lease to the node it names, when the leader
// accepts requests; it refuses, changing nothing, when the node does not
// contend or nobody holds the lease; it says so, after its timeout, when
// the leader does not accept requests.
func TestHandOverCommand(t *testing.T) {
	t.Run("carried out", func(t *testing.T) {
		url, el := handOverWorld(t, true)
		r := runHandOver(t, url, "handover", "--lease", "lead", "--to", "node-b", "--timeout", "10s")
		if r.code != exitOK || !strings.Contains(r.stdout, "lead: handed over to node-b") {
			t.Fatalf("handover = %d, stdout %q, stderr %q; want 0 and the new holder", r.code, r.stdout, r.stderr)
		}
		if el["node-b"].Term() == nil || el["node-a"].Term() != nil {
			t.Errorf("after the hand-over node-b leads %v, node-a %v; want node-b alone",
				el["node-b"].Term() != nil, el["node-a"].Term() != nil)
		}
		// The request is released: nothing moves it back, and a second
		// request for the holder is done at once.
		r = runHandOver(t, url, "status", "--lease", runtime.HandOverRequestName("lead"))
		if r.code != exitNotHeld {
			t.Errorf("after handover, status of the request lease = %d; want %d (released)", r.code, exitNotHeld)
		}
		r = runHandOver(t, url, "handover", "--lease", "lead", "--to", "node-b")
		if r.code != exitOK || !strings.Contains(r.stdout, "already held by node-b") {
			t.Errorf("handover to the holder = %d, %q %q; want 0, already held", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("not a candidate", func(t *testing.T) {
		url, el := handOverWorld(t, true)
		for _, to := range []string{"node-c", "node-z"} {
			r := runHandOver(t, url, "handover", "--lease", "lead", "--to", to)
			if r.code != exitNotCandidate || !strings.Contains(r.stderr, `"`+to+`" does not contend for "lead"`) {
				t.Errorf("handover to %s = %d, stderr %q; want %d naming it", to, r.code, r.stderr, exitNotCandidate)
			}
		}
		if el["node-a"].Term() == nil {
			t.Error("node-a lost the lease to a refused hand-over")
		}
		r := runHandOver(t, url, "handover", "--lease", "nobody-holds-this", "--to", "node-b")
		if r.code != exitNotHeld || !strings.Contains(r.stderr, `nobody holds "nobody-holds-this"`) {
			t.Errorf("handover of a free lease = %d, %q; want %d", r.code, r.stderr, exitNotHeld)
		}
	})
	t.Run("leader does not accept requests", func(t *testing.T) {
		url, el := handOverWorld(t, false)
		r := runHandOver(t, url, "handover", "--lease", "lead", "--to", "node-b", "--timeout", "300ms")
		if r.code != exitFailed || !strings.Contains(r.stderr, "runtime.AcceptHandOverRequests") {
			t.Errorf("handover to a leader that takes no requests = %d, stderr %q; want %d and the option named", r.code, r.stderr, exitFailed)
		}
		if el["node-a"].Term() == nil {
			t.Error("node-a lost the lease though it takes no requests")
		}
	})
}

// handover's usage errors name the flag and what it wants.
func TestHandOverUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"handover", "--backend", "memory:x", "--to", "b"}, "no lease: give --lease NAME"},
		{[]string{"handover", "--backend", "memory:x", "--lease", "lead"}, "no successor: give --to IDENTITY"},
		{[]string{"handover", "--lease", "lead", "--to", "b"}, "no backend"},
		{[]string{"handover", "--backend", "memory:x", "--lease", "le ad", "--to", "b"}, "--lease"},
		{[]string{"handover", "--backend", "memory:x", "--lease", "lead", "--to", "b", "--timeout", "0s"}, "--timeout 0s: want > 0"},
		{[]string{"handover", "--backend", "memory:x", "--lease", "lead", "--to", "b", "extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, func(string) string { return "" }, &stdout, &stderr, false)
		if code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("simba %v = %d, stderr %q; want %d and %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}
