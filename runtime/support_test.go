package runtime_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/testkit/termcheck"
	"github.com/simba-go/simba/runtime"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cfg is the configuration engine tests use: a 3s lease renewed every second.
// Time is virtual (testing/synctest), so the numbers cost nothing.
var cfg = runtime.ConfigFor(3 * time.Second)

func newClient(t *testing.T, b backends.Backend, opts ...runtime.Option) *runtime.Client {
	t.Helper()
	c, err := runtime.NewClient(b, cfg, opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

func closeClient(t *testing.T, c *runtime.Client) {
	t.Helper()
	if err := c.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// link is a node's connection to a shared store, which a test can cut (a
// network partition of that node alone: calls hang until their context ends,
// and notifications are lost) and heal, or freeze (the node's calls are held,
// whatever their context, until thawed; then they go on). The store's own
// faults act on every node at once.
type link struct {
	backends.Backend
	mu     sync.Mutex
	cut    chan struct{}    // non-nil while cut; closed at heal
	frozen chan struct{}    // non-nil while frozen; closed at thaw
	last   backends.Session // the store's handle of the last session opened
}

// lastSession returns the store's handle of the last session opened through
// l, bypassing the link.
func (l *link) lastSession() backends.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

func newLink(b backends.Backend) *link { return &link{Backend: b} }

func (l *link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut == nil {
		l.cut = make(chan struct{})
	}
}

func (l *link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut != nil {
		close(l.cut)
		l.cut = nil
	}
}

// Freeze holds every call the node makes from now on until Thaw, whatever
// its context: the node's I/O is stalled, as in a paused process. A held
// call waits on a channel, so in a bubble it is durably blocked: virtual time
// passes without it and synctest.Wait returns. Notifications still arrive.
func (l *link) Freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen == nil {
		l.frozen = make(chan struct{})
	}
}

// Thaw lets the held calls go on to the store, with their contexts (which
// may have ended meanwhile).
func (l *link) Thaw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen != nil {
		close(l.frozen)
		l.frozen = nil
	}
}

func (l *link) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut != nil
}

// pass waits while the link is frozen; then it returns nil if the link is
// up, or waits for ctx and returns its error wrapped as unreachable.
func (l *link) pass(ctx context.Context) error {
	l.mu.Lock()
	frozen := l.frozen
	l.mu.Unlock()
	if frozen != nil {
		<-frozen
	}
	if !l.isCut() {
		return nil
	}
	<-ctx.Done()
	return fmt.Errorf("link cut: %w (%w)", backends.ErrUnavailable, ctx.Err())
}

// leading counts the elections, locks and schedules c holds.
func leading(c *runtime.Client) int {
	n := 0
	for _, l := range c.Snapshot().Leases {
		if l.Role == runtime.RoleLeader {
			n++
		}
	}
	return n
}

// openWrapped opens a session of b and wraps it, for the tests' backends that
// count, hold or change what a session does.
func openWrapped(ctx context.Context, b backends.Backend, opts backends.SessionOptions,
	wrap func(backends.Session) backends.Session) (backends.Session, backends.Renewal, error) {
	s, r, err := b.OpenSession(ctx, opts)
	if err != nil {
		return nil, r, err
	}
	return wrap(s), r, nil
}

func (l *link) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if err := l.pass(ctx); err != nil {
		return nil, backends.Renewal{}, err
	}
	s, r, err := l.Backend.OpenSession(ctx, opts)
	if err != nil {
		return nil, r, err
	}
	l.mu.Lock()
	l.last = s
	l.mu.Unlock()
	return &linkSession{s: s, l: l}, r, nil
}

// StoreTime forwards the store's clock, if it has one.
func (l *link) StoreTime(ctx context.Context) (time.Time, error) {
	if err := l.pass(ctx); err != nil {
		return time.Time{}, err
	}
	return l.Backend.(backends.StoreClock).StoreTime(ctx)
}

type linkSession struct {
	s backends.Session
	l *link
}

