package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/enginetest"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// §11 "backend unreachable", S5, D4, T4, H3: as backendtest.RunEngine's
// CutOff, with the leader's packets dropped instead (blackholed): its calls
// hang until their contexts end (D2); its session goes Suspended; its term
// ends with DeadlinePassed at the local deadline all the same; the other
// node is elected only after that deadline (never two valid terms). Once
// healed, the old leader opens a new session and wins again when the other
// node stops.
func TestBlackholedConnection(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	cl := newCluster(t)
	link := faultnet.New()
	cutOff := newBackend(t, newDB(t, url, link), admin)
	a := cl.Start("a", cutOff, "lease")
	ta := a.WaitElected(5 * time.Second)
	oldSession := a.WaitState(runtime.SessionLive, time.Second).Session
	b := cl.Start("b", samePrefix(t, cutOff, newDB(t, url, nil)), "lease")
	b.NotElected(testConfig.RenewInterval)

	link.Blackhole()
	a.WaitState(runtime.SessionSuspended, 2*testConfig.RenewInterval)
	deadline := time.Now().Add(ta.Term.Remaining())
	ta.WaitEnded(t, time.Until(deadline)+time.Second)
	if ta.Reason != runtime.ReasonDeadlinePassed {
		t.Errorf("a's term ended with %v; want %v (§11)", ta.Reason, runtime.ReasonDeadlinePassed)
	}
	if late := ta.EndedAt.Sub(deadline); late > 500*time.Millisecond {
		t.Errorf("a's term ended %v after its local deadline; want at the deadline (D4)", late)
	}
	tb := b.WaitElected(testConfig.LeaseDuration + 2*testConfig.RenewInterval)
	if !tb.ElectedAt.After(deadline) {
		t.Errorf("b elected at %v, before a's local deadline %v: two valid terms", tb.ElectedAt, deadline)
	}
	t.Logf("b elected %v after a's local deadline", tb.ElectedAt.Sub(deadline))

	link.Heal()
	s := a.WaitState(runtime.SessionLive, testConfig.LeaseDuration+2*time.Second)
	if s.Session == oldSession {
		t.Errorf("a's session after the link healed is %s, the expired one; want a new session (S3)", s.Session)
	}
	a.NotElected(testConfig.RenewInterval) // b holds the lease and is alive
	b.Stop("lease")
	ta2 := a.WaitElected(2 * testConfig.RenewInterval)
	if ta2.Term.Token() <= tb.Term.Token() {
		t.Errorf("a's new token %d; want > b's %d (T2)", ta2.Term.Token(), tb.Term.Token())
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
	cl := newCluster(t)
	db := newDB(t, url, nil)
	lb := newBackend(t, db, admin)
	a := cl.Start("a", lb, "lease")
	ta := a.WaitElected(5 * time.Second)
	session := a.WaitState(runtime.SessionLive, time.Second).Session
	b := cl.Start("b", samePrefix(t, lb, newDB(t, url, nil)), "lease")
	killed := 0
	for end := time.Now().Add(3 * testConfig.LeaseDuration); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		killed += killConnections(t, db, admin)
	}
	if killed == 0 {
		t.Fatal("no connection of the leader's pool was killed")
	}
	if !ta.Term.Valid() {
		t.Errorf("a's term ended (%v) after %d of its connections were killed; want it kept: the session is a row", ta.Term.Reason(), killed)
	}
	if s := a.C.Snapshot(); s.Session != session {
		t.Errorf("a's session changed from %s to %s; want it kept", session, s.Session)
	}
	b.NotElected(0)
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
	cl := newCluster(t)
	db := newDB(t, srv.URL(), nil)
	b := newBackend(t, db, db)
	var nodes []*enginetest.Node
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, cl.Start(name, samePrefix(t, b, newDB(t, srv.URL(), nil)), "lease"))
	}
	leader := func(within time.Duration) int {
		t.Helper()
		who := -1
		waitFor(t, within, "a leader", func() bool {
			for i, n := range nodes {
				if len(n.Leading()) == 1 {
					who = i
					return true
				}
			}
			return false
		})
		return who
	}
	leader(5 * time.Second)
	before := cl.Terms()
	srv.Restart()
	leader(2*testConfig.LeaseDuration + 2*time.Second)
	t.Logf("after the restart with data: %d new terms", cl.Terms()-before)

	copyName := srv.Copy()
	// More terms after the copy: hand the lease over a few times.
	for range 3 {
		i := leader(2*testConfig.LeaseDuration + 2*time.Second)
		nodes[i].Stop("lease")
		nodes[i].Start("lease")
	}
	leader(2*testConfig.LeaseDuration + 2*time.Second)
	highest := cl.Highest("lease")
	for _, n := range nodes {
		n.Close()
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

// D2, §11: while the link to the server is blackholed, no call and no Close
// of the backend waits for it. A call returns when its context ends; Close
// returns at once, with the bells' connections (a holder's and a waiter's)
// silent too. Nothing the backend does sends a packet without a deadline:
// go-sql-driver writes COM_STMT_CLOSE (a prepared statement closed) and
// COM_QUIT (a connection closed) with none unless the DSN sets writeTimeout,
// and database/sql closes a statement while it holds its pool's lock, so one
// such write into a blackhole stopped the whole pool, and Close with it
// (TestBlackholedConnection hung for 11 minutes that way in CI).
func TestBlackholedClose(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	link := faultnet.New()
	t.Cleanup(link.Heal)
	db := newDB(t, url, link)
	b := newBackend(t, db, admin, withBellDB(newDB(t, url, link)))
	other := samePrefix(t, b, newDB(t, url, nil))
	ctx := testCtx(t)
	s := mustOpen(t, b, 30*time.Second)
	o := mustOpen(t, other, 30*time.Second)
	// b's session holds a lease (its bell is taken), and waits for one that
	// other holds (a waiter blocks on its bell).
	if _, err := s.Acquire(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Acquire(ctx, "wanted"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "wanted"); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("Acquire(wanted) = %v; want ErrLeaseHeld", err)
	}
	stop := s.(backends.Notifier).Watch("wanted", func() {})
	defer stop()
	waitFor(t, 2*time.Second, "the bell of held taken", func() bool { return bellOwner(t, b, "held") != 0 })

	link.Blackhole()
	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := s.KeepAlive(callCtx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("KeepAlive through a blackhole = %v; want an error wrapping context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("KeepAlive with a 300ms context took %v through a blackhole", took)
	}
	closed := make(chan struct{})
	start = time.Now()
	go func() {
		stop()
		b.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Logf("Close took %v through a blackhole", time.Since(start))
	case <-time.After(3 * time.Second):
		link.Heal() // so that the test can end
		<-closed
		t.Errorf("Backend.Close blocked %v through a blackhole (returned once the link healed)", time.Since(start))
	}
}
