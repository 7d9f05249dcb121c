package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/termcheck"
	"github.com/simba-go/simba/runtime"
)

// T2, A1, H1: two nodes contend; one wins; when it stops gracefully the other
// takes over at once (the memory store broadcasts releases), with a higher
// token.
func TestElectionHandOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var log termLog
		a := newClient(t, store, runtime.WithObserver(log.observer(0)))
		b := newClient(t, store, runtime.WithObserver(log.observer(1)))
		ea, err := a.StartElection("report", log.listener(0))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := b.StartElection("report", log.listener(1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := log.leader(); got != 0 {
			t.Fatalf("leader = %d, want node 0 (it started first)", got)
		}
		first := ea.Term()
		stopAt := time.Now()
		if err := ea.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := log.leader(); got != 1 {
			t.Fatalf("after node 0 stopped, leader = %d, want node 1", got)
		}
		if d := time.Since(stopAt); d != 0 {
			t.Errorf("hand-off took %v of virtual time, want none (release notification)", d)
		}
		if first.Reason() != runtime.ReasonStopped {
			t.Errorf("stopped term's reason = %v, want stopped", first.Reason())
		}
		closeClient(t, a)
		closeClient(t, b)
		log.check(t)
		if log.count() != 2 {
			t.Errorf("%d terms, want 2", log.count())
		}
	})
}

// T2, D1–D3, H1, H3, A1–A3, L1: ten nodes contending for one name through
// step-downs, stops, partitions of the leader and a slow store never hold two
// valid terms at one instant, and tokens strictly increase.
func TestTenNodesNeverTwoValidTerms(t *testing.T) {
	for seed := range uint64(3) {
		t.Run("seed"+string(rune('0'+seed)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { tenNodes(t, seed) })
		})
	}
}

func tenNodes(t *testing.T, seed uint64) {
	const nodes = 10
	store := memory.New(memory.WithMaxLease(cfg.LeaseDuration))
	rng := rand.New(rand.NewPCG(seed, 99))
	var log termLog
	links := make([]*link, nodes)
	clients := make([]*runtime.Client, nodes)
	elections := make([]*runtime.Election, nodes)
	start := func(i int) {
		e, err := clients[i].StartElection("report", log.listener(i))
		if err != nil {
			t.Fatal(err)
		}
		elections[i] = e
	}
	for i := range nodes {
		links[i] = newLink(store)
		clients[i] = newClient(t, links[i], runtime.WithSeed(seed*100+uint64(i)), runtime.WithObserver(log.observer(i)))
		start(i)
	}
	var wg sync.WaitGroup
	for range 150 {
		time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Second))))
		leader := log.leader()
		if leader < 0 {
			continue
		}
		switch rng.IntN(5) {
		case 0: // H4
			if err := elections[leader].StepDown(context.Background(), time.Duration(rng.Int64N(int64(3*time.Second)))); err != nil {
				t.Fatal(err)
			}
		case 1: // H1: stop, start again later
			if err := elections[leader].Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { time.Sleep(time.Second); start(leader) })
			wg.Wait()
		case 2: // the leader is partitioned from the store (H3, D4)
			links[leader].Cut()
			d := time.Duration(rng.Int64N(int64(6 * time.Second)))
			wg.Go(func() { time.Sleep(d); links[leader].Heal() })
		case 3: // D1: a slow store: replies arrive late
			store.Faults().SetLatency(0, time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
			wg.Go(func() { time.Sleep(2 * time.Second); store.Faults().SetLatency(0, 0) })
		}
	}
	wg.Wait()
	for i := range nodes {
		links[i].Heal()
		closeClient(t, clients[i])
	}
	log.check(t)
	if n := log.count(); n < 50 {
		t.Errorf("only %d terms in the run; the schedule exercised too little", n)
	}
}

