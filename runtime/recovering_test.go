package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/runtime"
)

// §15: a store that lost its state refuses grants for its maximum lease;
// the client says so — one warning in its log, saying for how long and how
// to shorten it, and Snapshot.Recovering until the guard ends — where it
// used to log, at DEBUG only, that another session held the lease.
func TestStoreRecoveringVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxLease = 20 * time.Second
		store := memory.New(memory.WithMaxLease(maxLease))
		var logs logtext.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		var events []runtime.Event
		var mu sync.Mutex
		c := newClient(t, store, runtime.WithLogger(logger), runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
			if e.Kind == runtime.EventStoreRecovering {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		})))
		defer closeClient(t, c)
		e, err := c.StartElection("report", nil)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if e.Term() == nil || c.Snapshot().Recovering != nil {
			t.Fatalf("before the loss: term %v, recovering %+v; want a term and no guard", e.Term(), c.Snapshot().Recovering)
		}

		lost := time.Now()
		store.Faults().Restart()
		time.Sleep(2 * cfg.LeaseDuration) // the old session ends; a new one is refused
		synctest.Wait()
		snap := c.Snapshot()
		r := snap.Recovering
		if r == nil {
			t.Fatalf("Snapshot.Recovering is nil %v after the store lost its state", time.Since(lost))
		}
		wantUntil := lost.Add(maxLease)
		if d := r.Until.Sub(wantUntil); d < -time.Second || d > time.Second || r.MaxLease != maxLease ||
			r.Remaining != time.Until(r.Until) || !errors.Is(r.Err, backends.ErrRecovering) || r.Why == "" {
			t.Errorf("Snapshot.Recovering = %+v; want until %v (the loss plus MaxLease %v), the refusal and why", r, wantUntil, maxLease)
		}

		time.Sleep(maxLease) // past the guard: a grant ends it
		synctest.Wait()
		if e.Term() == nil || c.Snapshot().Recovering != nil {
			t.Errorf("after the guard: term %v, recovering %+v; want a term and no guard", e.Term(), c.Snapshot().Recovering)
		}
		mu.Lock()
		n := len(events)
		mu.Unlock()
		out := logs.String()
		if n != 1 || strings.Count(out, "level=WARN msg=\"simba: no lease is granted for") != 1 ||
			!strings.Contains(out, "simba_max_lease") || !strings.Contains(out, "until=") {
			t.Errorf("%d recovering events, log:\n%s\nwant one warning saying for how long, until when and how to shorten it", n, out)
		}
	})
}

// The guard reported by a Lock's own call (made on the caller's goroutine)
// shows the same way: Lock waits, Snapshot says why.
func TestStoreRecoveringLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(memory.WithMaxLease(10 * time.Second))
		c := newClient(t, store)
		defer closeClient(t, c)
		if err := c.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		store.Faults().Restart()
		time.Sleep(2 * cfg.LeaseDuration)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := c.TryLock(ctx, "lock")
		if !errors.Is(err, backends.ErrRecovering) {
			t.Errorf("TryLock during the guard = %v; want ErrRecovering", err)
		}
		if r := c.Snapshot().Recovering; r == nil || r.Remaining <= 0 {
			t.Errorf("Snapshot.Recovering = %+v after a refused TryLock; want the guard", r)
		}
	})
}

// refusing is a store whose acquires are refused with an error that only
// wraps backends.ErrRecovering, without saying how long, until a time (as
// a backend without a *RecoveringError does).
type refusing struct {
	backends.Backend
	until time.Time
}

type refusingSession struct {
	backends.Session
	until time.Time
}

func (r refusing) OpenSession(ctx context.Context, o backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	s, rn, err := r.Backend.OpenSession(ctx, o)
	if err != nil {
		return nil, rn, err
	}
	return refusingSession{s, r.until}, rn, nil
}

func (s refusingSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	if time.Now().Before(s.until) {
		return backends.Grant{}, fmt.Errorf("store: acquire %q: no grants for a while: %w (%w)", name, backends.ErrRecovering, backends.ErrLeaseHeld)
	}
	return s.Session.Acquire(ctx, name)
}

// A store that refuses grants while it recovers without saying until when
// still shows: one warning, and Snapshot.Recovering without an end, until a
// grant.
func TestStoreRecoveringUnknownEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logtext.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c := newClient(t, refusing{memory.New(), time.Now().Add(20 * time.Second)}, runtime.WithLogger(logger))
		defer closeClient(t, c)
		e, err := c.StartElection("report", nil)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		r := c.Snapshot().Recovering
		if r == nil || !r.Until.IsZero() || r.Remaining != 0 || !errors.Is(r.Err, backends.ErrRecovering) {
			t.Errorf("Snapshot.Recovering = %+v; want the refusal, without an end", r)
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if e.Term() == nil || c.Snapshot().Recovering != nil {
			t.Errorf("after the refusals: term %v, recovering %+v; want a term and none", e.Term(), c.Snapshot().Recovering)
		}
		if n := strings.Count(logs.String(), `msg="simba: no lease is granted for now`); n != 1 {
			t.Errorf("warned %d times:\n%s\nwant once", n, logs.String())
		}
	})
}
