package simbaredis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 2 s lease,
// renewed every 667 ms; the local validity is 2 s × 0.99 − 50 ms = 1.93 s.
var testConfig = runtime.ConfigFor(2 * time.Second)

// sameNamespace returns another backend on the namespace of b, through
// client: another node of the same cluster.
func sameNamespace(t testing.TB, b *Backend, client redis.UniversalClient, opts ...Option) *Backend {
	t.Helper()
	nb, err := New(client, append([]Option{WithPrefix(b.Prefix()), WithMaxLease(b.MaxLease())}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { nb.Close() })
	return nb
}

// node is one runtime client contending for one lease, recording its terms.
type node struct {
	t    *testing.T
	name string
	c    *runtime.Client
	e    *runtime.Election

	mu      sync.Mutex
	terms   []*termRecord
	elected chan *termRecord
}

// termRecord is what a node saw of one term. Times are the node's
// monotonic clock (one process: one clock).
type termRecord struct {
	term      *runtime.Term
	electedAt time.Time // when the elected callback ran: an upper bound of adoption
	endedAt   time.Time // when Done was closed (observed by a goroutine)
	reason    runtime.Reason
	ended     chan struct{}
}

// startNode starts a client on b and an election for lease.
func startNode(t *testing.T, name string, b *Backend, lease string) *node {
	t.Helper()
	c, err := runtime.NewClient(b, testConfig)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	n := &node{t: t, name: name, c: c, elected: make(chan *termRecord, 16)}
	t.Cleanup(func() { n.close() })
	n.e, err = c.StartElection(lease, runtime.ListenerFuncs{
		OnElected: func(_ context.Context, term *runtime.Term) {
			rec := &termRecord{term: term, electedAt: time.Now(), ended: make(chan struct{})}
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
		n.t.Errorf("closing node %s: %v", n.name, err)
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
	timeout := time.NewTimer(max(within, 0))
	defer timeout.Stop()
	select {
	case <-rec.ended:
	case <-timeout.C:
		select {
		case <-rec.ended:
		default:
			t.Fatalf("term %v still not ended after %v", rec.term, within)
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
