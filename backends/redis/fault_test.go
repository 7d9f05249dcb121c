package simbaredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// §11 "backend unreachable", S5, D4, T4, H3: the leader's connection to
// Redis is cut (a proxy closes it and refuses new ones). Its session goes
// Suspended; its term ends with DeadlinePassed at the local deadline, not
// later; the other node is elected only after that deadline (never two
// valid terms). When the cut heals, the old leader opens a new session and
// contends again: it wins when the other node stops.
func TestCutConnection(t *testing.T) {
	addr, admin := sharedRedis(t)
	p := newProxy(t, addr)
	cutOff := newBackend(t, p.client(t), admin)
	a := startNode(t, "a", cutOff, "lease")
	ta := a.WaitElected(5 * time.Second)
	oldSession := a.WaitState(runtime.SessionLive, time.Second).Session
	b := startNode(t, "b", sameNamespace(t, cutOff, newClient(t, addr)), "lease")
	b.NotElected(testConfig.RenewInterval)

	p.cut()
	// A renewal whose reply was already on its way may still succeed; once
	// one has failed, none can: the term's deadline is fixed.
	a.WaitState(runtime.SessionSuspended, 2*testConfig.RenewInterval)
	deadline := time.Now().Add(ta.Term.Remaining())

	ta.WaitEnded(t, time.Until(deadline)+time.Second)
	if ta.Reason != runtime.ReasonDeadlinePassed {
		t.Errorf("a's term ended with %v; want %v (§11)", ta.Reason, runtime.ReasonDeadlinePassed)
	}
	// Done is closed by the engine's timer at the deadline; the goroutine
	// that notes it runs a little later.
	if early := deadline.Sub(ta.EndedAt); early > 5*time.Millisecond {
		t.Errorf("a's term ended %v before its local deadline; want at the deadline", early)
	}
	if late := ta.EndedAt.Sub(deadline); late > 500*time.Millisecond {
		t.Errorf("a's term ended %v after its local deadline; want at the deadline (D4)", late)
	}
	if ta.Term.Valid() {
		t.Error("a's term still valid after its deadline")
	}
	t.Logf("a's term ended %v after its local deadline", ta.EndedAt.Sub(deadline))

	// Redis expires a's session LeaseDuration after its last renewal; b
	// takes over at its next attempt.
	tb := b.WaitElected(testConfig.LeaseDuration + 2*testConfig.RenewInterval)
	if !tb.ElectedAt.After(deadline) {
		t.Errorf("b elected at %v, before a's local deadline %v: two valid terms", tb.ElectedAt, deadline)
	}
	if tb.Term.Token() <= ta.Term.Token() {
		t.Errorf("b's token %d; want > a's %d (T2)", tb.Term.Token(), ta.Term.Token())
	}
	t.Logf("b elected %v after a's local deadline", tb.ElectedAt.Sub(deadline))

	p.heal()
	s := a.WaitState(runtime.SessionLive, testConfig.LeaseDuration+time.Second)
	if s.Session == oldSession {
		t.Errorf("a's session after the cut healed is %s, the expired one; want a new session (S3)", s.Session)
	}
	a.NotElected(testConfig.RenewInterval) // b holds the lease and is alive
	if err := b.E.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ta2 := a.WaitElected(2 * testConfig.RenewInterval)
	if ta2.Term.Token() <= tb.Term.Token() {
		t.Errorf("a's new token %d; want > b's %d (T2)", ta2.Term.Token(), tb.Term.Token())
	}
}

// D1, D2, D4: replies that Redis sends promptly but that reach the client
// late only shorten the client's deadline, since it counts from when the
// request was sent. Replies later than the renewal period time out (D2);
// the term then ends with DeadlinePassed at the deadline it had, never
// extended by a late reply. When the latency goes, the node recovers.
func TestReplyLatency(t *testing.T) {
	addr, admin := sharedRedis(t)
	p := newProxy(t, addr)
	slow := newBackend(t, p.client(t), admin)
	a := startNode(t, "a", slow, "lease")
	ta := a.WaitElected(5 * time.Second)

	localValidity := time.Duration(float64(testConfig.LeaseDuration)*(1-testConfig.Drift)) - testConfig.Margin
	const latency = 250 * time.Millisecond // below the renewal period (667 ms)
	undo := p.delay(latency)
	// Once every renewal in flight was sent after the latency was added,
	// the time left after each one is at most the local validity minus the
	// latency (D1), and the term stays valid.
	time.Sleep(testConfig.RenewInterval + latency)
	var most time.Duration
	for end := time.Now().Add(2 * testConfig.RenewInterval); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		left := ta.Term.Remaining()
		if left <= 0 {
			t.Fatalf("a's term ended under a latency below the renewal period (%v)", ta.Term.Reason())
		}
		most = max(most, left)
	}
	t.Logf("with %v of reply latency, at most %v of the local validity %v was left", latency, most, localValidity)
	if want := localValidity - latency + 10*time.Millisecond; most > want {
		t.Errorf("a's term had up to %v left; want at most %v − %v after renewals with that latency (D1)", most, localValidity, latency)
	}
	undo()

	const tooSlow = 1500 * time.Millisecond // beyond the renewal period
	undo = p.delay(tooSlow)
	time.Sleep(latency) // replies in flight drain
	deadline := time.Now().Add(ta.Term.Remaining())
	ta.WaitEnded(t, testConfig.LeaseDuration+time.Second)
	if ta.Reason != runtime.ReasonDeadlinePassed {
		t.Errorf("a's term ended with %v; want %v", ta.Reason, runtime.ReasonDeadlinePassed)
	}
	// Only a renewal sent before the latency was raised may still have
	// moved the deadline: at most one renewal period.
	if late := ta.EndedAt.Sub(deadline); late > testConfig.RenewInterval+200*time.Millisecond {
		t.Errorf("a's term ended %v after the deadline it had when replies slowed; want no extension by late replies (D4)", late)
	}
	t.Logf("with %v of reply latency the term ended %v after its deadline, with %v", tooSlow, ta.EndedAt.Sub(deadline), ta.Reason)
	undo()
	a.WaitElected(testConfig.LeaseDuration + 2*testConfig.RenewInterval)
}