// §11 backend unreachable: the session goes Suspended, every term ends with
// DeadlinePassed at the local deadline, nothing runs as leader meanwhile, and
// a new session opens when the store answers again.
func TestUnreachableStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		defer closeClient(t, c)
		term, err := c.Lock(context.Background(), "report")
		if err != nil {
			t.Fatal(err)
		}
		firstSession := c.Snapshot().Session
		deadline := c.Snapshot().Deadline

		store.Faults().SetReachability(memory.Blackhole)
		// The renewal sent at RenewInterval times out one period later (D2).
		time.Sleep(2*cfg.RenewInterval + 10*time.Millisecond)
		if s := c.Snapshot(); s.State != runtime.SessionSuspended {
			t.Fatalf("state after a failed renewal = %v, want suspended", s.State)
		}
		if !term.Valid() {
			t.Fatal("term invalid before its deadline")
		}
		<-term.Done()
		if got := time.Now(); got.After(deadline) {
			t.Errorf("term ended at %v, after the local deadline %v", got, deadline)
		}
		if term.Reason() != runtime.ReasonDeadlinePassed || term.Valid() {
			t.Fatalf("reason %v valid %v, want deadline passed and invalid", term.Reason(), term.Valid())
		}
		if s := c.Snapshot(); s.State != runtime.SessionOpening {
			t.Fatalf("state after the deadline = %v, want opening", s.State)
		}
		store.Faults().SetReachability(memory.Reachable)
		if err := c.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := c.Snapshot(); s.Session == firstSession || s.Session == "" {
			t.Fatalf("S3: session after recovery = %q, want a new one (was %q)", s.Session, firstSession)
		}
	})
}

// D1: a renewal whose reply is slow only shortens the deadline: it counts from
// when the request was sent.
func TestSlowReplyShortensDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		defer closeClient(t, c)
		if err := c.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		const slow = 600 * time.Millisecond
		store.Faults().SetLatency(0, slow)
		time.Sleep(cfg.RenewInterval) // the renewal is sent now
		sentAt := time.Now()
		time.Sleep(slow) // its reply has just arrived
		synctest.Wait()
		s := c.Snapshot()
		local := time.Duration(float64(cfg.LeaseDuration)*(1-cfg.Drift)) - cfg.Margin
		if want := sentAt.Add(local); !s.Deadline.Equal(want) {
			t.Fatalf("deadline = %v, want sentAt + local validity = %v", s.Deadline, want)
		}
		if s.Remaining != local-slow {
			t.Fatalf("remaining = %v, want %v", s.Remaining, local-slow)
		}
	})
}

// D3: within the drift bound the local deadline comes before the store
// expires the session; beyond it, two nodes can believe they lead at once —
// the limit of the claim, shown here so that nobody relies on it.
func TestClockDrift(t *testing.T) {
	for _, tc := range []struct {
		rate    float64
		overlap bool
	}{{1 + cfg.Drift, false}, {2, true}} {
		synctest.Test(t, func(t *testing.T) {
			store := memory.New(memory.WithClockRate(tc.rate))
			var log termLog
			la := newLink(store)
			a := newClient(t, la, runtime.WithObserver(log.observer(0)))
			b := newClient(t, store, runtime.WithObserver(log.observer(1)))
			if _, err := a.StartElection("report", log.listener(0)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if _, err := b.StartElection("report", log.listener(1)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			la.Cut() // the leader stops renewing; b takes over once the store expires it
			time.Sleep(2 * cfg.LeaseDuration)
			la.Heal()
			closeClient(t, a)
			closeClient(t, b)
			got := log.report().Count(termcheck.Overlap) > 0
			if got != tc.overlap {
				t.Errorf("store clock rate %v with drift %v: two valid terms = %v, want %v", tc.rate, cfg.Drift, got, tc.overlap)
			}
		})
	}
}

// S3, T4: a session the store expires behind the client's back ends its terms
// with SessionExpired; the client opens a new session and wins again.
func TestSessionExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var log termLog
		c := newClient(t, store, runtime.WithObserver(log.observer(0)))
		e, err := c.StartElection("report", log.listener(0))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		first := e.Term()
		old := c.Snapshot().Session
		store.Faults().ExpireSession(old)
		<-first.Done()
		if first.Reason() != runtime.ReasonSessionExpired {
			t.Fatalf("reason = %v, want session expired", first.Reason())
		}
		time.Sleep(cfg.RenewInterval)
		second := e.Term()
		if second == nil || second == first || second.Token() <= first.Token() {
			t.Fatalf("not re-elected with a higher token: first %v, now %v", first, second)
		}
		if c.Snapshot().Session == old {
			t.Fatal("S3: the expired session came back")
		}
		closeClient(t, c)
		log.check(t)
	})
}

