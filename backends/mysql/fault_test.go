package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// §11 "backend unreachable", S5, D4, T4, H3: the leader's connections to
// the database are cut (its pool's dialer closes them and refuses new
// ones). Its session goes Suspended; its term ends with DeadlinePassed at
// the local deadline; the other node is elected only after that deadline
// (never two valid terms). Once healed, the old leader opens a new session
// and wins again when the other node stops.
func TestCutConnection(t *testing.T) {
	testUnreachable(t, (*faultnet.Link).Cut)
}

// As TestCutConnection, with the leader's packets dropped instead
// (blackholed): its calls hang until their contexts end (D2), and the term
// ends at its local deadline all the same.
func TestBlackholedConnection(t *testing.T) {
	testUnreachable(t, (*faultnet.Link).Blackhole)
}

func testUnreachable(t *testing.T, fault func(*faultnet.Link)) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	m := newMonitor(t)
	link := faultnet.New()
	cutOff := newBackend(t, newDB(t, url, link), admin)
	a := startNode(t, "a", cutOff, m, "lease")
	ta := a.waitElected(5 * time.Second)
	oldSession := a.waitState(runtime.SessionLive, time.Second).Session
	b := startNode(t, "b", samePrefix(t, cutOff, newDB(t, url, nil)), m, "lease")
	b.notElected(testConfig.RenewInterval)

	fault(link)
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
	s := a.waitState(runtime.SessionLive, testConfig.LeaseDuration+2*time.Second)
	if s.Session == oldSession {
		t.Errorf("a's session after the link healed is %s, the expired one; want a new session (S3)", s.Session)
	}
	a.notElected(testConfig.RenewInterval) // b holds the lease and is alive
	b.stop("lease")
	ta2 := a.waitElected(2 * testConfig.RenewInterval)
	if ta2.term.Token() <= tb.term.Token() {
		t.Errorf("a's new token %d; want > b's %d (T2)", ta2.term.Token(), tb.term.Token())
	}
}

// D1, D2, D4: requests held back on their way to the database for longer
// than the renewal period time out (D2), the session goes Suspended, and
// the term ends with DeadlinePassed at the deadline it had — a renewal the
// server handled late does not extend it. Without the delay, the node opens
// a new session and is elected again.
func TestDelayedConnection(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	m := newMonitor(t)
	link := faultnet.New()
	slow := newBackend(t, newDB(t, url, link), admin)
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
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	m := newMonitor(t)
	b := newBackend(t, newDB(t, url, nil), admin)
	a := startNode(t, "a", b, m, "lease")
	ta := a.waitElected(5 * time.Second)
	s := a.waitState(runtime.SessionLive, time.Second)

	expireSession(t, admin, b.Prefix(), s.Session)
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

// The server KILLs every connection of the leader's pool, over and over,
// while a candidate waits: a killed connection is only a broken transport
// (the session is a row, not a connection), so calls are sent again on new
// connections, the leader keeps its session, and at no instant are two
// terms valid.
func TestConnectionsKilled(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	m := newMonitor(t)
	db := newDB(t, url, nil)
	lb := newBackend(t, db, admin)
	a := startNode(t, "a", lb, m, "lease")
	ta := a.waitElected(5 * time.Second)
	session := a.waitState(runtime.SessionLive, time.Second).Session
	b := startNode(t, "b", samePrefix(t, lb, newDB(t, url, nil)), m, "lease")
	killed := 0
	for end := time.Now().Add(3 * testConfig.LeaseDuration); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		killed += killConnections(t, db, admin)
	}
	if killed == 0 {
		t.Fatal("no connection of the leader's pool was killed")
	}
	if !ta.term.Valid() {
		t.Errorf("a's term ended (%v) after %d of its connections were killed; want it kept: the session is a row", ta.term.Reason(), killed)
	}
	if s := a.c.Snapshot(); s.Session != session {
		t.Errorf("a's session changed from %s to %s; want it kept", session, s.Session)
	}
	b.notElected(0)
	t.Logf("%d connections killed; a kept its term", killed)
}

