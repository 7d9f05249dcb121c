package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// A1, S4: a watcher of a session that was refused the lease is called when
// the lease is released and when its holder's session closes; not for other
// names; never after stop returns; stop may be called twice. A watch with a
// nil function watches nothing: the releases below must not call it (a nil
// watch once panicked another session's release on the memory store).
// Skipped unless sessions implement backends.Notifier.
func testNotify(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	nb, ok := b.(backends.Notifier)
	if !ok {
		lacking(t, fmt.Sprintf("sessions (%T) do not implement backends.Notifier", b))
	}
	var fired, other atomic.Int64
	stop := nb.Watch("lease", func() { fired.Add(1) })
	stopOther := nb.Watch("unrelated", func() { other.Add(1) })
	defer stopOther()
	stopNil := nb.Watch("lease", nil)
	defer stopNil()
	// Watch may start late (Redis subscribes, ZooKeeper sets a watch):
	// give it a moment before the first release.
	e.sleep(e.poll())

	waitFired := func(what string, from int64) {
		t.Helper()
		if !e.eventually(h.ExpiryGrace, func() bool { return fired.Load() > from }, b) {
			t.Errorf("watcher not called within %v of %s (A1)", h.ExpiryGrace, what)
		}
	}
	// A candidate tries before it waits: b is refused first, as the engine
	// would be (a store may wake only the sessions it refused).
	refused := func() {
		t.Helper()
		if _, err := b.Acquire(e.ctx, "lease"); !errors.Is(err, backends.ErrLeaseHeld) {
			t.Fatalf("Acquire by b while a holds the lease = %v; want ErrLeaseHeld", err)
		}
	}
	g := e.acquire(a, "lease")
	refused()
	n := fired.Load()
	e.release(a, "lease", g.Token)
	waitFired("a release", n)

	e.acquire(a, "lease")
	refused()
	n = fired.Load()
	if err := a.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitFired("the holder's Close (S4)", n)

	stop()
	stop() // idempotent
	n = fired.Load()
	g = e.acquire(b, "lease")
	e.release(b, "lease", g.Token)
	e.sleep(h.ExpiryGrace, b)
	if got := fired.Load(); got != n {
		t.Errorf("watcher called %d times after stop returned; want 0", got-n)
	}
	if got := other.Load(); got != 0 {
		// Calls may be spurious (backends.Notifier), but a store that
		// wakes every watcher for every release defeats the purpose.
		t.Logf("watcher of an untouched name called %d times (allowed, but wasteful)", got)
	}
}

