package simbaetcd

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/faultnet"
	"github.com/simba-go/simba/internal/testkit/termcheck"
	"github.com/simba-go/simba/runtime"
)

// referee records the terms of the test's clients in a termcheck.Recorder,
// and checks them when the test ends: never two valid terms of one name,
// tokens rising in the order terms began (F5), callbacks paired.
type referee struct {
	rec *termcheck.Recorder

	mu     sync.Mutex
	latest *runtime.Term // the term elected last
}

func newReferee(t *testing.T) *referee {
	r := &referee{rec: termcheck.NewRecorder()}
	t.Cleanup(func() {
		if err := r.rec.Check(termcheck.Options{}).Err(); err != nil {
			t.Errorf("the clients' terms:\n%v", err)
		}
	})
	return r
}

func (r *referee) listener(node string, elected chan<- *runtime.Term) runtime.ListenerFuncs {
	var (
		mu  sync.Mutex
		ids = map[*runtime.Term]termcheck.TermID{}
	)
	return runtime.ListenerFuncs{
		OnElected: func(_ context.Context, term *runtime.Term) {
			id := r.rec.Begin(term.Name(), node, int64(term.Token()))
			r.rec.Elected(id)
			r.mu.Lock()
			r.latest = term
			r.mu.Unlock()
			mu.Lock()
			ids[term] = id
			mu.Unlock()
			go func() { <-term.Done(); r.rec.End(id) }()
			select {
			case elected <- term:
			default:
			}
		},
		OnRevoked: func(_ context.Context, term *runtime.Term, _ runtime.Reason) {
			mu.Lock()
			id, ok := ids[term]
			mu.Unlock()
			if !ok { // a revoked callback without its elected one (L1)
				id = r.rec.Begin(term.Name(), node, int64(term.Token()))
				r.rec.End(id)
			}
			r.rec.Revoked(id)
		},
	}
}

// runtimeClient returns a client on b, closed when the test ends.
func runtimeClient(t *testing.T, b backends.Backend, identity string, lease time.Duration) *runtime.Client {
	t.Helper()
	c, err := runtime.NewClient(b, runtime.Config{LeaseDuration: lease}, runtime.WithIdentity(identity))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*lease)
		defer cancel()
		c.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*lease)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("client %s: %v", identity, err)
	}
	return c
}

// elect starts the election "x" on c; its terms arrive on the channel.
func elect(t *testing.T, r *referee, c *runtime.Client, node string) chan *runtime.Term {
	t.Helper()
	ch := make(chan *runtime.Term, 4)
	if _, err := c.StartElection("x", r.listener(node, ch)); err != nil {
		t.Fatalf("StartElection on %s: %v", node, err)
	}
	return ch
}

func await(t *testing.T, ch chan *runtime.Term, within time.Duration, what string) *runtime.Term {
	t.Helper()
	select {
	case term := <-ch:
		return term
	case <-time.After(within):
		t.Fatalf("%s: no term within %v", what, within)
		return nil
	}
}

// A holder whose connections are cut, or silently dropped, loses its term
// by its own clock before etcd expires its lease and the candidate is
// elected: never two valid terms, tokens rising.
func TestHolderCutOff(t *testing.T) {
	const lease = 2 * time.Second
	for _, fault := range []string{"cut", "blackhole"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			link := faultnet.New()
			s := shared.get(t)
			ba := newBackend(t, newClient(t, link, s))
			bb := newBackend(t, newClient(t, nil, s), WithPrefix(ba.Prefix()))
			r := newReferee(t)
			a := runtimeClient(t, ba.Backend(), "a", lease)
			b := runtimeClient(t, bb.Backend(), "b", lease)
			ta := await(t, elect(t, r, a, "a"), 5*lease, "a")
			tb := elect(t, r, b, "b")
			time.Sleep(lease / 2)
			if fault == "cut" {
				link.Cut()
			} else {
				link.Blackhole()
			}
			faulted := time.Now()
			got := await(t, tb, 5*lease, "b after a was cut off")
			t.Logf("%s: b elected %v after a's link failed; a's term ended %v", fault, time.Since(faulted).Round(time.Millisecond), ta.Reason())
			if ta.Valid() {
				t.Errorf("a's term still valid after b was elected")
			}
			if got.Token() <= ta.Token() {
				t.Errorf("b's token %d; want > a's %d", got.Token(), ta.Token())
			}
			link.Heal()
		})
	}
}

