package simbazk

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 3 s lease,
// renewed every second.
var testConfig = runtime.ConfigFor(3 * time.Second)

// node is one runtime client contending for one lease, recording its terms
// and the engine's events.
type node struct {
	t    *testing.T
	name string
	c    *runtime.Client
	e    *runtime.Election

	mu      sync.Mutex
	terms   []*termRecord
	events  []runtime.Event
	elected chan *termRecord
}

// termRecord is what a node saw of one term. Times are the test process's
// monotonic clock (one process: one clock).
type termRecord struct {
	node      string
	term      *runtime.Term
	electedAt time.Time // when the elected callback ran: after adoption
	endedAt   time.Time // when Done was closed (observed by a goroutine)
	reason    runtime.Reason
	ended     chan struct{}
}

// startNode starts a client on b with cfg and an election for lease.
func startNode(t *testing.T, name string, b backends.Backend, cfg runtime.Config, lease string) *node {
	t.Helper()
	n := &node{t: t, name: name, elected: make(chan *termRecord, 16)}
	c, err := runtime.NewClient(b, cfg, runtime.WithIdentity(name), runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
		n.mu.Lock()
		n.events = append(n.events, e)
		n.mu.Unlock()
	})))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	n.c = c
	t.Cleanup(func() { n.close() })
	n.e, err = c.StartElection(lease, runtime.ListenerFuncs{
		OnElected: func(_ context.Context, term *runtime.Term) {
			rec := &termRecord{node: name, term: term, electedAt: time.Now(), ended: make(chan struct{})}
			go func() {
				<-term.Done()
				rec.endedAt = time.Now()
				rec.reason = term.Reason()
				close(rec.ended)
			}()
			n.mu.Lock()
			n.terms = append(n.terms, rec)
			n.mu.Unlock()
			n.elected <- rec
		},
	})
	if err != nil {
		t.Fatalf("StartElection: %v", err)
	}
	return n
}

func (n *node) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.c.Close(ctx); err != nil {
		n.t.Logf("closing node %s: %v", n.name, err)
	}
}

// waitElected waits for the node's next term.
func (n *node) waitElected(within time.Duration) *termRecord {
	n.t.Helper()
	select {
	case rec := <-n.elected:
		return rec
	case <-time.After(within):
		n.t.Fatalf("node %s not elected within %v (snapshot %+v)", n.name, within, n.c.Snapshot())
		return nil
	}
}

// notElected fails the test if the node is elected within d.
func (n *node) notElected(d time.Duration) {
	n.t.Helper()
	select {
	case rec := <-n.elected:
		n.t.Fatalf("node %s elected with token %d; want it not elected", n.name, rec.term.Token())
	case <-time.After(d):
	}
}

// waitEnded waits for the term to end.
func (rec *termRecord) waitEnded(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-rec.ended:
	case <-time.After(max(within, 0)):
		select {
		case <-rec.ended:
		default:
			t.Fatalf("term %v of %s still not ended after %v", rec.term, rec.node, within)
		}
	}
}

// waitState waits until the node's session is in state want.
func (n *node) waitState(want runtime.SessionState, within time.Duration) runtime.Snapshot {
	n.t.Helper()
	end := time.Now().Add(within)
	for {
		s := n.c.Snapshot()
		if s.State == want {
			return s
		}
		if time.Now().After(end) {
			n.t.Fatalf("node %s: session %v after %v; want %v (last error %v)", n.name, s.State, within, want, s.LastError)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countEvents returns how many events of kind the node's engine reported.
func (n *node) countEvents(kind runtime.EventKind) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, e := range n.events {
		if e.Kind == kind {
			c++
		}
	}
	return c
}

// allTerms returns every term the nodes saw, so far.
func allTerms(nodes ...*node) []*termRecord {
	var all []*termRecord
	for _, n := range nodes {
		n.mu.Lock()
		all = append(all, n.terms...)
		n.mu.Unlock()
	}
	return all
}

// noOverlap fails the test if two terms of the nodes were valid at once: a
// term is valid from its election until it ended (an ended term's end is
// when its Done closed; a running one's is now). Tokens must increase in
// the order of election.
func noOverlap(t *testing.T, nodes ...*node) {
	t.Helper()
	terms := allTerms(nodes...)
	for i, a := range terms {
		aEnd := time.Now()
		select {
		case <-a.ended:
			aEnd = a.endedAt
		default:
		}
		for _, b := range terms[i+1:] {
			bEnd := time.Now()
			select {
			case <-b.ended:
				bEnd = b.endedAt
			default:
			}
			if a.electedAt.Before(bEnd) && b.electedAt.Before(aEnd) && a != b {
				// The elected callback runs after adoption: a term adopted
				// just after another ended may be seen a little late, never
				// early, so an overlap seen here is real.
				t.Errorf("two valid terms: %s's (token %d, %v–%v) and %s's (token %d, %v–%v)",
					a.node, a.term.Token(), a.electedAt.Format("05.000"), aEnd.Format("05.000"),
					b.node, b.term.Token(), b.electedAt.Format("05.000"), bEnd.Format("05.000"))
			}
			if b.electedAt.After(a.electedAt) && b.term.Token() <= a.term.Token() {
				t.Errorf("%s's term elected after %s's has token %d ≤ %d (T2)", b.node, a.node, b.term.Token(), a.term.Token())
			}
		}
	}
}
