package simbapg

import (
	"testing"
	"time"

	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// §11 "backend unreachable", S5, D4, T4, H3: the leader's connections to
// PostgreSQL are cut (its pool's and its LISTEN connection's dialer closes
// them and refuses new ones). Its session goes Suspended; its term ends with
// DeadlinePassed at the local deadline; the other node is elected only after
// that deadline (never two valid terms). Once healed, the old leader opens a
// new session and wins again when the other node stops.
func TestCutConnection(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	m := newMonitor(t)
	link := faultnet.New()
	cutOff := newBackend(t, newPool(t, dsn, link), admin)
	a := startNode(t, "a", cutOff, m, "lease")
	ta := a.waitElected(5 * time.Second)
	oldSession := a.waitState(runtime.SessionLive, time.Second).Session
	b := startNode(t, "b", sameSchema(t, cutOff, newPool(t, dsn, nil)), m, "lease")
	b.notElected(testConfig.RenewInterval)

	link.Cut()
	a.waitState(runtime.SessionSuspended, 2*testConfig.RenewInterval)
	deadline := time.Now().Add(ta.term.Remaining())
	ta.waitEnded(t, time.Until(deadline)+time.Second)
	if ta.reason != runtime.ReasonDeadlinePassed {
		t.Errorf("a's term ended with %v; want %v (§11)", ta.reason, runtime.ReasonDeadlinePassed)
	}
	if late := ta.endedAt.Sub(deadline); late > 500*time.Millisecond {
		t.Errorf("a's term ended %v after its local deadline; want at the deadline (D4)", late)
	}
	tb := b.waitElected(testConfig.LeaseDuration + 2*testConfig.RenewInterval)
	if !tb.electedAt.After(deadline) {
		t.Errorf("b elected at %v, before a's local deadline %v: two valid terms", tb.electedAt, deadline)
	}
	t.Logf("b elected %v after a's local deadline", tb.electedAt.Sub(deadline))

	link.Heal()
	s := a.waitState(runtime.SessionLive, testConfig.LeaseDuration+time.Second)
	if s.Session == oldSession {
		t.Errorf("a's session after the cut healed is %s, the expired one; want a new session (S3)", s.Session)
	}
	a.notElected(testConfig.RenewInterval) // b holds the lease and is alive
	b.stop("lease")
	ta2 := a.waitElected(2 * testConfig.RenewInterval)
	if ta2.term.Token() <= tb.term.Token() {
		t.Errorf("a's new token %d; want > b's %d (T2)", ta2.term.Token(), tb.term.Token())
	}
}

// D1, D2, D4: requests held back on their way to PostgreSQL for longer than
// the renewal period time out (D2), the session goes Suspended, and the term
// ends with DeadlinePassed at the deadline it had — a renewal the server
// handled late does not extend it. Without the delay, the node opens a new
// session and is elected again.
func TestDelayedConnection(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	m := newMonitor(t)
	link := faultnet.New()
	slow := newBackend(t, newPool(t, dsn, link), admin)
	a := startNode(t, "a", slow, m, "lease")
	ta := a.waitElected(5 * time.Second)
	old := a.waitState(runtime.SessionLive, time.Second).Session

	// Below the renewal period: the term stays valid.
	link.DelayReplies(200 * time.Millisecond)
	for end := time.Now().Add(2 * testConfig.RenewInterval); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if !ta.term.Valid() {
			t.Fatalf("a's term ended under 200ms of reply latency (%v)", ta.term.Reason())
		}
	}
	link.DelayReplies(0)

	link.DelayRequests(3 * testConfig.RenewInterval)
	a.waitState(runtime.SessionSuspended, 3*testConfig.RenewInterval)
	deadline := time.Now().Add(ta.term.Remaining())
	ta.waitEnded(t, testConfig.LeaseDuration+time.Second)
	if ta.reason != runtime.ReasonDeadlinePassed {
		t.Errorf("a's term ended with %v; want %v", ta.reason, runtime.ReasonDeadlinePassed)
	}
	if late := ta.endedAt.Sub(deadline); late > 500*time.Millisecond {
		t.Errorf("a's term ended %v after the deadline it had when requests slowed; want no extension (D4)", late)
	}
	link.DelayRequests(0)
	ta2 := a.waitElected(2*testConfig.LeaseDuration + 2*time.Second)
	if s := a.c.Snapshot(); s.Session == old {
		t.Errorf("a's session after the delay is still %s; want a new one (S3)", old)
	}
	if ta2.term.Token() <= ta.term.Token() {
		t.Errorf("token of the new term %d; want > %d", ta2.term.Token(), ta.term.Token())
	}
}

