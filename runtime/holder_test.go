package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// Who leads: a client that does not contend reads the holder of a lease —
// its identity, session and token — and follows it through a hand-off; the
// holder itself reads Self.
func TestHolderReadAndFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a := newClient(t, store, runtime.WithIdentity("node-a"))
		b := newClient(t, store, runtime.WithIdentity("node-b"))
		watcher := newClient(t, store, runtime.WithIdentity("dashboard"))
		defer closeClient(t, watcher)
		defer closeClient(t, b)
		ctx := context.Background()

		if h, err := watcher.Holder(ctx, "report"); err != nil || !h.Free() || h.Name != "report" {
			t.Fatalf("Holder of a lease nobody took = %+v, %v; want free", h, err)
		}
		ea, err := a.StartElection("report", nil)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		term := ea.Term()
		if term == nil {
			t.Fatal("a is not elected")
		}
		h, err := watcher.Holder(ctx, "report")
		if err != nil {
			t.Fatal(err)
		}
		if h.Session != a.Snapshot().Session || h.Identity != "node-a" || h.Token != term.Token() || h.Self {
			t.Errorf("Holder read by a non-contender = %+v; want node-a's session %s and token %d, not self",
				h, a.Snapshot().Session, term.Token())
		}
		if h, err := a.Holder(ctx, "report"); err != nil || !h.Self {
			t.Errorf("Holder read by the holder = %+v, %v; want Self", h, err)
		}

		watchCtx, stopWatch := context.WithCancel(ctx)
		ch, err := watcher.WatchHolder(watchCtx, "report")
		if err != nil {
			t.Fatal(err)
		}
		if first := <-ch; first.Session != h.Session || first.Token != h.Token {
			t.Errorf("WatchHolder's first value = %+v; want the holder %+v", first, h)
		}
		eb, err := b.StartElection("report", nil)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		closeClient(t, a) // a graceful hand-off: b takes over at once
		synctest.Wait()
		tb := eb.Term()
		if tb == nil {
			t.Fatal("b not elected after a closed")
		}
		for got := range ch {
			if got.Session == b.Snapshot().Session {
				if got.Identity != "node-b" || got.Token != tb.Token() {
					t.Errorf("WatchHolder after the hand-off = %+v; want node-b with token %d", got, tb.Token())
				}
				if d := time.Since(start); d >= cfg.RenewInterval {
					t.Errorf("the new holder was seen %v after the hand-off; want well within a renewal interval", d)
				}
				break
			}
			if !got.Free() && got.Session != h.Session {
				t.Errorf("WatchHolder sent %+v; want a, free, then b", got)
			}
		}
		stopWatch()
		for range ch { // closed once the watch ends
		}
		if err := eb.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A holder that crashes is taken over when its session runs out, as the
// store measured it in the refusals the candidate got — not up to a retry
// interval later (fail-over at the lease).
func TestFailoverAtLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		for round := range 5 {
			name := fmt.Sprintf("lease-%d", round)
			la := newLink(store)
			var evs events
			a := newClient(t, la, runtime.WithObserver(&evs))
			b := newClient(t, store)
			if _, err := a.Lock(context.Background(), name); err != nil {
				t.Fatal(err)
			}
			eb, err := b.StartElection(name, nil)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(round+1) * 300 * time.Millisecond)
			synctest.Wait()
			la.Freeze() // a crashes: it renews no more
			// The store handled a's last renewal (or the opening) when it
			// was delivered: the store is in-process, time is virtual.
			renewals := append(evs.at(runtime.EventSessionOpened), evs.at(runtime.EventSessionRenewed)...)
			last := slices.MaxFunc(renewals, time.Time.Compare)
			for eb.Term() == nil {
				time.Sleep(time.Millisecond)
			}
			gap := time.Since(last) - cfg.LeaseDuration
			if limit := time.Duration(0.02 * float64(cfg.LeaseDuration)); gap < 0 || gap > limit {
				t.Errorf("round %d: b took over %v after a's session expired; want within %v (1.02 × LeaseDuration)", round, gap, limit)
			}
			la.Thaw()
			closeClient(t, b)
			closeClient(t, a)
		}
	})
}

// S1: a node that acquires and releases all the time still renews with one
// call per interval: the replies to its acquisitions and releases carry its
// digest, so it never reads its leases back.
func TestChurnNeedsNoOwnedReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store)
		defer closeClient(t, c)
		if err := c.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		store.Faults().ResetCalls()
		const periods = 10
		for i := range periods * 4 {
			term, err := c.Lock(context.Background(), fmt.Sprintf("job-%d", i%3))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(cfg.RenewInterval / 8)
			if err := c.Unlock(context.Background(), term); err != nil {
				t.Fatal(err)
			}
			time.Sleep(cfg.RenewInterval / 8)
		}
		calls := store.Faults().Calls()
		if calls.Owned != 0 {
			t.Errorf("%d Owned reads during churn; want 0 (the replies carry the digest)", calls.Owned)
		}
		if calls.KeepAlive > periods+1 {
			t.Errorf("%d keep-alives over %d renewal periods; want one per period", calls.KeepAlive, periods)
		}
	})
}

// A store that changes a session's leases behind its back (here: a lease the
// node does not know of, granted to a reply that was lost) still makes the
// node read them back and release the stray lease.
func TestForeignChangeStillRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		l := newLink(store)
		c := newClient(t, l)
		defer closeClient(t, c)
		if _, err := c.Lock(context.Background(), "mine"); err != nil {
			t.Fatal(err)
		}
		store.Faults().ResetCalls()
		// Acquire through the client's own session, as a lost reply would.
		s := l.lastSession()
		if _, err := s.Acquire(context.Background(), "stray"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * cfg.RenewInterval)
		synctest.Wait()
		if n := store.Faults().Calls().Owned; n == 0 {
			t.Error("no Owned read after the session's leases changed behind the node's back")
		}
		other, _, err := store.OpenSession(context.Background(), backends.SessionOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close(context.Background())
		if _, err := other.Acquire(context.Background(), "stray"); err != nil {
			t.Errorf("the stray lease is still held: %v", err)
		}
	})
}

// WithIdentity refuses what backends.ValidateIdentity refuses.
func TestWithIdentityInvalid(t *testing.T) {
	_, err := runtime.NewClient(memory.New(), cfg, runtime.WithIdentity("two\nlines"))
	if !errors.Is(err, backends.ErrInvalidIdentity) {
		t.Errorf("NewClient with a two-line identity = %v; want ErrInvalidIdentity", err)
	}
	c, err := runtime.NewClient(memory.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient(t, c)
	if c.Identity() != runtime.DefaultIdentity() || c.Identity() == "" {
		t.Errorf("default identity = %q; want DefaultIdentity() = %q", c.Identity(), runtime.DefaultIdentity())
	}
}
