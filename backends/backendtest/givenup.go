package backendtest

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/runtime"
)

// D3, S3: a leader whose renewals reach the store but whose replies come
// back too late gives its session up at its local deadline. The store
// still counts that session live — the late renewals extended it — until
// its own expiry, a renewal interval and more after the deadline. The
// engine closes the given-up session on the store as soon as a call gets
// through, once the slack D3 keeps before the store's expiry has passed
// (Margin + Drift × LeaseDuration). Here the replies come back to normal
// as the term ends, so the first close gets through: the lease frees then,
// and the next term (the other node's, or a's through its new session)
// begins within the slack and a few round trips of the old term's end,
// well before the store would have expired the session. (While every reply
// stays late, so does a new connection's handshake on the stores that need
// one: no call gets through.)
func testGivenUpFreed(t *testing.T, h *EngineHarness) {
	b, cfg, cl, path, a, ta, _ := h.leaderOnPath(t)
	o := cl.Start("o", h.same(t, b), "lease")
	o.NotElected(0)

	// Every reply late past the renewal period: the renewals still reach
	// the store, and each one pushes the store's expiry of a's session
	// out by LeaseDuration, while a's own deadline stays where the last
	// reply in time put it (D4).
	path.DelayReplies(3 * cfg.RenewInterval)
	t.Cleanup(func() { path.DelayReplies(0) })
	ta.WaitEnded(t, h.Lease+time.Second)
	path.DelayReplies(0)
	if ta.Reason != runtime.ReasonDeadlinePassed {
		t.Errorf("a's term ended with %v; want %v", ta.Reason, runtime.ReasonDeadlinePassed)
	}
	// The next term is o's, or a's through the new session it opened (S3).
	var next *enginetest.TermRecord
	select {
	case next = <-o.Elected():
	case next = <-a.Elected():
	case <-time.After(2 * h.Lease):
		t.Fatalf("nobody elected within %v of a's term's end", 2*h.Lease)
	}
	gap := next.ElectedAt.Sub(ta.EndedAt)
	slack := cfg.Margin + time.Duration(cfg.Drift*float64(cfg.LeaseDuration))
	t.Logf("the next term began %v after a's ended (slack %v; the store's own expiry at least %v later)", gap, slack, cfg.RenewInterval+slack)
	if want := slack + cfg.RenewInterval/2; gap > want {
		t.Errorf("the next term began %v after a's ended; want within %v: the given-up session closed on the store after the slack of %v, not left to expire",
			gap, want, slack)
	}
}