// killConnections takes every idle connection of db, learns its id, and has
// admin KILL it; it returns how many it killed.
func killConnections(t *testing.T, db, admin *sql.DB) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var (
		conns []*sql.Conn
		ids   []int64
	)
	for range db.Stats().Idle {
		c, err := db.Conn(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
		var id int64
		if c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		if _, err := admin.ExecContext(ctx, "KILL ?", id); err != nil {
			t.Logf("KILL %d: %v", id, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	return len(ids)
}

// §11, §15, T2: a private MariaDB that three nodes contend on is restarted
// with its data (killed, started again: InnoDB recovers every commit), and
// later started again from an older copy of its data directory, taken
// before more terms were won. After the restart a node leads again, and at
// no instant are two terms valid. Across the older copy, tokens do not go
// back: they are at least the database clock in microseconds, which moved on
// while the copy aged. The nodes are closed before the older copy comes back
// (a live node's terms would outlive what the copy forgot; the operator's
// remedy is start_guard, TestOlderCopyStartGuard).
func TestServerRestartAndOlderCopy(t *testing.T) {
	srv := testservers.StartMariaDB(t)
	m := newMonitor(t)
	db := newDB(t, srv.URL(), nil)
	b := newBackend(t, db, db)
	var nodes []*node
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, startNode(t, name, samePrefix(t, b, newDB(t, srv.URL(), nil)), m, "lease"))
	}
	leader := func(within time.Duration) int {
		t.Helper()
		who := -1
		waitFor(t, within, "a leader", func() bool {
			for i, n := range nodes {
				if len(n.leading()) == 1 {
					who = i
					return true
				}
			}
			return false
		})
		return who
	}
	leader(5 * time.Second)
	before := m.elections()
	srv.Restart()
	leader(2*testConfig.LeaseDuration + 2*time.Second)
	t.Logf("after the restart with data: %d new terms", m.elections()-before)

	copyName := srv.Copy()
	// More terms after the copy: hand the lease over a few times.
	for range 3 {
		i := leader(2*testConfig.LeaseDuration + 2*time.Second)
		nodes[i].stop("lease")
		nodes[i].start("lease")
	}
	leader(2*testConfig.LeaseDuration + 2*time.Second)
	highest := m.highest("lease")
	for _, n := range nodes {
		n.close()
	}
	srv.RestoreCopy(copyName)

	s := mustOpen(t, samePrefix(t, b, newDB(t, srv.URL(), nil)), testConfig.LeaseDuration)
	ctx := testCtx(t)
	var g backends.Grant
	waitFor(t, 2*testConfig.LeaseDuration+2*time.Second, "a grant after the older copy", func() bool {
		var err error
		g, err = s.Acquire(ctx, "lease")
		return err == nil
	})
	if g.Token <= backends.Token(highest) {
		t.Errorf("token after the older copy came back = %d; want > %d, the highest before (F5)", g.Token, highest)
	}
	t.Logf("highest token before: %d; after the older copy: %d", highest, g.Token)
}

// §15: after an older copy of the data comes back under live sessions, the
// operator's start_guard ends every session and grants nothing for MaxLease.
func TestOlderCopyStartGuard(t *testing.T) {
	srv := testservers.StartMariaDB(t)
	db := newDB(t, srv.URL(), nil)
	b := newBackend(t, db, db, WithMaxLease(2*time.Second))
	ctx := testCtx(t)
	old := mustOpen(t, b, 2*time.Second)
	g, err := old.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	copyName := srv.Copy()
	if _, err := old.KeepAlive(ctx); err != nil {
		t.Fatal(err)
	}
	srv.RestoreCopy(copyName)
	mustExec(t, db, "CALL "+b.Prefix()+"_start_guard()")
	if _, err := old.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive of a session from before start_guard = %v; want ErrSessionExpired", err)
	}
	s := mustOpen(t, b, 2*time.Second)
	start := time.Now()
	if _, err := s.Acquire(ctx, "lease"); !errors.Is(err, backends.ErrRecovering) {
		t.Fatalf("Acquire right after start_guard = %v; want ErrRecovering", err)
	}
	var g2 backends.Grant
	waitFor(t, 5*time.Second, "a grant after the guard", func() bool {
		s.KeepAlive(ctx)
		g2, err = s.Acquire(ctx, "lease")
		return err == nil
	})
	if took := time.Since(start); took < b.MaxLease()-100*time.Millisecond {
		t.Errorf("granted %v after start_guard; want none before MaxLease %v", took, b.MaxLease())
	}
	if g2.Token <= g.Token {
		t.Errorf("token after start_guard %d; want > %d", g2.Token, g.Token)
	}
}
