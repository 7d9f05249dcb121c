package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/runtime"
)

// Misuse gets an error, on the caller's goroutine, naming the call; no
// goroutine of the client's panics (a panic there ends the test binary) and
// none outlives Close (synctest.Test fails on a goroutine left blocked in
// its bubble, and goleak checks the whole package at exit).
func TestMisuseNilArguments(t *testing.T) {
	// A typed-nil observer is none: it would panic at every event.
	var nilObserver *countingObserver
	var logs logtext.Buffer
	c, err := runtime.NewClient(memory.New(), cfg, runtime.WithObserver(nilObserver),
		runtime.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))))
	if err != nil {
		t.Fatalf("NewClient with a typed-nil observer = %v; want it taken as none", err)
	}
	if _, err := c.Lock(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); out != "" {
		t.Errorf("a client with a typed-nil observer logged:\n%s", out)
	}
	var nilStore *memory.Store
	for _, b := range []backends.Backend{nil, nilStore} {
		if c, err := runtime.NewClient(b, cfg); !errors.Is(err, runtime.ErrNilArgument) || c != nil ||
			!strings.Contains(err.Error(), "nil backend") {
			t.Errorf("NewClient(%#v) = %v, %v; want an error matching ErrNilArgument naming the backend", b, c, err)
		}
	}

	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		var nilCtx context.Context // a nil context, as a caller might pass one
		task := func(context.Context, *runtime.Term) error { return nil }
		part := func(context.Context, *runtime.Term, int) error { return nil }
		e, err := c.StartElection("election", nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.StartSchedule("schedule", runtime.Schedule{Rate: time.Second}, task)
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.StartGroup("group", 2, runtime.Schedule{}, part)
		if err != nil {
			t.Fatal(err)
		}
		term, err := c.Lock(context.Background(), "lock")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if e.Term() == nil {
			t.Fatal("the election has no term on a store of its own")
		}

		check := func(call string, err error, want string) {
			t.Helper()
			if !errors.Is(err, runtime.ErrNilArgument) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s = %v; want an error matching ErrNilArgument containing %q", call, err, want)
			}
		}
		_, err = c.WatchHolder(nilCtx, "election")
		check("WatchHolder(nil ctx)", err, "watch holder: nil context")
		_, err = c.Holder(nilCtx, "election")
		check("Holder(nil ctx)", err, "holder: nil context")
		_, err = c.Lock(nilCtx, "other")
		check("Lock(nil ctx)", err, "lock: nil context")
		_, err = c.TryLock(nilCtx, "other")
		check("TryLock(nil ctx)", err, "lock: nil context")
		check("Unlock(nil ctx)", c.Unlock(nilCtx, term), "unlock: nil context")
		check("Unlock(nil term)", c.Unlock(context.Background(), nil), "nil term")
		check("Ready(nil ctx)", c.Ready(nilCtx), "ready: nil context")
		check("Election.Stop(nil ctx)", e.Stop(nilCtx), `stop "election": nil context`)
		check("Election.StepDown(nil ctx)", e.StepDown(nilCtx, time.Second), `step down "election": nil context`)
		check("ScheduledTask.Stop(nil ctx)", s.Stop(nilCtx), `stop "schedule": nil context`)
		check("Group.Stop(nil ctx)", g.Stop(nilCtx), `stop group "group": nil context`)
		check("Group.StepDown(nil ctx)", g.StepDown(nilCtx, time.Second), `step down group "group": nil context`)
		check("RunWhileLeader(nil ctx)", c.RunWhileLeader(nilCtx, "run", task), "RunWhileLeader: nil context")
		check("RunWhileLeader(nil fn)", c.RunWhileLeader(context.Background(), "run", nil), "nil function")
		_, err = c.StartSchedule("other", runtime.Schedule{Rate: time.Second}, nil)
		check("StartSchedule(nil fn)", err, "nil function")
		_, err = c.StartGroup("other", 2, runtime.Schedule{}, nil)
		check("StartGroup(nil fn)", err, "nil function")
		sem, err := c.Semaphore("pool", 2)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sem.Acquire(nilCtx)
		check("Semaphore.Acquire(nil ctx)", err, "nil context")
		check("Semaphore.Release(nil term)", sem.Release(context.Background(), nil), "nil term")
		check("Election.HandOver(nil ctx)", e.HandOver(nilCtx, "node-2"), `hand over "election": nil context`)
		check("Close(nil ctx)", c.Close(nilCtx), "close: nil context")

		// None of them changed anything: the lock is still held, the
		// election still runs, and the client closes as usual.
		if !term.Valid() {
			t.Error("the lock's term ended after misused calls")
		}
		if e.Term() == nil {
			t.Error("the election lost its term after misused calls")
		}
		closeClient(t, c)
	})
}

