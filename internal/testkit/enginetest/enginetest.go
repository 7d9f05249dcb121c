// Package enginetest runs the engine (package runtime) end to end on a real
// backend: the cases every backend must pass with clients on top of it, as
// backendtest checks the backend's contract below them. A backend's tests
// call [Run] with a constructor of isolated backends.
package enginetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// Harness describes the backend to [Run].
type Harness struct {
	// New returns a backend isolated from every other one it returned
	// (a prefix, a schema, a root of its own); several clients on it act as
	// separate nodes. It releases what it made with t.Cleanup.
	New func(t *testing.T) backends.Backend

	// Lease is the lease duration of the clients (1–3 s on a real server).
	Lease time.Duration
}

// Run runs the cases, one subtest each, in parallel.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Lease <= 0 {
		t.Fatalf("enginetest: Harness %+v: want New and a Lease > 0", h)
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, *Harness)
	}{
		{"HolderFollowed", testHolderFollowed},
		{"LockTakesTurns", testLockTakesTurns},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &h)
		})
	}
}

func (h *Harness) client(t *testing.T, b backends.Backend, identity string) *runtime.Client {
	t.Helper()
	c, err := runtime.NewClient(b, runtime.Config{LeaseDuration: h.Lease}, runtime.WithIdentity(identity))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*h.Lease)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("closing client %s: %v", identity, err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*h.Lease)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("client %s: %v", identity, err)
	}
	return c
}

// Who leads, from a client that does not contend: its Holder reads the
// leader's identity, session and token, and WatchHolder follows a graceful
// hand-off to the next leader well within a renewal interval.
func testHolderFollowed(t *testing.T, h *Harness) {
	b := h.New(t)
	a := h.client(t, b, "node-a")
	c := h.client(t, b, "node-c")
	watcher := h.client(t, b, "dashboard")
	ctx, cancel := context.WithTimeout(context.Background(), 10*h.Lease)
	defer cancel()

	ea, err := a.StartElection("report", nil)
	if err != nil {
		t.Fatal(err)
	}
	ta := waitTerm(t, ea.Term, h.Lease)
	got, err := watcher.Holder(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if got.Session != a.Snapshot().Session || got.Identity != "node-a" || got.Token != ta.Token() || got.Self {
		t.Errorf("Holder read by a non-contender = %+v; want node-a's session %s, token %d, not self", got, a.Snapshot().Session, ta.Token())
	}
	if mine, err := a.Holder(ctx, "report"); err != nil || !mine.Self {
		t.Errorf("Holder read by the holder = %+v, %v; want Self", mine, err)
	}
	ch, err := watcher.WatchHolder(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	if first := <-ch; first.Session != got.Session || first.Token != got.Token {
		t.Errorf("WatchHolder's first value = %+v; want %+v", first, got)
	}
	ec, err := c.StartElection("report", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A store's notifications may start late (a subscription to set up,
	// backends.Notifier): give the watcher's and the candidate's a moment.
	time.Sleep(250 * time.Millisecond)
	start := time.Now()
	if err := ea.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	tc := waitTerm(t, ec.Term, h.Lease)
	for next := range ch {
		if next.Session == c.Snapshot().Session {
			if next.Identity != "node-c" || next.Token != tc.Token() {
				t.Errorf("WatchHolder after the hand-off = %+v; want node-c with token %d", next, tc.Token())
			}
			took := time.Since(start)
			t.Logf("the watcher saw the new holder %v after the old one stopped", took)
			if took >= runtime.ConfigFor(h.Lease).RenewInterval {
				t.Errorf("the watcher saw the new holder %v after the hand-off; want well within a renewal interval", took)
			}
			break
		}
		if !next.Free() && next.Session != got.Session {
			t.Errorf("WatchHolder sent %+v; want a, free, then c", next)
		}
	}
	cancel()
	for range ch { // closed once its context ends
	}
}

// A cluster mutex that also serialises the goroutines of one client: Locks
// of one name on one client take turns, first come, first served, each turn
// a term with a greater token, while a second client contends too; never two
// holders at once.
func testLockTakesTurns(t *testing.T, h *Harness) {
	b := h.New(t)
	clients := []*runtime.Client{h.client(t, b, "node-1"), h.client(t, b, "node-2")}
	ctx, cancel := context.WithTimeout(context.Background(), 20*h.Lease)
	defer cancel()
	var (
		mu      sync.Mutex
		holding int
		last    runtime.Token
		turns   int
		wg      sync.WaitGroup
	)
	for i := range 6 {
		c := clients[i%2]
		wg.Go(func() {
			for range 3 {
				term, err := c.Lock(ctx, "ledger")
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				mu.Lock()
				holding++
				if holding > 1 {
					t.Errorf("two holders of the lock at once")
				}
				if term.Token() <= last {
					t.Errorf("turn with token %d after %d; want greater tokens", term.Token(), last)
				}
				last = term.Token()
				turns++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				mu.Lock()
				holding--
				mu.Unlock()
				if err := c.Unlock(ctx, term); err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Unlock: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if turns != 18 {
		t.Errorf("%d turns; want 18", turns)
	}
}

// waitTerm waits up to about two leases for term() to return a term.
func waitTerm(t *testing.T, term func() *runtime.Term, lease time.Duration) *runtime.Term {
	t.Helper()
	deadline := time.Now().Add(2 * lease)
	for {
		if tm := term(); tm != nil {
			return tm
		}
		if time.Now().After(deadline) {
			t.Fatalf("not elected within %v", 2*lease)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
