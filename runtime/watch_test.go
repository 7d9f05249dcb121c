package runtime_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// watchCounter wraps a store and counts what a node costs it per renewal
// period: the calls the store counts, and the release watches alive at each
// keep-alive. A watch is free on the memory store, but not on the others: a
// Redis or PostgreSQL subscription that a watch keeps alive is pinged every
// few seconds, and a ZooKeeper exists-watch is one request to set and one
// more after each event. So the requests a renewal period costs are the
// keep-alive plus one per watch then alive.
type watchCounter struct {
	backends.Backend
	keepAlives atomic.Int64 // KeepAlive calls
	watchedAt  atomic.Int64 // watches alive at those calls, summed
	started    atomic.Int64 // Watch calls
	live       atomic.Int64 // watches started and not stopped
}

func (w *watchCounter) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, w.Backend, opts, func(s backends.Session) backends.Session { return &watchCountedSession{Session: s, w: w} })
}

type watchCountedSession struct {
	backends.Session
	w *watchCounter
}

func (s *watchCountedSession) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	s.w.keepAlives.Add(1)
	s.w.watchedAt.Add(s.w.live.Load())
	return s.Session.KeepAlive(ctx)
}

func (s *watchCountedSession) Watch(name string, fn func()) (stop func()) {
	s.w.started.Add(1)
	s.w.live.Add(1)
	inner := s.Session.(backends.Notifier).Watch(name, fn)
	var once sync.Once
	return func() {
		once.Do(func() { s.w.live.Add(-1) })
		inner()
	}
}

// S1, A1: a node that holds its leases and waits for none makes exactly one
// request per renewal period — its keep-alive — however it churns locks
// meanwhile (each Lock and Unlock is its own acquire and release, and
// nothing more): it keeps no release watch alive, since only a refused
// candidate watches. A candidate that is refused does watch, and takes over
// at the release, not at its next attempt; once it holds the lease its
// watch stops.
func TestHolderRequestsPerRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		w := &watchCounter{Backend: store}
		c := newClient(t, w)
		defer closeClient(t, c)
		ctx := context.Background()
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		var elections []*runtime.Election
		for i := range 3 {
			e, err := c.StartElection(fmt.Sprintf("held-%d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			elections = append(elections, e)
		}
		// Settle: the acquisitions' replies may overtake each other, and
		// then the next keep-alive reads the list once (S1); the churn
		// below keeps half a period off the keep-alives.
		time.Sleep(2*cfg.RenewInterval + cfg.RenewInterval/2)
		for _, e := range elections {
			if e.Term() == nil {
				t.Fatalf("%s is not held", e.Name())
			}
		}

		store.Faults().ResetCalls()
		w.keepAlives.Store(0)
		w.watchedAt.Store(0)
		const periods = 12
		pairs := 0
		start := time.Now()
		for time.Since(start) < periods*cfg.RenewInterval {
			term, err := c.Lock(ctx, fmt.Sprintf("job-%d", pairs%5))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(cfg.RenewInterval / 7)
			if err := c.Unlock(ctx, term); err != nil {
				t.Fatal(err)
			}
			pairs++
			time.Sleep(cfg.RenewInterval / 11)
		}
		calls := store.Faults().Calls()
		renewals := w.keepAlives.Load()
		if renewals < periods-1 || renewals > periods+1 {
			t.Fatalf("%d keep-alives in %d renewal periods", renewals, periods)
		}
		if calls.Acquire != int64(pairs) || calls.Release != int64(pairs) {
			t.Errorf("%d Lock+Unlock pairs made %d acquires and %d releases; want one of each per pair", pairs, calls.Acquire, calls.Release)
		}
		requests := calls.Total() - calls.Acquire - calls.Release + w.watchedAt.Load()
		if perRenewal := float64(requests) / float64(renewals); perRenewal != 1 {
			t.Errorf("%.2f requests per renewal (%d keep-alives, calls %+v, %d watches alive at keep-alives, %d watches started); want exactly 1.00",
				perRenewal, renewals, calls, w.watchedAt.Load(), w.started.Load())
		}
		if n := w.started.Load(); n != 0 {
			t.Errorf("a node that was never refused started %d release watches; want none", n)
		}

		// A refused candidate watches, and takes over at the release.
		w2 := &watchCounter{Backend: store}
		other := newClient(t, w2)
		defer closeClient(t, other)
		if err := other.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		won := make(chan *runtime.Term, 1)
		go func() {
			term, err := other.Lock(ctx, "held-0")
			if err != nil {
				t.Error(err)
			}
			won <- term
		}()
		time.Sleep(cfg.RenewInterval / 10)
		synctest.Wait()
		if n := w2.live.Load(); n != 1 {
			t.Fatalf("a refused candidate has %d release watches; want 1", n)
		}
		stopped := time.Now()
		if err := elections[0].Stop(ctx); err != nil {
			t.Fatal(err)
		}
		term := <-won
		if d := time.Since(stopped); d > cfg.RenewInterval/10 {
			t.Errorf("the candidate took over %v after the release; want at once (the watch reports it)", d)
		}
		synctest.Wait()
		if n := w2.live.Load(); n != 0 {
			t.Errorf("the new holder keeps %d release watches; want none", n)
		}
		if err := other.Unlock(ctx, term); err != nil {
			t.Fatal(err)
		}
	})
}

