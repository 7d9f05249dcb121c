package memory_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
)

func open(t *testing.T, s *memory.Store, ttl time.Duration) (backends.Session, backends.Renewal) {
	t.Helper()
	sess, r, err := s.OpenSession(t.Context(), backends.SessionOptions{TTL: ttl})
	if err != nil {
		t.Fatalf("OpenSession(%v): %v", ttl, err)
	}
	return sess, r
}

func TestOpenSessionRejectsTTL(t *testing.T) {
	s := memory.New()
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, _, err := s.OpenSession(t.Context(), backends.SessionOptions{TTL: ttl}); err == nil {
			t.Errorf("OpenSession(%v) = nil error; want one naming the ttl", ttl)
		}
	}
	if c := s.Faults().Calls(); c.Total() != 0 {
		t.Errorf("calls = %+v; an invalid ttl should not reach the store", c)
	}
}

func TestOptionsPanicOnInvalidValues(t *testing.T) {
	for name, f := range map[string]func(){
		"WithMaxLease(0)":     func() { memory.WithMaxLease(0) },
		"WithMaxLease(-1s)":   func() { memory.WithMaxLease(-time.Second) },
		"WithClockRate(0)":    func() { memory.WithClockRate(0) },
		"WithClockRate(NaN)":  func() { memory.WithClockRate(math.NaN()) },
		"WithClockRate(+Inf)": func() { memory.WithClockRate(math.Inf(1)) },
		"SetClockRate(-1)":    func() { memory.New().Faults().SetClockRate(-1) },
		"SetLatency(-1ns, 0)": func() { memory.New().Faults().SetLatency(-1, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

// Open gives one store per name, process-wide; "" is the default store.
func TestOpenNamedStores(t *testing.T) {
	a, a2 := memory.Open("test-a"), memory.Open("test-a")
	b, def, def2 := memory.Open("test-b"), memory.Open(""), memory.Open("")
	if a != a2 || def != def2 {
		t.Fatal("Open with the same name returned different stores")
	}
	if a == b || a == def || b == def {
		t.Fatal("Open with different names returned the same store")
	}
	// State is shared through the name: a lease taken via one handle is
	// held for a session opened via the other.
	s1, _ := open(t, a, time.Minute)
	defer s1.Close(t.Context())
	if _, err := s1.Acquire(t.Context(), "shared"); err != nil {
		t.Fatal(err)
	}
	s2, _ := open(t, a2, time.Minute)
	defer s2.Close(t.Context())
	if _, err := s2.Acquire(t.Context(), "shared"); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Errorf("Acquire via the same named store = %v; want ErrLeaseHeld", err)
	}
	s3, _ := open(t, b, time.Minute)
	defer s3.Close(t.Context())
	if _, err := s3.Acquire(t.Context(), "shared"); err != nil {
		t.Errorf("Acquire in another named store = %v; want success", err)
	}
}

// C2, §15: the TTL is clamped to MaxLease, and the reply says so.
func TestMaxLeaseClamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New(memory.WithMaxLease(5 * time.Second))
		sess, r := open(t, s, time.Hour)
		if r.Remaining != 5*time.Second {
			t.Errorf("granted %v; want 5s", r.Remaining)
		}
		time.Sleep(5 * time.Second)
		_, err := sess.KeepAlive(t.Context())
		if !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("KeepAlive 5s after open = %v; want ErrSessionExpired at the clamped TTL", err)
		}
	})
}

// S3: expiry is exact on the store clock; a keep-alive a moment late does not
// revive the session.
func TestExpiryIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a, r := open(t, s, 10*time.Second)
		if r.Remaining != 10*time.Second {
			t.Fatalf("granted %v; want 10s", r.Remaining)
		}
		time.Sleep(10*time.Second - time.Nanosecond)
		r, err := a.KeepAlive(t.Context())
		if err != nil || r.Remaining != 10*time.Second {
			t.Fatalf("KeepAlive 1ns before expiry = %v, %v; want 10s remaining", r.Remaining, err)
		}
		time.Sleep(10 * time.Second)
		if _, err := a.KeepAlive(t.Context()); !errors.Is(err, backends.ErrSessionExpired) {
			t.Fatalf("KeepAlive at expiry = %v; want ErrSessionExpired", err)
		}
	})
}

