package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// H1, S4 at scale: a Close stops its contenders in batches — no input
// sends more than closeBatch releases, and no more than closeBatch
// requests are in flight — so that closing a client that leads a million
// elections neither builds a million effects in one step nor lets releases
// wait past their deadlines behind each other; every lease is released,
// then the session closed. A Close whose releases all fail reports the
// first maxCloseErrors failures and counts the rest.
func TestMachineCloseInBatches(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	const n = 3*closeBatch + 10
	for i := range n {
		c := h.startElection(fmt.Sprintf("lease-%d", i), false, false)
		h.win(c, Token(i+1))
	}
	h.step(Close{Waiter: 1})
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