// notifyCapture wraps a store and hands the test each function the client
// asks its sessions to call on a release, so that the test can call it as a
// backend's notification goroutine would.
type notifyCapture struct {
	backends.Backend
	watched chan func() // one per Watch call
}

func (n *notifyCapture) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, n.Backend, opts, func(s backends.Session) backends.Session { return &notifyCapturedSession{Session: s, n: n} })
}

type notifyCapturedSession struct {
	backends.Session
	n *notifyCapture
}

func (s *notifyCapturedSession) Watch(name string, fn func()) (stop func()) {
	stop = s.Session.(backends.Notifier).Watch(name, fn)
	select {
	case s.n.watched <- fn:
	default:
	}
	return stop
}

// A1: a backend's release notification never waits for the engine: the
// function the client gives Watch only records the release and returns,
// even while the engine is busy (here: held) and a callback is slow; the
// engine's own goroutine picks the release up once it can, and the
// candidate takes over then, rather than at its next attempt. Real time (a
// goroutine waiting for a mutex is not durably blocked in a synctest
// bubble), with generous bounds: a notification path that waited for the
// engine would never return while it is held.
func TestNotificationNeverWaitsForTheEngine(t *testing.T) {
	store := memory.New()
	cfg := runtime.ConfigFor(time.Minute) // attempts a retry interval apart: 10 s and more
	holder, err := runtime.NewClient(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(t, holder)
	ctx := context.Background()
	held, err := holder.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	n := &notifyCapture{Backend: store, watched: make(chan func(), 1)}
	c, err := runtime.NewClient(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(t, c)
	slow := make(chan struct{})
	defer close(slow)
	// A slow callback: elected on "other", it blocks until the test ends.
	if _, err := c.StartElection("other", runtime.ListenerFuncs{OnElected: func(context.Context, *runtime.Term) { <-slow }}); err != nil {
		t.Fatal(err)
	}
	won := make(chan *runtime.Term, 1)
	go func() {
		term, err := c.Lock(ctx, "job")
		if err != nil {
			t.Error(err)
		}
		won <- term
	}()
	var fn func()
	select {
	case fn = <-n.watched:
	case <-time.After(10 * time.Second):
		t.Fatal("the refused candidate set no watch")
	}

	release := c.HoldEngine()
	notified := make(chan struct{})
	go func() { // the store's notification path, while the engine is held
		for range 100 {
			fn()
		}
		close(notified)
	}()
	select {
	case <-notified:
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("the notification function blocked while the engine was busy")
	}
	// The release the notifications speak of (its own notification comes
	// through the store as well, on this goroutine).
	if err := holder.Unlock(ctx, held); err != nil {
		release()
		t.Fatal(err)
	}
	release()
	select {
	case term := <-won:
		if err := c.Unlock(ctx, term); err != nil {
			t.Fatal(err)
		}
	case <-time.After(cfg.RenewInterval / 4):
		t.Fatal("the candidate did not take over at the release")
	}
}
