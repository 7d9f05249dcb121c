//go:build !race

// These tests make go-zookeeper reconnect while watches are armed, and
// go-zookeeper v1.0.4 then reads Conn.lastZxid (sendSetWatches) while its
// receive loop writes it, unsynchronised (upstream go-zookeeper/zk#35): the
// race detector reports it in whichever test runs. They build without
// -race; make test runs them in a pass of their own.

package zookeeper

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// others returns the client addresses of the servers other than those
// given.
func (e *ensemble) others(not ...*testservers.ZooKeeperServer) []string {
	var addrs []string
	for _, s := range e.Servers {
		if !slices.Contains(not, s) {
			addrs = append(addrs, s.Addr)
		}
	}
	return addrs
}

// S1, §11: the server the leader's client is connected to is killed. The
// client moves to another server within the session timeout, its session
// survives, and so does its term; the other node is never elected.
func TestConnectedServerKilled(t *testing.T) {
	e := startEnsemble(t)
	root := uniqueRoot()
	b := newBackend(t, e.ClientAddrs(), root)
	waitGuard(t, b)
	cl := newCluster(t)
	a, srv := onFollower(t, e, cl, b, "a", "lease")
	ta := a.WaitElected(10 * time.Second)
	session := a.C.Snapshot().Session
	o := cl.Start("o", newBackend(t, e.others(srv), root), "lease")

	killed := time.Now()
	srv.Kill()
	var moved *testservers.ZooKeeperServer
	for end := time.Now().Add(2 * testConfig.LeaseDuration); moved == nil && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		moved = e.ServerOf(string(session))
	}
	if moved == nil {
		for _, s := range e.Servers {
			t.Logf("server %d cons:\n%s", s.ID, testservers.FourLetter(s.Addr, "cons"))
		}
		t.Fatalf("session %s is on no server %v after its server was killed (a: %+v)", session, 2*testConfig.LeaseDuration, a.C.Snapshot())
	}
	t.Logf("killed server %d; session %s moved to server %d within %v", srv.ID, session, moved.ID, time.Since(killed).Round(time.Millisecond))
	time.Sleep(2 * testConfig.LeaseDuration)
	if at, ok := ta.EndedBy(); ok {
		t.Fatalf("a's term ended (%v) %v after its server was killed; want it kept", ta.Reason, at.Sub(killed))
	}
	if s := a.C.Snapshot(); s.Session != session {
		t.Errorf("a's session is %s; want %s, which survived the move", s.Session, session)
	}
	select {
	case rec := <-o.Elected():
		t.Errorf("o elected with token %d while a's session lived", rec.Term.Token())
	default:
	}
}

// §11, T2: the leader of the ensemble is killed. The others elect a new
// leader; no term stays valid past the moment the store could give its
// lease away (when the new leader deleted its node), and terms never
// overlap.
func TestLeaderKilled(t *testing.T) {
	e := startEnsemble(t)
	root := uniqueRoot()
	b := newBackend(t, e.ClientAddrs(), root)
	waitGuard(t, b)
	cl := newCluster(t)
	a, _ := onFollower(t, e, cl, b, "a", "lease")
	ta := a.WaitElected(10 * time.Second)
	leader := e.Leader()
	cl.Start("o", newBackend(t, e.ClientAddrs(), root), "lease")
	deleted := deleteWatch(t, e.others(leader), root+"/l/lease")

	killed := time.Now()
	leader.Kill()
	next := e.WaitQuorum(30 * time.Second)
	t.Logf("killed leader %d; server %d leads after %v", leader.ID, next.ID, time.Since(killed).Round(time.Millisecond))
	select {
	case at := <-deleted:
		// The store gave the lease away: a's term must have ended first.
		end, ok := ta.EndedBy()
		if !ok || !end.Before(at) {
			t.Errorf("a's lease node was deleted %v after the kill while a's term was valid", at.Sub(killed))
		} else {
			t.Logf("a's term ended (%v) %v before its lease node was deleted", ta.Reason, at.Sub(end))
		}
	case <-time.After(2 * testConfig.LeaseDuration):
		if _, ok := ta.EndedBy(); ok {
			t.Logf("a's term ended (%v) though its lease stayed; it contends again", ta.Reason)
		} else {
			t.Logf("a's term and session survived the leader's death")
		}
	}
}

// §11: the follower the leader's client is connected to is cut off from the
// quorum (every byte between it and its peers is dropped; nobody is told).
// The client's renewal, a write, waits at the follower, and so do its pings
// behind it (ZooKeeper answers a session's requests in order), so
// go-zookeeper gives up on the connection after two thirds of the timeout
// and moves to a server of the quorum, where the session lives on: the term
// survives and the other node is never elected.
func TestFollowerCutOffClientMoves(t *testing.T) {
	e := startEnsemble(t)
	root := uniqueRoot()
	b := newBackend(t, e.ClientAddrs(), root)
	waitGuard(t, b)
	cl := newCluster(t)
	a, f := onFollower(t, e, cl, b, "a", "lease")
	ta := a.WaitElected(10 * time.Second)
	session := a.C.Snapshot().Session
	o := cl.Start("o", newBackend(t, e.others(f), root), "lease")

	heal := e.isolate(e.index(f))
	defer heal()
	cut := time.Now()
	var moved *testservers.ZooKeeperServer
	for end := time.Now().Add(testConfig.LeaseDuration); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if moved = e.ServerOf(string(session)); moved != nil && moved != f {
			break
		}
	}
	if moved == nil || moved == f {
		t.Fatalf("session %s still on the cut-off server %d after %v", session, f.ID, testConfig.LeaseDuration)
	}
	t.Logf("server %d cut off; session %s moved to server %d after %v", f.ID, session, moved.ID, time.Since(cut).Round(time.Millisecond))
	time.Sleep(2 * testConfig.LeaseDuration)
	if _, ok := ta.EndedBy(); ok {
		t.Errorf("a's term ended (%v) though its session moved to the quorum", ta.Reason)
	}
	select {
	case rec := <-o.Elected():
		t.Errorf("o elected with token %d while a's session lived", rec.Term.Token())
	default:
	}
}

