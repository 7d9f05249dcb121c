package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// These tests drive the state machine alone: the clock is a variable, backend
// replies are scripted, and every effect is inspected. Nothing runs
// concurrently, so each expectation is exact.

type harness struct {
	t   *testing.T
	m   *Machine
	cfg vocab.Config
	now Mono

	sent       []Request // requests not yet answered, in order
	dispatched []Effect
	tasks      []TermID
	events     []vocab.Event
	completed  []Effect
	log        []string // every effect, in order, for ordering checks

	terms     map[TermID]*hterm // every term started, as a driver sees it
	deadlines map[uint64]Mono   // each session's local deadline, as a driver sees it
	lastID    ContenderID
}

// hterm is a term as the driver sees it, from the core's effects.
type hterm struct {
	id     TermID
	name   string
	token  Token
	gen    uint64
	ended  bool
	reason vocab.Reason
	h      *harness
}

func (t *hterm) Valid() bool          { return !t.ended && t.h.now < t.h.deadlines[t.gen] }
func (t *hterm) Reason() vocab.Reason { return t.reason }
func (t *hterm) deadline() Mono       { return t.h.deadlines[t.gen] }
func (t *hterm) String() string       { return fmt.Sprintf("%s#%d", t.name, t.token) }

var errDown = fmt.Errorf("connection refused: %w", backends.ErrUnavailable)

func newHarness(t *testing.T, cfg vocab.Config) *harness {
	h := &harness{t: t, cfg: cfg, terms: make(map[TermID]*hterm), deadlines: make(map[uint64]Mono)}
	h.m = New(cfg, 1)
	h.m.Tick(0)
	h.collect()
	return h
}

func (h *harness) collect() {
	effs, _, _ := h.m.Ready()
	h.collectFrom(effs)
}

// collectFrom records effects as a driver would perform them.
func (h *harness) collectFrom(effs []Effect) {
	for _, e := range effs {
		switch e.Kind {
		case EffSend:
			h.sent = append(h.sent, e.Req)
			h.log = append(h.log, "send "+e.Req.Kind.String())
		case EffDispatch:
			h.dispatched = append(h.dispatched, e)
			h.log = append(h.log, fmt.Sprintf("dispatch elected=%v", e.Elected))
		case EffStartTask:
			h.tasks = append(h.tasks, e.Term)
			h.log = append(h.log, "start task")
		case EffEvent:
			h.events = append(h.events, e.Event)
			h.log = append(h.log, "event "+e.Event.Kind.String())
		case EffComplete:
			h.completed = append(h.completed, e)
			h.log = append(h.log, "complete")
		case EffTermStarted:
			h.terms[e.Term] = &hterm{id: e.Term, name: e.Name, token: e.Token, gen: e.Gen, h: h}
		case EffTermEnded:
			h.terms[e.Term].ended, h.terms[e.Term].reason = true, e.Reason
		case EffSetDeadline:
			h.deadlines[e.Gen] = e.At
		}
	}
}

// step hands the machine an input at the harness's time.
func (h *harness) step(in Input) error {
	h.t.Helper()
	err := h.m.Step(h.now, in)
	h.collect()
	return err
}

// advanceTo moves the clock to at and ticks.
func (h *harness) advanceTo(at Mono) {
	h.t.Helper()
	if at < h.now {
		h.t.Fatalf("time goes backwards: %v → %v", h.now, at)
	}
	h.now = at
	h.m.Tick(at)
	h.collect()
}

// take removes and returns the oldest unanswered request of kind.
func (h *harness) take(kind ReqKind) Request {
	h.t.Helper()
	for i, r := range h.sent {
		if r.Kind == kind {
			h.sent = slices.Delete(h.sent, i, i+1)
			return r
		}
	}
	h.t.Fatalf("no %v request was sent; unanswered: %v", kind, h.sent)
	return Request{}
}

func (h *harness) has(kind ReqKind) bool {
	return slices.ContainsFunc(h.sent, func(r Request) bool { return r.Kind == kind })
}

func (h *harness) reply(r Request, res Result) {
	h.t.Helper()
	h.step(Reply{ID: r.ID, Result: res})
}

func renewal(remaining time.Duration, version uint64) Result {
	return Result{Renewal: backends.Renewal{Remaining: remaining, Digest: backends.Digest{Version: version}}}
}