// D3: expiry is measured on the store clock, whose rate can differ from the
// client's; Remaining is in store time; changing the rate does not jump.
func TestClockRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New(memory.WithClockRate(2))
		a, _ := open(t, s, 10*time.Second)
		t0, _ := s.StoreTime(t.Context())
		time.Sleep(4 * time.Second)
		r, err := a.KeepAlive(t.Context())
		if err != nil {
			t.Fatalf("KeepAlive after 4s (8s of store time): %v", err)
		}
		if got := r.StoreTime.Sub(t0); got != 8*time.Second {
			t.Errorf("store clock advanced %v in 4s at rate 2; want 8s", got)
		}
		if r.Remaining != 10*time.Second {
			t.Errorf("Remaining = %v; want 10s of store time", r.Remaining)
		}
		time.Sleep(5 * time.Second) // 10s of store time: expired
		if _, err := a.KeepAlive(t.Context()); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("KeepAlive after 5s at rate 2 = %v; want ErrSessionExpired", err)
		}

		b, _ := open(t, s, 10*time.Second)
		before, _ := s.StoreTime(t.Context())
		s.Faults().SetClockRate(0.5)
		after, _ := s.StoreTime(t.Context())
		if before != after {
			t.Errorf("store clock jumped from %v to %v when the rate changed", before, after)
		}
		time.Sleep(19 * time.Second) // 9.5s of store time
		if _, err := b.KeepAlive(t.Context()); err != nil {
			t.Errorf("KeepAlive after 19s at rate 0.5 = %v; want the session alive", err)
		}
	})
}

// D1, D4: a renewal that the store handled promptly but whose reply came late
// (or never) still extended the session, from the moment the store handled
// it; the Remaining in a late reply was measured then.
func TestReplyLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		start := time.Now()
		a, _ := open(t, s, 10*time.Second)
		f := s.Faults()
		f.SetLatency(time.Second, 3*time.Second)

		r, err := a.KeepAlive(t.Context()) // handled at 1s: expiry 11s
		if err != nil || time.Since(start) != 4*time.Second || r.Remaining != 10*time.Second {
			t.Fatalf("KeepAlive = %v, %v after %v; want 10s remaining, after 4s", r.Remaining, err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err = a.KeepAlive(ctx) // handled at 5s (expiry 15s), reply lost at 6s
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("KeepAlive whose reply was lost = %v; want ErrUnavailable and DeadlineExceeded", err)
		}
		if now := time.Since(start); now != 6*time.Second {
			t.Errorf("KeepAlive whose reply was lost returned at %v; want at its deadline, 6s", now)
		}
		f.SetLatency(0, 0)
		time.Sleep(15*time.Second - time.Since(start) - time.Nanosecond)
		if _, _, err := a.Owned(t.Context()); err != nil {
			t.Errorf("Owned just before 15s = %v; the renewal handled at 5s keeps the session until 15s", err)
		}
		time.Sleep(time.Nanosecond)
		if _, _, err := a.Owned(t.Context()); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("Owned at 15s = %v; want ErrSessionExpired", err)
		}
	})
}

// A renewal whose request is delayed past its deadline never reaches the
// store and extends nothing.
func TestRequestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		start := time.Now()
		a, _ := open(t, s, 10*time.Second)
		f := s.Faults()
		f.SetLatency(3*time.Second, 0)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := a.KeepAlive(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("KeepAlive lost on the way = %v; want ErrUnavailable and DeadlineExceeded", err)
		}
		if now := time.Since(start); now != 2*time.Second {
			t.Errorf("KeepAlive lost on the way returned at %v; want at its deadline, 2s", now)
		}
		if got := f.Calls().KeepAlive; got != 1 {
			t.Errorf("Calls().KeepAlive = %d; want 1 (attempts count)", got)
		}
		f.SetLatency(0, 0)
		time.Sleep(10*time.Second - time.Since(start))
		if _, err := a.KeepAlive(t.Context()); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("KeepAlive at 10s = %v; want ErrSessionExpired, the lost renewal extended nothing", err)
		}
	})
}

