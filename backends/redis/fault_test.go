package simbaredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

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