// C2: a store that grants less than two renewals fit makes the client renew
// faster, with one SessionLeaseShortened event, and its terms stay valid.
func TestShortenedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(memory.WithMaxLease(1500 * time.Millisecond))
		var ev events
		logs := &logRecords{}
		c := newClient(t, store, runtime.WithObserver(&ev), runtime.WithLogger(slog.New(logs)))
		defer closeClient(t, c)
		term, err := c.Lock(context.Background(), "report")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * cfg.LeaseDuration)
		if !term.Valid() {
			t.Fatalf("term ended (%v) although the client could renew in time", term.Reason())
		}
		if p := c.Snapshot().RenewPeriod; p >= cfg.RenewInterval {
			t.Fatalf("renew period = %v, want less than %v", p, cfg.RenewInterval)
		}
		synctest.Wait()
		if n := len(ev.of(runtime.EventSessionLeaseShortened)); n != 1 {
			t.Fatalf("%d SessionLeaseShortened events, want 1", n)
		}
		if n := logs.count(slog.LevelWarn, "shorter lease"); n != 1 {
			t.Fatalf("%d warnings about the shortened lease logged, want 1", n)
		}
	})
}

// T3: Valid and Remaining are pure functions of the clock and the session's
// deadline. A node paused past its deadline — its calls held, its engine's
// timer stopped, so that none of its goroutines runs while virtual time
// passes — reads false on its first read, before the engine has ticked: the
// term has not even been revoked yet. Once the engine runs it revokes the
// term with DeadlinePassed, at once.
func TestPausedReadsInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		l := newLink(store)
		c := newClient(t, l)
		defer closeClient(t, c)
		term, err := c.Lock(context.Background(), "report")
		if err != nil {
			t.Fatal(err)
		}
		l.Freeze()
		synctest.Wait() // every call in flight is answered or held
		c.PauseEngine()
		left := term.Remaining()
		if left <= 0 {
			t.Fatalf("term has %v left before the pause", left)
		}
		time.Sleep(left) // the pause: nothing of the node's runs
		valid, remaining, reason := term.Valid(), term.Remaining(), term.Reason()
		if valid || remaining != 0 {
			t.Fatalf("first read after the pause: Valid=%v Remaining=%v, want false and 0", valid, remaining)
		}
		if reason != runtime.ReasonNotEnded {
			t.Fatalf("Reason = %v before the engine ran; the pause let the engine run", reason)
		}
		if err := term.EnsureValid(0); !errors.Is(err, runtime.ErrTermExpired) {
			t.Fatalf("EnsureValid = %v, want ErrTermExpired", err)
		}
		pausedAt := time.Now()
		c.ResumeEngine()
		<-term.Done()
		if term.Reason() != runtime.ReasonDeadlinePassed || time.Since(pausedAt) != 0 {
			t.Fatalf("after the pause: reason %v after %v, want deadline passed at once", term.Reason(), time.Since(pausedAt))
		}
		l.Thaw()
	})
}

// E1: EnsureValid fails unless the term stays valid for more than min.
func TestEnsureValid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		defer closeClient(t, c)
		term, err := c.Lock(context.Background(), "report")
		if err != nil {
			t.Fatal(err)
		}
		rem := term.Remaining()
		if err := term.EnsureValid(rem - time.Nanosecond); err != nil {
			t.Fatalf("EnsureValid(remaining-1ns) = %v", err)
		}
		err = term.EnsureValid(rem)
		var te *runtime.TermExpiredError
		if !errors.As(err, &te) || te.Name != "report" || te.Remaining != rem || te.Min != rem {
			t.Fatalf("EnsureValid(remaining) = %#v, want a TermExpiredError naming the term", err)
		}
		if err := c.Unlock(context.Background(), term); err != nil {
			t.Fatal(err)
		}
		err = term.EnsureValid(0)
		if !errors.As(err, &te) || te.Reason != runtime.ReasonStopped || !strings.Contains(err.Error(), "stopped") {
			t.Fatalf("EnsureValid after Unlock = %v, want expired: stopped", err)
		}
		if !errors.Is(context.Cause(term.Context()), runtime.ReasonStopped) {
			t.Fatalf("T2: context cause = %v, want the reason", context.Cause(term.Context()))
		}
	})
}

