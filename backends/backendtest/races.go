package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// T2, F5: many sessions acquiring and releasing one name concurrently. Each
// winner records its token while it holds the lease (the store makes the
// holds one after another), so the record is in term order: the tokens must
// increase strictly along it. A store that takes the token before it locks
// the lease record (PostgreSQL's nextval() before the row lock) can give a
// later term a lower token, and fails here.
func testTermOrder(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	const sessions, terms = 8, 10 // terms won per session
	var (
		mu     sync.Mutex
		order  []backends.Token
		failed []error
	)
	ss := make([]backends.Session, sessions)
	for i := range ss {
		ss[i], _ = e.open()
	}
	concurrently(sessions, func(i int) {
		s := ss[i]
		renewed := time.Now()
		for won := 0; won < terms && e.ctx.Err() == nil; {
			// 80 terms one after another may outlast the TTL on a loaded
			// machine: keep the session alive.
			if time.Since(renewed) > h.TTL/4 {
				if _, err := s.KeepAlive(e.ctx); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
					return
				}
				renewed = time.Now()
			}
			g, err := s.Acquire(e.ctx, "lease")
			if errors.Is(err, backends.ErrLeaseHeld) {
				continue
			}
			if err == nil {
				mu.Lock()
				order = append(order, g.Token)
				mu.Unlock()
				_, err = s.Release(e.ctx, "lease", g.Token)
				won++
			}
			if err != nil {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
				return
			}
		}
	})
	if len(failed) > 0 {
		t.Fatalf("acquire/release failed: %v", errors.Join(failed...))
	}
	if len(order) != sessions*terms {
		t.Fatalf("%d terms won; want %d", len(order), sessions*terms)
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Errorf("term %d has token %d after term %d's %d; want strictly increasing tokens in term order (T2)",
				i, order[i], i-1, order[i-1])
		}
	}
}

// S3: a keep-alive racing the takeover of its session's lease at the moment
// the session expires. Whichever the store handles first wins, but never
// both: once another session's Acquire of the lease has returned, no
// keep-alive of the old session sent after that may succeed (its session is
// over and never comes back), and no renewal that succeeded can be followed
// by a takeover before its time to live has passed. A store that re-checks an
// expiry with a stale clock after waiting for a lock (PostgreSQL's now() in
// an UPDATE … WHERE), or that hands the lease over after reading the holder's
// expiry without stopping its keep-alive, renews an expired session while the
// lease goes to another, and fails here.
//
// The race is won or lost within a round trip of the store's expiry, so the
// rounds run at once, each sending its keep-alive at another moment across
// the span in which the store's expiry lies: the last renewal was handled
// between its sending and its reply, and the session expires Remaining
// after that (B1), widened by a millisecond on either side. The takeover
// tries every millisecond from a little before the expiry to a little after
// it. In -v output each round says which won; both outcomes are fine.
func testKeepAliveRacesTakeover(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	const rounds = 8
	type pair struct{ a, b backends.Session }
	pairs := make([]pair, rounds)
	for i := range pairs {
		pairs[i].a, _ = e.open()
		pairs[i].b, _ = e.open()
	}
	concurrently(rounds, func(round int) {
		raceTakeover(t, e, round, rounds, pairs[round].a, pairs[round].b)
	})
}

