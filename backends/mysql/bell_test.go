package simbamysql

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// The bells on their own, with the release poll off (WithPollInterval(0)),
// so that only a bell can call a watch.

// bellNode is one backend of a bell test with a session, and the calls of
// its watch counted.
type bellNode struct {
	b     *Backend
	s     backends.Session
	fired atomic.Int64
}

// newBellNode opens a backend on the prefix of first (a new prefix if nil),
// with bells on a pool of their own unless bells is false, and a session.
func newBellNode(t *testing.T, first *Backend, bells bool) *bellNode {
	t.Helper()
	url := sharedURL(t)
	opts := []Option{WithPollInterval(0), WithMaxLease(time.Minute)}
	if bells {
		opts = append(opts, withBellDB(newDB(t, url, nil)))
	}
	var b *Backend
	if first == nil {
		b = newBackend(t, newDB(t, url, nil), newDB(t, url, nil), opts...)
	} else {
		b = samePrefix(t, first, newDB(t, url, nil), opts...)
	}
	s, _, err := b.OpenSession(context.Background(), backends.SessionOptions{TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return &bellNode{b: b, s: s}
}

// watch has n watch name after a refused Acquire, as a candidate does.
func (n *bellNode) watch(t *testing.T, name string) {
	t.Helper()
	if _, err := n.s.Acquire(context.Background(), name); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("Acquire(%q) = %v; want ErrLeaseHeld", name, err)
	}
	t.Cleanup(n.s.(backends.Notifier).Watch(name, func() { n.fired.Add(1) }))
}

// bellOwner returns the connection id that holds name's bell (0: none), as
// the holder's backend b names it.
func bellOwner(t *testing.T, b *Backend, name string) int64 {
	t.Helper()
	admin := newDB(t, sharedURL(t), nil)
	var db string
	if err := admin.QueryRow("SELECT DATABASE()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	var id sql.NullInt64
	if err := admin.QueryRow("SELECT IS_USED_LOCK(?)", b.bells.bellName(db, name)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id.Int64
}

// within polls cond every 5 ms for up to d.
func within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// A release rings the bell: the waiter's watch is called within
// milliseconds, with the poll off; while the lease is held, it is not
// called at all (no waiter spins on a bell it cannot get).
func TestBellWakesWaiter(t *testing.T) {
	ctx := context.Background()
	holder := newBellNode(t, nil, true)
	waiter := newBellNode(t, holder.b, true)
	g, err := holder.s.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	if !within(2*time.Second, func() bool { return bellOwner(t, holder.b, "lease") != 0 }) {
		t.Fatal("the holder's backend took no bell within 2s of the grant")
	}
	waiter.watch(t, "lease")
	time.Sleep(300 * time.Millisecond)
	if n := waiter.fired.Load(); n != 0 {
		t.Fatalf("the watch was called %d times while the lease was held; want 0", n)
	}
	start := time.Now()
	if _, err := holder.s.Release(ctx, "lease", g.Token); err != nil {
		t.Fatal(err)
	}
	if !within(2*time.Second, func() bool { return waiter.fired.Load() > 0 }) {
		t.Fatal("the waiter's watch was not called within 2s of the release (the poll is off: only the bell could)")
	}
	took := time.Since(start)
	t.Logf("woken %v after the release", took)
	if took > 500*time.Millisecond {
		t.Errorf("woken %v after the release; want within a few round trips", took)
	}
	if _, err := waiter.s.Acquire(ctx, "lease"); err != nil {
		t.Errorf("the woken waiter's Acquire: %v", err)
	}
}

// Two waiters on one bell wake once each for a release, and never wake each
// other: the one that takes the bell for its wake-up is no holder, and the
// other does not wait on it. Once one of them holds the lease, the other
// waits quietly on the new holder's bell, which then rings for its release.
func TestBellWaitersDoNotWakeEachOther(t *testing.T) {
	ctx := context.Background()
	holder := newBellNode(t, nil, true)
	w1, w2 := newBellNode(t, holder.b, true), newBellNode(t, holder.b, true)
	g, err := holder.s.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	if !within(2*time.Second, func() bool { return bellOwner(t, holder.b, "lease") != 0 }) {
		t.Fatal("no bell taken")
	}
	w1.watch(t, "lease")
	w2.watch(t, "lease")
	time.Sleep(100 * time.Millisecond)
	if _, err := holder.s.Release(ctx, "lease", g.Token); err != nil {
		t.Fatal(err)
	}
	if !within(2*time.Second, func() bool { return w1.fired.Load() > 0 && w2.fired.Load() > 0 }) {
		t.Fatalf("after the release, the watches were called %d and %d times; want both", w1.fired.Load(), w2.fired.Load())
	}
	time.Sleep(500 * time.Millisecond) // the lease stays free: nothing rings
	if a, b := w1.fired.Load(), w2.fired.Load(); a > 1 || b > 1 {
		t.Errorf("one release called the watches %d and %d times; want once each (waiters woke each other)", a, b)
	}
	g1, err := w1.s.Acquire(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	if !within(2*time.Second, func() bool { return bellOwner(t, w1.b, "lease") != 0 }) {
		t.Fatal("the new holder's backend took no bell")
	}
	before := w2.fired.Load()
	time.Sleep(300 * time.Millisecond)
	if n := w2.fired.Load() - before; n != 0 {
		t.Errorf("while w1 held the lease, w2's watch was called %d times; want 0", n)
	}
	if _, err := w1.s.Release(ctx, "lease", g1.Token); err != nil {
		t.Fatal(err)
	}
	if !within(2*time.Second, func() bool { return w2.fired.Load() > before }) {
		t.Error("w1's release did not ring w2's bell")
	}
}

// A holder without bells rings nothing, and a waiter with bells does not
// spin on the bell nobody holds: its watch is never called; the poll (off
// here) is what would wake it.
func TestBellHolderWithoutBells(t *testing.T) {
	ctx := context.Background()
	holder := newBellNode(t, nil, false)
	waiter := newBellNode(t, holder.b, true)
	if _, err := holder.s.Acquire(ctx, "lease"); err != nil {
		t.Fatal(err)
	}
	waiter.watch(t, "lease")
	time.Sleep(400 * time.Millisecond)
	if n := waiter.fired.Load(); n != 0 {
		t.Errorf("the watch was called %d times with no bell held; want 0", n)
	}
	if id := bellOwner(t, holder.b, "lease"); id != 0 {
		t.Errorf("a backend without bells holds the bell (connection %d)", id)
	}
}

// A session that ends — closed, or found expired by its next call — rings
// the bells of its leases.
func TestBellRingsWhenSessionEnds(t *testing.T) {
	ctx := context.Background()
	for _, end := range []string{"close", "expired"} {
		t.Run(end, func(t *testing.T) {
			holder := newBellNode(t, nil, true)
			waiter := newBellNode(t, holder.b, true)
			if _, err := holder.s.Acquire(ctx, "lease"); err != nil {
				t.Fatal(err)
			}
			if !within(2*time.Second, func() bool { return bellOwner(t, holder.b, "lease") != 0 }) {
				t.Fatal("no bell taken")
			}
			waiter.watch(t, "lease")
			time.Sleep(100 * time.Millisecond)
			switch end {
			case "close":
				if err := holder.s.Close(ctx); err != nil {
					t.Fatal(err)
				}
			case "expired":
				expireSession(t, newDB(t, sharedURL(t), nil), holder.b.Prefix(), holder.s.ID())
				if _, err := holder.s.KeepAlive(ctx); !errors.Is(err, backends.ErrSessionExpired) {
					t.Fatalf("KeepAlive after the expiry = %v; want ErrSessionExpired", err)
				}
			}
			if !within(2*time.Second, func() bool { return waiter.fired.Load() > 0 }) {
				t.Error("the session's end did not ring its lease's bell")
			}
		})
	}
}

// The bells never take much of a limited pool of the caller's: at most a
// quarter, holding connection included, and none from a pool under 8.
func TestBellsPoolLimit(t *testing.T) {
	for _, c := range []struct{ limit, want int }{{0, 4}, {4, 0}, {7, 0}, {8, 1}, {16, 3}, {100, 4}} {
		db := newDB(t, sharedURL(t), nil)
		db.SetMaxOpenConns(c.limit)
		b, err := New(db, WithBells(4))
		if err != nil {
			t.Fatal(err)
		}
		if b.bells.max != c.want {
			t.Errorf("WithBells(4) on a pool of at most %d connections: %d bells; want %d", c.limit, b.bells.max, c.want)
		}
		b.Close()
	}
	if _, err := New(newDB(t, sharedURL(t), nil), WithBells(-1)); err == nil {
		t.Error("WithBells(-1): no error")
	}
	b, err := New(newDB(t, sharedURL(t), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.bells.on() {
		t.Error("New without WithBells has bells; want none (they would take the caller's connections)")
	}
}