// S3, T4: a session row expired behind the client's back: the next
// keep-alive answers ErrSessionExpired; the term ends with SessionExpired
// (before its deadline), a new session opens and wins again, with a greater
// token.
func TestSessionExpiredBehindBack(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	m := newMonitor(t)
	b := newBackend(t, newPool(t, dsn, nil), admin)
	a := startNode(t, "a", b, m, "lease")
	ta := a.waitElected(5 * time.Second)
	s := a.waitState(runtime.SessionLive, time.Second)

	expireSession(t, admin, b.Schema(), s.Session)
	ta.waitEnded(t, 2*testConfig.RenewInterval)
	if ta.reason != runtime.ReasonSessionExpired {
		t.Errorf("a's term ended with %v; want %v", ta.reason, runtime.ReasonSessionExpired)
	}
	ta2 := a.waitElected(3 * testConfig.RenewInterval)
	if s2 := a.c.Snapshot(); s2.Session == s.Session {
		t.Errorf("a's session after expiry is still %s; want a new one (S3)", s.Session)
	}
	if ta2.term.Token() <= ta.term.Token() {
		t.Errorf("token after the new session %d; want > %d", ta2.term.Token(), ta.term.Token())
	}
}

// §11, §15, T2: a private PostgreSQL that three nodes contend on is
// restarted twice: with its data (pg_ctl restart -m fast), and with its data
// lost (wiped, initdb, started: the schema is created again, and its guard
// holds grants back for MaxLease). At no instant are two terms valid, tokens
// strictly increase, and after each restart a node leads again.
func TestServerRestart(t *testing.T) {
	srv := testservers.StartPostgres(t)
	m := newMonitor(t)
	pool := newPool(t, srv.DSN(), nil)
	b := newBackend(t, pool, pool)
	var nodes []*node
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, startNode(t, name, sameSchema(t, b, newPool(t, srv.DSN(), nil)), m, "lease"))
	}
	leader := func(within time.Duration) {
		t.Helper()
		waitFor(t, within, "a leader", func() bool {
			for _, n := range nodes {
				if len(n.leading()) == 1 {
					return true
				}
			}
			return false
		})
	}
	leader(5 * time.Second)
	before := m.elections()

	srv.Restart()
	leader(2*testConfig.LeaseDuration + 2*time.Second)
	t.Logf("after the restart with data: %d new terms", m.elections()-before)

	// Without data: the old leader's term stays valid until its local
	// deadline (nobody can tell it), and the new schema's guard grants
	// nothing for MaxLease meanwhile; then a node is elected.
	before = m.elections()
	start := time.Now()
	srv.Wipe()
	waitFor(t, b.MaxLease()+2*testConfig.LeaseDuration+5*time.Second, "a term after the restart without data", func() bool {
		return m.elections() > before
	})
	t.Logf("after the restart without data: a new term %v later", time.Since(start))
	if took := time.Since(start); took < b.MaxLease() {
		t.Errorf("a new term %v after the data was lost; want none before MaxLease %v (§15)", took, b.MaxLease())
	}
}

// A1: the LISTEN connection of the candidate's backend is terminated
// (pg_terminate_backend) while it waits: a hand-off meanwhile still
// happens (at the candidate's next attempt, or woken by the reconnection),
// and once the connection is back, hand-offs are prompt again.
func TestListenerTerminatedHandOff(t *testing.T) {
	dsn := sharedDSN(t)
	admin := newPool(t, dsn, nil)
	m := newMonitor(t)
	b1 := newBackend(t, newPool(t, dsn, nil), admin)
	b2 := sameSchema(t, b1, newPool(t, dsn, nil))
	a := startNode(t, "a", b1, m, "lease")
	a.waitElected(5 * time.Second)
	c := startNode(t, "c", b2, m, "lease")
	c.notElected(testConfig.RenewInterval)
	waitListening(t, b2)
	ctx := testCtx(t)

	old := b2.listenerPID.Load()
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(old)); err != nil {
		t.Fatal(err)
	}
	a.stop("lease")
	c.waitElected(testConfig.LeaseDuration) // by an attempt or by the reconnection's wake-up
	waitFor(t, 10*time.Second, "a new LISTEN connection", func() bool { p := b2.listenerPID.Load(); return p != 0 && p != old })

	// Hand-offs are prompt again: c hands back to a, a to c.
	a.start("lease")
	a.notElected(testConfig.RenewInterval)
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	c.stop("lease")
	a.waitElected(5 * time.Second)
	back := time.Since(start)
	c.start("lease")
	c.notElected(testConfig.RenewInterval)
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	a.stop("lease")
	c.waitElected(5 * time.Second)
	again := time.Since(start)
	t.Logf("hand-offs after the reconnection: %v and %v", back, again)
	// Candidates' attempts come every RenewInterval/2 + jitter (≥ 333 ms):
	// only notifications explain a faster hand-off.
	if again > 300*time.Millisecond {
		t.Errorf("a hand-off to the node whose LISTEN connection was terminated took %v; want it prompt, by notification, once reconnected", again)
	}
}
