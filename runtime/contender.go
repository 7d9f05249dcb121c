package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
)

// A contender is the machine's record of a name started on this client: an
// election (with a listener, a task, or both) or a lock. It moves through
// candidate → leader → (hand-off →) candidate or done.

type phase uint8

const (
	phCandidate phase = iota // wants the lease; at most one attempt in flight (A2)
	phLeader                 // holds term
	phHandoff                // term revoked by Stop/StepDown; waiting for the task, then releasing (H1)
	phDone                   // stopped; removed once its callbacks have run
)

// category orders contenders for Close (H1): elections, locks, schedules,
// then partition groups.
type category uint8

const (
	catElection category = iota
	catLock
	catSchedule
	catGroup
	numCategories = 4
)

// TaskFunc is work an election runs while this node holds the lease: it is
// called once per term with the term's context (cancelled when the term ends,
// with the reason as cause) and the term.
type TaskFunc func(ctx context.Context, t *Term) error

type contender struct {
	name            string
	cat             category
	listener        Listener            // nil if none
	task            TaskFunc            // nil if none
	taskEndCooldown time.Duration       // step-down cooldown when the task returns early
	tryOnce         bool                // TryLock: one attempt
	lockW           waiter              // Lock/TryLock: who gets the term
	waiting         bool                // a Lock queued behind another Lock of the name on this client
	refusal         *backends.HeldError // the last refused attempt's holder, if any
	queue           *serialQueue        // the driver's callback dispatcher
	group           *groupState         // the partition's group, if this is a partition
	part            int                 // the partition index
	info            *runInfo            // the driver's schedule status, if any

	phase         phase
	attempt       uint64 // in-flight acquire, 0 if none
	notified      bool   // a release was notified while the attempt was in flight
	retryAt       mono
	cooldownUntil mono
	term          *Term
	op            *stopOp
	tasks         int // tasks of this contender still running
	pending       int // callbacks dispatched and not yet run
	removed       bool
	timerSeq      uint64
}

// stopOp is a Stop or StepDown in progress.
type stopOp struct {
	stepDown  bool
	cooldown  time.Duration
	at        mono
	handedOff bool // the term (if any) is revoked and released
	waiters   []waiter
}

// termState is the machine's bookkeeping for a term, guarded by the client's
// mutex.
type termState struct {
	c              *contender
	sess           *session
	adopted        uint64 // adoption sequence, to order against Owned reads
	value          []byte // the lease's value at acquisition
	revokeDeadline mono   // the session deadline when the hand-off began (H1)
	taskRunning    bool
	electedQueued  bool // the elected callback was dispatched
	electedFailed  bool // ... and could not run (L6)
	releaseReq     uint64
}

// start registers c and makes it a candidate.
func (m *machine) start(now mono, c *contender) error {
	m.advance(now)
	defer m.settle()
	if m.closing != nil || m.state == SessionClosed {
		return ErrClosed
	}
	if ex, dup := m.byName[c.name]; dup && ex.cat == catLock && c.cat == catLock {
		// Locks of one name on one client take turns, first come, first
		// served, as with a sync.Mutex; TryLock does not wait.
		if c.tryOnce {
			return heldHere{}
		}
		c.waiting = true
		m.lockQueue[c.name] = append(m.lockQueue[c.name], c)
		return nil
	}
	if _, dup := m.byName[c.name]; dup {
		return ErrNameInUse
	}
	if g, i, ok := backends.SplitPartition(c.name); ok && m.reserved(c.name) {
		return fmt.Errorf("%w (partition %d of group %q)", ErrNameInUse, i, g)
	}
	m.contend(c)
	return nil
}

// contend registers c and makes it a candidate.
func (m *machine) contend(c *contender) {
	m.add(c)
	c.phase = phCandidate
	c.retryAt = m.now
	if s := m.sess; s != nil {
		m.emit(effect{kind: effWatch, req: request{gen: s.gen, name: c.name}})
		m.wake(c)
	}
}