func (ls *linkSession) ID() backends.SessionID { return ls.s.ID() }
func (ls *linkSession) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	if err := ls.l.pass(ctx); err != nil {
		return backends.Renewal{}, err
	}
	return ls.s.KeepAlive(ctx)
}
func (ls *linkSession) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	if err := ls.l.pass(ctx); err != nil {
		return nil, backends.Digest{}, err
	}
	return ls.s.Owned(ctx)
}
func (ls *linkSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	if err := ls.l.pass(ctx); err != nil {
		return backends.Grant{}, err
	}
	return ls.s.Acquire(ctx, name)
}
func (ls *linkSession) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	if err := ls.l.pass(ctx); err != nil {
		return backends.Digest{}, err
	}
	return ls.s.Release(ctx, name, token)
}
func (ls *linkSession) Holder(ctx context.Context, name string) (backends.Holder, error) {
	if err := ls.l.pass(ctx); err != nil {
		return backends.Holder{}, err
	}
	return ls.s.Holder(ctx, name)
}
func (ls *linkSession) PutValue(ctx context.Context, name string, token backends.Token, v []byte) error {
	if err := ls.l.pass(ctx); err != nil {
		return err
	}
	return ls.s.PutValue(ctx, name, token, v)
}
func (ls *linkSession) Join(ctx context.Context, group string, n int) error {
	if err := ls.l.pass(ctx); err != nil {
		return err
	}
	return ls.s.Join(ctx, group, n)
}
func (ls *linkSession) Leave(ctx context.Context, group string) error {
	if err := ls.l.pass(ctx); err != nil {
		return err
	}
	return ls.s.Leave(ctx, group)
}
func (ls *linkSession) Members(ctx context.Context, group string) (backends.GroupView, error) {
	if err := ls.l.pass(ctx); err != nil {
		return backends.GroupView{}, err
	}
	return ls.s.Members(ctx, group)
}
func (ls *linkSession) Close(ctx context.Context) error {
	if err := ls.l.pass(ctx); err != nil {
		return err
	}
	return ls.s.Close(ctx)
}
func (ls *linkSession) Watch(name string, fn func()) func() {
	n, ok := ls.s.(backends.Notifier)
	if !ok {
		return func() {}
	}
	return n.Watch(name, func() {
		if !ls.l.isCut() {
			fn()
		}
	})
}

// termLog records every term of a set of clients in a termcheck.Recorder
// on the bubble's clock. A term's adoption and end come from its client's
// observer events (EventElected, EventRevoked): they are delivered at the
// virtual instant they happened, since a bubble's clock stands still while
// any goroutine can run, and they do not wait for the listener's queue. The
// *Term and the callbacks come from the listener, which may run later: a
// node closed at the instant it won runs the elected callback of a term that
// has already ended.
//
// check verifies the whole history with termcheck — never two valid terms
// of a name at one instant (D3), tokens strictly increasing in the order
// terms began (T2), every elected callback followed by exactly one revoked
// one (L1) — and what only the log knows: every term observed and ended
// once, a revoked callback's reason the term's (T4), no term valid after its
// client closed.
type termLog struct {
	mu         sync.Mutex
	rec        *termcheck.Recorder // made at the first event, in the bubble
	terms      map[termKey]*termRecord
	violations []string
}

type termKey struct {
	node  int
	name  string
	token runtime.Token
}

type termRecord struct {
	id         termcheck.TermID
	node       int
	name       string
	token      runtime.Token
	term       *runtime.Term // from the elected callback; nil if it never ran
	start, end time.Time     // adoption and end, from the observer's events
	observed   int           // EventElected events seen
	ended      int           // EventRevoked events seen
	elected    int           // elected callbacks
	revoked    int           // revoked callbacks
	reason     runtime.Reason
}

// nodeName is a node's name in the record.
func nodeName(node int) string { return fmt.Sprintf("node %d", node) }

// record returns the term's record, made when the term is first seen (by
// its adoption event, or its callback if that came first). Called with l.mu
// held.
func (l *termLog) record(node int, name string, token runtime.Token) *termRecord {
	if l.terms == nil {
		l.terms = make(map[termKey]*termRecord)
		l.rec = termcheck.NewRecorder()
	}
	k := termKey{node, name, token}
	r := l.terms[k]
	if r == nil {
		r = &termRecord{id: l.rec.Begin(name, nodeName(node), int64(token)), node: node, name: name, token: token}
		l.terms[k] = r
	}
	return r
}

