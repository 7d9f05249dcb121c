package simbazk

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// queueEnv is a backend on a fresh root and a way to open sessions on it.
type queueEnv struct {
	t       *testing.T
	b       *Backend
	servers []string
	ctx     context.Context
}

func newQueueEnv(t *testing.T) *queueEnv {
	t.Helper()
	servers := sharedZK(t)
	b := newBackend(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return &queueEnv{t: t, b: b, servers: servers, ctx: ctx}
}

func (e *queueEnv) open(identity string) backends.Session {
	e.t.Helper()
	s, _, err := e.b.OpenSession(e.ctx, backends.SessionOptions{TTL: 3 * time.Second, Identity: identity})
	if err != nil {
		e.t.Fatal(err)
	}
	// Renew it, as the engine would (B2 closes a session not renewed).
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
				s.KeepAlive(e.ctx)
			}
		}
	}()
	e.t.Cleanup(func() {
		close(done)
		<-stopped
		s.Close(context.Background())
	})
	return s
}

// refuse makes s refused name and watching it, as the engine's candidate
// is: the watch reserves name. It waits until the reservation exists and
// returns its path, the watch's stop and a channel that receives the
// watch's calls.
func (e *queueEnv) refuse(s backends.Session, name string) (path string, stop func(), fired <-chan struct{}) {
	e.t.Helper()
	e.refused(s, name)
	ch := make(chan struct{}, 64)
	stop = s.(backends.Notifier).Watch(name, func() { ch <- struct{}{} })
	e.t.Cleanup(stop)
	zs := zkSession(e.t, s)
	for deadline := time.Now().Add(5 * time.Second); ; {
		zs.mu.Lock()
		r := zs.resv[name]
		if r != nil && r.path != "" {
			path = r.path
		}
		zs.mu.Unlock()
		if path != "" {
			return path, stop, ch
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no reservation of %q by %s within 5s of its watch", name, s.ID())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// acquire takes name for s, and stops the test if it cannot.
func (e *queueEnv) acquire(s backends.Session, name string) backends.Grant {
	e.t.Helper()
	g, err := s.Acquire(e.ctx, name)
	if err != nil {
		e.t.Fatalf("Acquire(%q) by %s: %v", name, s.ID(), err)
	}
	return g
}

// refused checks that s is refused name, held by another session, and
// stops the test if not. Without a watch that follows, the refusal leaves
// no reservation (see refuse).
func (e *queueEnv) refused(s backends.Session, name string) {
	e.t.Helper()
	if _, err := s.Acquire(e.ctx, name); !errors.Is(err, backends.ErrLeaseHeld) {
		e.t.Fatalf("Acquire(%q) by %s = %v; want ErrLeaseHeld", name, s.ID(), err)
	}
}

// release releases name, held by s with token, or fails the test.
func (e *queueEnv) release(s backends.Session, name string, token backends.Token) {
	e.t.Helper()
	if _, err := s.Release(e.ctx, name, token); err != nil {
		e.t.Fatalf("Release(%q) by %s: %v", name, s.ID(), err)
	}
}

func (e *queueEnv) holder(s backends.Session, name string) backends.Holder {
	e.t.Helper()
	h, err := s.Holder(e.ctx, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func waitFired(t *testing.T, fired <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatalf("watch not called within 5s of %s", what)
	}
}

// A release hands the lease to the first reservation: the waiter's watch
// fires, its Acquire is the reservation's turn (its token is the
// reservation's czxid, below the release's zxid: no write made it), above
// the previous holder's token; Holder names the holder, never a waiting
// reservation; the digests count the lease.
func TestReservationHandOff(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b := e.open("node a"), e.open("node b")
	ga := e.acquire(a, "lease")
	path, _, fired := e.refuse(b, "lease")
	if h := e.holder(b, "lease"); h.Session != a.ID() || h.Token != ga.Token {
		t.Errorf("Holder while a holds and b waits = %+v; want a with token %d", h, ga.Token)
	}
	before, err := b.KeepAlive(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.Digest.Leases != 0 {
		t.Errorf("b's digest counts %d leases while it only waits; want 0", before.Digest.Leases)
	}
	rd, err := a.Release(e.ctx, "lease", ga.Token)
	if err != nil {
		t.Fatal(err)
	}
	waitFired(t, fired, "the release")
	if h := e.holder(a, "lease"); h.Session != b.ID() || h.Token <= ga.Token {
		t.Errorf("Holder after a's release = %+v; want b's reservation, above token %d", h, ga.Token)
	}
	gb, err := b.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("b's Acquire after the release: %v", err)
	}
	c := directConn(t, e.servers)
	_, st, err := c.Get(path)
	if err != nil {
		t.Fatalf("the reservation node %s: %v", path, err)
	}
	if want := backends.Token(zkSession(t, b).gen.base + st.Czxid); gb.Token != want {
		t.Errorf("b's token = %d; want its reservation's, %d", gb.Token, want)
	}
	if gb.Token <= ga.Token {
		t.Errorf("b's token %d is not above a's %d", gb.Token, ga.Token)
	}
	_ = rd
	if h := e.holder(a, "lease"); h.Session != b.ID() || h.Token != gb.Token || h.Identity != "node b" {
		t.Errorf("Holder after b's Acquire = %+v; want b, node b, token %d", h, gb.Token)
	}
	// The digest: one lease more than before, one acquisition.
	if gb.Digest.Leases != 1 || gb.Digest.Version != before.Digest.Version+1 {
		t.Errorf("b's grant digest = %+v; want 1 lease, version %d", gb.Digest, before.Digest.Version+1)
	}
	after, err := b.KeepAlive(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Digest != gb.Digest {
		t.Errorf("b's keep-alive digest = %+v; want the grant's %+v", after.Digest, gb.Digest)
	}
	owned, od, err := b.Owned(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(owned) != 1 || owned[0] != (backends.Held{Name: "lease", Token: gb.Token}) || od != gb.Digest {
		t.Errorf("b's Owned = %v, %+v; want lease with token %d, digest %+v", owned, od, gb.Digest, gb.Digest)
	}
	if again, err := b.Acquire(e.ctx, "lease"); err != nil || again.Token != gb.Token {
		t.Errorf("b's Acquire of the lease it holds = %v, %v; want token %d", again.Token, err, gb.Token)
	}
	if err := b.PutValue(e.ctx, "lease", gb.Token, []byte("v")); err != nil {
		t.Errorf("PutValue by the holder through a reservation: %v", err)
	}
	if _, err := a.Acquire(e.ctx, "lease"); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Errorf("a's Acquire while b holds = %v; want ErrLeaseHeld", err)
	}
	inv, err := e.b.Inspect(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Leases) != 1 || inv.Leases[0].Session != b.ID() || inv.Leases[0].Token != gb.Token || string(inv.Leases[0].Value) != "v" {
		t.Errorf("Inspect's leases = %+v; want b's lease with token %d and value v", inv.Leases, gb.Token)
	}
	d, err := b.Release(e.ctx, "lease", gb.Token)
	if err != nil {
		t.Fatal(err)
	}
	if d.Leases != 0 || d.Version != gb.Digest.Version+1 {
		t.Errorf("b's release digest = %+v; want 0 leases, version %d", d, gb.Digest.Version+1)
	}
	if nodeExists(t, c, path) {
		t.Errorf("the reservation node %s outlived b's release", path)
	}
	ga2, err := a.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("a's Acquire after b's release: %v", err)
	}
	if ga2.Token <= gb.Token || string(ga2.Value) != "v" {
		t.Errorf("a's grant after b = token %d, value %q; want above %d, value v", ga2.Token, ga2.Value, gb.Token)
	}
}

// Inspect lists the holder, never a waiting reservation; a session that
// stops watching removes its reservation at once, so the next one holds
// after the release.
func TestReservationStopRemoves(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b, c := e.open("node a"), e.open("node b"), e.open("node c")
	ga := e.acquire(a, "lease")
	pb, stopB, _ := e.refuse(b, "lease")
	_, _, firedC := e.refuse(c, "lease")
	inv, err := e.b.Inspect(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Leases) != 1 || inv.Leases[0].Session != a.ID() {
		t.Errorf("Inspect's leases while b and c wait = %+v; want a's only", inv.Leases)
	}
	for _, si := range inv.Sessions {
		if want := map[bool]int{true: 1, false: 0}[si.ID == a.ID()]; si.Leases != want {
			t.Errorf("Inspect counts %d leases for %s; want %d", si.Leases, si.ID, want)
		}
	}
	stopB()
	zc := directConn(t, e.servers)
	for deadline := time.Now().Add(5 * time.Second); nodeExists(t, zc, pb); {
		if time.Now().After(deadline) {
			t.Fatalf("b's reservation %s still exists 5s after its watch stopped", pb)
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.release(a, "lease", ga.Token)
	waitFired(t, firedC, "the release")
	if h := e.holder(a, "lease"); h.Session != c.ID() {
		t.Errorf("Holder after a's release = %+v; want c (b stopped waiting)", h)
	}
	if _, err := b.Acquire(e.ctx, "lease"); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Errorf("b's Acquire = %v; want ErrLeaseHeld (c's turn)", err)
	}
	gc, err := c.Acquire(e.ctx, "lease")
	if err != nil || gc.Token <= ga.Token {
		t.Errorf("c's Acquire = %d, %v; want a token above %d", gc.Token, err, ga.Token)
	}
}

// A refusal without a watch that follows (a TryLock) leaves no
// reservation: the lease is free once released.
func TestRefusalWithoutWatchReservesNothing(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b := e.open("node a"), e.open("node b")
	ga := e.acquire(a, "lease")
	e.refused(b, "lease")
	e.release(a, "lease", ga.Token)
	if h := e.holder(a, "lease"); !h.Free() {
		t.Errorf("Holder after the release = %+v; want free", h)
	}
	if _, err := a.Acquire(e.ctx, "lease"); err != nil {
		t.Errorf("a's Acquire after its release: %v", err)
	}
}

// Tokens strictly increase in grant order while sessions queue, reserve,
// take their turns, stop waiting and jump in directly, concurrently.
func TestReservationTokensInGrantOrder(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	const nodes, turns = 5, 6
	var (
		mu     sync.Mutex
		grants []backends.Token
		wg     sync.WaitGroup
	)
	for i := range nodes {
		s := e.open("node " + string(rune('a'+i)))
		wg.Go(func() {
			n := s.(backends.Notifier)
			for turn := 0; turn < turns; {
				if e.ctx.Err() != nil {
					return
				}
				g, err := s.Acquire(e.ctx, "lease")
				if errors.Is(err, backends.ErrLeaseHeld) {
					// Wait for a release, as the engine does, and every
					// other turn stop waiting before the next attempt.
					fired := make(chan struct{}, 1)
					stop := n.Watch("lease", func() {
						select {
						case fired <- struct{}{}:
						default:
						}
					})
					select {
					case <-fired:
					case <-time.After(300 * time.Millisecond):
					}
					if turn%2 == 1 {
						stop()
					}
					for {
						g, err = s.Acquire(e.ctx, "lease")
						if !errors.Is(err, backends.ErrLeaseHeld) {
							break
						}
						select {
						case <-fired:
						case <-time.After(300 * time.Millisecond):
						case <-e.ctx.Done():
						}
					}
					stop()
				}
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				mu.Lock()
				grants = append(grants, g.Token)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				grants = append(grants, -g.Token) // released
				mu.Unlock()
				if _, err := s.Release(e.ctx, "lease", g.Token); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
				turn++
			}
		})
	}
	wg.Wait()
	var order []backends.Token
	for i, tok := range grants {
		if tok > 0 {
			if i+1 < len(grants) && grants[i+1] != -tok {
				t.Fatalf("grant %d (token %d) overlaps the next: %v", i, tok, grants)
			}
			order = append(order, tok)
		}
	}
	if len(order) != nodes*turns {
		t.Fatalf("%d grants; want %d", len(order), nodes*turns)
	}
	if !slices.IsSorted(order) || len(slices.Compact(slices.Clone(order))) != len(order) {
		t.Errorf("tokens in grant order are not strictly increasing: %v", order)
	}
}

// A root of the first layout (simbazk 1, no queues) is used, not refused,
// and nobody reserves there: its other clients may be of a version that
// does not see queues.
func TestFirstLayoutRootWithoutReservations(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	zc := directConn(t, e.servers)
	data, st, err := zc.Get(e.b.Root())
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(data), layoutVersion, layoutV1, 1)
	if _, err := zc.Set(e.b.Root(), []byte(old), st.Version); err != nil {
		t.Fatal(err)
	}
	if err := zc.Delete(e.b.Root()+"/q", -1); err != nil {
		t.Fatal(err)
	}
	// Sessions of a backend that reads the root afresh.
	e.b = sameRoot(t, e.b, e.servers)
	a, b := e.open("node a"), e.open("node b")
	if zkSession(t, a).gen.queues {
		t.Fatalf("a session on a %q root uses queues", layoutV1)
	}
	ga, err := a.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("Acquire on a %q root: %v", layoutV1, err)
	}
	e.refused(b, "lease")
	fired := make(chan struct{}, 8)
	defer b.(backends.Notifier).Watch("lease", func() { fired <- struct{}{} })()
	time.Sleep(100 * time.Millisecond) // the watch goroutine's turn, which must not reserve
	zs := zkSession(t, b)
	zs.mu.Lock()
	r := zs.resv["lease"]
	zs.mu.Unlock()
	if r != nil {
		t.Errorf("b reserved the lease on a %q root", layoutV1)
	}
	if nodeExists(t, zc, e.b.Root()+"/q") {
		t.Errorf("the %q root got a queue node", layoutV1)
	}
	e.release(a, "lease", ga.Token)
	waitFired(t, fired, "the release")
	gb, err := b.Acquire(e.ctx, "lease")
	if err != nil || gb.Token <= ga.Token {
		t.Fatalf("b's Acquire after the release = %d, %v; want a token above %d", gb.Token, err, ga.Token)
	}
	if !nodeExists(t, zc, e.b.Root()+"/l/lease") {
		t.Errorf("b holds the lease without a lease node on a %q root", layoutV1)
	}
}

// A watch of a session that does not wait for the name (a follower of the
// holder: it read the holder before it watched) reserves nothing, and is
// called each time the lease passes on, also from one reservation to the
// next, which does not touch the lease node.
func TestFollowerWokenAlongReservations(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b, c, f := e.open("node a"), e.open("node b"), e.open("node c"), e.open("follower")
	ga := e.acquire(a, "lease")
	_, _, firedB := e.refuse(b, "lease")
	_, _, firedC := e.refuse(c, "lease")
	// f was refused too, but read the holder before it watched.
	e.refused(f, "lease")
	e.holder(f, "lease")
	follow := make(chan struct{}, 64)
	defer f.(backends.Notifier).Watch("lease", func() { follow <- struct{}{} })()
	zf := zkSession(t, f)
	// The follower's watch is set once the watch goroutine marks it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		zf.watches.mu.Lock()
		set := zf.watches.queue["lease"]
		zf.watches.mu.Unlock()
		if set {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower's watch of the queue not set within 5s")
		}
	}
	zf.mu.Lock()
	r := zf.resv["lease"]
	zf.mu.Unlock()
	if r != nil {
		t.Fatal("a Watch after a Holder reserved the name")
	}
	drain := func() {
		for {
			select {
			case <-follow:
			default:
				return
			}
		}
	}
	drain()
	e.release(a, "lease", ga.Token)
	waitFired(t, follow, "a's release")
	waitFired(t, firedB, "a's release")
	gb, err := b.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("b's turn: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // events of the queue before the release
	drain()
	e.release(b, "lease", gb.Token)
	waitFired(t, follow, "b's release, from its reservation to c's")
	waitFired(t, firedC, "b's release")
	if h := e.holder(f, "lease"); h.Session != c.ID() {
		t.Errorf("Holder after b's release = %+v; want c", h)
	}
}

// A reservation that the deletion of the node it watches makes the holder
// (the lease node while it is first; the first reservation, with no lease
// node, while it is second) is granted by that event: with the value node
// watched meanwhile, the Acquire that takes the turn sends nothing, from
// the release on, and returns the value the previous holder stored last.
func TestTurnGrantedByEvent(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b := e.open("node a"), e.open("node b")
	var cnt counter
	counted := e.b
	e.b = sameRoot(t, e.b, e.servers, WithDialer(cnt.dial))
	c := e.open("node c") // counted
	e.b = counted
	// valueReady waits until s's reservation of the lease knows the value.
	valueReady := func(s backends.Session, want string) {
		t.Helper()
		zs := zkSession(t, s)
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			zs.mu.Lock()
			r := zs.resv["lease"]
			ok := r != nil && r.val.ok && string(r.val.data) == want && r.firstAfter != ""
			zs.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's reservation does not know the value %q, or what grants it, within 5s", s.ID(), want)
			}
		}
	}
	ga := e.acquire(a, "lease")
	// c first in the queue, behind a's lease node.
	_, _, firedC := e.refuse(c, "lease")
	if err := a.PutValue(e.ctx, "lease", ga.Token, []byte("a1")); err != nil {
		t.Fatal(err)
	}
	valueReady(c, "a1")
	if err := a.PutValue(e.ctx, "lease", ga.Token, []byte("a2")); err != nil {
		t.Fatal(err)
	}
	valueReady(c, "a2")
	before, _ := cnt.snapshot()
	e.release(a, "lease", ga.Token)
	waitFired(t, firedC, "a's release")
	gc, err := c.Acquire(e.ctx, "lease")
	after, _ := cnt.snapshot()
	if err != nil {
		t.Fatalf("c's turn: %v", err)
	}
	if gc.Token <= ga.Token || string(gc.Value) != "a2" {
		t.Errorf("c's grant = token %d, value %q; want above %d, value a2", gc.Token, gc.Value, ga.Token)
	}
	if n := after - before; n > 1 { // 1: a keep-alive of c's may fall in
		t.Errorf("c's turn granted by the release's event sent %d requests; want none", n)
	}
	// b second, behind c's reservation, with no lease node.
	_, _, firedB := e.refuse(b, "lease")
	valueReady(b, "a2")
	if err := c.PutValue(e.ctx, "lease", gc.Token, []byte("c1")); err != nil {
		t.Fatal(err)
	}
	e.release(c, "lease", gc.Token)
	waitFired(t, firedB, "c's release")
	gb, err := b.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("b's turn: %v", err)
	}
	if gb.Token <= gc.Token || string(gb.Value) != "c1" {
		t.Errorf("b's grant = token %d, value %q; want above %d, value c1 (stored right before the release)", gb.Token, gb.Value, gc.Token)
	}
}

