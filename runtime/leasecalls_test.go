package runtime_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// gatedBackend holds every Acquire until its gate opens, counting how many
// wait at once, and counts the session's renewals.
type gatedBackend struct {
	backends.Backend
	gate      chan struct{}
	mu        sync.Mutex
	inFlight  int
	most      int
	renewals  atomic.Int64
	acquiring atomic.Int64
}

func (g *gatedBackend) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	return openWrapped(ctx, g.Backend, opts, func(s backends.Session) backends.Session { return &gatedSession{Session: s, g: g} })
}

type gatedSession struct {
	backends.Session
	g *gatedBackend
}

func (s *gatedSession) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	r, err := s.Session.KeepAlive(ctx)
	if err == nil {
		s.g.renewals.Add(1)
	}
	return r, err
}

func (s *gatedSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	g := s.g
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	g.acquiring.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
		return backends.Grant{}, ctx.Err()
	}
	return s.Session.Acquire(ctx, name)
}

// A client that starts many elections at once makes at most MaxLeaseCalls
// acquires at a time, and its session is renewed meanwhile: keep-alives
// never wait behind the acquires (one goroutine per call put a thousand
// acquires, and the keep-alive, in one queue for the store). A queued call
// is made when a goroutine is free, with its whole timeout from then (D2),
// so that a storm goes through at the store's pace. Once the store
// answers, every election is elected.
func TestLeaseCallsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedBackend{Backend: memory.New(), gate: make(chan struct{})}
		c := newClient(t, g)
		defer closeClient(t, c)
		const n = 1000
		startStorm(t, c, n)
		renewed := g.renewals.Load()
		if made := g.acquiring.Load(); made != runtime.MaxLeaseCalls {
			t.Errorf("%d acquires made at once; want %d", made, runtime.MaxLeaseCalls)
		}
		// The first acquires' deadline (a renewal period, D2) passes while
		// they wait at the store; the calls queued behind them, sent at the
		// same moment, are made then, each with a period of its own.
		time.Sleep(cfg.RenewInterval + cfg.RenewInterval/10)
		synctest.Wait()
		if made := g.acquiring.Load(); made != 2*runtime.MaxLeaseCalls {
			t.Errorf("%d acquires made by the first deadline; want %d: the first %d, and as many taken from the queue when they timed out",
				made, 2*runtime.MaxLeaseCalls, runtime.MaxLeaseCalls)
		}
		time.Sleep(cfg.RenewInterval)
		synctest.Wait()
		g.mu.Lock()
		most := g.most
		g.mu.Unlock()
		if most != runtime.MaxLeaseCalls {
			t.Errorf("%d elections started: at most %d acquires at once; want %d", n, most, runtime.MaxLeaseCalls)
		}
		if got := g.renewals.Load() - renewed; got < 1 {
			t.Errorf("no renewal in %v while %d acquires waited; want the session renewed", 2*cfg.RenewInterval, most)
		}
		if s := c.Snapshot(); s.State != runtime.SessionLive {
			t.Errorf("session %v while the acquires waited; want live", s.State)
		}
		close(g.gate)
		for deadline := time.Now().Add(10 * cfg.LeaseDuration); ; time.Sleep(cfg.RenewInterval) {
			held := leading(c)
			if held == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d elections elected %v after the store answered", held, n, 10*cfg.LeaseDuration)
			}
		}
	})
}

// A queued acquire whose election stopped before a goroutine was free to
// make it is answered without being made (engine.Machine.Wanted): a client
// closing during a storm of acquires waits for the ones in flight, not for
// the thousands queued behind them, and nothing reports them as failures.
func TestUnwantedQueuedCallsAreNotMade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedBackend{Backend: memory.New(), gate: make(chan struct{})}
		var errs atomic.Int64
		c, err := runtime.NewClient(g, cfg, runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
			if e.Kind == runtime.EventBackendError && e.Name != "" {
				errs.Add(1)
			}
		})))
		if err != nil {
			t.Fatal(err)
		}
		const n = 1000
		startStorm(t, c, n)
		closed := make(chan error, 1)
		go func() { closed <- c.Close(context.Background()) }()
		synctest.Wait()
		close(g.gate) // the acquires in flight now answer
		synctest.Wait()
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("Close: %v", err)
			}
		default:
			t.Fatalf("Close has not returned once the %d acquires in flight answered", runtime.MaxLeaseCalls)
		}
		if made := g.acquiring.Load(); made != runtime.MaxLeaseCalls {
			t.Errorf("%d acquires made; want the %d in flight when Close began, none of the %d queued", made, runtime.MaxLeaseCalls, n-runtime.MaxLeaseCalls)
		}
		if e := errs.Load(); e > 0 {
			t.Errorf("%d backend errors reported for lease calls; want none (calls not made are not failures)", e)
		}
	})
}

// startStorm waits until c's session is open, starts n elections at once,
// and waits until the client's goroutines are blocked (in a synctest
// bubble).
func startStorm(t *testing.T, c *runtime.Client, n int) {
	t.Helper()
	if err := c.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.StartElection("lease-"+strconv.Itoa(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	synctest.Wait()
}