// Refuse fails at once with ErrUnavailable; Blackhole hangs until the
// context ends and then wraps both ErrUnavailable and the context's error. In
// neither mode does the store see the call.
func TestUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a, _ := open(t, s, time.Minute)
		b, _ := open(t, s, time.Minute)
		f := s.Faults()

		f.SetReachability(memory.Refuse)
		start := time.Now()
		_, err := a.Acquire(t.Context(), "lease")
		if !errors.Is(err, backends.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire refused = %v; want ErrUnavailable alone", err)
		}
		if time.Since(start) != 0 {
			t.Errorf("Acquire refused after %v; want at once", time.Since(start))
		}

		f.SetReachability(memory.Blackhole)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		_, err = a.Acquire(ctx, "lease")
		cancel()
		if !errors.Is(err, backends.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire blackholed = %v; want ErrUnavailable and DeadlineExceeded", err)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("Acquire blackholed returned after %v; want at its 5s deadline", took)
		}
		ctx, cancel = context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := a.KeepAlive(ctx)
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("KeepAlive blackholed returned %v before its context ended", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("KeepAlive blackholed, then cancelled = %v; want ErrUnavailable and Canceled", err)
		}

		f.SetReachability(memory.Reachable)
		if _, err := b.Acquire(t.Context(), "lease"); err != nil {
			t.Errorf("Acquire after healing = %v; the unreachable store must not have granted the lease", err)
		}
		if got := f.Calls().Acquire; got != 3 {
			t.Errorf("Calls().Acquire = %d; want 3 (refused and blackholed calls count)", got)
		}
	})
}

