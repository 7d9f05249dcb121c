package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/backends"
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
// and notifications are lost) and heal. The store's own faults act on every
// node at once.
type link struct {
	backends.Backend
	mu  sync.Mutex
	cut chan struct{} // non-nil while cut; closed at heal
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

func (l *link) isCut() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cut != nil
}

// pass returns nil if the link is up, or waits for ctx and returns its
// error wrapped as unreachable.
func (l *link) pass(ctx context.Context) error {
	if !l.isCut() {
		return nil
	}
	<-ctx.Done()
	return fmt.Errorf("link cut: %w (%w)", backends.ErrUnavailable, ctx.Err())
}

func (l *link) OpenSession(ctx context.Context, ttl time.Duration) (backends.Session, backends.Renewal, error) {
	if err := l.pass(ctx); err != nil {
		return nil, backends.Renewal{}, err
	}
	s, r, err := l.Backend.OpenSession(ctx, ttl)
	if err != nil {
		return nil, r, err
	}
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
func (ls *linkSession) Release(ctx context.Context, name string, token backends.Token) error {
	if err := ls.l.pass(ctx); err != nil {
		return err
	}
	return ls.s.Release(ctx, name, token)
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

// termLog records every term of a set of clients as the listeners see them:
// when each became known, when it ended, and its callbacks. It checks, at
// every election, that no other recorded term is valid at that instant.
type termLog struct {
	mu         sync.Mutex
	terms      []*termRecord
	violations []string
}

type termRecord struct {
	node       int
	term       *runtime.Term
	start, end time.Time
	elected    int
	revoked    int
	reason     runtime.Reason
}

func (l *termLog) listener(node int) runtime.Listener {
	return runtime.ListenerFuncs{
		OnElected: func(_ context.Context, t *runtime.Term) {
			now := time.Now()
			l.mu.Lock()
			defer l.mu.Unlock()
			for _, r := range l.terms {
				if r.term.Name() == t.Name() && r.term.Valid() && r.term != t {
					l.violations = append(l.violations, fmt.Sprintf(
						"at %v node %d elected %v while node %d's %v is still valid", now, node, t, r.node, r.term))
				}
			}
			rec := &termRecord{node: node, term: t, start: now, elected: 1}
			l.terms = append(l.terms, rec)
			go func() { // record when Valid turned false
				<-t.Done()
				l.mu.Lock()
				rec.end = time.Now()
				l.mu.Unlock()
			}()
		},
		OnRevoked: func(_ context.Context, t *runtime.Term, r runtime.Reason) {
			l.mu.Lock()
			defer l.mu.Unlock()
			for _, rec := range l.terms {
				if rec.term == t {
					rec.revoked++
					rec.reason = r
					return
				}
			}
			l.violations = append(l.violations, fmt.Sprintf("L1: revoked %v without elected", t))
		},
	}
}

// leader returns the node holding a valid term, or -1.
func (l *termLog) leader() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range slices.Backward(l.terms) {
		if r.term.Valid() {
			return r.node
		}
	}
	return -1
}

// check verifies the whole history: no two terms of a name overlap in time,
// tokens strictly increase in the order terms began, and every elected
// callback was followed by exactly one revoked callback.
func (l *termLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.violations {
		t.Error(v)
	}
	terms := slices.Clone(l.terms)
	slices.SortStableFunc(terms, func(a, b *termRecord) int { return a.start.Compare(b.start) })
	for i, r := range terms {
		if r.elected != 1 || r.revoked != 1 {
			t.Errorf("L1: %v had %d elected and %d revoked callbacks, want 1 and 1", r.term, r.elected, r.revoked)
		}
		if r.end.IsZero() {
			t.Errorf("%v never ended", r.term)
		}
		if i == 0 {
			continue
		}
		prev := terms[i-1]
		if prev.term.Name() != r.term.Name() {
			continue
		}
		if r.start.Before(prev.end) {
			t.Errorf("two valid terms: node %d's %v [%v, %v) overlaps node %d's %v from %v",
				prev.node, prev.term, prev.start, prev.end, r.node, r.term, r.start)
		}
		if r.term.Token() <= prev.term.Token() {
			t.Errorf("T2: token %d after %d", r.term.Token(), prev.term.Token())
		}
	}
}

func (l *termLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.terms)
}

// events collects a client's observer events.
type events struct {
	mu  sync.Mutex
	evs []runtime.Event
}

func (e *events) Observe(ev runtime.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
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