// B1, §11: as above, but the client knows only the cut-off follower (it is
// on the follower's side of the partition), so it cannot move. Its renewals
// fail; the quorum expires its session a timeout after the last touch of it
// the leader saw, which can be older than the last renewal by up to a tick
// and go-zookeeper's ping interval. The client's term must end before that:
// the margin between the two is B1's follower lag at work, reported for
// cuts at three points of the renewal cycle.
func TestFollowerCutOffClientStuck(t *testing.T) {
	e := startEnsemble(t)
	root := uniqueRoot()
	waitGuard(t, newBackend(t, e.ClientAddrs(), root))
	// A follower, and a client that knows only it.
	var f *testservers.ZooKeeperServer
	for _, s := range e.Servers {
		if s.Mode() == "follower" {
			f = s
			break
		}
	}
	cl := newCluster(t)
	a := cl.Start("a", newBackend(t, []string{f.Addr}, root), "lease")
	first := a.WaitElected(10 * time.Second)
	o := cl.Start("o", newBackend(t, e.others(f), root), "lease")
	var margins []time.Duration
	for round, offset := range []time.Duration{0, testConfig.RenewInterval / 3, 2 * testConfig.RenewInterval / 3} {
		ta := first
		if round > 0 {
			select {
			case ta = <-a.Elected():
			case <-time.After(3 * testConfig.LeaseDuration):
				t.Fatalf("round %d: a not elected", round)
			}
		}
		deleted := deleteWatch(t, e.others(f), leaseNode(t, e.others(f), root, "lease"))
		// Cut right after a renewal, plus offset.
		for r := a.C.Snapshot().Remaining; ; time.Sleep(2 * time.Millisecond) {
			now := a.C.Snapshot().Remaining
			if now > r {
				break
			}
			r = now
		}
		time.Sleep(offset)
		heal := e.isolate(e.index(f))
		cut := time.Now()
		var expiredAt time.Time
		select {
		case expiredAt = <-deleted:
		case <-time.After(3 * testConfig.LeaseDuration):
			heal()
			t.Fatalf("round %d: the quorum did not expire a's session within %v of the cut", round, 3*testConfig.LeaseDuration)
		}
		end, ok := ta.EndedBy()
		if !ok {
			heal()
			t.Fatalf("round %d: a's term still valid %v after the cut, after the quorum expired its session (B1)", round, time.Since(cut))
		}
		margin := expiredAt.Sub(end)
		margins = append(margins, margin)
		t.Logf("round %d, cut %v after a renewal: a's term ended (%v) at %v; the quorum expired a's session at %v; margin %v",
			round, offset.Round(time.Millisecond), ta.Reason, end.Sub(cut).Round(time.Millisecond),
			expiredAt.Sub(cut).Round(time.Millisecond), margin.Round(time.Millisecond))
		if margin <= 0 {
			t.Errorf("round %d: a's term ended %v after the quorum expired its session: two leaders were possible (B1)", round, -margin)
		}
		to := o.WaitElected(2 * testConfig.LeaseDuration)
		if to.ElectedAt.Before(end) {
			t.Errorf("round %d: o elected before a's term ended", round)
		}
		// Hand the lease back to a for the next round.
		heal()
		e.WaitQuorum(30 * time.Second)
		a.WaitState(runtime.SessionLive, 3*testConfig.LeaseDuration)
		if err := o.E.StepDown(context.Background(), 2*testConfig.LeaseDuration); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("B1 follower-lag margins: %v", margins)
}

// B1: on a member of an ensemble (the leader included: a client cannot tell
// which server leads) a renewal proves only the touches the leader has
// surely seen, so its Remaining is the negotiated timeout less at least a
// tick — unlike on a standalone server, whose renewals prove the whole
// timeout (backends/zookeeper's TestStandaloneRenewalsProveTheWholeTimeout).
func TestEnsembleRenewalsLeaveTheLag(t *testing.T) {
	e := startEnsemble(t)
	root := uniqueRoot()
	waitGuard(t, newBackend(t, e.ClientAddrs(), root))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, srv := range e.Servers {
		b := newBackend(t, []string{srv.Addr}, root)
		s, opened, err := b.OpenSession(ctx, backends.SessionOptions{TTL: testConfig.LeaseDuration})
		if err != nil {
			t.Fatalf("server %d (%s): OpenSession: %v", srv.ID, srv.Mode(), err)
		}
		time.Sleep(2 * tick) // past the handshake, which the leader handles itself
		r, err := s.KeepAlive(ctx)
		if err != nil {
			t.Fatalf("server %d (%s): KeepAlive: %v", srv.ID, srv.Mode(), err)
		}
		if r.Remaining > opened.Remaining-tick {
			t.Errorf("server %d (%s): a renewal's Remaining %v; want at most the timeout %v less a tick %v (B1's follower lag)",
				srv.ID, srv.Mode(), r.Remaining, opened.Remaining, tick)
		}
		s.Close(ctx)
	}
}