// open answers the pending open request with a full lease.
func (h *harness) open() Request {
	h.t.Helper()
	r := h.take(ReqOpen)
	h.reply(r, Result{Session: backends.SessionID(fmt.Sprint("s", r.Gen)), Renewal: backends.Renewal{Remaining: h.cfg.LeaseDuration}})
	return r
}

func (h *harness) startElection(name string, listener, task bool) *contender {
	h.t.Helper()
	h.lastID++
	id := h.lastID
	if err := h.step(Start{ID: id, Name: name, Kind: KindElection, Listener: listener, Task: task,
		TaskEndCooldown: h.cfg.RenewInterval}); err != nil {
		h.t.Fatal(err)
	}
	return h.m.byID[id]
}

// termOf returns c's current term as the driver sees it.
func (h *harness) termOf(c *contender) *hterm {
	if c.term == nil {
		return nil
	}
	return h.terms[c.term.id]
}

// win answers c's pending acquire with token and returns the term.
func (h *harness) win(c *contender, token Token) *hterm {
	h.t.Helper()
	r := h.take(ReqAcquire)
	if r.Name != c.name {
		h.t.Fatalf("acquire for %q, want %q", r.Name, c.name)
	}
	h.reply(r, Result{Grant: backends.Grant{Token: token}})
	if c.term == nil || c.term.token != token {
		h.t.Fatalf("term not adopted: %+v", c.term)
	}
	return h.termOf(c)
}

// keepAliveUntil advances to at, answering every renewal on the way.
func (h *harness) keepAliveUntil(at Mono) {
	h.t.Helper()
	for h.now < at {
		next := at
		if s := h.m.sess; s != nil && s.renewAt > h.now && s.renewAt < next {
			next = s.renewAt
		}
		h.advanceTo(next)
		for h.has(ReqKeepAlive) {
			h.reply(h.take(ReqKeepAlive), renewal(h.cfg.LeaseDuration, h.m.sess.digest.Version))
		}
	}
}

func (h *harness) eventCount(kind vocab.EventKind) int {
	n := 0
	for _, e := range h.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func localDeadline(cfg vocab.Config, sentAt Mono, remaining time.Duration) Mono {
	return sentAt + time.Duration(float64(remaining)*(1-cfg.Drift)) - cfg.Margin
}

// testCfg is the runtime's ConfigFor(3 * time.Second): renew 1s, margin 50ms, drift 0.01.
var testCfg = vocab.Config{LeaseDuration: 3 * time.Second, RenewInterval: time.Second, Drift: 0.01,
	Margin: 50 * time.Millisecond, RetryJitter: 500 * time.Millisecond, MinBackoff: 100 * time.Millisecond}

// D1: the deadline counts from when the request was sent, so a slow reply
// only shortens it.
func TestMachineDeadlineFromSentAt(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	sess := h.m.sess
	if got, want := sess.deadline, localDeadline(testCfg, 0, 3*time.Second); got != want {
		t.Fatalf("deadline after open = %v, want %v", got, want)
	}

	h.advanceTo(testCfg.RenewInterval)
	ka := h.take(ReqKeepAlive)
	if ka.Timeout != testCfg.RenewInterval {
		t.Errorf("D2: keep-alive timeout = %v, want the renewal period %v", ka.Timeout, testCfg.RenewInterval)
	}
	sentAt := h.now
	h.advanceTo(sentAt + 700*time.Millisecond) // a slow reply
	h.reply(ka, renewal(3*time.Second, 0))
	if got, want := sess.deadline, localDeadline(testCfg, sentAt, 3*time.Second); got != want {
		t.Fatalf("deadline after a reply 700ms late = %v, want %v (from sentAt %v)", got, want, sentAt)
	}
	if h.m.state != vocab.SessionLive {
		t.Fatalf("state = %v, want live", h.m.state)
	}
}

// D4: once the local deadline has passed, a late renewal reply does not extend
// it; the terms end with DeadlinePassed and stay ended, and a new session opens.
func TestMachineLateReplyDoesNotRevive(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, false)
	term := h.win(c, 7)
	dl := h.m.sess.deadline

	h.advanceTo(testCfg.RenewInterval)
	ka := h.take(ReqKeepAlive) // never answered in time
	h.advanceTo(dl - time.Millisecond)
	if !term.Valid() {
		t.Fatal("term invalid before its deadline")
	}
	h.advanceTo(dl)
	if term.Valid() || term.Reason() != vocab.ReasonDeadlinePassed {
		t.Fatalf("at the deadline: Valid=%v Reason=%v, want false, deadline passed", term.Valid(), term.Reason())
	}
	if !h.has(ReqOpen) {
		t.Fatal("no new session opened after the deadline")
	}
	h.reply(ka, renewal(3*time.Second, 0)) // the late reply
	if term.Valid() || term.Reason() != vocab.ReasonDeadlinePassed || term.deadline() != dl {
		t.Fatalf("late reply changed the ended term: Valid=%v Reason=%v deadline=%v (was %v)",
			term.Valid(), term.Reason(), term.deadline(), dl)
	}
	// T3: even when elected again, the old term stays ended.
	h.open()
	term2 := h.win(c, 9)
	if term.Valid() || !term2.Valid() || term == term2 {
		t.Fatalf("after re-election: old valid=%v, new valid=%v, same=%v", term.Valid(), term2.Valid(), term == term2)
	}
}

