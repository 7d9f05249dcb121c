package runtime_test

import (
	"context"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
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
	inCaller bool          // the stack shows runtime.(*Client).Lock or Unlock
	timeout  time.Duration // the context's deadline, less the time of the call
}

func (r *callRecorder) record(ctx context.Context, op string) {
	stack := string(debug.Stack())
	dl, _ := ctx.Deadline()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, recordedCall{op: op, timeout: time.Until(dl),
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

func (s *recordedSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	s.r.record(ctx, "acquire")
	return s.Session.Acquire(ctx, name)
}

func (s *recordedSession) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	s.r.record(ctx, "release")
	return s.Session.Release(ctx, name, token)
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
		long, cancelLong := context.WithTimeout(context.Background(), time.Hour)
		defer cancelLong()
		short, cancelShort := context.WithTimeout(context.Background(), cfg.RenewInterval/2)
		defer cancelShort()
		cancellable, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, tc := range []struct {
			name     string
			ctx      context.Context
			inCaller bool
		}{
			{"background", context.Background(), true},
			{"a deadline after the call's", long, true},
			{"a deadline before the call's", short, false},
			{"cancellable without a deadline", cancellable, false},
		} {
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
