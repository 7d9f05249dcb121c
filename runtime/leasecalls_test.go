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
// whose deadline passes before its turn is not made. Once the store
// answers, every election is elected.
func TestLeaseCallsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedBackend{Backend: memory.New(), gate: make(chan struct{})}
		c := newClient(t, g)
		defer closeClient(t, c)
		if err := c.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		const n = 1000
		for i := range n {
			if _, err := c.StartElection("lease-"+strconv.Itoa(i), nil); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		renewed := g.renewals.Load()
		// The first acquires' deadline (a renewal period, D2) passes while
		// they wait at the store: the calls queued behind them, sent at the
		// same moment, are answered without being made (made late, they
		// would only fail with an outcome unknown); the elections retry
		// half a period later at the earliest.
		time.Sleep(cfg.RenewInterval + cfg.RenewInterval/10)
		synctest.Wait()
		if made := g.acquiring.Load(); made != runtime.MaxLeaseCalls {
			t.Errorf("%d acquires made by the first deadline; want the %d that ran, none of those that waited past it", made, runtime.MaxLeaseCalls)
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
