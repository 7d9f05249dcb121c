package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
)

// These tests drive the state machine alone: the clock is a variable, backend
// replies are scripted, and every effect is inspected. Nothing runs
// concurrently, so each expectation is exact.

type harness struct {
	t   *testing.T
	m   *machine
	cfg Config
	now mono

	sent       []request // requests not yet answered, in order
	dispatched []effect
	tasks      []*Term
	events     []Event
	completed  []effect
	log        []string // every effect, in order, for ordering checks
}

var errDown = fmt.Errorf("connection refused: %w", backends.ErrUnavailable)

func newHarness(t *testing.T, cfg Config) *harness {
	h := &harness{t: t, cfg: cfg}
	h.m = newMachine(cfg, 1, func() mono { return h.now }, nil)
	h.m.tick(0)
	h.collect()
	return h
}

func (h *harness) collect() {
	for _, e := range h.m.takeEffects() {
		switch e.kind {
		case effSend:
			h.sent = append(h.sent, e.req)
			h.log = append(h.log, "send "+e.req.kind.String())
		case effDispatch:
			h.dispatched = append(h.dispatched, e)
			h.log = append(h.log, fmt.Sprintf("dispatch elected=%v", e.elected))
		case effStartTask:
			h.tasks = append(h.tasks, e.term)
			h.log = append(h.log, "start task")
		case effEvent:
			h.events = append(h.events, e.ev)
			h.log = append(h.log, "event "+e.ev.Kind.String())
		case effComplete:
			h.completed = append(h.completed, e)
			h.log = append(h.log, "complete")
		}
	}
}

// advanceTo moves the clock to at and ticks.
func (h *harness) advanceTo(at mono) {
	h.t.Helper()
	if at < h.now {
		h.t.Fatalf("time goes backwards: %v → %v", h.now, at)
	}
	h.now = at
	h.m.tick(at)
	h.collect()
}

// take removes and returns the oldest unanswered request of kind.
func (h *harness) take(kind reqKind) request {
	h.t.Helper()
	for i, r := range h.sent {
		if r.kind == kind {
			h.sent = slices.Delete(h.sent, i, i+1)
			return r
		}
	}
	h.t.Fatalf("no %v request was sent; unanswered: %v", kind, h.sent)
	return request{}
}

func (h *harness) has(kind reqKind) bool {
	return slices.ContainsFunc(h.sent, func(r request) bool { return r.kind == kind })
}

func (h *harness) reply(r request, res result) {
	h.m.done(h.now, r.id, res)
	h.collect()
}

func renewal(remaining time.Duration, version uint64) result {
	return result{renewal: backends.Renewal{Remaining: remaining, Digest: backends.Digest{Version: version}}}
}

// open answers the pending open request with a full lease.
func (h *harness) open() request {
	h.t.Helper()
	r := h.take(reqOpen)
	h.reply(r, result{session: backends.SessionID(fmt.Sprint("s", r.gen)), renewal: backends.Renewal{Remaining: h.cfg.LeaseDuration}})
	return r
}

func (h *harness) startElection(name string, l Listener, task TaskFunc) *contender {
	h.t.Helper()
	c := &contender{name: name, cat: catElection, listener: l, task: task, taskEndCooldown: h.cfg.RenewInterval}
	if err := h.m.start(h.now, c); err != nil {
		h.t.Fatal(err)
	}
	h.collect()
	return c
}

// win answers c's pending acquire with token and returns the term.
func (h *harness) win(c *contender, token Token) *Term {
	h.t.Helper()
	r := h.take(reqAcquire)
	if r.name != c.name {
		h.t.Fatalf("acquire for %q, want %q", r.name, c.name)
	}
	h.reply(r, result{grant: backends.Grant{Token: token}})
	if c.term == nil || c.term.token != token {
		h.t.Fatalf("term not adopted: %+v", c.term)
	}
	return c.term
}

// keepAliveUntil advances to at, answering every renewal on the way.
func (h *harness) keepAliveUntil(at mono) {
	h.t.Helper()
	for h.now < at {
		next := at
		if s := h.m.sess; s != nil && s.renewAt > h.now && s.renewAt < next {
			next = s.renewAt
		}
		h.advanceTo(next)
		for h.has(reqKeepAlive) {
			h.reply(h.take(reqKeepAlive), renewal(h.cfg.LeaseDuration, h.m.sess.digest.Version))
		}
	}
}