// A reservation that cannot know that the deletion of the node it watches
// makes it the holder (it is second, set behind the first while a lease
// node existed) has its turn's reads sent when the event arrives: once
// they are answered, the Acquire that takes the turn sends nothing.
func TestTurnPrefetched(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b := e.open("node a"), e.open("node b")
	var cnt counter
	plain := e.b
	e.b = sameRoot(t, e.b, e.servers, WithDialer(cnt.dial))
	c := e.open("node c") // counted
	e.b = plain
	ga := e.acquire(a, "lease")
	_, _, firedB := e.refuse(b, "lease")
	_, _, firedC := e.refuse(c, "lease")
	zc := zkSession(t, c)
	// c's watch set on b's reservation while a's lease node exists.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		zc.watches.mu.Lock()
		set := zc.watches.target["lease"] != ""
		zc.watches.mu.Unlock()
		if set {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("c's watch of b's reservation not set within 5s")
		}
	}
	e.release(a, "lease", ga.Token)
	waitFired(t, firedB, "a's release")
	gb := e.acquire(b, "lease")
	if err := b.PutValue(e.ctx, "lease", gb.Token, []byte("last")); err != nil {
		t.Fatal(err)
	}
	e.release(b, "lease", gb.Token)
	waitFired(t, firedC, "b's release")
	zc.mu.Lock()
	pre := zc.resv["lease"].pre
	zc.mu.Unlock()
	if pre == nil {
		t.Fatal("no reads sent on the release's event")
	}
	if pre.won {
		t.Fatal("c took b's release for its grant, though it was set behind b while a's lease node existed")
	}
	select {
	case <-pre.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the prefetched reads not answered within 5s")
	}
	before, _ := cnt.snapshot()
	gc, err := c.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("c's turn: %v", err)
	}
	after, _ := cnt.snapshot()
	if gc.Token <= gb.Token || string(gc.Value) != "last" {
		t.Errorf("c's grant = token %d, value %q; want above %d, value last", gc.Token, gc.Value, gb.Token)
	}
	if n := after - before; n > 1 { // 1: a keep-alive of c's may fall in
		t.Errorf("c's Acquire of a prefetched turn sent %d requests; want none", n)
	}
}

