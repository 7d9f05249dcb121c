package engine

import (
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// term is the core's record of one term (T2): a period during which this
// node owns a lease, from adoption to revocation, and what still refers to
// it (a task, a scheduled run, callbacks) until the core forgets it.
type term struct {
	id         TermID
	c          *contender // its lease name is c.name
	sess       *session
	token      Token
	adopted    uint64 // adoption sequence, to order against Owned reads
	releaseReq RequestID
	run        *run // the schedule's runs, if the contender runs on one
	timerSeq   uint64

	revokeDeadline Mono // the session deadline when the hand-off began (H1)

	ended         bool
	taskRunning   bool  // a task or a schedule's runs hold the hand-off (H1)
	electedQueued bool  // the elected callback was dispatched
	electedFailed bool  // ... and could not run (L6)
	revokedQueued bool  // the revoked callback was dispatched
	delay         uint8 // a partition's once-per-term task waits for its initial delay or step (delayTimer, delayRenewal)
}

func (m *Machine) adopt(c *contender, s *session, token Token, value []byte) {
	m.adoptSeq++
	m.termSeq++
	t := &term{id: m.termSeq, c: c, sess: s, token: token, adopted: m.adoptSeq}
	m.terms[t.id] = t
	c.term, c.phase = t, phLeader
	m.unwatch(c) // a holder waits for no release (S1)
	m.emit(Effect{Kind: EffTermStarted, Term: t.id, Contender: c.id, Name: c.name, Token: token, Gen: s.gen,
		Lock: c.kind == KindLock, Quiet: c.quiet()})
	elected := vocab.Event{Kind: vocab.EventElected, Name: c.name, Token: token, Session: s.id}
	if g := c.group; g != nil {
		// A partition's term says its group, so that metrics can count it
		// per group rather than per partition lease.
		elected.Group, elected.Partition = g.name, c.part
	}
	m.event(elected)
	if g := c.group; g != nil {
		m.event(vocab.Event{Kind: vocab.EventPartitionGained, Name: c.name, Token: token, Session: s.id, Group: g.name, Partition: c.part})
	}
	if w := c.waiter(); w != 0 {
		m.complete(w, t.id, nil)
		c.clearWaiter()
	}
	if c.listener {
		t.electedQueued = true
		m.dispatch(c, t, true)
	}
	if c.task {
		m.startWork(c, t, value)
	}
}

func (m *Machine) dispatch(c *contender, t *term, elected bool) {
	c.pending++
	if !elected {
		t.revokedQueued = true
	}
	m.emit(Effect{Kind: EffDispatch, Contender: c.id, Term: t.id, Elected: elected})
}

// revoked dispatches t's revoked callback, if its elected one was delivered
// (L1, L6).
func (m *Machine) revokedCallback(c *contender, t *term) {
	if t.electedQueued && (!t.electedFailed || mutant == "unpaired-callbacks") {
		m.dispatch(c, t, false)
	}
}

// revoke ends t for r: Valid is false from now on (T3). A schedule or a
// delayed task waiting for its time has nothing to wait for: its work ends
// with the term.
func (m *Machine) revoke(t *term, r vocab.Reason) {
	if t.ended {
		return
	}
	t.ended = true // the reason goes with the effect and the event; the core needs no more
	m.emit(Effect{Kind: EffTermEnded, Term: t.id, Reason: r})
	revoked := vocab.Event{Kind: vocab.EventRevoked, Name: t.c.name, Token: t.token, Session: t.sess.id, Reason: r}
	if c := t.c; c.group != nil {
		revoked.Group, revoked.Partition = c.group.name, c.part // as for EventElected
	}
	m.event(revoked)
	if c := t.c; c.group != nil {
		m.event(vocab.Event{Kind: vocab.EventPartitionLost, Name: t.c.name, Token: t.token, Session: t.sess.id, Reason: r,
			Group: c.group.name, Partition: c.part})
	}
	m.workEnds(t)
}

// loseTerm ends c's term at once, for a reason other than Stop or StepDown
// (H3): the backend may have given the lease away already.
func (m *Machine) loseTerm(c *contender, reason vocab.Reason) {
	t := c.term
	m.revoke(t, reason)
	if c.phase == phHandoff {
		m.afterRelease(c) // nothing left to wait for or release
		return
	}
	c.term, c.phase = nil, phCandidate
	m.revokedCallback(c, t)
	m.maybeForget(t)
	if c.kind == KindLock || c.group != nil {
		m.stop(c, false, 0, 0) // a lock is not retaken; a partition waits for the next balance
		return
	}
	c.retryAt = m.now
	m.wake(c)
}

// maybeForget drops t once nothing refers to it: it ended, its contender
// moved on, and no task or run of it is still running.
func (m *Machine) maybeForget(t *term) {
	if t.ended && !t.taskRunning && t.c.term != t && m.terms[t.id] == t {
		delete(m.terms, t.id)
		m.emit(Effect{Kind: EffForget, Term: t.id})
	}
}

// taskDone reports that t's task returned err.
func (m *Machine) taskDone(t *term, err error, canceled bool) {
	if !t.taskRunning || t.run != nil {
		return
	}
	if err != nil && !(t.ended && canceled) {
		m.event(vocab.Event{Kind: vocab.EventTaskFailed, Name: t.c.name, Token: t.token, Err: err})
	}
	m.taskEnded(t)
}

// taskEnded notes that t's work (its task, or its schedule's runs) is over,
// and moves on: a hand-off releases; a task that ended while the term is
// valid steps down, so that leadership does not sit idle here (§13); a
// partition stays held and idle until a rebalance moves it, so that its work
// is not rerun elsewhere.
func (m *Machine) taskEnded(t *term) {
	c := t.c
	t.taskRunning = false
	c.tasks--
	switch {
	case c.phase == phHandoff && c.term == t && t.releaseReq == 0:
		m.release(c)
	case c.phase == phLeader && c.term == t && !t.ended && m.now < t.sess.deadline && c.group == nil:
		var cooldown time.Duration
		if c.x != nil {
			cooldown = c.x.taskEndCooldown
		}
		m.stop(c, true, cooldown, 0)
	default:
		m.wake(c)
	}
	m.maybeForget(t)
}

// callbackDone reports that one of c's callbacks ran.
func (m *Machine) callbackDone(c *contender) {
	c.pending--
	m.endOp(c)
}

// dispatchFailed reports that t's elected callback could not be dispatched
// (L6): nobody knows of the term, so it is given up without a revoked
// callback, and the election sits out one lease period.
func (m *Machine) dispatchFailed(c *contender, t *term, err error) {
	c.pending--
	if t == nil {
		m.endOp(c)
		return
	}
	t.electedFailed = true
	m.event(vocab.Event{Kind: vocab.EventCallbackRejected, Name: t.c.name, Token: t.token, Err: err})
	if c.term == t && c.phase == phLeader && c.op == nil {
		c.op = &stopOp{stepDown: true, cooldown: m.cfg.LeaseDuration, at: m.now}
		m.handoff(c, vocab.ReasonSteppedDown)
		return
	}
	m.endOp(c)
}
