package engine

import (
	"fmt"
	"testing"

	"github.com/simba-go/simba/backends"
)

// A client that starts many elections at once sends at most acquireSlots
// attempts at a time; each reply lets the next in line send its own, in
// the order they were started, until every lease is held.
func TestMachinePacedAttempts(t *testing.T) {
	const n = 3*acquireSlots + 17
	h := newHarness(t, testCfg)
	h.open()
	for i := range n {
		h.startElection(fmt.Sprintf("lease-%d", i), false, false)
	}
	var order []string
	for token := Token(1); ; token++ {
		inFlight := 0
		for _, r := range h.sent {
			if r.Kind == ReqAcquire {
				inFlight++
			}
		}
		if inFlight > acquireSlots {
			t.Fatalf("%d acquisitions in flight; want at most %d", inFlight, acquireSlots)
		}
		if inFlight == 0 {
			break
		}
		r := h.take(ReqAcquire)
		order = append(order, r.Name)
		h.reply(r, Result{Grant: backends.Grant{Token: token}})
	}
	if len(order) != n {
		t.Fatalf("%d attempts made; want %d, one per election", len(order), n)
	}
	for i, name := range order {
		if want := fmt.Sprintf("lease-%d", i); name != want {
			t.Fatalf("attempt %d for %s; want %s: first started, first sent", i, name, want)
		}
	}
	if held := len(h.m.terms); held != n {
		t.Errorf("%d leases held; want %d", held, n)
	}
	if len(h.m.pace.line) != 0 || h.m.pace.inLine != nil {
		t.Errorf("the line is not empty once every election holds its lease")
	}
}

// An election stopped while it waits in line makes no attempt when its
// turn comes.
func TestMachinePacedStopped(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	for i := range acquireSlots {
		h.startElection(fmt.Sprintf("lease-%d", i), false, false)
	}
	late := h.startElection("late", false, false)
	if err := h.step(Stop{ID: late.id}); err != nil {
		t.Fatal(err)
	}
	for h.has(ReqAcquire) {
		h.reply(h.take(ReqAcquire), Result{Grant: backends.Grant{Token: 1}})
	}
	for _, r := range h.sent {
		if r.Name == "late" {
			t.Fatalf("a stopped election's attempt was sent: %v", r)
		}
	}
}
