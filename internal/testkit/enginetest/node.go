package enginetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// Node is one runtime client contending for one lease on a backend under
// test, recording its terms and its engine's events, for the backends' end to
// end and fault tests.
type Node struct {
	T    *testing.T
	Name string
	C    *runtime.Client
	E    *runtime.Election

	mu      sync.Mutex
	terms   []*TermRecord
	events  []runtime.Event
	elected chan *TermRecord
}

// TermRecord is what a node saw of one term. Times are the test process's
// monotonic clock (one process: one clock).
type TermRecord struct {
	Node      string
	Term      *runtime.Term
	ElectedAt time.Time // when the elected callback ran: after adoption
	EndedAt   time.Time // when Done was closed (observed by a goroutine); set once Ended is closed
	Reason    runtime.Reason
	Ended     chan struct{}
}

// StartNode starts a client on b with cfg, its identity name, and an
// election for lease; the client is closed when the test ends.
func StartNode(t *testing.T, name string, b backends.Backend, cfg runtime.Config, lease string) *Node {
	t.Helper()
	n := &Node{T: t, Name: name, elected: make(chan *TermRecord, 16)}
	c, err := runtime.NewClient(b, cfg, runtime.WithIdentity(name), runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
		n.mu.Lock()
		n.events = append(n.events, e)
		n.mu.Unlock()
	})))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	n.C = c
	t.Cleanup(n.Close)
	n.E, err = c.StartElection(lease, runtime.ListenerFuncs{
		OnElected: func(_ context.Context, term *runtime.Term) { n.Track(term) },
	})
	if err != nil {
		t.Fatalf("StartElection: %v", err)
	}
	return n
}

// Track records term as elected now, as the node's own election does: for
// an election a test starts itself on the node's client, from its elected
// callback.
func (n *Node) Track(term *runtime.Term) {
	rec := &TermRecord{Node: n.Name, Term: term, ElectedAt: time.Now(), Ended: make(chan struct{})}
	go func() {
		<-term.Done()
		rec.EndedAt = time.Now()
		rec.Reason = term.Reason()
		close(rec.Ended)
	}()
	n.mu.Lock()
	n.terms = append(n.terms, rec)
	n.mu.Unlock()
	n.elected <- rec
}

// Events returns the events of kind the node's engine reported, so far.
func (n *Node) Events(kind runtime.EventKind) []runtime.Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []runtime.Event
	for _, e := range n.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Close closes the node's client. A client that could not hand over (its
// store unreachable, as fault tests make it) says so, which is logged; a
// Close that does not finish in 10 s fails the test.
func (n *Node) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.C.Close(ctx); err != nil {
		if ctx.Err() != nil {
			n.T.Errorf("closing node %s: %v", n.Name, err)
		} else {
			n.T.Logf("closing node %s: %.300s", n.Name, err)
		}
	}
}

// WaitElected waits for the node's next term.
func (n *Node) WaitElected(within time.Duration) *TermRecord {
	n.T.Helper()
	select {
	case rec := <-n.elected:
		return rec
	case <-time.After(within):
		n.T.Fatalf("node %s not elected within %v (snapshot %+v)", n.Name, within, n.C.Snapshot())
		return nil
	}
}

// Elected returns the channel of the node's terms, as they are elected.
func (n *Node) Elected() <-chan *TermRecord { return n.elected }

// NotElected fails the test if the node is elected within d.
func (n *Node) NotElected(d time.Duration) {
	n.T.Helper()
	select {
	case rec := <-n.elected:
		n.T.Fatalf("node %s elected with token %d; want it not elected", n.Name, rec.Term.Token())
	case <-time.After(d):
	}
}

// WaitEnded waits for the term to end.
func (rec *TermRecord) WaitEnded(t *testing.T, within time.Duration) {
	t.Helper()
	timeout := time.NewTimer(max(within, 0))
	defer timeout.Stop()
	select {
	case <-rec.Ended:
	case <-timeout.C:
		select {
		case <-rec.Ended:
		default:
			t.Fatalf("term %v still not ended after %v", rec.Term, within)
		}
	}
}

// WaitState waits until the node's session is in state want.
func (n *Node) WaitState(want runtime.SessionState, within time.Duration) runtime.Snapshot {
	n.T.Helper()
	end := time.Now().Add(within)
	for {
		s := n.C.Snapshot()
		if s.State == want {
			return s
		}
		if time.Now().After(end) {
			n.T.Fatalf("node %s: session %v after %v; want %v (last error %v)", n.Name, s.State, within, want, s.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CountEvents returns how many events of kind the node's engine reported.
func (n *Node) CountEvents(kind runtime.EventKind) int { return len(n.Events(kind)) }

// AllTerms returns every term the nodes saw, so far.
func AllTerms(nodes ...*Node) []*TermRecord {
	var all []*TermRecord
	for _, n := range nodes {
		n.mu.Lock()
		all = append(all, n.terms...)
		n.mu.Unlock()
	}
	return all
}

// NoOverlap fails the test if two terms of the nodes were valid at once: a
// term is valid from its election until it ended (an ended term's end is
// when its Done closed; a running one's is now). Tokens must increase in
// the order of election (T2).
func NoOverlap(t *testing.T, nodes ...*Node) {
	t.Helper()
	terms := AllTerms(nodes...)
	end := func(r *TermRecord) time.Time {
		select {
		case <-r.Ended:
			return r.EndedAt
		default:
			return time.Now()
		}
	}
	for i, a := range terms {
		aEnd := end(a)
		for _, b := range terms[i+1:] {
			bEnd := end(b)
			if a.ElectedAt.Before(bEnd) && b.ElectedAt.Before(aEnd) {
				// The elected callback runs after adoption: a term adopted
				// just after another ended may be seen a little late, never
				// early, so an overlap seen here is real.
				t.Errorf("two valid terms: %s's (token %d, %v–%v) and %s's (token %d, %v–%v)",
					a.Node, a.Term.Token(), a.ElectedAt.Format("05.000"), aEnd.Format("05.000"),
					b.Node, b.Term.Token(), b.ElectedAt.Format("05.000"), bEnd.Format("05.000"))
			}
			if b.ElectedAt.After(a.ElectedAt) && b.Term.Token() <= a.Term.Token() {
				t.Errorf("%s's term elected after %s's has token %d ≤ %d (T2)", b.Node, a.Node, b.Term.Token(), a.Term.Token())
			}
		}
	}
}
