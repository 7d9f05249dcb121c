package enginetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/termcheck"
	"github.com/simba-go/simba/runtime"
)

// Cluster is the nodes of one test and the record of their terms. When the
// test ends, after its nodes have closed, it checks the record with
// termcheck and fails the test for every violation.
type Cluster struct {
	t   *testing.T
	cfg runtime.Config
	rec *termcheck.Recorder
}

// NewCluster returns a cluster whose nodes run with cfg.
func NewCluster(t *testing.T, cfg runtime.Config) *Cluster {
	t.Helper()
	c := &Cluster{t: t, cfg: cfg, rec: termcheck.NewRecorder()}
	// Registered before any node's Close, so run after them all.
	t.Cleanup(func() {
		if err := c.rec.Check(termcheck.Options{}).Err(); err != nil {
			t.Errorf("the terms of the cluster's nodes:\n%v", err)
		}
	})
	return c
}

// Config returns the nodes' configuration.
func (c *Cluster) Config() runtime.Config { return c.cfg }

// Terms returns how many terms the nodes were elected with so far.
func (c *Cluster) Terms() int { return c.rec.Len() }

// Highest returns the highest token of the terms of name the nodes were
// elected with so far, or 0.
func (c *Cluster) Highest(name string) int64 {
	var h int64
	for _, t := range c.rec.Terms() {
		if t.Name == name {
			h = max(h, t.Token)
		}
	}
	return h
}

// Check fails the test now for every violation of the term invariant so
// far (NewCluster checks again when the test ends).
func (c *Cluster) Check() {
	c.t.Helper()
	if err := c.rec.Check(termcheck.Options{}).Err(); err != nil {
		c.t.Errorf("the terms of the cluster's nodes:\n%v", err)
	}
}

// Start starts a node named name on b, with an election for each lease.
func (c *Cluster) Start(name string, b backends.Backend, leases ...string) *Node {
	c.t.Helper()
	n := c.NewNode(name, b)
	for _, l := range leases {
		n.Start(l)
	}
	return n
}

// NewNode starts a node named name (its client's identity) on b, with opts
// after the cluster's; its client is closed when the test ends.
func (c *Cluster) NewNode(name string, b backends.Backend, opts ...runtime.Option) *Node {
	c.t.Helper()
	n := &Node{T: c.t, Name: name, cluster: c, elections: map[string]*runtime.Election{},
		elected: make(chan *TermRecord, 1024)}
	opts = append([]runtime.Option{runtime.WithIdentity(name), runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) {
		n.mu.Lock()
		n.events = append(n.events, e)
		n.mu.Unlock()
	}))}, opts...)
	client, err := runtime.NewClient(b, c.cfg, opts...)
	if err != nil {
		c.t.Fatalf("NewClient: %v", err)
	}
	n.C = client
	c.t.Cleanup(n.Close)
	return n
}

// Node is one runtime client of a [Cluster], contending for leases and
// recording its terms (in the cluster's record) and its engine's events.
type Node struct {
	T    *testing.T
	Name string
	C    *runtime.Client
	E    *runtime.Election // the election of the first lease started

	cluster   *Cluster
	mu        sync.Mutex
	elections map[string]*runtime.Election
	events    []runtime.Event
	elected   chan *TermRecord
	closed    bool
}

// TermRecord is what a node saw of one term. Times are the test process's
// monotonic clock.
type TermRecord struct {
	Node      string
	Term      *runtime.Term
	ElectedAt time.Time // when the elected callback ran: after adoption
	EndedAt   time.Time // when the term ended (Term.EndedAt); set once Ended is closed
	Reason    runtime.Reason
	Ended     chan struct{}

	id termcheck.TermID
}