// wake re-evaluates c when its timer fires or something it waits for changed.
func (m *machine) wake(c *contender) {
	switch c.phase {
	case phCandidate:
		m.maybeAttempt(c)
	case phHandoff:
		if t := c.term; t.eng.taskRunning && t.eng.releaseReq == 0 && m.now >= t.eng.revokeDeadline {
			m.event(Event{Kind: EventTaskStuck, Name: t.name, Token: t.token})
			m.release(c)
		}
	}
}

func (m *machine) maybeAttempt(c *contender) {
	if c.removed || c.phase != phCandidate || c.attempt != 0 || c.op != nil || c.tasks > 0 || m.closing != nil {
		return
	}
	s := m.sess
	if s == nil {
		return // the session's opening wakes every candidate
	}
	if at := max(c.retryAt, c.cooldownUntil); m.now < at {
		m.schedule(c, at)
		return
	}
	c.attempt = m.send(request{kind: reqAcquire, gen: s.gen, name: c.name, timeout: s.period}, &pendingReq{c: c})
}

func (m *machine) acquireDone(p *pendingReq, res result) {
	c := p.c
	if c.attempt == p.req.id {
		c.attempt = 0
	}
	wanted := !p.abandoned && !c.removed && c.phase == phCandidate && c.op == nil
	s, live := m.current(p.req.gen)
	retry := m.now + m.cfg.RenewInterval/2 + m.jitter()
	switch {
	case res.err == nil:
		if live {
			m.ownChange(s, res.grant.Digest)
		}
		// A3: adopt only the current attempt's reply, before the deadline
		// (advance ended the session otherwise), with a token above every
		// token this session released for the name.
		if wanted && live && res.grant.Token > s.released[c.name] {
			m.adopt(c, s, res.grant.Token, res.grant.Value)
			return
		}
		if live {
			m.send(request{kind: reqRelease, gen: s.gen, name: c.name, token: res.grant.Token, timeout: s.period},
				&pendingReq{})
		}
	case errors.Is(res.err, ErrLeaseHeld):
		if errors.Is(res.err, backends.ErrRecovering) {
			m.event(Event{Kind: EventBackendError, Name: c.name, Err: res.err})
		}
		// The store measured when the holder's session ends unless it is
		// renewed: try again then, rather than up to a retry interval later
		// (a crashed holder is not renewed). The remaining time was measured
		// when the store handled the call, before now; allow for Drift.
		var he *backends.HeldError
		if errors.As(res.err, &he) {
			c.refusal = he
		}
		if he != nil && he.Holder.Remaining > 0 {
			wait := time.Duration(float64(he.Holder.Remaining)*(1+m.cfg.Drift)) + time.Millisecond
			retry = min(retry, m.now+wait)
		}
	case errors.Is(res.err, backends.ErrSessionExpired):
		if live {
			m.sessionLost(ReasonSessionExpired)
		}
	default:
		m.event(Event{Kind: EventBackendError, Name: c.name, Err: res.err})
	}
	if !wanted {
		return
	}
	if c.tryOnce && res.err != nil && !errors.Is(res.err, backends.ErrSessionExpired) {
		err := res.err
		if c.refusal != nil {
			err = c.refusal // "held by …": the backend's prefix adds nothing
		}
		m.complete(c.lockW, nil, fmt.Errorf("simba: lock %q: %w", c.name, err))
		c.lockW = nil
		m.stop(c, false, 0, nil)
		return
	}
	// A release notified while this attempt was in flight may have come
	// after the store refused it: then try again at once (A1).
	if !c.notified {
		c.retryAt = retry
	}
	c.notified = false
	m.wake(c)
}