// H2: a task that ignores cancellation delays the hand-off by at most the
// validity its term had when it was revoked; the lease is then released and
// the stuck task reported.
func TestStuckTaskDelaysHandOffAtMostRemaining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var ev events
		a := newClient(t, store, runtime.WithObserver(&ev))
		b := newClient(t, store)
		release := make(chan struct{})
		e, err := a.StartElection("report", nil, runtime.WithTask(func(ctx context.Context, _ *runtime.Term) error {
			<-release // ignores ctx
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		term := e.Term()
		var won atomic.Pointer[time.Time]
		if _, err := b.StartElection("report", runtime.ListenerFuncs{OnElected: func(context.Context, *runtime.Term) {
			now := time.Now()
			won.Store(&now)
		}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		remaining := term.Remaining()
		stopAt := time.Now()
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(stopAt); d != remaining {
			t.Errorf("Stop took %v, want the term's remaining validity %v", d, remaining)
		}
		synctest.Wait()
		if w := won.Load(); w == nil || w.Sub(stopAt) != remaining {
			t.Errorf("node b won at %v after stop, want %v", w, remaining)
		}
		if len(ev.of(runtime.EventTaskStuck)) != 1 {
			t.Error("stuck task not reported")
		}
		close(release)
		closeClient(t, a)
		closeClient(t, b)
	})
}

// L5: Stop and Close called from inside a callback or task return at once
// without deadlock, and the callbacks stay paired (L1).
func TestStopFromInside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var log termLog
		c := newClient(t, store, runtime.WithObserver(log.observer(0)))
		var e *runtime.Election
		ready := make(chan struct{})
		inner := log.listener(0)
		var stopErr error
		l := runtime.ListenerFuncs{
			OnElected: func(ctx context.Context, t *runtime.Term) {
				inner.Elected(ctx, t)
				<-ready
				stopErr = e.Stop(ctx)
			},
			OnRevoked: inner.Revoked,
		}
		var err error
		e, err = c.StartElection("report", l)
		if err != nil {
			t.Fatal(err)
		}
		close(ready)
		synctest.Wait()
		if stopErr != nil {
			t.Fatalf("Stop from inside = %v, want nil", stopErr)
		}
		if e.Term() != nil || log.count() != 1 {
			t.Fatalf("election still leading after an inside Stop")
		}

		// Close from inside a task.
		var closeErr error
		if _, err := c.StartElection("audit", nil, runtime.WithTask(func(ctx context.Context, _ *runtime.Term) error {
			closeErr = c.Close(ctx)
			<-ctx.Done()
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if closeErr != nil {
			t.Fatalf("Close from inside = %v", closeErr)
		}
		if s := c.Snapshot(); s.State != runtime.SessionClosed {
			t.Fatalf("state = %v, want closed", s.State)
		}
		closeClient(t, c) // waits; returns nil for a closed client
		log.check(t)
	})
}

// L7: a panicking callback or task is recovered and reported; the engine
// goes on, and the callbacks stay paired.
func TestPanicsRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var ev events
		c := newClient(t, store, runtime.WithObserver(&ev))
		var revoked atomic.Int32
		e, err := c.StartElection("report", runtime.ListenerFuncs{
			OnElected: func(context.Context, *runtime.Term) { panic("boom in elected") },
			OnRevoked: func(context.Context, *runtime.Term, runtime.Reason) { revoked.Add(1) },
		}, runtime.WithTask(func(context.Context, *runtime.Term) error { panic(errors.New("boom in task")) }))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		cb := ev.of(runtime.EventCallbackPanicked)
		tf := ev.of(runtime.EventTaskFailed)
		var pe *runtime.PanicError
		if len(cb) != 1 || !errors.As(cb[0].Err, &pe) || pe.Value != "boom in elected" || len(pe.Stack) == 0 {
			t.Fatalf("callback panic events = %+v", cb)
		}
		if len(tf) != 1 || !errors.As(tf[0].Err, &pe) || tf[0].Err.Error() != "simba: panic: boom in task" {
			t.Fatalf("task panic events = %+v", tf)
		}
		// The task ended while the term was valid: the election stepped down.
		if revoked.Load() != 1 {
			t.Fatalf("revoked %d times, want 1 (the step-down after the task ended)", revoked.Load())
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		closeClient(t, c)
	})
}