// A1, §13: a group member's watcher of a partition is called when another
// member releases it, and when the holder's session closes, though the
// watcher's session was never refused the partition: members contend only
// for the partitions that are free in their view, so a store that wakes
// only the sessions it refused would leave a graceful leave's partitions
// idle until the members' next renewal. Skipped unless sessions implement
// backends.Notifier.
func testNotifyMembers(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	a, _ := e.open()
	b, _ := e.open()
	nb, ok := b.(backends.Notifier)
	if !ok {
		lacking(t, fmt.Sprintf("sessions (%T) do not implement backends.Notifier", b))
	}
	for _, s := range []backends.Session{a, b} {
		if err := s.Join(e.ctx, "grp", 2); err != nil {
			t.Fatalf("Join: %v", err)
		}
	}
	part := backends.PartitionName("grp", 1)
	var fired atomic.Int64
	stop := nb.Watch(part, func() { fired.Add(1) })
	defer stop()
	e.sleep(e.poll()) // Watch may start late, as in Notify
	waitFired := func(what string, from int64) {
		t.Helper()
		if !e.eventually(h.ExpiryGrace, func() bool { return fired.Load() > from }, b) {
			t.Errorf("a member's watcher of %s not called within %v of %s (A1, §13)", part, h.ExpiryGrace, what)
		}
	}
	g := e.acquire(a, part)
	n := fired.Load()
	e.release(a, part, g.Token)
	waitFired("another member's release", n)

	e.acquire(a, part)
	n = fired.Load()
	if err := a.Close(e.ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitFired("the holder's Close (S4)", n)
}

// §13, D1: a backend that implements backends.StoreClock reads its clock in
// StoreTime and reports the same clock in every renewal's StoreTime.
func testStoreClock(t *testing.T, h *Harness) {
	e := newEnv(t, h)
	sc, ok := e.b.(backends.StoreClock)
	if !ok {
		lacking(t, fmt.Sprintf("backend (%T) does not implement backends.StoreClock", e.b))
	}
	s, r0 := e.open()
	if r0.StoreTime.IsZero() {
		t.Error("OpenSession's Renewal.StoreTime is zero; a backend with a StoreClock reports it")
	}
	start := time.Now()
	t1, err := sc.StoreTime(e.ctx)
	if err != nil {
		t.Fatalf("StoreTime: %v", err)
	}
	r := e.keepAlive(s)
	t2, err := sc.StoreTime(e.ctx)
	if err != nil {
		t.Fatalf("StoreTime: %v", err)
	}
	elapsed := time.Since(start)
	// Clocks read in separate calls may differ by the calls' duration and
	// the store clock's resolution (ZooKeeper: milliseconds).
	const resolution = 2 * time.Millisecond
	if r.StoreTime.IsZero() {
		t.Fatal("KeepAlive's Renewal.StoreTime is zero")
	}
	if r.StoreTime.Before(t1.Add(-resolution)) || r.StoreTime.After(t2.Add(resolution)) {
		t.Errorf("KeepAlive StoreTime %v; want between the StoreTime calls around it, %v and %v", r.StoreTime, t1, t2)
	}
	if d := t2.Sub(t1); d < -resolution || d > elapsed+time.Second {
		t.Errorf("store clock moved %v in %v of client time", d, elapsed)
	}
	if d := t1.Sub(time.Now()).Abs(); d > time.Hour {
		t.Logf("store clock %v is %v from the client's; only its rate matters, but check the server's time sync", t1, d)
	}
}

// §15, S3, T2, F5: after a restart that loses all state, the old sessions are
// expired; no lease is granted until the configured MaxLease has passed since
// the restart; then tokens are greater than every token issued before it.
func testAmnesiaGuard(t *testing.T, h *Harness) {
	if h.NewRestartable == nil {
		lacking(t, "Harness.NewRestartable is nil")
	}
	b, restart := h.NewRestartable(t)
	e := envOn(t, h, b)
	a, _ := e.open()
	var before backends.Token
	for _, name := range []string{"lease", "other", "lease"} {
		g := e.acquire(a, name)
		before = max(before, g.Token)
		if name == "other" {
			e.release(a, name, g.Token)
		}
	}
	start := time.Now()
	maxLease := restart()
	if maxLease <= 0 {
		t.Fatalf("the harness's restart returned MaxLease %v; want > 0", maxLease)
	}

	_, err := a.KeepAlive(e.ctx)
	wantErr(t, err, backends.ErrSessionExpired, "KeepAlive of a session from before the restart")
	_, err = a.Acquire(e.ctx, "fresh")
	wantErr(t, err, backends.ErrSessionExpired, "Acquire by a session from before the restart")

	c, _ := e.open()
	var (
		g       backends.Grant
		granted time.Duration
		refused bool
	)
	ok := e.eventually(maxLease+h.ExpiryGrace, func() bool {
		var err error
		g, err = c.Acquire(e.ctx, "lease")
		if err == nil {
			granted = time.Since(start)
			return true
		}
		if !errors.Is(err, backends.ErrLeaseHeld) || !errors.Is(err, backends.ErrRecovering) {
			t.Fatalf("Acquire during the amnesia guard = %v; want ErrLeaseHeld and ErrRecovering", err)
		}
		if !refused {
			refused = true
			CheckRecovering(t, "Acquire's refusal", err, maxLease)
			if in, ok := b.(backends.Inspector); ok {
				inv, err := in.Inspect(e.ctx)
				if err != nil {
					t.Fatalf("Inspect during the amnesia guard: %v", err)
				}
				if inv.Recovering == nil {
					t.Errorf("Inspect during the amnesia guard: Inventory.Recovering is nil; want the guard, so that a status tool says why grants wait")
				} else {
					CheckRecovering(t, "Inspect's Inventory.Recovering", inv.Recovering, maxLease)
				}
			}
		}
		return false
	}, c)
	if !ok {
		t.Fatalf("no Acquire succeeded within %v of the restart; want one after MaxLease %v", maxLease+h.ExpiryGrace, maxLease)
	}
	if granted < maxLease {
		t.Errorf("Acquire succeeded %v after the restart; want no grant before MaxLease %v (§15)", granted, maxLease)
	}
	if g.Token <= before {
		t.Errorf("first token after the restart = %d; want > %d, the last before it (F5, §15)", g.Token, before)
	}
	if g2 := e.acquire(c, "other"); g2.Token <= g.Token {
		t.Errorf("second token after the restart = %d; want > %d", g2.Token, g.Token)
	}
}

// D2, §12: while the store is unreachable every call fails within its
// context's deadline with an error wrapping ErrUnavailable or the context's
// error; once it is reachable again sessions open.
func testUnreachable(t *testing.T, h *Harness) {
	if h.NewCuttable == nil {
		lacking(t, "Harness.NewCuttable is nil")
	}
	b, cut := h.NewCuttable(t)
	e := envOn(t, h, b)
	openedAt := time.Now()
	a, ra := e.open()
	g := e.acquire(a, "lease")

	heal := sync.OnceFunc(cut())
	t.Cleanup(heal)

	timeout := max(h.TTL/4, 50*time.Millisecond)
	slack := max(h.TTL/4, 250*time.Millisecond)
	check := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(e.ctx, timeout)
		defer cancel()
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		switch {
		case err == nil:
			t.Errorf("%s while unreachable = nil; want an error", what)
		case errors.Is(err, backends.ErrSessionExpired) && time.Since(openedAt) > ra.Remaining:
			// B2: a backend whose driver renews by itself closes the
			// session once its remaining time has passed without a
			// successful keep-alive.
		case !errors.Is(err, backends.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s while unreachable = %v; want an error wrapping ErrUnavailable or the context's error", what, err)
		}
		if took > timeout+slack {
			t.Errorf("%s while unreachable took %v; want it to return by its deadline (%v, +%v slack)", what, took, timeout, slack)
		}
	}
	check("KeepAlive", func(ctx context.Context) error { _, err := a.KeepAlive(ctx); return err })
	check("Acquire", func(ctx context.Context) error { _, err := a.Acquire(ctx, "other"); return err })
	check("Release", func(ctx context.Context) error { _, err := a.Release(ctx, "lease", g.Token); return err })
	check("PutValue", func(ctx context.Context) error { return a.PutValue(ctx, "lease", g.Token, []byte("v")) })
	check("Owned", func(ctx context.Context) error { _, _, err := a.Owned(ctx); return err })
	check("Join", func(ctx context.Context) error { return a.Join(ctx, "group", 2) })
	check("Members", func(ctx context.Context) error { _, err := a.Members(ctx, "group"); return err })
	check("OpenSession", func(ctx context.Context) error {
		s, _, err := e.b.OpenSession(ctx, backends.SessionOptions{TTL: h.TTL})
		if err == nil {
			closeQuietly(s)
		}
		return err
	})
	if sc, ok := e.b.(backends.StoreClock); ok {
		check("StoreTime", func(ctx context.Context) error { _, err := sc.StoreTime(ctx); return err })
	}

	heal()
	var err error
	ok := e.eventually(h.TTL+h.ExpiryGrace, func() bool {
		var s backends.Session
		s, _, err = e.b.OpenSession(e.ctx, backends.SessionOptions{TTL: h.TTL})
		if err == nil {
			closeQuietly(s)
		}
		return err == nil
	})
	if !ok {
		t.Fatalf("OpenSession after healing still fails: %v", err)
	}
	if _, err := a.KeepAlive(e.ctx); err != nil && !errors.Is(err, backends.ErrSessionExpired) {
		t.Errorf("KeepAlive after healing = %v; want success or ErrSessionExpired", err)
	}
}

// CheckRecovering checks that err, a refusal of what (an Acquire, say) by
// a store's amnesia guard (§15), tells a user why the store grants nothing,
// until when and how to shorten the wait: a *[backends.RecoveringError],
// matching [backends.ErrRecovering] and [backends.ErrLeaseHeld], with a
// reason, 0 < Remaining ≤ MaxLease (a second's slack for the clock read),
// the store's MaxLease, and a message that names the backend option and the
// URL parameter that shorten it. It returns the error, and stops the test
// when err is no RecoveringError.
func CheckRecovering(t testing.TB, what string, err error, maxLease time.Duration) *backends.RecoveringError {
	t.Helper()
	var re *backends.RecoveringError
	if !errors.As(err, &re) || !errors.Is(err, backends.ErrRecovering) || !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("%s during the amnesia guard = %v; want a *backends.RecoveringError matching ErrRecovering and ErrLeaseHeld, saying why and for how long", what, err)
	}
	if re.Why == "" {
		t.Errorf("%s during the amnesia guard: RecoveringError.Why is empty; want why the store waits", what)
	}
	if re.Remaining <= 0 || re.Remaining > maxLease+time.Second {
		t.Errorf("%s during the amnesia guard: Remaining %v; want in (0, MaxLease %v]", what, re.Remaining, maxLease)
	}
	if re.MaxLease != maxLease {
		t.Errorf("%s during the amnesia guard: MaxLease %v; want the store's %v", what, re.MaxLease, maxLease)
	}
	for _, s := range []string{"grants resume in", "WithMaxLease", "simba_max_lease"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s during the amnesia guard: %q does not say %q", what, err, s)
		}
	}
	return re
}