func (m *machine) adopt(c *contender, s *session, token Token, value []byte) {
	m.adoptSeq++
	t := newTerm(m.owner, c.name, token, &s.deadline, m.clock)
	t.eng = termState{c: c, sess: s, adopted: m.adoptSeq, value: value}
	c.term, c.phase = t, phLeader
	elected := Event{Kind: EventElected, Name: c.name, Token: token, Session: s.id}
	if g := c.group; g != nil {
		// A partition's term says its group, so that metrics can count it
		// per group rather than per partition lease.
		elected.Group, elected.Partition = g.name, c.part
	}
	m.event(elected)
	if g := c.group; g != nil {
		m.event(Event{Kind: EventPartitionGained, Name: c.name, Token: token, Session: s.id, Group: g.name, Partition: c.part})
	}
	if c.lockW != nil {
		m.complete(c.lockW, t, nil)
		c.lockW = nil
	}
	if c.listener != nil {
		t.eng.electedQueued = true
		m.dispatch(c, t, true)
	}
	if c.task != nil {
		t.eng.taskRunning = true
		c.tasks++
		m.emit(effect{kind: effStartTask, c: c, term: t})
	}
}

func (m *machine) dispatch(c *contender, t *Term, elected bool) {
	c.pending++
	m.emit(effect{kind: effDispatch, c: c, term: t, elected: elected})
}

func (m *machine) revoke(t *Term, r Reason) {
	if t.end(r) {
		revoked := Event{Kind: EventRevoked, Name: t.name, Token: t.token, Session: t.eng.sess.id, Reason: r}
		if c := t.eng.c; c.group != nil {
			revoked.Group, revoked.Partition = c.group.name, c.part // as for EventElected
		}
		m.event(revoked)
		if c := t.eng.c; c.group != nil {
			m.event(Event{Kind: EventPartitionLost, Name: t.name, Token: t.token, Session: t.eng.sess.id, Reason: r,
				Group: c.group.name, Partition: c.part})
		}
	}
}

// stop stops c (or steps it down for cooldown) with the hand-off order of H1,
// and completes w once done. A stop overrides a step-down in progress.
func (m *machine) stop(c *contender, stepDown bool, cooldown time.Duration, w waiter) {
	if c.removed {
		m.complete(w, nil, nil)
		return
	}
	if op := c.op; op != nil {
		if !stepDown {
			op.stepDown = false
		}
		if w != nil {
			op.waiters = append(op.waiters, w)
		}
		return
	}
	c.op = &stopOp{stepDown: stepDown, cooldown: cooldown, at: m.now}
	if w != nil {
		c.op.waiters = append(c.op.waiters, w)
	}
	if c.attempt != 0 {
		m.pending[c.attempt].abandoned = true
	}
	if c.lockW != nil {
		m.complete(c.lockW, nil, fmt.Errorf("simba: lock %q: %w", c.name, ErrClosed))
		c.lockW = nil
	}
	if c.phase == phLeader {
		reason := ReasonStopped
		if stepDown {
			reason = ReasonSteppedDown
		}
		m.handoff(c, reason)
		return
	}
	c.op.handedOff = true
	if stepDown {
		c.cooldownUntil = m.now + cooldown
	} else {
		c.phase = phDone
	}
	m.endOp(c)
}

// handoff revokes c's term and waits for its task — at most until the
// session deadline as it stands now — before releasing the lease (H1, H2).
func (m *machine) handoff(c *contender, reason Reason) {
	t := c.term
	t.eng.revokeDeadline = t.eng.sess.deadline.get()
	m.revoke(t, reason)
	c.phase = phHandoff
	if t.eng.taskRunning && m.now < t.eng.revokeDeadline {
		m.schedule(c, t.eng.revokeDeadline)
		return
	}
	if t.eng.taskRunning {
		m.event(Event{Kind: EventTaskStuck, Name: t.name, Token: t.token})
	}
	m.release(c)
}

// release sends the release of c's revoked term, with its token (T5).
func (m *machine) release(c *contender) {
	t := c.term
	s, live := m.current(t.eng.sess.gen)
	if !live {
		m.afterRelease(c)
		return
	}
	s.released[t.name] = max(s.released[t.name], t.token)
	t.eng.releaseReq = m.send(request{kind: reqRelease, gen: s.gen, name: t.name, token: t.token, timeout: s.period},
		&pendingReq{c: c, term: t})
}

