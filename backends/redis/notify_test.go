package simbaredis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// A1: a session's own releases and its own Close do not wake its own
// watches — it knows, and waking it would only make it read the store again
// — while every other session's watches of the name wake, those of sessions
// of the same backend (another node in the same process) included.
func TestOwnReleasesDoNotWakeOwnWatches(t *testing.T) {
	addr, admin := sharedRedis(t)
	b := newBackend(t, newClient(t, addr), admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() backends.Session {
		t.Helper()
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, other, third := open(), open(), open()
	defer other.Close(ctx)
	defer third.Close(ctx)
	var byA, byOther atomic.Int64
	watch := func(s backends.Session, name string, n *atomic.Int64) {
		t.Cleanup(s.(backends.Notifier).Watch(name, func() { n.Add(1) }))
	}
	watch(a, "x", &byA)
	watch(other, "x", &byOther)
	time.Sleep(100 * time.Millisecond) // the subscription starts

	waitFor := func(what string, n *atomic.Int64, want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for n.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d calls after 5s; want %d", what, n.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// cycle makes s acquire x, the other sessions be refused it (a
	// candidate tries before it waits; a release wakes the backends
	// refused), and s release it.
	cycle := func(s backends.Session) {
		t.Helper()
		g, err := s.Acquire(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []backends.Session{a, other, third} {
			if o != s {
				o.Acquire(ctx, "x") // refused, or expired for a closed a
			}
		}
		if _, err := s.Release(ctx, "x", g.Token); err != nil {
			t.Fatal(err)
		}
	}

	// Notifications arrive in order, on one goroutine: once the third
	// session's release has woken a, a's own release before it was
	// delivered too.
	cycle(a)
	waitFor("other's watch after a's release", &byOther, 1)
	cycle(third)
	waitFor("a's watch after the third session's release", &byA, 1)
	waitFor("other's watch after the third session's release", &byOther, 2)
	if n := byA.Load(); n != 1 {
		t.Errorf("a's watch called %d times for a's own release and another's; want 1, for the other's", n)
	}

	if _, err := a.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	other.Acquire(ctx, "x") // refused
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("other's watch after a's Close", &byOther, 3)
	cycle(third)
	waitFor("other's watch after the third session's second release", &byOther, 4)
	// a's watch may still be called for the third session's release (a
	// closed, but its watch was not stopped); not for a's own Close.
	if n := byA.Load(); n > 2 {
		t.Errorf("a's watch called %d times; want at most 2 (once per other session's release), none for its own Close", n)
	}
}

// A1 at scale: a release wakes only the few backends refused the lease last,
// so that it costs Redis the same however many nodes wait — here 40 nodes
// wait, and a release publishes wakePerRelease messages, not 40 — and one
// of the woken nodes takes the lease at once.
func TestReleaseWakesAFew(t *testing.T) {
	srv := startRedis(t) // a private server: its command counts are ours alone
	admin := newClient(t, srv.Addr)
	holderB := newBackend(t, newClient(t, srv.Addr), admin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, _, err := holderB.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g, err := holder.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	const nodes = 40
	var woken atomic.Int64
	for range nodes {
		b := sameNamespace(t, holderB, newClient(t, srv.Addr))
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.(backends.Notifier).Watch("x", func() { woken.Add(1) }))
		if _, err := s.Acquire(ctx, "x"); !errors.Is(err, backends.ErrLeaseHeld) {
			t.Fatalf("Acquire of a held lease = %v; want ErrLeaseHeld", err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the subscriptions start
	publishes := func() int64 {
		t.Helper()
		for _, line := range strings.Split(admin.Info(ctx, "commandstats").Val(), "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_publish:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	before := publishes()
	if _, err := holder.Release(ctx, "x", g.Token); err != nil {
		t.Fatal(err)
	}
	if n := publishes() - before; n != wakePerRelease {
		t.Errorf("a release with %d nodes waiting published %d messages; want %d", nodes, n, wakePerRelease)
	}
	deadline := time.Now().Add(5 * time.Second)
	for woken.Load() < wakePerRelease && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := woken.Load(); n != wakePerRelease {
		t.Errorf("%d watchers woken; want %d", n, wakePerRelease)
	}
	// With nobody waiting, a release publishes nothing.
	g, err = holder.Acquire(ctx, "y")
	if err != nil {
		t.Fatal(err)
	}
	before = publishes()
	if _, err := holder.Release(ctx, "y", g.Token); err != nil {
		t.Fatal(err)
	}
	if n := publishes() - before; n != 0 {
		t.Errorf("a release nobody waits for published %d messages; want none", n)
	}
}

// backends.HolderNotifier across a cut: while the watching backend's
// connections are cut (its subscription is gone), the lease changes hands
// twice; once the path heals, the watch is told the current holder (read
// again when the backend marks the name after resubscribing), and every
// change it was told is newer than the one before.
func TestWatchHolderAcrossCut(t *testing.T) {
	addr, admin := sharedRedis(t)
	bl := newBackend(t, newClient(t, addr), admin)
	p := newProxy(t, addr)
	bw := sameNamespace(t, bl, p.client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(b *Backend) backends.Session {
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	w, l := open(bw), open(bl)
	var (
		mu   sync.Mutex
		told []backends.Holder
	)
	stop := w.(backends.HolderNotifier).WatchHolder("x", func(h backends.Holder) {
		mu.Lock()
		told = append(told, h)
		mu.Unlock()
	})
	defer stop()
	last := func() backends.Holder {
		mu.Lock()
		defer mu.Unlock()
		if len(told) == 0 {
			return backends.Holder{}
		}
		return told[len(told)-1]
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(15 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 15s", what)
			}
		}
	}
	g, err := l.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the first grant told", func() bool { return last().Token == g.Token && last().Session == l.ID() })

	p.cut()
	for range 2 {
		if _, err := l.Release(ctx, "x", g.Token); err != nil {
			t.Fatal(err)
		}
		if g, err = l.Acquire(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if h := last(); h.Token == g.Token {
		t.Fatalf("the watch was told token %d while its connections were cut; the test cuts nothing", h.Token)
	}
	p.heal()
	waitFor("the current holder told after the heal", func() bool { return last().Token == g.Token && last().Session == l.ID() })
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(told); i++ {
		prev, cur := told[i-1], told[i]
		if cur.Session != "" && cur.Token <= prev.Token || cur.Session == "" && (prev.Session == "" || cur.Token < prev.Token) {
			t.Errorf("told %+v after %+v: out of order", cur, prev)
		}
	}
}