// The counters prove that a renewal is one call, whatever is held.
func TestCallCounters(t *testing.T) {
	s := memory.New()
	f := s.Faults()
	a, _ := open(t, s, time.Minute)
	for i := range 100 {
		if _, err := a.Acquire(t.Context(), fmt.Sprintf("lease-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	f.ResetCalls()
	for range 7 {
		if _, err := a.KeepAlive(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.StoreTime(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := memory.Calls{KeepAlive: 7, StoreTime: 1}
	if got := f.Calls(); got != want || got.Total() != 8 {
		t.Errorf("Calls() = %+v (total %d); want %+v (total 8)", got, got.Total(), want)
	}
	if _, err := a.Acquire(t.Context(), "bad/name"); !errors.Is(err, backends.ErrInvalidName) {
		t.Fatal(err)
	}
	if got := f.Calls().Acquire; got != 0 {
		t.Errorf("Calls().Acquire = %d after an invalid name; want 0, it never reaches the store", got)
	}
}

// §15: after a restart with all state lost, old sessions are expired, values
// are gone, the run id changes, watchers wake, and no lease is granted until
// MaxLease has passed on the store clock; tokens keep increasing.
func TestRestartGuard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New(memory.WithMaxLease(30*time.Second), memory.WithClockRate(1.5))
		a, _ := open(t, s, time.Minute)
		var last backends.Token
		for i := range 1000 { // more tokens than microseconds pass: the counter runs ahead of the clock
			name := fmt.Sprintf("lease-%d", i)
			g, err := a.Acquire(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			last = g.Token
			if err := a.PutValue(t.Context(), name, g.Token, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		var woken atomic.Int64
		stop := a.(backends.Notifier).Watch("lease-0", func() { woken.Add(1) })
		defer stop()
		run := s.RunID()

		restarted := time.Now()
		s.Faults().Restart()
		if s.RunID() == run {
			t.Error("RunID unchanged by a restart")
		}
		if woken.Load() != 1 {
			t.Errorf("watcher woken %d times by the restart; want 1", woken.Load())
		}
		if _, err := a.KeepAlive(t.Context()); !errors.Is(err, backends.ErrSessionExpired) {
			t.Errorf("KeepAlive of a session from before the restart = %v; want ErrSessionExpired", err)
		}
		b, _ := open(t, s, 10*time.Second)
		_, err := b.Acquire(t.Context(), "lease-0")
		if !errors.Is(err, backends.ErrLeaseHeld) || !strings.Contains(err.Error(), "recovering") {
			t.Errorf("Acquire right after the restart = %v; want ErrLeaseHeld saying the store is recovering", err)
		}
		// 30s of store time at rate 1.5 is 20s of client time.
		for range 3 {
			time.Sleep(19 * time.Second / 3)
			if _, err := b.KeepAlive(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.Acquire(t.Context(), "lease-0"); !errors.Is(err, backends.ErrLeaseHeld) {
			t.Errorf("Acquire 19s after the restart = %v; want ErrLeaseHeld", err)
		}
		time.Sleep(time.Until(restarted.Add(20 * time.Second)))
		g, err := b.Acquire(t.Context(), "lease-0")
		if err != nil {
			t.Fatalf("Acquire 20s (30s of store time) after the restart = %v; want success", err)
		}
		if g.Token <= last {
			t.Errorf("token after the restart = %d; want > %d, the last before it", g.Token, last)
		}
		if g.Value != nil {
			t.Errorf("value after the restart = %q; want nil, all state was lost", g.Value)
		}
	})
}

// A1: expiry is noticed lazily: the watcher of a lease whose holder expired
// is called by the next call to the store, on that call's goroutine.
func TestWatchExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memory.New()
		a, _ := open(t, s, 5*time.Second)
		b, _ := open(t, s, time.Minute)
		if _, err := a.Acquire(t.Context(), "lease"); err != nil {
			t.Fatal(err)
		}
		var woken atomic.Int64
		stop := b.(backends.Notifier).Watch("lease", func() { woken.Add(1) })
		defer stop()
		time.Sleep(6 * time.Second)
		if woken.Load() != 0 {
			t.Fatal("watcher called with no call to the store")
		}
		if _, err := b.KeepAlive(t.Context()); err != nil {
			t.Fatal(err)
		}
		if woken.Load() != 1 {
			t.Errorf("watcher called %d times by the call that noticed the expiry; want 1", woken.Load())
		}
	})
}

// A session's own release, or its close, wakes the watches of other
// sessions but not its own: it tells the releasing session nothing new (the
// Redis backend behaves the same).
func TestOwnReleasesDoNotWakeOwnWatches(t *testing.T) {
	ctx := t.Context()
	s := memory.New()
	a, _ := open(t, s, time.Minute)
	b, _ := open(t, s, time.Minute)
	var byA, byB atomic.Int64
	defer a.(backends.Notifier).Watch("x", func() { byA.Add(1) })()
	defer b.(backends.Notifier).Watch("x", func() { byB.Add(1) })()
	cycle := func(s backends.Session) {
		t.Helper()
		g, err := s.Acquire(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Release(ctx, "x", g.Token); err != nil {
			t.Fatal(err)
		}
	}
	cycle(a)
	if byA.Load() != 0 || byB.Load() != 1 {
		t.Errorf("a released x: a's watch called %d times, b's %d; want 0 and 1", byA.Load(), byB.Load())
	}
	cycle(b)
	if byA.Load() != 1 || byB.Load() != 1 {
		t.Errorf("b released x: a's watch called %d times, b's %d; want 1 and 1", byA.Load(), byB.Load())
	}
	if _, err := a.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if byB.Load() != 2 {
		t.Errorf("a closed holding x: b's watch called %d times in all; want 2", byB.Load())
	}
}

// After stop returns, fn is never called again: stop waits for a call in
// progress on another goroutine; stop is idempotent.
func TestWatchStopWaitsForCall(t *testing.T) {
	s := memory.New()
	a, _ := open(t, s, time.Minute)
	b, _ := open(t, s, time.Minute)
	entered, unblock := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	stop := b.(backends.Notifier).Watch("lease", func() {
		if calls.Add(1) == 1 {
			close(entered)
			<-unblock
		}
	})
	g, err := a.Acquire(t.Context(), "lease")
	if err != nil {
		t.Fatal(err)
	}
	go a.Release(t.Context(), "lease", g.Token)
	<-entered
	stopped := make(chan struct{})
	go func() {
		stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stop returned while the watcher was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(unblock)
	<-stopped
	stop()
	g, _ = a.Acquire(t.Context(), "lease")
	a.Release(t.Context(), "lease", g.Token)
	if n := calls.Load(); n != 1 {
		t.Errorf("watcher called %d times; want 1, none after stop", n)
	}
}

// Many goroutines using one store at once, with watches stopped mid-flight,
// sessions expired behind their backs and groups churning: run with -race.
// Tokens are never issued twice, a lease has one holder, and no watcher runs
// after its stop returned.
func TestConcurrentUse(t *testing.T) {
	s := memory.New()
	f := s.Faults()
	const (
		workers = 16
		rounds  = 300
	)
	var (
		mu     sync.Mutex
		tokens = make(map[backends.Token]string)
	)
	record := func(name string, tok backends.Token) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := tokens[tok]; dup {
			t.Errorf("token %d issued for %q and %q", tok, prev, name)
		}
		tokens[tok] = name
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			sess, _, err := s.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
			if err != nil {
				t.Error(err)
				return
			}
			n := sess.(backends.Notifier)
			for i := range rounds {
				name := fmt.Sprintf("lease-%d", i%5)
				var stopped atomic.Bool
				stop := n.Watch(name, func() {
					if stopped.Load() {
						t.Error("watcher called after its stop returned")
					}
				})
				g, err := sess.Acquire(ctx, name)
				switch {
				case err == nil:
					record(name, g.Token)
					_ = sess.PutValue(ctx, name, g.Token, []byte(name))
					_, _ = sess.Release(ctx, name, g.Token)
				case errors.Is(err, backends.ErrSessionExpired):
					sess, _, err = s.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
					if err != nil {
						t.Error(err)
						return
					}
					n = sess.(backends.Notifier)
				case !errors.Is(err, backends.ErrLeaseHeld):
					t.Errorf("Acquire: %v", err)
				}
				stop()
				stopped.Store(true)
				switch i % 7 {
				case 0:
					_ = sess.Join(ctx, "group", 5)
				case 1:
					_, _ = sess.Members(ctx, "group")
				case 2:
					_ = sess.Leave(ctx, "group")
				case 3:
					_, _ = sess.KeepAlive(ctx)
				case 4:
					_, _, _ = sess.Owned(ctx)
				case 5:
					if w == 0 {
						f.ExpireSession(sess.ID())
					}
				}
			}
			_ = sess.Close(ctx)
		})
	}
	wg.Wait()
	if len(tokens) == 0 {
		t.Fatal("no lease was ever acquired")
	}
	sess, _ := open(t, s, time.Minute)
	for i := range 5 {
		if _, err := sess.Acquire(t.Context(), fmt.Sprintf("lease-%d", i)); err != nil {
			t.Errorf("Acquire after every session closed: %v", err)
		}
	}
	if v, err := sess.Members(t.Context(), "group"); err != nil || len(v.Members) != 0 {
		t.Errorf("Members after every member closed = %+v, %v; want none", v, err)
	}
}

// No call of fn starts after stop returned, even when a store call collected
// the watch to wake it before stop ran. A blocking watcher of the same name
// holds the waking call between the two, half of the time (the order in which
// one call wakes watchers is not defined), so the loop hits that case.
func TestWatchNeverAfterStop(t *testing.T) {
	s := memory.New()
	a, _ := open(t, s, time.Minute)
	b, _ := open(t, s, time.Minute)
	n := b.(backends.Notifier)
	for range 40 {
		entered, unblock := make(chan struct{}, 1), make(chan struct{})
		stop1 := n.Watch("lease", func() {
			entered <- struct{}{}
			<-unblock
		})
		var returned atomic.Bool
		stop2 := n.Watch("lease", func() {
			if returned.Load() {
				t.Error("watcher called after its stop returned")
			}
		})
		g, err := a.Acquire(t.Context(), "lease")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.Release(t.Context(), "lease", g.Token)
		}()
		<-entered
		stop2()
		returned.Store(true)
		close(unblock)
		<-done
		stop1()
	}
}