func (m *machine) releaseDone(p *pendingReq, res result) {
	if s, live := m.current(p.req.gen); live && res.err == nil {
		m.ownChange(s, res.digest)
	}
	if res.err != nil {
		if s, live := m.current(p.req.gen); live {
			// The lease may still be ours in the store: the next renewal
			// re-reads the list and releases what nobody here holds.
			s.recheck = true
			m.event(Event{Kind: EventBackendError, Name: p.req.name, Err: res.err})
		}
		if m.closing != nil {
			m.closing.errs = append(m.closing.errs, fmt.Errorf("lease %q not released: %w", p.req.name, res.err))
		}
	}
	if c := p.c; c != nil && c.term == p.term && c.phase == phHandoff {
		m.afterRelease(c)
	}
}

// afterRelease ends a hand-off: the revoked callback is delivered and the
// stop or step-down completes once every callback has run (L3).
func (m *machine) afterRelease(c *contender) {
	t := c.term
	c.term = nil
	if t.eng.electedQueued && !t.eng.electedFailed {
		m.dispatch(c, t, false)
	}
	op := c.op
	op.handedOff = true
	if op.stepDown {
		c.phase = phCandidate
		c.cooldownUntil = op.at + op.cooldown
	} else {
		c.phase = phDone
	}
	m.endOp(c)
}

// endOp completes c's stop or step-down once its term is handed off and its
// callbacks have run.
func (m *machine) endOp(c *contender) {
	op := c.op
	if op == nil || !op.handedOff || c.pending > 0 {
		return
	}
	c.op = nil
	for _, w := range op.waiters {
		m.complete(w, nil, nil)
	}
	if c.phase == phDone {
		m.remove(c)
		return
	}
	m.wake(c)
}

// loseTerm ends c's term at once, for a reason other than Stop or StepDown
// (H3): the backend may have given the lease away already.
func (m *machine) loseTerm(c *contender, reason Reason) {
	t := c.term
	m.revoke(t, reason)
	if c.phase == phHandoff {
		m.afterRelease(c) // nothing left to wait for or release
		return
	}
	c.term, c.phase = nil, phCandidate
	if t.eng.electedQueued && !t.eng.electedFailed {
		m.dispatch(c, t, false)
	}
	if c.cat == catLock || c.group != nil {
		m.stop(c, false, 0, nil) // a lock is not retaken; a partition waits for the next balance
		return
	}
	c.retryAt = m.now
	m.wake(c)
}

// add registers c by name and in start order.
func (m *machine) add(c *contender) {
	m.byName[c.name] = c
	m.contenders = append(m.contenders, c)
	m.active[c.cat]++
}

func (m *machine) remove(c *contender) {
	c.phase, c.removed = phDone, true
	m.active[c.cat]--
	delete(m.byName, c.name)
	if g := c.group; g != nil && g.parts[c.part] == c {
		delete(g.parts, c.part)
	}
	m.removed++
	if s := m.sess; s != nil && c.group == nil { // a group watches its partitions itself
		m.emit(effect{kind: effUnwatch, req: request{gen: s.gen, name: c.name}})
	}
	if q := m.lockQueue[c.name]; c.cat == catLock && len(q) > 0 {
		// The next Lock of the name on this client takes its turn.
		next := q[0]
		if len(q) == 1 {
			delete(m.lockQueue, c.name)
		} else {
			m.lockQueue[c.name] = q[1:]
		}
		next.waiting = false
		m.contend(next)
	}
}

// compact drops removed contenders and groups from the ordered lists; it
// runs at the end of an input, never while a list is being walked.
func (m *machine) compact() {
	m.groupList = slices.DeleteFunc(m.groupList, func(g *groupState) bool { return g.removed })
	if m.removed == 0 || 2*m.removed < len(m.contenders) {
		return
	}
	kept := m.contenders[:0]
	for _, c := range m.contenders {
		if !c.removed {
			kept = append(kept, c)
		}
	}
	clear(m.contenders[len(kept):])
	m.contenders, m.removed = kept, 0
}

// API inputs concerning contenders.