// The deletion of the predecessor a reservation's watch was just set on
// may be told before the watch goroutine has recorded that watch
// (go-zookeeper calls back from its receive loop, right behind the reply
// that set it): that event still calls the watch, and the watch is set
// again after the turn it asked for. CI under load lost it: a hand-over's
// chosen successor, behind a candidate that gave the lease back at once,
// waited for its next attempt, up to a renewal interval.
func TestPredecessorGoneWhileWatchSet(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b, c := e.open("node a"), e.open("node b"), e.open("node c")
	ga := e.acquire(a, "lease")
	pb, stopB, _ := e.refuse(b, "lease")
	zc := zkSession(t, c)
	zd := directConn(t, e.servers)
	var once sync.Once
	zc.watches.mu.Lock()
	zc.watches.watchSet = func(_, target string) {
		if target != pb {
			return
		}
		once.Do(func() {
			// b stops waiting, between the reply that set c's watch on
			// b's reservation and c's record of it.
			stopB()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				if ok, _, err := zd.Exists(pb); err != nil || !ok {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("b's reservation %s still exists 5s after its watch stopped", pb)
					return
				}
			}
			// A read on c's connection: ZooKeeper sends the deletion's
			// event before its reply, and go-zookeeper has called back
			// with the event once the reply is here.
			if _, _, err := zc.conn.Exists(pb); err != nil {
				t.Errorf("c's read after b's reservation went: %v", err)
			}
		})
	}
	zc.watches.mu.Unlock()
	_, _, firedC := e.refuse(c, "lease")
	waitFired(t, firedC, "the deletion of c's predecessor, b's reservation, while c's watch on it was being set")
	// A hint: a still holds, and c's turn is refused.
	e.refused(c, "lease")
	// a releases right after: c, first now, is told whether the release
	// comes before its turn's refusal sets the watch again (headFound) or
	// after (the lease node's event).
	for len(firedC) > 0 {
		<-firedC
	}
	e.release(a, "lease", ga.Token)
	waitFired(t, firedC, "a's release")
	gc, err := c.Acquire(e.ctx, "lease")
	if err != nil || gc.Token <= ga.Token {
		t.Fatalf("c's turn = %d, %v; want a token above %d", gc.Token, err, ga.Token)
	}
}