// Start starts the node's election for lease, with opts.
func (n *Node) Start(lease string, opts ...runtime.ElectionOption) *runtime.Election {
	n.T.Helper()
	e, err := n.C.StartElection(lease, n.Listener(), opts...)
	if err != nil {
		n.T.Fatalf("node %s: StartElection(%q): %v", n.Name, lease, err)
	}
	n.mu.Lock()
	n.elections[lease] = e
	if n.E == nil {
		n.E = e
	}
	n.mu.Unlock()
	return e
}

// Stop stops the node's election for lease: a graceful hand-off if it
// leads.
func (n *Node) Stop(lease string) {
	n.T.Helper()
	n.mu.Lock()
	e := n.elections[lease]
	delete(n.elections, lease)
	n.mu.Unlock()
	if e == nil {
		n.T.Fatalf("node %s: Stop(%q): no such election", n.Name, lease)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		n.T.Errorf("node %s: Stop(%q): %v", n.Name, lease, err)
	}
}

// Listener returns a listener that records the terms of an election the
// test starts itself on the node's client, as the node's own elections do.
func (n *Node) Listener() runtime.Listener {
	var mu sync.Mutex
	ids := map[*runtime.Term]termcheck.TermID{}
	return runtime.ListenerFuncs{
		OnElected: func(_ context.Context, term *runtime.Term) {
			rec := n.track(term)
			mu.Lock()
			ids[term] = rec.id
			mu.Unlock()
		},
		OnRevoked: func(_ context.Context, term *runtime.Term, _ runtime.Reason) {
			mu.Lock()
			id, ok := ids[term]
			delete(ids, term)
			mu.Unlock()
			if !ok {
				// A revoked callback without an elected one (L1): recorded
				// as a term of its own, which the check reports.
				id = n.cluster.rec.Begin(term.Name(), n.Name, int64(term.Token()))
				n.cluster.rec.End(id)
			}
			n.cluster.rec.Revoked(id)
		},
	}
}

// track records term as elected now.
func (n *Node) track(term *runtime.Term) *TermRecord {
	rec := &TermRecord{Node: n.Name, Term: term, ElectedAt: time.Now(), Ended: make(chan struct{})}
	rec.id = n.cluster.rec.Begin(term.Name(), n.Name, int64(term.Token()))
	n.cluster.rec.Elected(rec.id)
	go func() {
		<-term.Done()
		// When the term ended, not when this goroutine woke: on a store as
		// quick as the memory store the next holder may begin in between.
		rec.EndedAt = term.EndedAt()
		n.cluster.rec.EndAt(rec.id, rec.EndedAt)
		rec.Reason = term.Reason()
		close(rec.Ended)
	}()
	select {
	case n.elected <- rec:
	default: // nobody waits for this many: the record has it
	}
	return rec
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

// CountEvents returns how many events of kind the node's engine reported.
func (n *Node) CountEvents(kind runtime.EventKind) int { return len(n.Events(kind)) }

// Close closes the node's client, once. A client that could not hand over
// (its store unreachable, as fault tests make it) says so, which is logged;
// a Close that does not finish in 10 s fails the test. Once Close returned
// in time, every revoked callback has run, and the record says so
// (termcheck's pairing).
func (n *Node) Close() {
	n.mu.Lock()
	closed := n.closed
	n.closed = true
	n.mu.Unlock()
	if closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := n.C.Close(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		n.T.Errorf("closing node %s: %v", n.Name, err)
		return
	case err != nil:
		n.T.Logf("closing node %s: %.300s", n.Name, err)
	}
	n.cluster.rec.Settle(n.Name)
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
		n.T.Fatalf("node %s elected with %v; want it not elected", n.Name, rec.Term)
	case <-time.After(d):
	}
}

// Leading returns the names the node holds a valid term of, sorted.
func (n *Node) Leading() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var names []string
	for name, e := range n.elections {
		if term := e.Term(); term != nil && term.Valid() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
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

// EndedBy reports whether the term has ended, and when.
func (rec *TermRecord) EndedBy() (time.Time, bool) {
	select {
	case <-rec.Ended:
		return rec.EndedAt, true
	default:
		return time.Time{}, false
	}
}
