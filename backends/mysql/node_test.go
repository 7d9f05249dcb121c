package simbamysql

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/simba-go/simba/runtime"
)

// testConfig is the engine's timing in the end-to-end tests: a 2 s lease,
// renewed every 667 ms; the local validity is 2 s × 0.99 − 50 ms = 1.93 s.
var testConfig = runtime.ConfigFor(2 * time.Second)

// monitor watches every term of a test's nodes, continuously: no two terms
// of one name are valid at any instant (T2, D3), and the tokens of a name
// strictly increase in the order its terms begin (F5). It checks when a term
// is elected (every other valid term of its name is an overlap: the new one
// is valid by then) and, between elections, samples every term's Valid every
// millisecond, from the runtime's own bookkeeping (Term.Valid is a pure
// function of the node's monotonic clock and deadline).
type monitor struct {
	t      *testing.T
	mu     sync.Mutex
	live   map[string][]*runtime.Term // terms not yet seen ended, by name
	last   map[string]runtime.Token
	terms  int
	errs   []string
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

func newMonitor(t *testing.T) *monitor {
	m := &monitor{t: t, live: map[string][]*runtime.Term{}, last: map[string]runtime.Token{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go m.sample()
	t.Cleanup(m.check)
	return m
}

func (m *monitor) fail(format string, args ...any) {
	if len(m.errs) < 20 {
		m.errs = append(m.errs, fmt.Sprintf(format, args...))
	}
}

// elected records term, which its node was just elected with.
func (m *monitor) elected(term *runtime.Term) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := term.Name()
	for _, other := range m.live[name] {
		if other.Valid() && term.Valid() {
			m.fail("%v elected while %v was still valid (%v left): two valid terms", term, other, other.Remaining())
		}
	}
	if last, ok := m.last[name]; ok && term.Token() <= last {
		m.fail("%v elected after a term with token %d: tokens must strictly increase", term, last)
	}
	m.last[name] = max(m.last[name], term.Token())
	m.live[name] = append(m.live[name], term)
	m.terms++
}

func (m *monitor) sample() {
	defer close(m.done)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		m.mu.Lock()
		for name, terms := range m.live {
			valid := terms[:0:0]
			kept := terms[:0]
			for _, term := range terms {
				select {
				case <-term.Done():
					continue // ended: never valid again (T3)
				default:
				}
				kept = append(kept, term)
				if term.Valid() {
					valid = append(valid, term)
				}
			}
			m.live[name] = kept
			if len(valid) > 1 {
				m.fail("%v valid at the same instant: two valid terms", valid)
			}
		}
		m.mu.Unlock()
	}
}

// highest returns the highest token recorded for name.
func (m *monitor) highest(name string) runtime.Token {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[name]
}

// elections returns the number of terms recorded.
func (m *monitor) elections() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.terms
}

// check stops the sampling and fails the test for what it saw.
func (m *monitor) check() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.errs {
		m.t.Error(e)
	}
}

// node is one runtime client, recording its terms.
type node struct {
	t    *testing.T
	name string
	c    *runtime.Client
	m    *monitor

	mu        sync.Mutex
	elections map[string]*runtime.Election
	elected   chan *termRecord
}

// termRecord is what a node saw of one term. Times are the process's
// monotonic clock.
type termRecord struct {
	term      *runtime.Term
	electedAt time.Time // when the elected callback ran: an upper bound of adoption
	endedAt   time.Time // when Done was closed (observed by a goroutine)
	reason    runtime.Reason
	ended     chan struct{}
}

// newNode starts a client on b, closed when the test ends; m may be nil.
func newNode(t *testing.T, name string, b *Backend, m *monitor, opts ...runtime.Option) *node {
	t.Helper()
	c, err := runtime.NewClient(b, testConfig, opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	n := &node{t: t, name: name, c: c, m: m, elections: map[string]*runtime.Election{}, elected: make(chan *termRecord, 1024)}
	t.Cleanup(n.close)
	return n
}

// startNode starts a client on b and an election for each lease.
func startNode(t *testing.T, name string, b *Backend, m *monitor, leases ...string) *node {
	t.Helper()
	n := newNode(t, name, b, m)
	for _, l := range leases {
		n.start(l)
	}
	return n
}

// start starts the node's election for lease.
func (n *node) start(lease string) {
	n.t.Helper()
	e, err := n.c.StartElection(lease, runtime.ListenerFuncs{
		OnElected: func(_ context.Context, term *runtime.Term) {
			if n.m != nil {
				n.m.elected(term)
			}
			rec := &termRecord{term: term, electedAt: time.Now(), ended: make(chan struct{})}
			go func() {
				<-term.Done()
				rec.endedAt = time.Now()
				rec.reason = term.Reason()
				close(rec.ended)
			}()
			select {
			case n.elected <- rec:
			default:
			}
		},
	})
	if err != nil {
		n.t.Fatalf("StartElection(%q): %v", lease, err)
	}
	n.mu.Lock()
	n.elections[lease] = e
	n.mu.Unlock()
}

// stop stops the node's election for lease (a graceful hand-off if it
// leads).
func (n *node) stop(lease string) {
	n.t.Helper()
	n.mu.Lock()
	e := n.elections[lease]
	delete(n.elections, lease)
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		n.t.Errorf("node %s: Stop(%q): %v", n.name, lease, err)
	}
}

// leading returns the names the node holds a valid term of.
func (n *node) leading() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var names []string
	for name, e := range n.elections {
		if term := e.Term(); term != nil && term.Valid() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func (n *node) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.c.Close(ctx); err != nil {
		// A node whose link a test cut cannot hand over: Close says so,
		// and its leases expire in the store. Only a timeout is a failure.
		if errors.Is(err, context.DeadlineExceeded) {
			n.t.Errorf("closing node %s: %v", n.name, err)
		} else {
			n.t.Logf("closing node %s: %.300s", n.name, err)
		}
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
		n.t.Fatalf("node %s elected with %v; want it not elected", n.name, rec.term)
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