// C2: a grant too short for two renewals RenewInterval apart makes the client
// renew every third of the local validity, with one event per session.
func TestMachineShortenedGrant(t *testing.T) {
	h := newHarness(t, testCfg)
	r := h.take(ReqOpen)
	h.reply(r, Result{Session: "s1", Renewal: backends.Renewal{Remaining: 1500 * time.Millisecond}})
	local := h.m.localValidity(1500 * time.Millisecond)
	if got := h.m.sess.period; got != local/3 {
		t.Fatalf("period = %v, want a third of the local validity %v", got, local/3)
	}
	for range 3 {
		h.advanceTo(h.m.sess.renewAt)
		h.reply(h.take(ReqKeepAlive), renewal(1500*time.Millisecond, 0))
	}
	if n := h.eventCount(vocab.EventSessionLeaseShortened); n != 1 {
		t.Fatalf("SessionLeaseShortened published %d times, want once per session", n)
	}
	if h.m.state != vocab.SessionLive {
		t.Fatalf("state = %v, want live: no term should end with DeadlinePassed", h.m.state)
	}
}

// C3: after a failed renewal the client retries after half the time left,
// at most RenewInterval, at least MinBackoff, and never past the deadline.
func TestMachineRenewBackoff(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	dl := h.m.sess.deadline
	h.advanceTo(testCfg.RenewInterval)
	var retries []Mono
	for h.has(ReqKeepAlive) || h.m.sess != nil && h.m.sess.renewAt > 0 {
		if !h.has(ReqKeepAlive) {
			h.advanceTo(h.m.sess.renewAt)
			continue
		}
		h.reply(h.take(ReqKeepAlive), Result{Err: errDown})
		if h.m.state != vocab.SessionSuspended {
			t.Fatalf("state = %v after a failed renewal, want suspended", h.m.state)
		}
		s := h.m.sess
		if s.renewAt == 0 {
			break
		}
		left := dl - h.now
		want := min(max(left/2, testCfg.MinBackoff), testCfg.RenewInterval)
		if got := s.renewAt - h.now; got != want {
			t.Fatalf("retry after %v with %v left, want %v", got, left, want)
		}
		if s.renewAt >= dl {
			t.Fatalf("retry scheduled at %v, past the deadline %v", s.renewAt, dl)
		}
		retries = append(retries, s.renewAt)
	}
	if len(retries) < 3 {
		t.Fatalf("only %d retries before the deadline: %v", len(retries), retries)
	}
	h.advanceTo(dl)
	if h.m.sess != nil || h.m.state != vocab.SessionOpening {
		t.Fatalf("after the deadline: state %v, want opening with no session", h.m.state)
	}
}