// S3, T4: a session expired in Redis behind its client's back: the next
// keep-alive answers ErrSessionExpired; the term ends with SessionExpired
// (before its deadline), a new session opens and wins again, with a greater
// token.
func TestSessionExpiredBehindBack(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	a := startNode(t, "a", b, "lease")
	ta := a.WaitElected(5 * time.Second)
	s := a.WaitState(runtime.SessionLive, time.Second)

	expireSession(t, admin, b.keys, string(s.Session))
	ta.WaitEnded(t, 2*testConfig.RenewInterval)
	if ta.Reason != runtime.ReasonSessionExpired {
		t.Errorf("a's term ended with %v; want %v", ta.Reason, runtime.ReasonSessionExpired)
	}
	ta2 := a.WaitElected(3 * testConfig.RenewInterval)
	if s2 := a.C.Snapshot(); s2.Session == s.Session {
		t.Errorf("a's session after expiry is still %s; want a new one (S3)", s.Session)
	}
	if ta2.Term.Token() <= ta.Term.Token() {
		t.Errorf("token after the new session %d; want > %d", ta2.Term.Token(), ta.Term.Token())
	}
}

// S3, T5, §15: a renewal that reaches Redis late — after the session
// expired and another session took its lease (go-redis's own retries can
// hold a command that long) — fails with ErrSessionExpired and revives
// nothing; so do the expired session's late release and value write.
func TestLateRenewalRevivesNothing(t *testing.T) {
	addr, admin := sharedRedis(t)
	p := newProxy(t, addr)
	late := newBackend(t, p.client(t), admin)
	other := sameNamespace(t, late, newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const ttl = 500 * time.Millisecond
	a, _, err := late.OpenSession(ctx, backends.SessionOptions{TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ga, err := a.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := other.OpenSession(ctx, backends.SessionOptions{TTL: other.MaxLease()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	keepB := func() {
		t.Helper()
		if _, err := b.KeepAlive(ctx); err != nil {
			t.Fatalf("KeepAlive of b: %v", err)
		}
	}

	// Hold a's requests back for longer than its session lives.
	p.link.DelayRequests(1500 * time.Millisecond)
	type result struct {
		r   backends.Renewal
		err error
	}
	keepAlive := make(chan result, 1)
	sent := time.Now()
	go func() {
		r, err := a.KeepAlive(ctx)
		keepAlive <- result{r, err}
	}()

	// Meanwhile a's session expires in Redis and b takes the lease.
	var gb backends.Grant
	for {
		gb, err = b.Acquire(ctx, "lease")
		if err == nil {
			break
		}
		if !errors.Is(err, backends.ErrLeaseHeld) {
			t.Fatalf("Acquire by b: %v", err)
		}
		if time.Since(sent) > 1400*time.Millisecond {
			t.Fatalf("b could not take the lease before a's late renewal arrived: %v", err)
		}
		keepB()
		time.Sleep(20 * time.Millisecond)
	}
	res := <-keepAlive
	keepB()
	t.Logf("late keep-alive returned after %v: %v", time.Since(sent), res.err)
	if !errors.Is(res.err, backends.ErrSessionExpired) {
		t.Errorf("late KeepAlive = %+v, %v; want ErrSessionExpired (S3)", res.r, res.err)
	}
	p.link.DelayRequests(0)

	if _, err := a.Release(ctx, "lease", ga.Token); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("late Release = %v; want ErrSessionExpired", err)
	}
	if err := a.PutValue(ctx, "lease", ga.Token, []byte("stale")); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("late PutValue = %v; want ErrSessionExpired", err)
	}
	if _, err := a.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive after the late one = %v; want ErrSessionExpired (S3: never revived)", err)
	}
	held, _, err := b.Owned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0] != (backends.Held{Name: "lease", Token: gb.Token}) {
		t.Errorf("b owns %v; want lease with token %d, untouched by a's late calls", held, gb.Token)
	}
	if gb.Token <= ga.Token {
		t.Errorf("b's token %d; want > a's %d", gb.Token, ga.Token)
	}
}

// D2, §12: a call to a Redis that does not answer (a proxy that swallows
// everything) returns by its context's deadline, with an error wrapping
// both ErrUnavailable and the context's error.
func TestDeadlineBoundsCalls(t *testing.T) {
	addr, admin := sharedRedis(t)
	p := newProxy(t, addr)
	b := newBackend(t, p.client(t), admin)
	ctx := context.Background()
	s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.link.Blackhole()
	defer p.link.Heal()
	const timeout = 200 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	_, err = s.KeepAlive(cctx)
	took := time.Since(start)
	if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("KeepAlive to a silent Redis = %v; want an error wrapping ErrUnavailable and context.DeadlineExceeded", err)
	}
	if took > timeout+250*time.Millisecond {
		t.Errorf("KeepAlive to a silent Redis took %v; want it to return by its deadline %v (D2)", took, timeout)
	}
}