// Replies slowed by a fifth of the renewal interval only shorten the
// holder's deadlines (D1): it keeps its term and nobody else is elected.
func TestDelayedReplies(t *testing.T) {
	const lease = 2 * time.Second
	link := faultnet.New()
	s := shared.get(t)
	ba := newBackend(t, newClient(t, link, s))
	bb := newBackend(t, newClient(t, nil, s), WithPrefix(ba.Prefix()))
	r := newReferee(t)
	a := runtimeClient(t, ba.Backend(), "a", lease)
	b := runtimeClient(t, bb.Backend(), "b", lease)
	ta := await(t, elect(t, r, a, "a"), 5*lease, "a")
	tb := elect(t, r, b, "b")
	link.DelayReplies(lease / 15)
	select {
	case term := <-tb:
		t.Fatalf("b elected (token %d) while a renews through slow replies", term.Token())
	case <-time.After(3 * lease):
	}
	if !ta.Valid() {
		t.Errorf("a's term ended (%v) under replies slowed by %v", ta.Reason(), lease/15)
	}
	link.DelayReplies(0)
}

// etcd issue 19597: a candidate whose session expires while it waits must
// never be granted. Its lease key would be deleted with its lease, so
// waiting for the holder's key to go is not enough: the acquisition must
// check the session itself.
func TestExpiredCandidateNeverGranted(t *testing.T) {
	b := newBackend(t, newClient(t, nil, shared.get(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() backends.Session {
		s, _, err := b.OpenSession(ctx, backends.SessionOptions{TTL: testTTL, Identity: "node"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	holder, waiter := open(), open()
	g, err := holder.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Acquire(ctx, "x"); !errors.Is(err, backends.ErrLeaseHeld) {
		t.Fatalf("waiter's Acquire = %v; want ErrLeaseHeld", err)
	}
	woken := make(chan struct{}, 1)
	stop := waiter.(backends.Notifier).Watch("x", func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	defer stop()
	revokeBehindBack(t, b, waiter.ID()) // the waiter's session ends while it waits
	if _, err := holder.Release(ctx, "x", g.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Log("the watch of the expired session did not fire; trying anyway")
	}
	if g2, err := waiter.Acquire(ctx, "x"); !errors.Is(err, backends.ErrSessionExpired) {
		t.Fatalf("Acquire by the expired waiter = %+v, %v; want ErrSessionExpired", g2, err)
	}
	h, err := holder.Holder(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !h.Free() {
		t.Errorf("Holder = %+v; want the lease free, never granted to the expired session", h)
	}
}

// A three-member cluster keeps the holder's term across the loss of a
// follower: renewals go on through the other two, nobody else is elected.
func TestFollowerLost(t *testing.T) {
	const lease = 3 * time.Second
	ms := startCluster(t)
	ba := newBackend(t, newClient(t, nil, ms...))
	bb := newBackend(t, newClient(t, nil, ms...), WithPrefix(ba.Prefix()))
	r := newReferee(t)
	a := runtimeClient(t, ba.Backend(), "a", lease)
	b := runtimeClient(t, bb.Backend(), "b", lease)
	ta := await(t, elect(t, r, a, "a"), 5*lease, "a")
	tb := elect(t, r, b, "b")
	for _, m := range ms {
		if !m.isLeader() {
			m.kill()
			break
		}
	}
	select {
	case term := <-tb:
		t.Fatalf("b elected (token %d) after a follower was lost; want a to keep its term", term.Token())
	case <-time.After(3 * lease):
	}
	if !ta.Valid() {
		t.Errorf("a's term ended (%v) when a follower was lost", ta.Reason())
	}
}

// The leader of a three-member cluster killed, without handing its
// leadership over: whoever holds the lease afterwards, no term is valid
// past the moment the cluster could give its lease away (the referee
// checks at every election), and the lease is held again once a new leader
// is elected. The clients talk to the followers, which forward to the
// leader (see server.kill for why not to the leader itself).
func TestLeaderKilled(t *testing.T) {
	const lease = 3 * time.Second
	ms := startCluster(t)
	var leader *server
	var followers []*server
	for _, m := range ms {
		if m.isLeader() {
			leader = m
		} else {
			followers = append(followers, m)
		}
	}
	if leader == nil {
		t.Fatal("the cluster has no leader")
	}
	ba := newBackend(t, newClient(t, nil, followers...))
	bb := newBackend(t, newClient(t, nil, followers...), WithPrefix(ba.Prefix()))
	r := newReferee(t)
	a := runtimeClient(t, ba.Backend(), "a", lease)
	b := runtimeClient(t, bb.Backend(), "b", lease)
	ta := await(t, elect(t, r, a, "a"), 5*lease, "a")
	elect(t, r, b, "b")
	if !leader.isLeader() {
		t.Log("leadership moved before the kill; killing the old leader all the same")
	}
	leader.hardKill()
	killed := time.Now()
	// Wait until some node holds a valid term again.
	for deadline := time.Now().Add(6 * lease); ; time.Sleep(50 * time.Millisecond) {
		r.mu.Lock()
		last := r.latest
		r.mu.Unlock()
		if last.Valid() {
			t.Logf("a term (token %d) valid %v after the leader was killed; a's first term: %v", last.Token(), time.Since(killed).Round(time.Millisecond), ta.Reason())
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no valid term within %v of the leader's loss", 6*lease)
		}
	}
	time.Sleep(2 * lease) // the referee watches the elections meanwhile
}