// A2, A3: at most one acquisition in flight; a late reply to an abandoned
// attempt releases what it won; a token not above one this session released
// is not adopted.
func TestMachineAttempts(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, false)
	first := h.take(ReqAcquire)
	h.step(Released{Gen: h.m.sess.gen, Name: "report"}) // a release notification
	if h.has(ReqAcquire) {
		t.Fatal("A2: a second acquisition was sent while one is in flight")
	}
	h.reply(first, Result{Err: fmt.Errorf("Held: %w", backends.ErrLeaseHeld)})

	// Stop while an attempt is in flight; its late win must be released.
	h.step(Released{Gen: h.m.sess.gen, Name: "report"})
	attempt := h.take(ReqAcquire)
	h.step(Stop{ID: c.id, Waiter: 1})
	if len(h.completed) != 1 || c.removed != true {
		t.Fatalf("stop of a candidate did not complete at once: completed=%d removed=%v", len(h.completed), c.removed)
	}
	h.reply(attempt, Result{Grant: backends.Grant{Token: 11}})
	rel := h.take(ReqRelease)
	if rel.Name != "report" || rel.Token != 11 {
		t.Fatalf("A3: late win released as %s#%d, want report#11", rel.Name, rel.Token)
	}

	// A token not above one this session released is stale: released, not adopted.
	c2 := h.startElection("audit", false, false)
	t1 := h.win(c2, 20)
	h.step(Stop{ID: c2.id, StepDown: true}) // step down, no cooldown
	h.reply(h.take(ReqRelease), Result{})
	if !t1.ended {
		t.Fatal("stepped-down term not ended")
	}
	h.reply(h.take(ReqAcquire), Result{Grant: backends.Grant{Token: 20}})
	if c2.term != nil {
		t.Fatalf("A3: adopted token 20 after releasing token 20")
	}
	if rel := h.take(ReqRelease); rel.Token != 20 {
		t.Fatalf("stale grant released with token %d, want 20", rel.Token)
	}
}

// T4: a renewal whose digest differs makes the client re-read its leases; a
// term the store no longer lists is revoked with TakenOver, and a lease the
// store lists that nobody here holds is released.
func TestMachineTakenOver(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	a := h.startElection("a", false, false)
	b := h.startElection("b", false, false)
	ta := h.win(a, 3)
	tb := h.win(b, 4)

	h.advanceTo(testCfg.RenewInterval)
	h.reply(h.take(ReqKeepAlive), renewal(3*time.Second, 5))
	owned := h.take(ReqOwned)
	h.reply(owned, Result{Held: []backends.Held{{Name: "b", Token: 4}, {Name: "stray", Token: 2}},
		Digest: backends.Digest{Leases: 2, Version: 5}})
	if ta.Valid() || ta.Reason() != vocab.ReasonTakenOver {
		t.Fatalf("term a: Valid=%v Reason=%v, want taken over", ta.Valid(), ta.Reason())
	}
	if !tb.Valid() {
		t.Fatal("term b revoked although the store lists it")
	}
	if rel := h.take(ReqRelease); rel.Name != "stray" || rel.Token != 2 {
		t.Fatalf("stray lease released as %s#%d, want stray#2", rel.Name, rel.Token)
	}
	// The same digest again: no re-read.
	h.advanceTo(2 * testCfg.RenewInterval)
	same := renewal(3*time.Second, 5)
	same.Renewal.Digest.Leases = 2
	h.reply(h.take(ReqKeepAlive), same)
	if h.has(ReqOwned) {
		t.Fatal("Owned re-read although the digest is unchanged")
	}
}

// H1, H2: Stop revokes the term, waits for the task (at most until the
// deadline the session had then), releases with the token, delivers the
// revoked callback, and only then completes.
func TestMachineHandoffOrder(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", true, true)
	term := h.win(c, 5)
	if len(h.tasks) != 1 || len(h.dispatched) != 1 {
		t.Fatalf("tasks=%d dispatched=%d, want 1 and 1", len(h.tasks), len(h.dispatched))
	}
	h.step(CallbackDone{ID: c.id})

	h.log = nil
	h.step(Stop{ID: c.id, Waiter: 1})
	if !term.ended {
		t.Fatal("H1: term not revoked and cancelled first")
	}
	if h.has(ReqRelease) {
		t.Fatal("H1: released while the task still runs")
	}
	h.advanceTo(h.now + 100*time.Millisecond)
	h.step(TaskDone{Term: term.id})
	rel := h.take(ReqRelease)
	if rel.Token != 5 {
		t.Fatalf("T5: release token %d, want 5", rel.Token)
	}
	if len(h.completed) != 0 {
		t.Fatal("completed before the release was answered")
	}
	h.reply(rel, Result{})
	if len(h.completed) != 0 {
		t.Fatal("L3: completed before the revoked callback ran")
	}
	h.step(CallbackDone{ID: c.id})
	want := []string{"event revoked", "send release", "dispatch elected=false", "complete"}
	if !slices.Equal(h.log, want) {
		t.Fatalf("hand-off order = %q, want %q", h.log, want)
	}
	if !c.removed {
		t.Fatal("stopped election not removed")
	}
}