// stopInput is Stop (stepDown false) or StepDown from the API.
func (m *machine) stopInput(now mono, c *contender, stepDown bool, cooldown time.Duration, w waiter) {
	m.advance(now)
	defer m.settle()
	m.stop(c, stepDown, cooldown, w)
}

// unlock stops the lock whose term is t; a term that already ended or was
// released completes at once.
func (m *machine) unlock(now mono, t *Term, w waiter) {
	m.advance(now)
	defer m.settle()
	c := t.eng.c
	if c != nil && c.cat != catLock {
		m.complete(w, nil, fmt.Errorf("simba: Unlock: %v is an election's term; stop the election instead", t))
		return
	}
	if c == nil || c.removed || c.term != t {
		m.complete(w, nil, nil)
		return
	}
	m.stop(c, false, 0, w)
}

// abandon gives up a lock whose caller stopped waiting; a term adopted in
// the meantime was already handed to the caller, who releases it.
func (m *machine) abandon(now mono, c *contender) {
	m.advance(now)
	defer m.settle()
	if c.waiting {
		c.waiting = false
		c.lockW = nil
		q := slices.DeleteFunc(m.lockQueue[c.name], func(x *contender) bool { return x == c })
		if len(q) == 0 {
			delete(m.lockQueue, c.name)
		} else {
			m.lockQueue[c.name] = q
		}
		return
	}
	if c.lockW == nil {
		return
	}
	c.lockW = nil
	m.stop(c, false, 0, nil)
}

// notified reports a possible release of name on session gen (A1).
func (m *machine) notified(now mono, gen uint64, name string) {
	m.advance(now)
	defer m.settle()
	if _, live := m.current(gen); !live {
		return
	}
	if c := m.byName[name]; c != nil && c.phase == phCandidate {
		c.retryAt = m.now
		c.notified = c.attempt != 0 // the attempt in flight may have been refused before the release
		m.wake(c)
	}
	if group, i, ok := backends.SplitPartition(name); ok {
		if g := m.groups[group]; g != nil && i < g.n {
			m.readView(g) // a partition may be free: plan again
		}
	}
}

// taskDone reports that t's task returned err.
func (m *machine) taskDone(now mono, t *Term, err error) {
	m.advance(now)
	defer m.settle()
	c := t.eng.c
	t.eng.taskRunning = false
	c.tasks--
	ended := t.ended.Load()
	if err != nil && !(ended && errors.Is(err, context.Canceled)) {
		m.event(Event{Kind: EventTaskFailed, Name: t.name, Token: t.token, Err: err})
	}
	switch {
	case c.phase == phHandoff && c.term == t && t.eng.releaseReq == 0:
		m.release(c)
	case c.phase == phLeader && c.term == t && !ended && m.now < t.deadline.get() && c.group == nil:
		// The task ended while the term is valid: step down, so that
		// leadership does not sit idle here (SPEC §13). A partition stays
		// held and idle until a rebalance moves it, so that its work is not
		// rerun elsewhere.
		m.stop(c, true, c.taskEndCooldown, nil)
	default:
		m.wake(c)
	}
}

// callbackDone reports that one of c's callbacks ran.
func (m *machine) callbackDone(now mono, c *contender) {
	m.advance(now)
	defer m.settle()
	c.pending--
	m.endOp(c)
}

// dispatchFailed reports that t's elected callback could not be dispatched
// (L6): nobody knows of the term, so it is given up without a revoked
// callback, and the election sits out one lease period.
func (m *machine) dispatchFailed(now mono, c *contender, t *Term, err error) {
	m.advance(now)
	defer m.settle()
	c.pending--
	t.eng.electedFailed = true
	m.event(Event{Kind: EventCallbackRejected, Name: t.name, Token: t.token, Err: err})
	if c.term == t && c.phase == phLeader && c.op == nil {
		c.op = &stopOp{stepDown: true, cooldown: m.cfg.LeaseDuration, at: m.now}
		m.handoff(c, ReasonSteppedDown)
		return
	}
	m.endOp(c)
}