// StartAll refuses a nil start function and a start function that returns
// a nil Registration without an error (a typed nil included), and stops
// what it had started, as for any failed start.
func TestStartAllNilRegistrations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		startReport := func() (runtime.Registration, error) { return c.StartElection("report", nil) }
		var nilElection *runtime.Election
		for _, tc := range []struct {
			bad  func() (runtime.Registration, error)
			want string
		}{
			{nil, "start function 2 of 2 is nil"},
			{func() (runtime.Registration, error) { return nil, nil }, "start function 2 of 2 returned a nil Registration"},
			{func() (runtime.Registration, error) { return nilElection, nil }, "start function 2 of 2 returned a nil Registration (*runtime.Election)"},
		} {
			regs, err := runtime.StartAll(startReport, tc.bad)
			if !errors.Is(err, runtime.ErrNilArgument) || !strings.Contains(err.Error(), tc.want) || regs != nil {
				t.Errorf("StartAll = %v, %v; want an error matching ErrNilArgument containing %q", regs, err, tc.want)
			}
			// The election StartAll started was stopped: its name is free.
			e, err := c.StartElection("report", nil)
			if err != nil {
				t.Fatalf("the election a failed StartAll started is still running: %v", err)
			}
			if err := e.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Every call on a closed client returns an error matching ErrClosed, and
// starting a name twice one matching ErrNameInUse, whatever started it.
func TestMisuseClosedClientAndNameTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		task := func(context.Context, *runtime.Term) error { return nil }
		part := func(context.Context, *runtime.Term, int) error { return nil }
		ctx := context.Background()
		e, err := c.StartElection("election", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartSchedule("schedule", runtime.Schedule{Rate: time.Second}, task); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartGroup("group", 2, runtime.Schedule{}, part); err != nil {
			t.Fatal(err)
		}
		term, err := c.Lock(ctx, "lock")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"election", "schedule", "lock"} {
			_, err1 := c.StartElection(name, nil)
			_, err2 := c.StartSchedule(name, runtime.Schedule{Rate: time.Second}, task)
			_, err3 := c.TryLock(ctx, name)
			for i, err := range []error{err1, err2, err3} {
				if !errors.Is(err, runtime.ErrNameInUse) && !(name == "lock" && i == 2 && errors.Is(err, runtime.ErrLeaseHeld)) {
					t.Errorf("starting %q a second time (call %d) = %v; want ErrNameInUse", name, i+1, err)
				}
			}
		}
		if _, err := c.StartGroup("group", 2, runtime.Schedule{}, part); !errors.Is(err, runtime.ErrNameInUse) {
			t.Errorf("StartGroup of a started group = %v; want ErrNameInUse", err)
		}

		closeClient(t, c)
		closed := map[string]error{}
		_, closed["StartElection"] = c.StartElection("x", nil)
		_, closed["StartSchedule"] = c.StartSchedule("x", runtime.Schedule{Rate: time.Second}, task)
		_, closed["StartGroup"] = c.StartGroup("x", 2, runtime.Schedule{}, part)
		_, closed["Lock"] = c.Lock(ctx, "x")
		_, closed["TryLock"] = c.TryLock(ctx, "x")
		_, closed["Holder"] = c.Holder(ctx, "x")
		_, closed["WatchHolder"] = c.WatchHolder(ctx, "x")
		closed["Ready"] = c.Ready(ctx)
		closed["RunWhileLeader"] = c.RunWhileLeader(ctx, "x", task)
		closed["StepDown"] = e.StepDown(ctx, time.Second)
		for call, err := range closed {
			if !errors.Is(err, runtime.ErrClosed) {
				t.Errorf("%s on a closed client = %v; want an error matching ErrClosed", call, err)
			}
		}
		// Calls that end what Close ended succeed: nothing is left to do.
		if err := c.Unlock(ctx, term); err != nil {
			t.Errorf("Unlock of a term Close ended = %v; want nil", err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Errorf("Stop of an election Close ended = %v; want nil", err)
		}
		if err := c.Close(ctx); err != nil {
			t.Errorf("a second Close = %v; want nil", err)
		}
	})
}

// panicky is a backend whose sessions panic in Acquire: the panic stays on
// the goroutine of the call, where the client recovers it and fails the
// call, and the client goes on and closes.
type panicky struct{ backends.Backend }

type panickySession struct{ backends.Session }

func (p panicky) OpenSession(ctx context.Context, o backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	s, r, err := p.Backend.OpenSession(ctx, o)
	if err != nil {
		return nil, r, err
	}
	return panickySession{s}, r, nil
}

func (panickySession) Acquire(context.Context, string) (backends.Grant, error) {
	panic("acquire exploded")
}

func TestBackendPanicIsAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events atomic.Int32
		var lastErr atomic.Value
		c := newClient(t, panicky{memory.New()}, runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
			if e.Kind == runtime.EventBackendError && e.Err != nil {
				events.Add(1)
				lastErr.Store(e.Err)
			}
		})))
		if _, err := c.StartElection("report", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		err, _ := lastErr.Load().(error)
		var pe *runtime.PanicError
		if events.Load() == 0 || !errors.As(err, &pe) || !strings.Contains(err.Error(), "acquire exploded") {
			t.Errorf("backend errors observed: %d, last %v; want the acquire's panic as a *PanicError", events.Load(), err)
		}
		closeClient(t, c)
	})
}

type countingObserver struct{ n int }

func (o *countingObserver) Observe(runtime.Event) { o.n++ }