// L6: when the callback executor refuses an elected callback, the term is
// given up without any callback, so callbacks stay paired; the election sits
// out one lease period and then wins again.
func TestCallbackExecutorRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var refuse atomic.Bool
		refuse.Store(true)
		exec := func(f func()) error {
			if refuse.Load() {
				return errors.New("pool full")
			}
			go f()
			return nil
		}
		var ev events
		var log termLog
		c := newClient(t, store, runtime.WithCallbackExecutor(exec), runtime.WithObserver(log.observer(0, &ev)))
		if _, err := c.StartElection("report", log.listener(0)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if log.count() != 0 {
			t.Fatal("a callback ran although the executor refused")
		}
		if n := len(ev.of(runtime.EventCallbackRejected)); n != 1 {
			t.Fatalf("%d rejections reported, want 1", n)
		}
		refuse.Store(false)
		time.Sleep(cfg.LeaseDuration - time.Millisecond)
		if log.count() != 0 {
			t.Fatal("re-elected during the one-lease cooldown")
		}
		time.Sleep(cfg.RenewInterval)
		if log.count() != 1 {
			t.Fatalf("%d terms after the cooldown, want 1", log.count())
		}
		closeClient(t, c)
		log.check(t)
	})
}

// H4: StepDown keeps the election started but out of the contest for the
// cooldown, counted from the moment it stepped down.
func TestStepDownCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var log termLog
		c := newClient(t, store, runtime.WithObserver(log.observer(0)))
		e, err := c.StartElection("report", log.listener(0))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		first := e.Term()
		const cooldown = 5 * time.Second
		if err := e.StepDown(context.Background(), cooldown); err != nil {
			t.Fatal(err)
		}
		if first.Reason() != runtime.ReasonSteppedDown {
			t.Fatalf("reason = %v, want stepped down", first.Reason())
		}
		if s := c.Snapshot(); s.Leases[0].Role != runtime.RoleCoolingDown || s.Leases[0].Cooldown != cooldown {
			t.Fatalf("snapshot = %+v, want cooling down for %v", s.Leases, cooldown)
		}
		time.Sleep(cooldown - time.Millisecond)
		if e.Term() != nil {
			t.Fatal("contended during the cooldown")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if e.Term() == nil || e.Term().Token() <= first.Token() {
			t.Fatalf("not re-elected with a higher token after the cooldown: %v", e.Term())
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := e.StepDown(context.Background(), 0); !errors.Is(err, runtime.ErrStopped) {
			t.Fatalf("StepDown after Stop = %v, want ErrStopped", err)
		}
		closeClient(t, c)
		log.check(t)
	})
}

// §13: RunWhileLeader runs fn once per term; when fn returns early the node
// steps down for RenewInterval so that another node takes over, and the
// error is reported. When ctx ends it stops with the hand-off order.
func TestRunWhileLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		var ev events
		a := newClient(t, store, runtime.WithObserver(&ev))
		b := newClient(t, store)
		runs := make(chan string, 10)
		ctxA, cancelA := context.WithCancel(context.Background())
		doneA := make(chan error)
		const cooldown = 10 * time.Second
		go func() {
			doneA <- a.RunWhileLeader(ctxA, "report", func(ctx context.Context, term *runtime.Term) error {
				runs <- "a"
				return errors.New("batch failed")
			}, runtime.WithTaskEndCooldown(cooldown))
		}()
		synctest.Wait()
		ctxB, cancelB := context.WithCancel(context.Background())
		doneB := make(chan error)
		go func() {
			doneB <- b.RunWhileLeader(ctxB, "report", func(ctx context.Context, term *runtime.Term) error {
				runs <- "b"
				<-ctx.Done()
				return context.Cause(ctx)
			})
		}()
		synctest.Wait()
		if got := []string{<-runs, <-runs}; got[0] != "a" || got[1] != "b" {
			t.Fatalf("runs = %v, want a then b (a stepped down after its task failed)", got)
		}
		if errs := ev.of(runtime.EventTaskFailed); len(errs) != 1 || errs[0].Err.Error() != "batch failed" {
			t.Fatalf("task failures reported: %+v", errs)
		}
		if s := a.Snapshot(); s.Leases[0].Role != runtime.RoleCoolingDown || s.Leases[0].Cooldown != cooldown {
			t.Fatalf("after its task failed, a is %v for %v; want cooling down for %v", s.Leases[0].Role, s.Leases[0].Cooldown, cooldown)
		}
		cancelB()
		if err := <-doneB; err != nil {
			t.Fatalf("RunWhileLeader returned %v after ctx ended, want nil", err)
		}
		synctest.Wait()
		if got := <-runs; got != "a" {
			t.Fatalf("after b stopped, %s ran, want a", got)
		}
		cancelA()
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
		closeClient(t, a)
		closeClient(t, b)
	})
}

