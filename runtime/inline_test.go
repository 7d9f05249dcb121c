package runtime_test

import (
	"context"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// callRecorder wraps a store and records, for each Acquire and Release,
// whether it ran beneath a call of the named API function on the same
// goroutine, and the deadline of its context against the time it was made.
type callRecorder struct {
	backends.Backend
	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	op       string
	name     string
	inCaller bool          // the stack shows runtime.(*Client).Lock or Unlock
	timeout  time.Duration // the context's deadline, less the time of the call
	stack    string        // the goroutine's stack when the call was made
}

// beneath reports whether the call was made beneath a call of fn (a
// function's full name, as a stack shows it) on the same goroutine.
func (c recordedCall) beneath(fn string) bool { return strings.Contains(c.stack, fn+"(") }

func (r *callRecorder) record(ctx context.Context, op, name string) {
	stack := string(debug.Stack())
	dl, _ := ctx.Deadline()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, recordedCall{op: op, name: name, timeout: time.Until(dl), stack: stack,
		inCaller: strings.Contains(stack, "runtime.(*Client).Lock(") || strings.Contains(stack, "runtime.(*Client).Unlock(")})
}

func (r *callRecorder) take() []recordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

func (r *callRecorder) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, r.Backend, opts, func(s backends.Session) backends.Session { return &recordedSession{Session: s, r: r} })
}

type recordedSession struct {
	backends.Session
	r *callRecorder
}

// Watch passes the store's release notifications on.
func (s *recordedSession) Watch(name string, fn func()) (stop func()) {
	return s.Session.(backends.Notifier).Watch(name, fn)
}

func (s *recordedSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	s.r.record(ctx, "acquire", name)
	return s.Session.Acquire(ctx, name)
}

func (s *recordedSession) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	s.r.record(ctx, "release", name)
	return s.Session.Release(ctx, name, token)
}

// callerContext is a caller's context, and whether a call it waits for is
// made on the caller's goroutine.
type callerContext struct {
	name     string
	ctx      context.Context
	inCaller bool
}

// callerContexts returns the contexts an API caller may pass (with t's
// bubble's clock): one that never ends, deadlines after and before a call's
// own, and one that may be cancelled at any moment.
func callerContexts(t *testing.T) []callerContext {
	long, cancelLong := context.WithTimeout(context.Background(), time.Hour)
	t.Cleanup(cancelLong)
	short, cancelShort := context.WithTimeout(context.Background(), cfg.RenewInterval/2)
	t.Cleanup(cancelShort)
	cancellable, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return []callerContext{
		{"background", context.Background(), true},
		{"a deadline after the call's", long, true},
		{"a deadline before the call's", short, false},
		{"cancellable without a deadline", cancellable, false},
	}
}

// D2: a Lock or Unlock whose context cannot end before its call's deadline
// makes the acquire or release on its own goroutine; one whose context may
// end sooner (a shorter deadline, or a cancellation without one) leaves it
// to a goroutine of the client, so that it can return when its context
// ends. Either way the call's deadline is one renewal period from when it
// was sent.
func TestCallerMakesItsOwnCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &callRecorder{Backend: memory.New()}
		c := newClient(t, r)
		defer closeClient(t, c)
		if err := c.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, tc := range callerContexts(t) {
			term, err := c.Lock(tc.ctx, "job")
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if err := c.Unlock(tc.ctx, term); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			calls := r.take()
			if len(calls) != 2 {
				t.Fatalf("%s: %d calls %+v; want an acquire and a release", tc.name, len(calls), calls)
			}
			for _, call := range calls {
				if call.inCaller != tc.inCaller {
					t.Errorf("%s: the %s ran on the caller's goroutine: %v; want %v", tc.name, call.op, call.inCaller, tc.inCaller)
				}
				if call.timeout != cfg.RenewInterval {
					t.Errorf("%s: the %s's context ends %v after it was sent; want the renewal period, %v", tc.name, call.op, call.timeout, cfg.RenewInterval)
				}
			}
		}
	})
}

// D2, as for Unlock: an election's Stop or StepDown whose context cannot end
// before the release's deadline makes the release on its own goroutine;
// one whose context may end sooner leaves it to a goroutine of the client.
func TestStopMakesItsOwnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &callRecorder{Backend: memory.New()}
		c := newClient(t, r)
		defer closeClient(t, c)
		for _, tc := range callerContexts(t) {
			for _, stepDown := range []bool{false, true} {
				e, err := c.StartElection("job", nil)
				if err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if e.Term() == nil {
					t.Fatalf("%s: not elected", tc.name)
				}
				r.take()
				op := "runtime.(*Election).Stop"
				if stepDown {
					op = "runtime.(*Election).StepDown"
					err = e.StepDown(tc.ctx, time.Hour)
					if err == nil {
						err = e.Stop(context.Background())
					}
				} else {
					err = e.Stop(tc.ctx)
				}
				if err != nil {
					t.Fatalf("%s, %s: %v", op, tc.name, err)
				}
				calls := r.take()
				if len(calls) != 1 || calls[0].op != "release" {
					t.Fatalf("%s, %s: calls %+v; want one release", op, tc.name, calls)
				}
				if got := calls[0].beneath(op); got != tc.inCaller {
					t.Errorf("%s, %s: the release ran on the caller's goroutine: %v; want %v", op, tc.name, got, tc.inCaller)
				}
				if calls[0].timeout != cfg.RenewInterval {
					t.Errorf("%s, %s: the release's context ends %v after it was sent; want the renewal period, %v",
						op, tc.name, calls[0].timeout, cfg.RenewInterval)
				}
			}
		}
	})
}

