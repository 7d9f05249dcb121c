package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// H1, S4 at scale: a Close stops its contenders in batches — no input
// sends more than closeBatch releases, and no more than closeBatch
// requests are in flight — so that closing a client that leads a million
// elections neither builds a million effects in one step nor lets releases
// wait past their deadlines behind each other; every lease is released,
// then the session closed. A Close whose releases all fail reports the
// first maxCloseErrors failures and counts the rest. (One election's task
// is running when the Close begins, so it is not a bulk Close.)
func TestMachineCloseInBatches(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	const n = 3*closeBatch + 10
	busy := h.win(h.startElection("busy", false, true), 1)
	for i := range n - 1 {
		c := h.startElection(fmt.Sprintf("lease-%d", i), false, false)
		h.win(c, Token(i+2))
	}
	h.step(Close{Waiter: 1})
	if h.m.closing == nil || h.m.closing.bulk {
		t.Fatalf("a Close with a task running is a bulk Close")
	}
	h.step(TaskDone{Term: busy.id, Canceled: true})
	released := map[string]bool{}
	inFlight := func() int {
		k := 0
		for _, r := range h.sent {
			if r.Kind == ReqRelease {
				k++
			}
		}
		return k
	}
	for steps := 0; !h.has(ReqClose); steps++ {
		if steps > 10*n {
			t.Fatalf("the close made no progress: %d of %d released", len(released), n)
		}
		if k := inFlight(); k > closeBatch {
			t.Fatalf("%d releases in flight; want at most %d", k, closeBatch)
		}
		if inFlight() == 0 {
			if at, ok := h.m.nextWake(); !ok || at > h.now {
				t.Fatalf("nothing in flight, %d of %d released, and no wake now (at %v, %v)", len(released), n, at, ok)
			}
			h.advanceTo(h.now)
			continue
		}
		r := h.take(ReqRelease)
		released[r.Name] = true
		before := len(h.sent)
		h.reply(r, Result{Err: errors.New("store unavailable")})
		if sent := len(h.sent) - before; sent > closeBatch {
			t.Fatalf("one input sent %d requests; want at most %d", sent, closeBatch)
		}
	}
	if len(released) != n {
		t.Fatalf("%d of %d leases released before the session closed", len(released), n)
	}
	h.reply(h.take(ReqClose), Result{})
	if len(h.completed) != 1 {
		t.Fatalf("%d completions; want the Close's", len(h.completed))
	}
	err := h.completed[0].Err
	if err == nil {
		t.Fatal("Close = nil; want the failed releases reported")
	}
	if got := strings.Count(err.Error(), "not released"); got != maxCloseErrors {
		t.Errorf("Close reports %d failures one by one; want %d", got, maxCloseErrors)
	}
	if want := fmt.Sprintf("and %d more", n-maxCloseErrors); !strings.Contains(err.Error(), want) {
		t.Errorf("Close = %v; want it to end with %q", err, want)
	}
}

// H1, S4, L3: a Close of a client leading more than closeBatch leases, with
// no task running, is a bulk Close: it revokes every term and lets the
// session's close release them all (the store frees a closed session's
// leases at once), rather than sending a release each; every revoked
// callback comes after the close is answered, at most closeStepMax per
// input, and the Close completes once they have all run.
func TestMachineBulkClose(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	const n = 2*closeStepMax + 10
	var cs []*contender
	for i := range n {
		c := h.startElection(fmt.Sprintf("lease-%d", i), true, false)
		h.win(c, Token(i+1))
		cs = append(cs, c)
	}
	for _, c := range cs { // the elected callbacks ran
		h.step(CallbackDone{ID: c.id})
	}
	elected := len(h.dispatched)
	h.step(Close{Waiter: 1})
	for steps := 0; !h.has(ReqClose); steps++ {
		if steps > n {
			t.Fatalf("the bulk Close made no progress")
		}
		if h.has(ReqRelease) {
			t.Fatalf("a bulk Close sent a release: %v", h.take(ReqRelease))
		}
		h.advanceTo(h.now)
	}
	for _, ht := range h.terms {
		if !ht.ended || ht.reason != vocab.ReasonStopped {
			t.Fatalf("term %v not revoked (%v) before the session's close was sent", ht, ht.reason)
		}
	}
	if got := len(h.dispatched) - elected; got != 0 {
		t.Fatalf("%d revoked callbacks dispatched before the session's close was answered; want none (H1: release first)", got)
	}
	h.reply(h.take(ReqClose), Result{})
	for steps := 0; len(h.dispatched)-elected < n; steps++ {
		if steps > n {
			t.Fatalf("%d of %d revoked callbacks dispatched after the close, and no progress", len(h.dispatched)-elected, n)
		}
		before := len(h.dispatched)
		h.advanceTo(h.now)
		if got := len(h.dispatched) - before; got > closeStepMax {
			t.Fatalf("one input dispatched %d revoked callbacks; want at most %d", got, closeStepMax)
		}
	}
	for i, c := range cs {
		if len(h.completed) != 0 {
			t.Fatalf("Close completed with %d revoked callbacks still to run (L3)", n-i)
		}
		h.step(CallbackDone{ID: c.id})
	}
	if len(h.completed) != 1 || h.completed[0].Err != nil {
		t.Fatalf("completions %v; want the Close's, without error", h.completed)
	}
}

// A driver may step many inputs before it takes the effects (a batch of
// callbacks that ended, stepped under one lock): no input of a bulk Close
// adds a chunk of hand-offs while closeStepMax effects wait for the driver,
// so the effects between two reads stay bounded however many inputs came.
func TestMachineBulkCloseBoundsEffectsBetweenReads(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	const n = 4 * closeStepMax
	for i := range n {
		h.win(h.startElection(fmt.Sprintf("lease-%d", i), false, false), Token(i+1))
	}
	h.step(Close{Waiter: 1})
	eightInputs := func() {
		t.Helper()
		for range 8 { // eight inputs, no read between them
			h.m.Tick(h.now)
		}
		effs, _, _ := h.m.Ready()
		if len(effs) > 4*closeStepMax {
			t.Fatalf("%d effects after eight inputs without a read; want a bounded chunk (closeStepMax %d)", len(effs), closeStepMax)
		}
		if len(effs) == 0 {
			t.Fatal("no progress")
		}
		h.collectFrom(effs)
	}
	for !h.has(ReqClose) { // revoking the terms
		eightInputs()
	}
	h.reply(h.take(ReqClose), Result{})
	for len(h.completed) == 0 { // handing them over
		eightInputs()
	}
}