// Locks: TryLock fails while another node holds the name; Lock waits until
// it is released; a lock's ctx ending gives up the wait and leaves nothing
// held; Unlock releases with the token (T5).
func TestLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a, b := newClient(t, store), newClient(t, store)
		ta, err := a.TryLock(context.Background(), "ledger")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryLock(context.Background(), "ledger"); !errors.Is(err, runtime.ErrLeaseHeld) {
			t.Fatalf("TryLock of a held lock = %v, want ErrLeaseHeld", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = b.Lock(ctx, "ledger")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with a deadline = %v, want DeadlineExceeded", err)
		}
		if s := b.Snapshot(); len(s.Leases) != 0 {
			t.Fatalf("an abandoned Lock left %+v", s.Leases)
		}
		got := make(chan *runtime.Term)
		go func() {
			tb, err := b.Lock(context.Background(), "ledger")
			if err != nil {
				t.Error(err)
			}
			got <- tb
		}()
		synctest.Wait()
		if err := a.Unlock(context.Background(), ta); err != nil {
			t.Fatal(err)
		}
		tb := <-got
		if ta.Valid() || !tb.Valid() || tb.Token() <= ta.Token() {
			t.Fatalf("after unlock: a %v valid=%v, b %v valid=%v", ta, ta.Valid(), tb, tb.Valid())
		}
		if err := a.Unlock(context.Background(), ta); err != nil {
			t.Fatalf("second Unlock = %v, want nil", err)
		}
		if err := a.Unlock(context.Background(), tb); !errors.Is(err, runtime.ErrNotOwner) {
			t.Fatalf("Unlock of another client's term = %v, want ErrNotOwner", err)
		}
		closeClient(t, a)
		closeClient(t, b)
		if tb.Valid() || tb.Reason() != runtime.ReasonStopped {
			t.Fatalf("Close left the lock valid=%v reason=%v", tb.Valid(), tb.Reason())
		}
	})
}

// L4, L8: a name is unique per client across elections and locks. T1: a
// name is 1–128 characters of [A-Za-z0-9._:-], and neither "." nor "..";
// anything else is rejected at the call with an error naming the bad input.
// A closed client is a clear error.
func TestMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		if _, err := c.StartElection("report", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartElection("report", nil); !errors.Is(err, runtime.ErrNameInUse) || !strings.Contains(err.Error(), `"report"`) {
			t.Fatalf("second StartElection = %v, want ErrNameInUse naming it", err)
		}
		if _, err := c.TryLock(context.Background(), "report"); !errors.Is(err, runtime.ErrNameInUse) {
			t.Fatalf("TryLock of an election's name = %v, want ErrNameInUse", err)
		}
		for _, name := range []string{"", strings.Repeat("x", 129), ".", "..", "a/b", "ünïcode", "a b", "a*"} {
			var ne *backends.NameError
			if _, err := c.StartElection(name, nil); !errors.Is(err, runtime.ErrInvalidName) || !errors.As(err, &ne) || ne.Name != name {
				t.Errorf("T1: StartElection(%q) = %v, want ErrInvalidName naming it", name, err)
			}
			if _, err := c.Lock(context.Background(), name); !errors.Is(err, runtime.ErrInvalidName) || !errors.As(err, &ne) || ne.Name != name {
				t.Errorf("T1: Lock(%q) = %v, want ErrInvalidName naming it", name, err)
			}
		}
		for _, name := range []string{"x", strings.Repeat("x", 128), "a..b", "...", "A-Z_a.z:0-9", "-"} {
			term, err := c.TryLock(context.Background(), name)
			if err != nil {
				t.Errorf("T1: TryLock(%q) = %v, want a valid name", name, err)
				continue
			}
			if err := c.Unlock(context.Background(), term); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.RunWhileLeader(context.Background(), "x", nil); err == nil {
			t.Error("RunWhileLeader with a nil function succeeded")
		}
		closeClient(t, c)
		if _, err := c.StartElection("other", nil); !errors.Is(err, runtime.ErrClosed) {
			t.Fatalf("StartElection on a closed client = %v, want ErrClosed", err)
		}
		if _, err := c.Lock(context.Background(), "other"); !errors.Is(err, runtime.ErrClosed) {
			t.Fatalf("Lock on a closed client = %v, want ErrClosed", err)
		}
		if err := c.Ready(context.Background()); !errors.Is(err, runtime.ErrClosed) {
			t.Fatalf("Ready on a closed client = %v, want ErrClosed", err)
		}
		if err := c.Close(context.Background()); err != nil {
			t.Fatalf("second Close = %v", err)
		}
	})
	if _, err := runtime.NewClient(nil, runtime.Config{}); err == nil {
		t.Error("NewClient(nil) succeeded")
	}
	bad := runtime.ConfigFor(time.Second)
	bad.Drift = 0.7
	if _, err := runtime.NewClient(memory.New(), bad); !errors.Is(err, runtime.ErrInvalidConfig) {
		t.Errorf("NewClient with Drift 0.7 = %v, want ErrInvalidConfig", err)
	}
}

