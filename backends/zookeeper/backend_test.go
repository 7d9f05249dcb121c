package simbazk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/faultnet"
)

// §12: with digest auth, lease nodes carry an ACL that lets only clients
// with the credentials delete them: a client without them cannot take a
// lease by deleting its node, but can read who holds it. A backend with a
// wrong password, or none, fails at once with ErrNotAuthorized, and does
// not retry.
func TestDigestACL(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	b := newBackend(t, servers, WithDigest("simba", "s3cret"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 3 * time.Second, Identity: "node a"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	g, err := s.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}

	c := directConn(t, servers)
	if err := c.Delete(b.paths.lease("lease"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("Delete of a lease node by a client without the credentials = %v; want zk.ErrNoAuth", err)
	}
	if data, _, err := c.Get(b.paths.lease("lease")); err != nil || !strings.HasPrefix(string(data), string(s.ID())) {
		t.Errorf("Get of the lease node by a client without the credentials = %q, %v; want it readable", data, err)
	}

	for _, tt := range []struct {
		name string
		opts []Option
	}{
		{"wrong password", []Option{WithDigest("simba", "wrong")}},
		{"no credentials", nil},
	} {
		other := sameRoot(t, b, servers, tt.opts...)
		start := time.Now()
		_, _, err := other.OpenSession(ctx, backends.SessionOptions{TTL: 3 * time.Second})
		if !errors.Is(err, ErrNotAuthorized) || errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("OpenSession with %s = %v; want ErrNotAuthorized, not ErrUnavailable", tt.name, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("OpenSession with %s took %v; want it to fail at once, without retrying", tt.name, took)
		}
		t.Logf("%s: %v", tt.name, err)
	}
	if h, err := s.Holder(ctx, "lease"); err != nil || h.Token != g.Token {
		t.Errorf("Holder after the others failed = %+v, %v; want the lease still held with token %d", h, err, g.Token)
	}
}

// New refuses bad arguments with errors that name them.
func TestNewErrors(t *testing.T) {
	for _, tt := range []struct {
		servers []string
		opts    []Option
		want    string
	}{
		{nil, nil, "no servers"},
		{[]string{"zk1"}, nil, `server "zk1": want host:port`},
		{[]string{"zk1:2181"}, []Option{WithRoot("simba")}, "want an absolute path"},
		{[]string{"zk1:2181"}, []Option{WithRoot("/")}, `"/" is ZooKeeper's own root`},
		{[]string{"zk1:2181"}, []Option{WithRoot("/a//b")}, "no empty"},
		{[]string{"zk1:2181"}, []Option{WithMaxLease(0)}, "WithMaxLease(0s): want at least 1ms"},
		{[]string{"zk1:2181"}, []Option{WithTickTime(-time.Second)}, "WithTickTime(-1s)"},
		{[]string{"zk1:2181"}, []Option{WithDigest("a:b", "c")}, "without ':'"},
	} {
		_, err := New(tt.servers, tt.opts...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v, …) = %v; want an error containing %q", tt.servers, err, tt.want)
		}
	}
}

// B2, S3: the backend closes a session when its last renewal's remaining
// time has run out, and a renewal cannot undo that, however it races the
// timer that closes it. A keep-alive sent once the deadline has passed (its
// timer not yet run) is never sent and reports the session expired; a
// renewal answered after the backend decided to close the session reports
// it too, so no caller is told of time the backend is taking away; in both
// cases the session's leases are free at once for another session.
func TestRenewalRacingB2Deadline(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	b := newBackend(t, servers)
	waitGuard(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func() *session {
		t.Helper()
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return zkSession(t, s)
	}
	other := open()
	for i, tt := range []struct {
		name  string
		renew func(s *session) error
	}{
		{"keep-alive sent after the deadline", func(s *session) error {
			_, err := s.KeepAlive(ctx)
			return err
		}},
		{"renewal answered after the backend decided", func(s *session) error {
			s.b2Expired()
			now := time.Now()
			return s.renewed("keep-alive", now.Add(-time.Second), now.Add(2*time.Second))
		}},
	} {
		if _, err := other.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
		s := open()
		name := fmt.Sprintf("lease-%d", i)
		if _, err := s.Acquire(ctx, name); err != nil {
			t.Fatal(err)
		}
		// The deadline has passed and the timer has not run.
		s.mu.Lock()
		s.b2.Stop()
		s.b2At = time.Now().Add(-time.Millisecond)
		s.mu.Unlock()
		if err := tt.renew(s); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("%s: renewal = %v; want ErrSessionExpired (B2)", tt.name, err)
		}
		if _, err := s.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("%s: a later KeepAlive = %v; want ErrSessionExpired (S3)", tt.name, err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			_, err := other.Acquire(ctx, name)
			if err == nil {
				break
			}
			if !errors.Is(err, backends.ErrLeaseHeld) || time.Now().After(deadline) {
				t.Errorf("%s: Acquire by another session = %v; want the lease freed by the closed session", tt.name, err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// S1, B2: a session renewed more often than half its timeout writes one
// request per renewal and no ping (go-zookeeper's own, every third of the
// timeout, are dropped); a session left idle is pinged by the wire once half
// its timeout passed without a write, which keeps go-zookeeper's read
// deadline (two thirds of the timeout) fed: the connection is not dropped
// and dialled again.
func TestPingsOnlyWhenIdle(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	var c counter
	b := newBackend(t, servers, WithDialer(c.dial), WithMaxLease(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bs, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close(ctx)
	s := zkSession(t, bs)
	timeout := s.w.negotiated()
	if timeout < 6*time.Second {
		t.Skipf("negotiated session timeout %v; this test needs at least 6 s (the server's maxSessionTimeout)", timeout)
	}
	cur := func() *wireConn {
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		return s.w.cur
	}
	conn := cur()

	// Busy: a renewal every eighth of the timeout, for two thirds of it
	// (go-zookeeper pings twice meanwhile).
	r0, p0 := c.snapshot()
	renewals := 0
	for end := time.Now().Add(timeout * 2 / 3); time.Now().Before(end); renewals++ {
		if _, err := s.KeepAlive(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(timeout / 8)
	}
	r1, p1 := c.snapshot()
	if p1 != p0 || r1-r0 != int64(renewals) {
		t.Errorf("%d renewals wrote %d requests and %d pings; want one request per renewal and no ping", renewals, r1-r0, p1-p0)
	}

	// Idle for longer than go-zookeeper's read deadline, within B2's.
	idle := timeout * 7 / 10
	r, err := s.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining <= idle+500*time.Millisecond {
		t.Fatalf("Remaining %v; the idle span %v must fit in it", r.Remaining, idle)
	}
	_, p2 := c.snapshot()
	time.Sleep(idle)
	_, p3 := c.snapshot()
	if p3-p2 < 1 {
		t.Errorf("idle for %v: %d pings; want the wire to ping after %v", idle, p3-p2, idlePing(timeout))
	}
	if cur() != conn {
		t.Errorf("idle for %v: the session dialled a new connection; want the wire's pings to keep the first one", idle)
	}
	if _, err := s.KeepAlive(ctx); err != nil {
		t.Errorf("KeepAlive after the idle span: %v", err)
	}
}

// B1 on a standalone server, which is the leader of its own sessions: a
// renewal proves the whole negotiated timeout from when it was sent, so
// Remaining is that timeout, not the timeout less a tick. The backend learns
// what the server is once per connection, from its configuration node read
// beside another call; a new connection (here after a cut) is learnt anew.
func TestStandaloneRenewalsProveTheWholeTimeout(t *testing.T) {
	t.Parallel()
	servers := sharedZK(t)
	if data, _, err := directConn(t, servers).Get(configPath); err != nil || len(data) > 0 {
		t.Skipf("the shared ZooKeeper %v is not a standalone server (%s: %q, %v)", servers, configPath, data, err)
	}
	link := faultnet.New()
	b := newBackend(t, servers, WithDialer(link.DialTimeout), WithMaxLease(4*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, opened, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close(ctx)
	s := zkSession(t, bs)
	first := s.w.current()
	if k := serverKind(first.kind.Load()); k != kindStandalone {
		t.Fatalf("after OpenSession the connection's server kind is %d; want standalone (%d), read beside the session node", k, kindStandalone)
	}
	timeout := s.w.negotiated()
	if opened.Remaining != timeout {
		t.Errorf("OpenSession's Remaining %v; want the negotiated timeout %v", opened.Remaining, timeout)
	}
	for i := range 3 {
		r, err := s.KeepAlive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Remaining != timeout {
			t.Errorf("renewal %d: Remaining %v; want the negotiated timeout %v (a standalone server has no follower lag)", i, r.Remaining, timeout)
		}
	}

	// A new connection: its server is not known until a call reads it.
	link.Cut()
	link.Heal()
	var r backends.Renewal
	for i := 0; i < 5 && (r.Remaining != timeout || s.w.current() == first); i++ {
		if r, err = s.KeepAlive(ctx); err != nil && !errors.Is(err, backends.ErrUnavailable) {
			t.Fatal(err)
		}
	}
	if s.w.current() == first {
		t.Fatalf("the session still uses its first connection after a cut")
	}
	if k := serverKind(s.w.current().kind.Load()); k != kindStandalone || r.Remaining != timeout {
		t.Errorf("after reconnecting: server kind %d, Remaining %v; want standalone (%d) and %v", k, r.Remaining, kindStandalone, timeout)
	}
}