// H2: a task that ignores cancellation delays the hand-off by at most the
// validity the term had when it was revoked; then the lease is released and
// the stuck task reported.
func TestMachineStuckTask(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, true)
	term := h.win(c, 5)
	h.advanceTo(500 * time.Millisecond)
	revokeDeadline := h.m.sess.deadline
	h.step(Stop{ID: c.id, Waiter: 1})
	// Renewals go on and move the session deadline; the hand-off keeps the old one.
	h.advanceTo(testCfg.RenewInterval)
	h.reply(h.take(ReqKeepAlive), renewal(3*time.Second, 0))
	h.advanceTo(revokeDeadline - time.Millisecond)
	if h.has(ReqRelease) {
		t.Fatal("released before the term's validity ran out")
	}
	h.advanceTo(revokeDeadline)
	if rel := h.take(ReqRelease); rel.Token != term.token {
		t.Fatalf("release token %d, want %d", rel.Token, term.token)
	}
	if h.eventCount(vocab.EventTaskStuck) != 1 {
		t.Fatal("stuck task not reported")
	}
}

// H3: a term lost to an expired session is revoked at once; the revoked
// callback is dispatched without waiting for the task.
func TestMachineSessionExpiredDoesNotWait(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", true, true)
	term := h.win(c, 5)
	h.step(CallbackDone{ID: c.id})
	h.advanceTo(testCfg.RenewInterval)
	h.dispatched = nil
	h.reply(h.take(ReqKeepAlive), Result{Err: fmt.Errorf("gone: %w", backends.ErrSessionExpired)})
	if term.Reason() != vocab.ReasonSessionExpired {
		t.Fatalf("reason = %v, want session expired", term.Reason())
	}
	if len(h.dispatched) != 1 || h.dispatched[0].Elected {
		t.Fatal("revoked callback not dispatched at once")
	}
	if h.has(ReqRelease) {
		t.Fatal("released on an expired session")
	}
	if !h.has(ReqOpen) || h.m.state != vocab.SessionOpening {
		t.Fatal("S3: no new session opening after expiry")
	}
	// The task is still running: no new attempt until it returns.
	h.open()
	if h.has(ReqAcquire) {
		t.Fatal("contending again while the previous term's task still runs")
	}
	h.step(TaskDone{Term: term.id})
	if !h.has(ReqAcquire) {
		t.Fatal("not contending after the old task returned")
	}
}

// L6: if the elected callback cannot be dispatched, the term is given up with
// no revoked callback, and the election sits out one lease period.
func TestMachineDispatchFailed(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", true, false)
	term := h.win(c, 5)
	h.dispatched = nil
	h.step(DispatchFailed{ID: c.id, Term: term.id, Err: errors.New("pool full")})
	if term.Valid() {
		t.Fatal("term still valid after its elected callback was rejected")
	}
	h.reply(h.take(ReqRelease), Result{})
	if len(h.dispatched) != 0 {
		t.Fatalf("L6: %d callbacks dispatched for a term nobody was told about", len(h.dispatched))
	}
	if c.phase != phCandidate || c.cooldown() != h.now+testCfg.LeaseDuration {
		t.Fatalf("phase %v cooldown until %v, want candidate until %v", c.phase, c.cooldown(), h.now+testCfg.LeaseDuration)
	}
	h.keepAliveUntil(c.cooldown() - time.Millisecond)
	if h.has(ReqAcquire) {
		t.Fatal("contended during the one-lease cooldown")
	}
	h.keepAliveUntil(c.cooldown())
	if !h.has(ReqAcquire) {
		t.Fatal("not contending after the cooldown")
	}
}

// A1: a release notified while an attempt is in flight is not lost when the
// store refused that attempt before the release: the candidate tries again
// at once instead of after its retry interval.
func TestMachineNotifiedDuringAttempt(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, false)
	first := h.take(ReqAcquire)
	h.step(Released{Gen: h.m.sess.gen, Name: "report"})                        // the holder releases now...
	h.reply(first, Result{Err: fmt.Errorf("Held: %w", backends.ErrLeaseHeld)}) // ...after the store refused us
	if !h.has(ReqAcquire) {
		t.Fatalf("no immediate retry after a release notified during the attempt (retry at %v)", c.retryAt)
	}
	// A plain refusal waits for the retry interval.
	h.reply(h.take(ReqAcquire), Result{Err: fmt.Errorf("Held: %w", backends.ErrLeaseHeld)})
	if h.has(ReqAcquire) {
		t.Fatal("retried at once after a refusal with no notification")
	}
}