// A graceful hand-off between two clients: the candidate's acquire, prompted
// by the release notification, is made by the goroutine that ran the
// driver's loop and took the notification — no goroutine is started or woken
// for it (loop.go) — at every hand-off, the loop's two goroutines taking
// turns.
func TestNotedAcquireMadeByTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		recorders := [2]*callRecorder{{Backend: store}, {Backend: store}}
		var clients [2]*runtime.Client
		var elections [2]*runtime.Election
		for i := range clients {
			clients[i] = newClient(t, recorders[i])
			defer closeClient(t, clients[i])
			e, err := clients[i].StartElection("job", nil)
			if err != nil {
				t.Fatal(err)
			}
			elections[i] = e
			synctest.Wait()
		}
		leader := 0
		if elections[1].Term() != nil {
			leader = 1
		}
		for handOff := range 6 {
			other := 1 - leader
			recorders[other].take()
			if err := elections[leader].Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if elections[other].Term() == nil {
				t.Fatalf("hand-off %d: the candidate was not elected at the release", handOff)
			}
			calls := recorders[other].take()
			if len(calls) != 1 || calls[0].op != "acquire" {
				t.Fatalf("hand-off %d: the candidate's calls %+v; want one acquire", handOff, calls)
			}
			if !calls[0].beneath("runtime.(*driver).onNote") || !calls[0].beneath("runtime.(*driver).runLoop") {
				t.Errorf("hand-off %d: the acquire was not made by the loop's goroutine:\n%s", handOff, calls[0].stack)
			}
			e, err := clients[leader].StartElection("job", nil)
			if err != nil {
				t.Fatal(err)
			}
			elections[leader] = e
			synctest.Wait()
			leader = other
		}
	})
}

// oneNameGate holds every Acquire of one name, once armed, until its gate
// opens (or the call's context ends), and says when one is held.
type oneNameGate struct {
	backends.Backend
	name  string
	armed atomic.Bool   // set to hold them
	held  chan struct{} // receives when an Acquire of name is held
	gate  chan struct{} // closed to let them through
}

func (g *oneNameGate) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, g.Backend, opts, func(s backends.Session) backends.Session { return &oneNameGateSession{Session: s, g: g} })
}

type oneNameGateSession struct {
	backends.Session
	g *oneNameGate
}

func (s *oneNameGateSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	if name == s.g.name && s.g.armed.Load() {
		select {
		case s.g.held <- struct{}{}:
		default:
		}
		select {
		case <-s.g.gate:
		case <-ctx.Done():
			return backends.Grant{}, ctx.Err()
		}
	}
	return s.Session.Acquire(ctx, name)
}

func (s *oneNameGateSession) Watch(name string, fn func()) (stop func()) {
	return s.Session.(backends.Notifier).Watch(name, fn)
}

// While the goroutine that took a release notification makes the acquire
// it prompted, the other runs the driver's loop: a store that holds that
// acquire holds up nothing else — the next release notification is taken
// and its lease acquired (on a goroutine of its own, one noted acquire
// being in flight), and the session renews.
func TestLoopRunsWhileNotedAcquireHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		gated := &oneNameGate{Backend: store, name: "a", held: make(chan struct{}, 1), gate: make(chan struct{})}
		var seen events
		holder, candidate := newClient(t, store), newClient(t, gated, runtime.WithObserver(&seen))
		defer closeClient(t, holder)
		defer closeClient(t, candidate)
		var held, wanted [2]*runtime.Election
		for i, name := range []string{"a", "b"} {
			var err error
			if held[i], err = holder.StartElection(name, nil); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if wanted[i], err = candidate.StartElection(name, nil); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if held[0].Term() == nil || held[1].Term() == nil {
			t.Fatal("the holder does not hold a and b")
		}
		gated.armed.Store(true)           // the first attempts went through: hold the next
		time.Sleep(cfg.RenewInterval / 2) // the session renews while the acquire of a is held
		if err := held[0].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-gated.held:
		default:
			t.Fatal("the candidate made no acquire of a at its release")
		}
		renewals := len(seen.at(runtime.EventSessionRenewed))
		if err := held[1].Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if wanted[1].Term() == nil {
			t.Fatal("the candidate was not elected for b while its acquire of a was held")
		}
		time.Sleep(cfg.RenewInterval * 9 / 10) // within the held acquire's deadline
		synctest.Wait()
		if wanted[0].Term() != nil {
			t.Fatal("the candidate was elected for a through a held acquire")
		}
		if got := len(seen.at(runtime.EventSessionRenewed)); got <= renewals {
			t.Errorf("no renewal in the renewal period the acquire of a was held (%d before, %d after)", renewals, got)
		}
		close(gated.gate)
		synctest.Wait()
		if wanted[0].Term() == nil {
			t.Fatal("the candidate was not elected for a once the store let its acquire through")
		}
	})
}