// A reservation made after the release it waited for (the watch that
// follows a refusal came after the holder had gone) is first in the queue
// with no lease node: its session holds the lease, and no deletion is left
// to tell it. Its watch is called once the reservation is found so, not
// at the session's next attempt on its own schedule.
func TestReservationMadeFirstIsTold(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b := e.open("node a"), e.open("node b")
	ga := e.acquire(a, "lease")
	e.refused(b, "lease")
	e.release(a, "lease", ga.Token)
	fired := make(chan struct{}, 64)
	defer b.(backends.Notifier).Watch("lease", func() { fired <- struct{}{} })()
	waitFired(t, fired, "b's reservation made first, after a's release")
	if h := e.holder(a, "lease"); h.Session != b.ID() || h.Token <= ga.Token {
		t.Errorf("Holder once b's watch is called = %+v; want b's reservation, above token %d", h, ga.Token)
	}
	gb, err := b.Acquire(e.ctx, "lease")
	if err != nil || gb.Token <= ga.Token {
		t.Fatalf("b's turn = %d, %v; want a token above %d", gb.Token, err, ga.Token)
	}
}

// A lease granted through a reservation that the engine does not adopt (a
// candidate that gives it back to the successor a hand-over named) is
// released with the session's watch still on: the watch that the turn used
// up is set again, so that the session hears of the name's next release.
func TestReservationGivenBackWatchesAgain(t *testing.T) {
	t.Parallel()
	e := newQueueEnv(t)
	a, b := e.open("node a"), e.open("node b")
	ga := e.acquire(a, "lease")
	_, _, fired := e.refuse(b, "lease") // stays on, as the engine's does
	e.release(a, "lease", ga.Token)
	waitFired(t, fired, "a's release")
	gb, err := b.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("b's turn: %v", err)
	}
	e.release(b, "lease", gb.Token) // given back
	ga, err = a.Acquire(e.ctx, "lease")
	if err != nil {
		t.Fatalf("a's Acquire after b gave the lease back: %v", err)
	}
	e.refused(b, "lease")
	zb := zkSession(t, b)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		zb.watches.mu.Lock()
		set := zb.watches.armed["lease"] && zb.watches.exists["lease"]
		zb.watches.mu.Unlock()
		if set {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b's watch, on since before its turn, not set on a's new lease node within 5s of b giving the lease back")
		}
	}
	for len(fired) > 0 {
		<-fired
	}
	e.release(a, "lease", ga.Token)
	waitFired(t, fired, "a's second release")
}