// raceTakeover is round round of testKeepAliveRacesTakeover's rounds: a
// holds the lease, its keep-alive is sent at the round's moment around its
// expiry, and b tries to take the lease. It runs on a goroutine of its own,
// so it reports with t.Errorf.
func raceTakeover(t *testing.T, e *env, round, rounds int, a, b backends.Session) {
	h := e.h
	name := fmt.Sprintf("lease-%d", round)
	if _, err := a.Acquire(e.ctx, name); err != nil {
		t.Errorf("round %d: Acquire(%q): %v", round, name, err)
		return
	}
	sentAt := time.Now()
	r, err := a.KeepAlive(e.ctx)
	if err != nil {
		t.Errorf("round %d: KeepAlive: %v", round, err)
		return
	}
	latency := time.Since(sentAt)
	// b is renewed after a, and again when the race starts, so that it
	// outlives the race.
	keepB := func() bool {
		if _, err := b.KeepAlive(e.ctx); err != nil {
			t.Errorf("round %d: KeepAlive: %v", round, err)
			return false
		}
		return true
	}
	if !keepB() {
		return
	}
	// The store renewed a between sentAt and sentAt+latency, so it expires
	// Remaining after a moment in that span: this round's keep-alive goes
	// at its place among the rounds in it, widened by a millisecond on
	// either side.
	offset := -time.Millisecond + time.Duration(round)*(latency+2*time.Millisecond)/time.Duration(rounds-1)
	// Race from a little before the expiry to a little after it.
	from := sentAt.Add(r.Remaining - h.ExpiryGrace/4)
	at := sentAt.Add(r.Remaining + offset)
	until := sentAt.Add(r.Remaining + h.ExpiryGrace)
	time.Sleep(time.Until(from))
	if !keepB() {
		return
	}

	type renewal struct {
		sent  time.Time
		until time.Time // what it granted, from when it was sent
	}
	var (
		renewals []renewal
		taken    time.Time // when b's Acquire returned a grant
		mu       sync.Mutex
	)
	concurrently(2, func(i int) {
		if i == 0 {
			time.Sleep(time.Until(at))
		}
		for time.Now().Before(until) {
			if i == 0 {
				sent := time.Now()
				ka, err := a.KeepAlive(e.ctx)
				if errors.Is(err, backends.ErrSessionExpired) {
					return
				}
				if err == nil {
					mu.Lock()
					renewals = append(renewals, renewal{sent, sent.Add(ka.Remaining)})
					mu.Unlock()
					// a is renewed: stop renewing, so it can expire.
					time.Sleep(time.Until(until))
					return
				}
			} else {
				_, err := b.Acquire(e.ctx, name)
				if err == nil {
					mu.Lock()
					taken = time.Now()
					mu.Unlock()
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	outcome := "the keep-alive renewed the session"
	if !taken.IsZero() {
		outcome = "the lease was taken over"
	}
	t.Logf("round %d, keep-alive sent %v after the earliest expiry (the renewal took %v): %s", round, offset, latency, outcome)
	for _, rn := range renewals {
		if !taken.IsZero() && rn.sent.After(taken) {
			t.Errorf("round %d: a keep-alive sent %v after another session took the lease succeeded (S3: an expired session came back)",
				round, rn.sent.Sub(taken))
		}
		if !taken.IsZero() && taken.Before(rn.until.Add(-h.ExpiryGrace)) && rn.sent.Before(taken) {
			t.Errorf("round %d: the lease was taken %v before the renewal sent %v earlier expired",
				round, rn.until.Sub(taken), taken.Sub(rn.sent))
		}
	}
	if taken.IsZero() && len(renewals) == 0 {
		t.Errorf("round %d: neither the keep-alive nor the takeover succeeded", round)
	}
	if !taken.IsZero() {
		if _, err := a.KeepAlive(e.ctx); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("round %d: KeepAlive of the session whose lease was taken = %v; want ErrSessionExpired", round, err)
		}
	}
}

// §12: a call whose context has ended returns promptly, with an error that
// wraps the context's error, and leaves the session usable.
func testEndedContext(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	g := e.acquire(a, "lease")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	slack := max(h.TTL/4, 250*time.Millisecond)
	check := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		start := time.Now()
		err := call(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended context = %v; want an error wrapping context.Canceled", what, err)
		}
		if took := time.Since(start); took > slack {
			t.Errorf("%s with an ended context took %v; want it to return at once", what, took)
		}
	}
	check("KeepAlive", func(ctx context.Context) error { _, err := a.KeepAlive(ctx); return err })
	check("Acquire", func(ctx context.Context) error { _, err := a.Acquire(ctx, "other"); return err })
	check("Release", func(ctx context.Context) error { _, err := a.Release(ctx, "lease", g.Token); return err })
	check("PutValue", func(ctx context.Context) error { return a.PutValue(ctx, "lease", g.Token, []byte("v")) })
	check("Holder", func(ctx context.Context) error { _, err := a.Holder(ctx, "lease"); return err })
	check("Owned", func(ctx context.Context) error { _, _, err := a.Owned(ctx); return err })
	check("Members", func(ctx context.Context) error { _, err := a.Members(ctx, "group"); return err })
	check("OpenSession", func(ctx context.Context) error {
		s, _, err := e.b.OpenSession(ctx, backends.SessionOptions{TTL: h.TTL})
		if err == nil {
			closeQuietly(s)
		}
		return err
	})
	// The session is still usable, and a call that ran anyway (the store
	// may have received it) left a state the store reports consistently.
	ka := e.keepAlive(a)
	held, d := e.owned(a)
	if d.Leases != len(held) || d != ka.Digest {
		t.Errorf("after calls with an ended context: Owned %v with digest %+v, keep-alive digest %+v; want them to agree", held, d, ka.Digest)
	}
	holds := slices.Contains(held, backends.Held{Name: "lease", Token: g.Token})
	if got, err := a.Holder(e.ctx, "lease"); err != nil || holds != (got.Session == a.ID()) {
		t.Errorf("after calls with an ended context: Owned %v, Holder(lease) = %+v, %v; want them to agree", held, got, err)
	}
}

// §12: after Backend.Close (for backends that implement io.Closer), every
// call fails with an error wrapping ErrClosed, and closing again is fine.
func testBackendClosed(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	cl, ok := e.b.(io.Closer)
	if !ok {
		lacking(t, fmt.Sprintf("backend (%T) does not implement io.Closer", e.b))
	}
	a, _ := e.open()
	g := e.acquire(a, "lease")
	if err := a.Close(e.ctx); err != nil {
		t.Fatalf("closing the session: %v", err)
	}
	s, _ := e.open()
	if err := cl.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, _, err := e.b.OpenSession(e.ctx, backends.SessionOptions{TTL: h.TTL})
	wantErr(t, err, backends.ErrClosed, "OpenSession after Close")
	_, err = s.KeepAlive(e.ctx)
	wantErr(t, err, backends.ErrClosed, "KeepAlive after the backend's Close")
	_, err = s.Acquire(e.ctx, "lease")
	wantErr(t, err, backends.ErrClosed, "Acquire after the backend's Close")
	_, err = s.Holder(e.ctx, "lease")
	wantErr(t, err, backends.ErrClosed, "Holder after the backend's Close")
	_, err = s.Release(e.ctx, "lease", g.Token)
	wantErr(t, err, backends.ErrClosed, "Release after the backend's Close")
	if sc, ok := e.b.(backends.StoreClock); ok {
		_, err = sc.StoreTime(e.ctx)
		wantErr(t, err, backends.ErrClosed, "StoreTime after Close")
	}
	if err := cl.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
}

// S1, T2, F5: a durable store (PostgreSQL, ZooKeeper) that restarts keeps its
// sessions, leases, values and token counter: once it answers again, a
// session whose time to live has not run out renews, still holds its lease
// (others are refused), and the next tokens are greater than those before.
// A store whose restarts end every session (Harness.RestartEndsSessions:
// Redis, §15) keeps its values and tokens: see durableRestartGuarded.
// Skipped unless the harness has NewDurable.
func testDurableRestart(t *testing.T, h *Harness) {
	if h.NewDurable == nil {
		lacking(t, "Harness.NewDurable is nil")
	}
	if h.DurableTTL > 0 {
		longer := *h
		longer.TTL = h.DurableTTL
		h = &longer
	}
	b, restart := h.NewDurable(t)
	e := envOn(t, h, b)
	a, _ := e.open()
	g := e.acquire(a, "lease")
	if err := a.PutValue(e.ctx, "lease", g.Token, []byte("kept")); err != nil {
		t.Fatalf("PutValue: %v", err)
	}
	gx := e.acquire(a, "other")
	e.release(a, "other", gx.Token)
	e.keepAlive(a)
	start := time.Now()
	restart()
	if h.RestartEndsSessions {
		durableRestartGuarded(t, e, a, start, max(g.Token, gx.Token))
		return
	}

	var err error
	if !e.eventually(h.TTL, func() bool { _, err = a.KeepAlive(e.ctx); return err == nil }) {
		t.Fatalf("KeepAlive after the restart still fails: %v", err)
	}
	c, _ := e.open()
	e.wantHeldBy(a, c, "lease", g.Token)
	if g2 := e.acquire(a, "lease"); string(g2.Value) != "kept" || g2.Token != g.Token {
		t.Errorf("re-Acquire after the restart = token %d, value %q; want %d and %q", g2.Token, g2.Value, g.Token, "kept")
	}
	if g3 := e.acquire(c, "other"); g3.Token <= g.Token || g3.Token <= gx.Token {
		t.Errorf("token after the restart = %d; want > %d, the last before it (F5)", g3.Token, max(g.Token, gx.Token))
	}
}

// durableRestartGuarded is the rest of testDurableRestart for a store whose
// restarts end every session and start its amnesia guard (§15): once it
// answers again, the session from before the restart is expired (S3); no
// lease is granted before MaxLease has passed since the restart; the first
// grant finds the value written before the restart, with a token greater
// than every token before it (F5).
func durableRestartGuarded(t *testing.T, e *env, a backends.Session, start time.Time, before backends.Token) {
	t.Helper()
	var err error
	if !e.eventually(e.h.TTL, func() bool { _, err = a.KeepAlive(e.ctx); return errors.Is(err, backends.ErrSessionExpired) }) {
		t.Fatalf("KeepAlive of a session from before the restart = %v; want ErrSessionExpired once the store answers", err)
	}
	c, _ := e.open()
	var (
		g       backends.Grant
		granted time.Duration
	)
	ok := e.eventually(e.h.MaxLease+e.h.TTL+e.h.ExpiryGrace, func() bool {
		g, err = c.Acquire(e.ctx, "lease")
		if err == nil {
			granted = time.Since(start)
			return true
		}
		if !errors.Is(err, backends.ErrLeaseHeld) || !errors.Is(err, backends.ErrRecovering) {
			t.Fatalf("Acquire during the amnesia guard after a restart = %v; want ErrLeaseHeld and ErrRecovering", err)
		}
		return false
	}, c)
	if !ok {
		t.Fatalf("no Acquire succeeded within %v of the restart: %v", e.h.MaxLease+e.h.TTL+e.h.ExpiryGrace, err)
	}
	if granted < e.h.MaxLease {
		t.Errorf("Acquire succeeded %v after the restart; want no grant before MaxLease %v (§15)", granted, e.h.MaxLease)
	}
	if string(g.Value) != "kept" {
		t.Errorf("the value after a restart that kept the data = %q; want %q, written before it", g.Value, "kept")
	}
	if g.Token <= before {
		t.Errorf("token after the restart = %d; want > %d, the last before it (F5)", g.Token, before)
	}
}