// A3: a Lock abandoned while its attempt is in flight, and the next Lock of
// the name, whose attempt reaches the store after the first one: the store
// answers it as any acquisition of a lease the session holds, with the same
// token. The first win is released (no one wants it); the second reply
// carries the token being released and must not be adopted: its term would
// stay valid after that release frees the lease in the store, and the
// release's digest (one version up) keeps the next renewal from noticing.
// Before the fix, releases of unwanted wins did not count as released.
// abandonedThenNext starts two Locks of one name, abandons the first while
// its acquire is in flight, and returns that attempt and the second Lock's.
func (h *harness) abandonedThenNext() (first, second Request) {
	h.t.Helper()
	h.open()
	for id := ContenderID(1); id <= 2; id++ {
		if err := h.step(Start{ID: id, Name: "report", Kind: KindLock, Waiter: Waiter(id)}); err != nil {
			h.t.Fatal(err)
		}
	}
	first = h.take(ReqAcquire)
	h.step(Abandon{ID: 1})
	return first, h.take(ReqAcquire)
}

func TestMachineAbandonedWinNotReadopted(t *testing.T) {
	h := newHarness(t, testCfg)
	first, second := h.abandonedThenNext()
	h.reply(first, Result{Grant: backends.Grant{Token: 5, Digest: backends.Digest{Leases: 1, Version: 1}}})
	if rel := h.take(ReqRelease); rel.Token != 5 {
		t.Fatalf("the abandoned win released as #%d, want #5", rel.Token)
	}
	h.reply(second, Result{Grant: backends.Grant{Token: 5, Digest: backends.Digest{Leases: 1, Version: 1}}})
	if c := h.m.byID[2]; c == nil || c.term != nil {
		t.Fatalf("A3: adopted token 5 while its release is in flight")
	}
	if len(h.completed) != 0 {
		t.Fatalf("the second Lock was completed with the term being released: %+v", h.completed)
	}
}

// A3, H1: the same two attempts, their replies in the other order. The
// store handled the abandoned attempt first and answered the second with
// the same lease and token; the second is adopted, and the abandoned one's
// late reply, which carries that grant, must not release it under the valid
// term. The simulator found it (seed 39252: two terms of one name valid at
// once).
func TestMachineAbandonedReplyAfterAdoption(t *testing.T) {
	h := newHarness(t, testCfg)
	first, second := h.abandonedThenNext()
	h.reply(second, Result{Grant: backends.Grant{Token: 5, Digest: backends.Digest{Leases: 1, Version: 1}}})
	c := h.m.byID[2]
	if c == nil || c.term == nil || c.term.token != 5 {
		t.Fatalf("the second Lock did not adopt #5")
	}
	h.reply(first, Result{Grant: backends.Grant{Token: 5, Digest: backends.Digest{Leases: 1, Version: 1}}})
	if h.has(ReqRelease) {
		t.Fatalf("the abandoned attempt's late reply released #5, the valid term's lease")
	}
	if tm := h.termOf(c); tm == nil || !tm.Valid() {
		t.Fatalf("the adopted term is no longer valid")
	}
}

// H4, A1: an election stepped down while its attempt is in flight stays a
// candidate and contends again when its cooldown ends, whatever the
// abandoned attempt's reply. Before the fix, the step-down's wake found the
// attempt in flight, the reply's handler returned for an abandoned attempt,
// and nothing set the next attempt: the election never contended again
// unless a release notification or a new session woke it.
func TestMachineStepDownDuringAttempt(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, false)
	attempt := h.take(ReqAcquire)
	h.step(Stop{ID: c.id, StepDown: true, Cooldown: 400 * time.Millisecond, Waiter: 1})
	if len(h.completed) != 1 {
		t.Fatal("the step-down of a candidate did not complete at once")
	}
	h.reply(attempt, Result{Err: errDown})
	h.advanceTo(400*time.Millisecond - time.Millisecond)
	if h.has(ReqAcquire) {
		t.Fatal("contended during the cooldown")
	}
	h.advanceTo(400 * time.Millisecond)
	if !h.has(ReqAcquire) {
		t.Fatal("not contending after the cooldown: the abandoned attempt's reply left no timer")
	}
}

