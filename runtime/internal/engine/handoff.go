package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// stopOp is a Stop or StepDown in progress (H1, H4).
type stopOp struct {
	stepDown  bool
	cooldown  time.Duration
	at        Mono
	handedOff bool // the term (if any) is revoked and released
	waiters   []Waiter
}

// stop stops c (or steps it down for cooldown) with the hand-off order of H1,
// and completes w once done. A stop overrides a step-down in progress.
func (m *Machine) stop(c *contender, stepDown bool, cooldown time.Duration, w Waiter) {
	if c.removed {
		m.complete(w, 0, nil)
		return
	}
	if op := c.op; op != nil {
		if !stepDown {
			op.stepDown = false
		}
		if w != 0 {
			op.waiters = append(op.waiters, w)
		}
		return
	}
	c.op = &stopOp{stepDown: stepDown, cooldown: cooldown, at: m.now}
	if w != 0 {
		c.op.waiters = append(c.op.waiters, w)
	}
	if c.attempt != 0 {
		m.pending[c.attempt].abandoned = true
	}
	if w := c.waiter(); w != 0 {
		m.complete(w, 0, fmt.Errorf("simba: lock %q: %w", c.name, ErrClosed))
		c.clearWaiter()
	}
	if c.phase == phLeader {
		reason := vocab.ReasonStopped
		if stepDown {
			reason = vocab.ReasonSteppedDown
		}
		m.handoff(c, reason)
		return
	}
	c.op.handedOff = true
	if stepDown {
		c.setCooldown(m.now, m.now+cooldown)
	} else {
		c.phase = phDone
	}
	m.endOp(c)
}

// handoff revokes c's term and waits for its task — at most until the
// session deadline as it stands now — before releasing the lease (H1, H2).
func (m *Machine) handoff(c *contender, reason vocab.Reason) {
	t := c.term
	t.revokeDeadline = t.sess.deadline
	c.phase = phHandoff
	if mutant == "release-before-revoke" {
		m.release(c) // revoked only when the release is answered
		return
	}
	m.revoke(t, reason)
	if t.taskRunning && m.now < t.revokeDeadline {
		m.schedule(c, t.revokeDeadline)
		return
	}
	if t.taskRunning {
		m.event(vocab.Event{Kind: vocab.EventTaskStuck, Name: t.c.name, Token: t.token})
	}
	m.release(c)
}

// release sends the release of c's revoked term, with its token (T5).
func (m *Machine) release(c *contender) {
	t := c.term
	s, live := m.current(t.sess.gen)
	if !live {
		m.afterRelease(c)
		return
	}
	s.released[t.c.name] = max(s.released[t.c.name], t.token)
	if m.deferRelease(c) {
		return
	}
	t.releaseReq = m.send(Request{Kind: ReqRelease, Gen: s.gen, Name: t.c.name, Token: m.releaseToken(t.token), Timeout: s.period},
		&pendingReq{c: c, t: t})
}

func (m *Machine) releaseDone(p *pendingReq, res Result) {
	if s, live := m.current(p.req.Gen); live && res.Err == nil {
		m.ownChange(s, res.Digest)
	}
	if res.Err != nil {
		if s, live := m.current(p.req.Gen); live {
			// The lease may still be ours in the store: the next renewal
			// re-reads the list and releases what nobody here holds.
			s.recheck = true
			m.event(vocab.Event{Kind: vocab.EventBackendError, Name: p.req.Name, Err: res.Err})
		}
		if m.closing != nil {
			m.closing.fail(fmt.Errorf("lease %q not released: %w", p.req.Name, res.Err))
		}
	}
	if c := p.c; c != nil && c.term == p.t && c.phase == phHandoff {
		m.afterRelease(c)
	}
}

// afterRelease ends a hand-off: the revoked callback is delivered and the
// stop or step-down completes once every callback has run (L3).
func (m *Machine) afterRelease(c *contender) {
	t := c.term
	if t.releaseReq == bulkRelease {
		m.handedOffDeferred(c)
	}
	if mutant == "release-before-revoke" {
		m.revoke(t, vocab.ReasonStopped)
	}
	c.term = nil
	m.revokedCallback(c, t)
	m.maybeForget(t)
	op := c.op
	op.handedOff = true
	if op.stepDown {
		c.phase = phCandidate
		c.setCooldown(m.now, op.at+op.cooldown)
	} else {
		c.phase = phDone
	}
	m.endOp(c)
}

// endOp completes c's stop or step-down once its term is handed off and its
// callbacks have run.
func (m *Machine) endOp(c *contender) {
	op := c.op
	if op == nil || !op.handedOff || c.pending > 0 {
		return
	}
	c.op = nil
	for _, w := range op.waiters {
		m.complete(w, 0, nil)
	}
	if c.phase == phDone {
		m.remove(c)
		return
	}
	m.wake(c)
}

// unlock stops the lock whose term is t; a term that already ended or was
// released completes at once.
func (m *Machine) unlock(id TermID, w Waiter) {
	t := m.terms[id]
	if t == nil || t.c.removed || t.c.term != t {
		m.complete(w, 0, nil)
		return
	}
	m.stop(t.c, false, 0, w)
}

// abandon gives up a lock whose caller stopped waiting; a term adopted in
// the meantime was already handed to the caller, who releases it.
func (m *Machine) abandon(c *contender) {
	if c.waiting {
		c.waiting = false
		c.clearWaiter()
		delete(m.byID, c.id)
		q := slices.DeleteFunc(m.lockQueue[c.name], func(x *contender) bool { return x == c })
		if len(q) == 0 {
			delete(m.lockQueue, c.name)
		} else {
			m.lockQueue[c.name] = q
		}
		return
	}
	if c.waiter() == 0 {
		return
	}
	c.clearWaiter()
	m.stop(c, false, 0, 0)
}