// S2: a session id identifies one session instance and is never reused: 128
// random bits on the memory store (32 hex digits), a new one for every
// session any client opens — after an expiry, or a restart of the store that
// lost every record of the old ones.
func TestSessionIDsNeverReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(memory.WithMaxLease(cfg.LeaseDuration))
		const n = 3
		opened := make([]chan backends.SessionID, n)
		clients := make([]*runtime.Client, n)
		for i := range clients {
			opened[i] = make(chan backends.SessionID, 10)
			clients[i] = newClient(t, store, runtime.WithObserver(runtime.ObserverFunc(func(ev runtime.Event) {
				if ev.Kind == runtime.EventSessionOpened {
					opened[i] <- ev.Session
				}
			})))
		}
		seen := map[backends.SessionID]int{}
		next := func(why string) {
			t.Helper()
			for i, c := range clients {
				id := <-opened[i] // the client opened a session
				if len(id) != 32 || strings.Trim(string(id), "0123456789abcdef") != "" {
					t.Errorf("session id %q, want 128 random bits as 32 hex digits", id)
				}
				if j, dup := seen[id]; dup {
					t.Errorf("S2: session id %s opened by client %d and again by client %d (%s)", id, j, i, why)
				}
				seen[id] = i
				if got := c.Snapshot().Session; got != id {
					t.Errorf("client %d's snapshot shows session %s, want the one just opened, %s", i, got, id)
				}
			}
		}
		next("first")
		for range 5 {
			for _, c := range clients {
				store.Faults().ExpireSession(c.Snapshot().Session)
			}
			next("after an expiry")
		}
		store.Faults().Restart()
		next("after a restart of the store")
		for _, c := range clients {
			closeClient(t, c)
		}
		if len(seen) != 7*n {
			t.Errorf("%d distinct session ids, want %d", len(seen), 7*n)
		}
	})
}

// S4, H1: Close stops elections, then locks, with the hand-off order, then
// closes the session; the store holds nothing of the client afterwards.
func TestCloseReleasesEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		var order []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		if _, err := c.StartElection("report", runtime.ListenerFuncs{
			OnRevoked: func(context.Context, *runtime.Term, runtime.Reason) { note("election revoked") },
		}); err != nil {
			t.Fatal(err)
		}
		lock, err := c.Lock(context.Background(), "ledger")
		if err != nil {
			t.Fatal(err)
		}
		go func() { <-lock.Done(); note("lock ended") }()
		synctest.Wait()
		other := newClient(t, store)
		defer closeClient(t, other)
		closeClient(t, c)
		synctest.Wait()
		if len(order) != 2 || order[0] != "election revoked" || order[1] != "lock ended" {
			t.Fatalf("close order = %v, want the election before the lock", order)
		}
		for _, name := range []string{"report", "ledger"} {
			tm, err := other.TryLock(context.Background(), name)
			if err != nil {
				t.Fatalf("after Close, %s is still held: %v", name, err)
			}
			if err := other.Unlock(context.Background(), tm); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// S1, §15: the amnesia guard. A store restarted with all state lost ends the
// old sessions (SessionExpired), grants nothing until its maximum lease has
// passed, and keeps tokens increasing; no two nodes ever hold valid terms.
func TestStoreRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(memory.WithMaxLease(cfg.LeaseDuration))
		var log termLog
		a := newClient(t, store, runtime.WithObserver(log.observer(0)))
		b := newClient(t, store, runtime.WithObserver(log.observer(1)))
		if _, err := a.StartElection("report", log.listener(0)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := b.StartElection("report", log.listener(1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		restart := time.Now()
		store.Faults().Restart()
		time.Sleep(3 * cfg.LeaseDuration)
		closeClient(t, a)
		closeClient(t, b)
		log.check(t)
		terms := log.sorted()
		if len(terms) < 2 {
			t.Fatalf("%d terms, want a term before and after the restart", len(terms))
		}
		if r := terms[0].reason; r != runtime.ReasonSessionExpired {
			t.Errorf("old term ended with %v, want session expired", r)
		}
		if next := terms[1].start; next.Sub(restart) < cfg.LeaseDuration {
			t.Errorf("a lease was granted %v after the restart, before the guard's %v", next.Sub(restart), cfg.LeaseDuration)
		}
	})
}

// Snapshot shows the session state, id, deadline and the terms held (S5).
func TestSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		if err := c.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		term, err := c.Lock(context.Background(), "ledger")
		if err != nil {
			t.Fatal(err)
		}
		s := c.Snapshot()
		if s.State != runtime.SessionLive || s.Session == "" || s.RenewPeriod != cfg.RenewInterval || s.Remaining <= 0 {
			t.Fatalf("snapshot = %+v", s)
		}
		if len(s.Leases) != 1 || s.Leases[0] != (runtime.LeaseStatus{Name: "ledger", Lock: true, Role: runtime.RoleLeader,
			Token: term.Token(), Remaining: term.Remaining()}) {
			t.Fatalf("leases = %+v", s.Leases)
		}
		closeClient(t, c)
		if s := c.Snapshot(); s.State != runtime.SessionClosed || len(s.Leases) != 0 {
			t.Fatalf("after close: %+v", s)
		}
	})
}