func (h *harness) eventCount(kind EventKind) int {
	n := 0
	for _, e := range h.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func localDeadline(cfg Config, sentAt mono, remaining time.Duration) mono {
	return sentAt + time.Duration(float64(remaining)*(1-cfg.Drift)) - cfg.Margin
}

var testCfg = ConfigFor(3 * time.Second) // renew 1s, margin 50ms, drift 0.01

// D1: the deadline counts from when the request was sent, so a slow reply
// only shortens it.
func TestMachineDeadlineFromSentAt(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	sess := h.m.sess
	if got, want := sess.deadline.get(), localDeadline(testCfg, 0, 3*time.Second); got != want {
		t.Fatalf("deadline after open = %v, want %v", got, want)
	}

	h.advanceTo(testCfg.RenewInterval)
	ka := h.take(reqKeepAlive)
	if ka.timeout != testCfg.RenewInterval {
		t.Errorf("D2: keep-alive timeout = %v, want the renewal period %v", ka.timeout, testCfg.RenewInterval)
	}
	sentAt := h.now
	h.advanceTo(sentAt + 700*time.Millisecond) // a slow reply
	h.reply(ka, renewal(3*time.Second, 0))
	if got, want := sess.deadline.get(), localDeadline(testCfg, sentAt, 3*time.Second); got != want {
		t.Fatalf("deadline after a reply 700ms late = %v, want %v (from sentAt %v)", got, want, sentAt)
	}
	if h.m.state != SessionLive {
		t.Fatalf("state = %v, want live", h.m.state)
	}
}

// D4: once the local deadline has passed, a late renewal reply does not extend
// it; the terms end with DeadlinePassed and stay ended, and a new session opens.
func TestMachineLateReplyDoesNotRevive(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", nil, nil)
	term := h.win(c, 7)
	dl := h.m.sess.deadline.get()

	h.advanceTo(testCfg.RenewInterval)
	ka := h.take(reqKeepAlive) // never answered in time
	h.advanceTo(dl - time.Millisecond)
	if !term.Valid() {
		t.Fatal("term invalid before its deadline")
	}
	h.advanceTo(dl)
	if term.Valid() || term.Reason() != ReasonDeadlinePassed {
		t.Fatalf("at the deadline: Valid=%v Reason=%v, want false, deadline passed", term.Valid(), term.Reason())
	}
	if !h.has(reqOpen) {
		t.Fatal("no new session opened after the deadline")
	}
	h.reply(ka, renewal(3*time.Second, 0)) // the late reply
	if term.Valid() || term.Reason() != ReasonDeadlinePassed || term.deadline.get() != dl {
		t.Fatalf("late reply changed the ended term: Valid=%v Reason=%v deadline=%v (was %v)",
			term.Valid(), term.Reason(), term.deadline.get(), dl)
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
	r := h.take(reqOpen)
	h.reply(r, result{session: "s1", renewal: backends.Renewal{Remaining: 1500 * time.Millisecond}})
	local := testCfg.localValidity(1500 * time.Millisecond)
	if got := h.m.sess.period; got != local/3 {
		t.Fatalf("period = %v, want a third of the local validity %v", got, local/3)
	}
	for range 3 {
		h.advanceTo(h.m.sess.renewAt)
		h.reply(h.take(reqKeepAlive), renewal(1500*time.Millisecond, 0))
	}
	if n := h.eventCount(EventSessionLeaseShortened); n != 1 {
		t.Fatalf("SessionLeaseShortened published %d times, want once per session", n)
	}
	if h.m.state != SessionLive {
		t.Fatalf("state = %v, want live: no term should end with DeadlinePassed", h.m.state)
	}
}

// C3: after a failed renewal the client retries after half the time left,
// at most RenewInterval, at least MinBackoff, and never past the deadline.
func TestMachineRenewBackoff(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	dl := h.m.sess.deadline.get()
	h.advanceTo(testCfg.RenewInterval)
	var retries []mono
	for h.has(reqKeepAlive) || h.m.sess != nil && h.m.sess.renewAt > 0 {
		if !h.has(reqKeepAlive) {
			h.advanceTo(h.m.sess.renewAt)
			continue
		}
		h.reply(h.take(reqKeepAlive), result{err: errDown})
		if h.m.state != SessionSuspended {
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
	if h.m.sess != nil || h.m.state != SessionOpening {
		t.Fatalf("after the deadline: state %v, want opening with no session", h.m.state)
	}
}

// A2, A3: at most one acquisition in flight; a late reply to an abandoned
// attempt releases what it won; a token not above one this session released
// is not adopted.
func TestMachineAttempts(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", nil, nil)
	first := h.take(reqAcquire)
	h.m.notified(h.now, h.m.sess.gen, "report") // a release notification
	h.collect()
	if h.has(reqAcquire) {
		t.Fatal("A2: a second acquisition was sent while one is in flight")
	}
	h.reply(first, result{err: fmt.Errorf("held: %w", backends.ErrLeaseHeld)})

	// Stop while an attempt is in flight; its late win must be released.
	h.m.notified(h.now, h.m.sess.gen, "report")
	h.collect()
	attempt := h.take(reqAcquire)
	h.m.stopInput(h.now, c, false, 0, "w")
	h.collect()
	if len(h.completed) != 1 || c.removed != true {
		t.Fatalf("stop of a candidate did not complete at once: completed=%d removed=%v", len(h.completed), c.removed)
	}
	h.reply(attempt, result{grant: backends.Grant{Token: 11}})
	rel := h.take(reqRelease)
	if rel.name != "report" || rel.token != 11 {
		t.Fatalf("A3: late win released as %s#%d, want report#11", rel.name, rel.token)
	}

	// A token not above one this session released is stale: released, not adopted.
	c2 := h.startElection("audit", nil, nil)
	t1 := h.win(c2, 20)
	h.m.stopInput(h.now, c2, true, 0, nil) // step down, no cooldown
	h.collect()
	h.reply(h.take(reqRelease), result{})
	if !t1.ended.Load() {
		t.Fatal("stepped-down term not ended")
	}
	h.reply(h.take(reqAcquire), result{grant: backends.Grant{Token: 20}})
	if c2.term != nil {
		t.Fatalf("A3: adopted token 20 after releasing token 20")
	}
	if rel := h.take(reqRelease); rel.token != 20 {
		t.Fatalf("stale grant released with token %d, want 20", rel.token)
	}
}

// T4: a renewal whose digest differs makes the client re-read its leases; a
// term the store no longer lists is revoked with TakenOver, and a lease the
// store lists that nobody here holds is released.
func TestMachineTakenOver(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	a := h.startElection("a", nil, nil)
	b := h.startElection("b", nil, nil)
	ta := h.win(a, 3)
	tb := h.win(b, 4)

	h.advanceTo(testCfg.RenewInterval)
	h.reply(h.take(reqKeepAlive), renewal(3*time.Second, 5))
	owned := h.take(reqOwned)
	h.reply(owned, result{held: []backends.Held{{Name: "b", Token: 4}, {Name: "stray", Token: 2}},
		digest: backends.Digest{Leases: 2, Version: 5}})
	if ta.Valid() || ta.Reason() != ReasonTakenOver {
		t.Fatalf("term a: Valid=%v Reason=%v, want taken over", ta.Valid(), ta.Reason())
	}
	if !tb.Valid() {
		t.Fatal("term b revoked although the store lists it")
	}
	if rel := h.take(reqRelease); rel.name != "stray" || rel.token != 2 {
		t.Fatalf("stray lease released as %s#%d, want stray#2", rel.name, rel.token)
	}
	// The same digest again: no re-read.
	h.advanceTo(2 * testCfg.RenewInterval)
	same := renewal(3*time.Second, 5)
	same.renewal.Digest.Leases = 2
	h.reply(h.take(reqKeepAlive), same)
	if h.has(reqOwned) {
		t.Fatal("Owned re-read although the digest is unchanged")
	}
}

type ctxT = context.Context

type recordingListener struct{ log *[]string }

func (l recordingListener) Elected(_ ctxT, t *Term) { *l.log = append(*l.log, "elected "+t.String()) }
func (l recordingListener) Revoked(_ ctxT, t *Term, r Reason) {
	*l.log = append(*l.log, "revoked "+t.String()+" "+r.String())
}

// H1, H2: Stop revokes the term, waits for the task (at most until the
// deadline the session had then), releases with the token, delivers the
// revoked callback, and only then completes.
func TestMachineHandoffOrder(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	var calls []string
	c := h.startElection("report", recordingListener{&calls}, func(ctxT, *Term) error { return nil })
	term := h.win(c, 5)
	if len(h.tasks) != 1 || len(h.dispatched) != 1 {
		t.Fatalf("tasks=%d dispatched=%d, want 1 and 1", len(h.tasks), len(h.dispatched))
	}
	h.m.callbackDone(h.now, c)
	h.collect()

	h.log = nil
	h.m.stopInput(h.now, c, false, 0, "stop")
	h.collect()
	if !term.ended.Load() || term.ctx.Err() == nil {
		t.Fatal("H1: term not revoked and cancelled first")
	}
	if h.has(reqRelease) {
		t.Fatal("H1: released while the task still runs")
	}
	h.advanceTo(h.now + 100*time.Millisecond)
	h.m.taskDone(h.now, term, nil)
	h.collect()
	rel := h.take(reqRelease)
	if rel.token != 5 {
		t.Fatalf("T5: release token %d, want 5", rel.token)
	}
	if len(h.completed) != 0 {
		t.Fatal("completed before the release was answered")
	}
	h.reply(rel, result{})
	if len(h.completed) != 0 {
		t.Fatal("L3: completed before the revoked callback ran")
	}
	h.m.callbackDone(h.now, c)
	h.collect()
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
	c := h.startElection("report", nil, func(ctxT, *Term) error { return nil })
	term := h.win(c, 5)
	h.advanceTo(500 * time.Millisecond)
	revokeDeadline := h.m.sess.deadline.get()
	h.m.stopInput(h.now, c, false, 0, "stop")
	h.collect()
	// Renewals go on and move the session deadline; the hand-off keeps the old one.
	h.advanceTo(testCfg.RenewInterval)
	h.reply(h.take(reqKeepAlive), renewal(3*time.Second, 0))
	h.advanceTo(revokeDeadline - time.Millisecond)
	if h.has(reqRelease) {
		t.Fatal("released before the term's validity ran out")
	}
	h.advanceTo(revokeDeadline)
	if rel := h.take(reqRelease); rel.token != term.token {
		t.Fatalf("release token %d, want %d", rel.token, term.token)
	}
	if h.eventCount(EventTaskStuck) != 1 {
		t.Fatal("stuck task not reported")
	}
}

// H3: a term lost to an expired session is revoked at once; the revoked
// callback is dispatched without waiting for the task.
func TestMachineSessionExpiredDoesNotWait(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	var calls []string
	c := h.startElection("report", recordingListener{&calls}, func(ctxT, *Term) error { return nil })
	term := h.win(c, 5)
	h.m.callbackDone(h.now, c)
	h.collect()
	h.advanceTo(testCfg.RenewInterval)
	h.dispatched = nil
	h.reply(h.take(reqKeepAlive), result{err: fmt.Errorf("gone: %w", backends.ErrSessionExpired)})
	if term.Reason() != ReasonSessionExpired {
		t.Fatalf("reason = %v, want session expired", term.Reason())
	}
	if len(h.dispatched) != 1 || h.dispatched[0].elected {
		t.Fatal("revoked callback not dispatched at once")
	}
	if h.has(reqRelease) {
		t.Fatal("released on an expired session")
	}
	if !h.has(reqOpen) || h.m.state != SessionOpening {
		t.Fatal("S3: no new session opening after expiry")
	}
	// The task is still running: no new attempt until it returns.
	h.open()
	if h.has(reqAcquire) {
		t.Fatal("contending again while the previous term's task still runs")
	}
	h.m.taskDone(h.now, term, nil)
	h.collect()
	if !h.has(reqAcquire) {
		t.Fatal("not contending after the old task returned")
	}
}

// L6: if the elected callback cannot be dispatched, the term is given up with
// no revoked callback, and the election sits out one lease period.
func TestMachineDispatchFailed(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	var calls []string
	c := h.startElection("report", recordingListener{&calls}, nil)
	term := h.win(c, 5)
	h.dispatched = nil
	h.m.dispatchFailed(h.now, c, term, errors.New("pool full"))
	h.collect()
	if term.Valid() {
		t.Fatal("term still valid after its elected callback was rejected")
	}
	h.reply(h.take(reqRelease), result{})
	if len(h.dispatched) != 0 {
		t.Fatalf("L6: %d callbacks dispatched for a term nobody was told about", len(h.dispatched))
	}
	if c.phase != phCandidate || c.cooldownUntil != h.now+testCfg.LeaseDuration {
		t.Fatalf("phase %v cooldown until %v, want candidate until %v", c.phase, c.cooldownUntil, h.now+testCfg.LeaseDuration)
	}
	h.keepAliveUntil(c.cooldownUntil - time.Millisecond)
	if h.has(reqAcquire) {
		t.Fatal("contended during the one-lease cooldown")
	}
	h.keepAliveUntil(c.cooldownUntil)
	if !h.has(reqAcquire) {
		t.Fatal("not contending after the cooldown")
	}
}

// A1: a release notified while an attempt is in flight is not lost when the
// store refused that attempt before the release: the candidate tries again
// at once instead of after its retry interval.
func TestMachineNotifiedDuringAttempt(t *testing.T) {
	h := newHarness(t, testCfg)
	h.open()
	c := h.startElection("report", nil, nil)
	first := h.take(reqAcquire)
	h.m.notified(h.now, h.m.sess.gen, "report") // the holder releases now...
	h.collect()
	h.reply(first, result{err: fmt.Errorf("held: %w", backends.ErrLeaseHeld)}) // ...after the store refused us
	if !h.has(reqAcquire) {
		t.Fatalf("no immediate retry after a release notified during the attempt (retry at %v)", c.retryAt)
	}
	// A plain refusal waits for the retry interval.
	h.reply(h.take(reqAcquire), result{err: fmt.Errorf("held: %w", backends.ErrLeaseHeld)})
	if h.has(reqAcquire) {
		t.Fatal("retried at once after a refusal with no notification")
	}
}