// A3, T4: an acquisition whose reply was lost (the call timed out) leaves
// the lease held in the store; the next Owned read lists it, nobody here
// holds it, and it is released. The candidate's next attempt, handled by the
// store before that release, gets the same token back: it must not be
// adopted, since the release in flight frees the lease. The simulator found
// this one (seed 17025: two terms of one name valid at once).
func TestMachineStrayReleaseNotReadopted(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, false)
	h.reply(h.take(ReqAcquire), Result{Err: errDown}) // the store granted #5, the reply was lost
	for h.now < testCfg.RenewInterval {
		h.advanceTo(min(c.retryAt, testCfg.RenewInterval))
		if h.has(ReqAcquire) {
			h.reply(h.take(ReqAcquire), Result{Err: errDown})
		}
	}
	h.reply(h.take(ReqKeepAlive), renewal(3*time.Second, 1))
	h.reply(h.take(ReqOwned), Result{Held: []backends.Held{{Name: "report", Token: 5}}, Digest: backends.Digest{Leases: 1, Version: 1}})
	if rel := h.take(ReqRelease); rel.Token != 5 {
		t.Fatalf("stray lease released as #%d, want #5", rel.Token)
	}
	h.advanceTo(c.retryAt)
	h.reply(h.take(ReqAcquire), Result{Grant: backends.Grant{Token: 5, Digest: backends.Digest{Leases: 1, Version: 1}}})
	if c.term != nil {
		t.Fatal("A3: adopted token 5 while its release is in flight")
	}
}

// T4, H1: a release that fails leaves the lease possibly held in the store,
// and the next renewal re-reads the list to release it; if that read fails
// too, the one after asks again. Before the fix, a failed Owned read dropped
// the request: with the digest unchanged (the release never happened),
// nothing read the list again, and the lease stayed held in the store for
// the session's whole life, free for nobody. The simulator found it (seed
// 18588: a name without a holder long after the faults ended).
func TestMachineFailedOwnedReadAsksAgain(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, false)
	h.win(c, 5)
	h.step(Stop{ID: c.id, Waiter: 1})
	h.reply(h.take(ReqRelease), Result{Err: errDown})
	h.advanceTo(testCfg.RenewInterval)
	h.reply(h.take(ReqKeepAlive), renewal(3*time.Second, 0))
	h.reply(h.take(ReqOwned), Result{Err: errDown})
	h.advanceTo(2 * testCfg.RenewInterval)
	h.reply(h.take(ReqKeepAlive), renewal(3*time.Second, 0))
	if !h.has(ReqOwned) {
		t.Fatal("T4: a failed Owned read is not asked again at the next renewal")
	}
}

// T4, A1: a lease the store lists that nobody here holds, while a TryLock
// of its name has an attempt in flight, is left to that attempt; if the
// attempt fails, the next renewal reads the list again and releases it.
// Before the fix it stayed held in the store for the session's whole life
// (the simulator's seed 29388).
func TestMachineStraySkippedIsReadAgain(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", false, false)
	h.win(c, 5)
	h.step(Stop{ID: c.id, Waiter: 1})
	h.reply(h.take(ReqRelease), Result{Err: errDown}) // the lease stays held in the store
	if err := h.step(Start{ID: 2, Name: "report", Kind: KindLock, TryOnce: true, Waiter: 2}); err != nil {
		t.Fatal(err)
	}
	attempt := h.take(ReqAcquire)
	h.advanceTo(testCfg.RenewInterval)
	h.reply(h.take(ReqKeepAlive), renewal(3*time.Second, 0))
	h.reply(h.take(ReqOwned), Result{Held: []backends.Held{{Name: "report", Token: 5}}, Digest: backends.Digest{Leases: 1, Version: 1}})
	h.reply(attempt, Result{Err: errDown}) // the TryLock fails
	h.advanceTo(2 * testCfg.RenewInterval)
	same := renewal(3*time.Second, 1)
	same.Renewal.Digest.Leases = 1 // the digest the Owned read returned: nothing changed
	h.reply(h.take(ReqKeepAlive), same)
	h.reply(h.take(ReqOwned), Result{Held: []backends.Held{{Name: "report", Token: 5}}, Digest: backends.Digest{Leases: 1, Version: 1}})
	if rel := h.take(ReqRelease); rel.Name != "report" || rel.Token != 5 {
		t.Fatalf("released %s#%d, want report#5", rel.Name, rel.Token)
	}
}