// observer returns node's observer; every event is passed on to next too.
// Create each client whose listener is log.listener(node) with
// runtime.WithObserver(log.observer(node)).
func (l *termLog) observer(node int, next ...runtime.Observer) runtime.Observer {
	return runtime.ObserverFunc(func(ev runtime.Event) {
		for _, o := range next {
			o.Observe(ev)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		switch ev.Kind {
		case runtime.EventElected:
			r := l.record(node, ev.Name, ev.Token)
			r.observed++
			r.start = time.Now()
		case runtime.EventRevoked:
			r := l.record(node, ev.Name, ev.Token)
			r.ended++
			r.end, r.reason = time.Now(), ev.Reason
			l.rec.End(r.id)
		}
	})
}

func (l *termLog) listener(node int) runtime.Listener {
	return runtime.ListenerFuncs{
		OnElected: func(_ context.Context, t *runtime.Term) {
			l.mu.Lock()
			defer l.mu.Unlock()
			r := l.record(node, t.Name(), t.Token())
			if r.term != nil && r.term != t {
				l.violations = append(l.violations, fmt.Sprintf("T2: node %d elected twice with %v", node, t))
			}
			r.term = t
			r.elected++
			l.rec.Elected(r.id)
		},
		OnRevoked: func(_ context.Context, t *runtime.Term, reason runtime.Reason) {
			l.mu.Lock()
			defer l.mu.Unlock()
			r := l.record(node, t.Name(), t.Token())
			if r.term != nil && r.term != t {
				l.violations = append(l.violations, fmt.Sprintf("L1: node %d: revoked %v, not the term it was elected with", node, t))
			}
			r.revoked++
			l.rec.Revoked(r.id) // without an elected callback, termcheck's pairing says so
			if reason != t.Reason() {
				l.violations = append(l.violations, fmt.Sprintf("T4: node %d: %v revoked with %v, but its Reason is %v", node, t, reason, t.Reason()))
			}
		},
	}
}

// leader returns the node holding a valid term, or -1.
func (l *termLog) leader() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.terms {
		if r.term != nil && r.term.Valid() {
			return r.node
		}
	}
	return -1
}

// sorted returns the terms recorded, by name and then by token.
func (l *termLog) sorted() []*termRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	terms := slices.Collect(maps.Values(l.terms))
	slices.SortFunc(terms, func(a, b *termRecord) int {
		return cmp.Or(strings.Compare(a.name, b.name), cmp.Compare(a.token, b.token))
	})
	return terms
}

// report checks what was recorded so far with termcheck.
func (l *termLog) report() termcheck.Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return termcheck.Report{}
	}
	return l.rec.Check(termcheck.Options{})
}

// check verifies the whole history, once every client is closed (so every
// callback is due: the nodes are settled). It first waits until every
// goroutine of the bubble is blocked, so that the last events and callbacks
// have been recorded.
func (l *termLog) check(t *testing.T) {
	t.Helper()
	synctest.Wait()
	terms := l.sorted()
	l.mu.Lock()
	for _, v := range l.violations {
		t.Error(v)
	}
	for _, r := range terms {
		if r.observed != 1 {
			t.Errorf("%s#%d (node %d): %d EventElected events, want 1 (is the client created with log.observer(%d)?)",
				r.name, r.token, r.node, r.observed, r.node)
		}
		if r.ended != 1 {
			t.Errorf("%s#%d (node %d) never ended (%d EventRevoked events, want 1)", r.name, r.token, r.node, r.ended)
		}
		if r.term != nil && r.term.Valid() {
			t.Errorf("%v (node %d) is valid after its client closed", r.term, r.node)
		}
		l.rec.Settle(nodeName(r.node))
	}
	l.mu.Unlock()
	for _, v := range l.report().Violations {
		t.Error(v)
	}
}

// count returns how many terms had their elected callback run.
func (l *termLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.terms {
		n += r.elected
	}
	return n
}

// events collects a client's observer events, with the instant each was
// delivered (in a bubble, the instant it happened).
type events struct {
	mu  sync.Mutex
	evs []runtime.Event
	ats []time.Time
}

func (e *events) Observe(ev runtime.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.ats = append(e.ats, time.Now())
	e.mu.Unlock()
}

// at returns when each event of kind was delivered.
func (e *events) at(kind runtime.EventKind) []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []time.Time
	for i, ev := range e.evs {
		if ev.Kind == kind {
			out = append(out, e.ats[i])
		}
	}
	return out
}

func (e *events) of(kind runtime.EventKind) []runtime.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []runtime.Event
	for _, ev := range e.evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// logRecords is a slog.Handler that keeps the records it is given.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// count returns how many records of level have a message containing text.
func (h *logRecords) count(level slog.Level, text string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level && strings.Contains(r.Message, text) {
			n++
		}
	}
	return n
}