// Ready reports the backend's last error when no session opens in time.
func TestReadyUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		store.Faults().SetReachability(memory.Refuse)
		c := newClient(t, store)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := c.Ready(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), backends.ErrUnavailable.Error()) {
			t.Fatalf("Ready = %v, want a deadline error naming the backend's failure", err)
		}
		closeClient(t, c)
	})
}

// H1: Close finishes as soon as the hand-off allows; it never waits for a
// renewal or retry timer (here: an election cooling down, then a candidate).
func TestCloseDoesNotWaitForTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		e, err := c.StartElection("audit", nil)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := e.StepDown(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		closeClient(t, c)
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close with an election cooling down took %v of virtual time, want none", d)
		}

		holder := newClient(t, store)
		defer closeClient(t, holder)
		if _, err := holder.Lock(context.Background(), "report"); err != nil {
			t.Fatal(err)
		}
		c = newClient(t, store)
		if _, err := c.StartElection("report", nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start = time.Now()
		closeClient(t, c)
		if d := time.Since(start); d != 0 {
			t.Fatalf("Close with a candidate took %v of virtual time, want none", d)
		}
	})
}

// L2: an election's callbacks run one at a time, in order, with no internal
// lock held: a slow callback that calls back into the client does not block
// the engine, and the next callback waits for it.
func TestCallbacksSerialAndUnlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		var mu sync.Mutex
		var calls []string
		inside := 0
		record := func(what string, term *runtime.Term) {
			mu.Lock()
			inside++
			if inside > 1 {
				t.Errorf("L2: %s of %v overlaps another callback", what, term)
			}
			calls = append(calls, what)
			mu.Unlock()
			_ = c.Snapshot()            // no internal lock is held
			time.Sleep(time.Second / 4) // a slow callback
			mu.Lock()
			inside--
			mu.Unlock()
		}
		e, err := c.StartElection("report", runtime.ListenerFuncs{
			OnElected: func(_ context.Context, t *runtime.Term) { record("elected", t) },
			OnRevoked: func(_ context.Context, t *runtime.Term, _ runtime.Reason) { record("revoked", t) },
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			synctest.Wait()
			// Step down while the elected callback may still run; the engine
			// does not wait for it, and Renewals go on meanwhile.
			if err := e.StepDown(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		closeClient(t, c)
		mu.Lock()
		defer mu.Unlock()
		if len(calls) < 8 {
			t.Fatalf("only %d callbacks: %v", len(calls), calls)
		}
		for i, call := range calls {
			want := "elected"
			if i%2 == 1 {
				want = "revoked"
			}
			if call != want {
				t.Fatalf("L1, L2: callbacks out of order: %v", calls)
			}
		}
	})
}
