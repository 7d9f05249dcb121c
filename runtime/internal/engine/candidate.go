package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// A contender is the core's record of a name started on this client: an
// election, a lock, a schedule or a group's partition. It moves through
// candidate → leader → (hand-off →) candidate or done.
type contender struct {
	id    ContenderID
	name  string
	x     *contenderExtra // what only some contenders have; nil for most
	group *group          // the partition's group, if this is a partition
	part  int             // the partition index

	attempt  RequestID // in-flight acquire, 0 if none
	watchGen uint64    // the session generation whose releases of name it watches, 0 if none
	retryAt  Mono
	term     *term
	op       *stopOp
	timerSeq uint64
	tasks    int32 // tasks of this contender still running
	pending  int32 // callbacks dispatched and not yet run

	// The flags, together, so that a client holding a million leases
	// keeps a million contenders of the smallest size.
	kind     Kind
	listener bool // dispatch callbacks
	task     bool // start a task per term
	tryOnce  bool // TryLock: one attempt
	waiting  bool // a Lock queued behind another Lock of the name on this client
	phase    phase
	notified bool // a release was notified while the attempt was in flight
	removed  bool
}

// contenderExtra is what only some contenders have — schedules, locks,
// elections with a task, candidates refused — kept apart so that the
// contender of a plain election is small: a client may lead a million.
type contenderExtra struct {
	sched           vocab.Schedule      // KindSchedule: when runs happen
	status          *RunStatus          // KindSchedule: the runs so far
	taskEndCooldown time.Duration       // a task's: step-down cooldown when it returns early
	cooldownUntil   Mono                // a step-down's: no attempt before then
	lockW           Waiter              // Lock/TryLock: who gets the term
	refusal         *backends.HeldError // the last refused attempt's holder, if any
	handOverSeen    []byte              // the hand-over record last granted with, if any (handover.go)
	deferUntil      Mono                // until when it gives the lease back to a successor
}

// extra returns c's extra fields, making them if need be.
func (c *contender) extra() *contenderExtra {
	if c.x == nil {
		c.x = new(contenderExtra)
	}
	return c.x
}

// cooldown returns until when c sits out a step-down, 0 if it never did.
func (c *contender) cooldown() Mono {
	if c.x == nil {
		return 0
	}
	return c.x.cooldownUntil
}

// setCooldown makes c sit out until until; a cooldown already over at now
// costs a contender without extra fields nothing.
func (c *contender) setCooldown(now, until Mono) {
	if until > now || c.x != nil {
		c.extra().cooldownUntil = until
	}
}

// waiter returns the Lock or TryLock waiting for c's term, 0 if none.
func (c *contender) waiter() Waiter {
	if c.x == nil {
		return 0
	}
	return c.x.lockW
}

// quiet reports whether nothing but a question (LeaderTermInfo) will ever
// refer to c's terms: a plain election, with no listener, no task and no
// waiter, outside a group. A driver need not keep a record of such a term
// until asked: a client leading a million of them keeps none.
func (c *contender) quiet() bool {
	return c.kind == KindElection && !c.listener && !c.task && c.group == nil && c.waiter() == 0
}

// clearWaiter forgets c's waiter.
func (c *contender) clearWaiter() {
	if c.x != nil {
		c.x.lockW = 0
	}
}

// refused returns the holder that refused c's last attempt, if any.
func (c *contender) refused() *backends.HeldError {
	if c.x == nil {
		return nil
	}
	return c.x.refusal
}

// runStatus returns c's runs so far if it is a schedule, or nil.
func (c *contender) runStatus() *RunStatus {
	if c.x == nil {
		return nil
	}
	return c.x.status
}

type phase uint8

const (
	phCandidate phase = iota // wants the lease; at most one attempt in flight (A2)
	phLeader                 // holds term
	phHandoff                // term revoked by Stop/StepDown; waiting for the task, then releasing (H1)
	phDone                   // stopped; removed once its callbacks have run
)

var phaseNames = [...]string{"candidate", "leader", "handoff", "done"}

func (p phase) String() string { return phaseNames[p] }

// start registers a contender and makes it a candidate.
func (m *Machine) start(in Start) error {
	if m.closing != nil || m.state == vocab.SessionClosed {
		return ErrClosed
	}
	if in.ID == 0 || in.ID&PartitionBit != 0 || m.byID[in.ID] != nil {
		panic(fmt.Sprintf("engine: Start with id %d, zero, a partition's or in use", in.ID))
	}
	c := &contender{id: in.ID, name: in.Name, kind: in.Kind, listener: in.Listener, task: in.Task, tryOnce: in.TryOnce}
	if (in.Task || in.Kind == KindSchedule) && in.TaskEndCooldown != 0 {
		c.extra().taskEndCooldown = in.TaskEndCooldown
	}
	if in.Waiter != 0 {
		c.extra().lockW = in.Waiter
	}
	if in.Kind == KindSchedule {
		x := c.extra()
		x.sched, x.status, c.task = in.Schedule, &RunStatus{}, true
	}
	if ex, dup := m.byName[c.name]; dup && ex.kind == KindLock && c.kind == KindLock {
		// Locks of one name on one client take turns, first come, first
		// served, as with a sync.Mutex; TryLock does not wait.
		if c.tryOnce {
			return heldHere{}
		}
		c.waiting = true
		m.byID[c.id] = c
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
func (m *Machine) contend(c *contender) {
	m.add(c)
	c.phase = phCandidate
	c.retryAt = m.now
	if m.sess != nil {
		m.wake(c)
	}
}

// watch makes c watch releases of its name on session s, once it has been
// refused the lease there (A1): a store may wake only the sessions it
// refused, and a node that holds what it wants waits for nothing, so it
// keeps no watch alive (S1: its keep-alive is its only request). It
// reports whether the watch is new.
func (m *Machine) watch(c *contender, s *session) bool {
	if c.watchGen == s.gen {
		return false
	}
	c.watchGen = s.gen
	m.emit(Effect{Kind: EffWatch, Gen: s.gen, Name: c.name})
	return true
}

// unwatch stops c's watch, if it has one on the current session: it holds
// the lease, or wants it no more.
func (m *Machine) unwatch(c *contender) {
	if s := m.sess; s != nil && c.watchGen == s.gen {
		m.emit(Effect{Kind: EffUnwatch, Gen: s.gen, Name: c.name})
	}
	c.watchGen = 0
}

// wake re-evaluates c when its timer fires or something it waits for changed.
func (m *Machine) wake(c *contender) {
	switch c.phase {
	case phCandidate:
		m.maybeAttempt(c)
	case phHandoff:
		if t := c.term; t.taskRunning && t.releaseReq == 0 && m.now >= t.revokeDeadline {
			m.event(vocab.Event{Kind: vocab.EventTaskStuck, Name: t.c.name, Token: t.token})
			m.release(c)
		}
	}
}

func (m *Machine) maybeAttempt(c *contender) {
	if c.removed || c.phase != phCandidate || c.attempt != 0 || c.op != nil || c.tasks > 0 || m.closing != nil {
		return
	}
	s := m.sess
	if s == nil {
		return // the session's opening wakes every candidate
	}
	if at := max(c.retryAt, c.cooldown()); m.now < at {
		m.schedule(c, at)
		return
	}
	if !m.pace.take(c) {
		return // a slot's release wakes it (pace.go)
	}
	c.attempt = m.send(Request{Kind: ReqAcquire, Gen: s.gen, Name: c.name, Timeout: s.period}, &pendingReq{c: c})
}

func (m *Machine) acquireDone(p *pendingReq, res Result) {
	defer m.pace.done(m) // after c's own handling, so that c may take the slot again
	c := p.c
	if c.attempt == p.req.ID {
		c.attempt = 0
	}
	wanted := !p.abandoned && !c.removed && c.phase == phCandidate && c.op == nil
	if mutant == "adopt-abandoned" {
		wanted = c.phase == phCandidate || c.removed
	}
	s, live := m.current(p.req.Gen)
	retry := m.now + m.cfg.RenewInterval/2 + m.jitter()
	switch {
	case res.Err == nil:
		if live {
			m.ownChange(s, res.Grant.Digest)
		}
		// A3: adopt only the current attempt's reply, before the deadline
		// (advance ended the session otherwise), with a token above every
		// token this session released for the name.
		if wanted && live && (res.Grant.Token > s.released[c.name] || mutant == "token-not-above-released") {
			if !m.deferToSuccessor(c, s, res.Grant.Value) {
				m.adopt(c, s, res.Grant.Token, res.Grant.Value)
				m.adoptedHandOver(c, s, res.Grant.Value)
				return
			}
			// A successor was named: give the lease back, and try again at
			// the usual pace, not woken by releases (handover.go).
		}
		if live {
			m.releaseUnwanted(s, c.name, res.Grant.Token)
		}
	case errors.Is(res.Err, backends.ErrLeaseHeld):
		if errors.Is(res.Err, backends.ErrRecovering) {
			m.event(vocab.Event{Kind: vocab.EventBackendError, Name: c.name, Err: res.Err})
		}
		// The store measured when the holder's session ends unless it is
		// renewed: try again then, rather than up to a retry interval later
		// (a crashed holder is not renewed). The remaining time was measured
		// when the store handled the call, before now; allow for Drift.
		var he *backends.HeldError
		if errors.As(res.Err, &he) {
			c.extra().refusal = he
			m.successorSeen(c, he.Holder.Session)
		}
		if he != nil && he.Holder.Remaining > 0 {
			wait := time.Duration(float64(he.Holder.Remaining)*(1+m.cfg.Drift)) + time.Millisecond
			retry = min(retry, m.now+wait)
		}
	case errors.Is(res.Err, backends.ErrSessionExpired):
		if live {
			m.sessionLost(vocab.ReasonSessionExpired)
		}
	case errors.Is(res.Err, ErrNotMade):
		// Abandoned, and never made: nothing happened at the store.
	default:
		m.event(vocab.Event{Kind: vocab.EventBackendError, Name: c.name, Err: res.Err})
	}
	if !wanted || c.removed {
		if !c.removed && c.phase == phCandidate && c.op == nil {
			// The attempt was abandoned by a step-down that left the
			// election a candidate: it contends again when its cooldown
			// ends. Without this wake nothing would re-arm its timer (the
			// step-down's own wake found this attempt in flight).
			m.wake(c)
		}
		return
	}
	if c.tryOnce && res.Err != nil && !errors.Is(res.Err, backends.ErrSessionExpired) {
		err := res.Err
		if r := c.refused(); r != nil {
			err = r // "held by …": the backend's prefix adds nothing
		}
		m.complete(c.waiter(), 0, fmt.Errorf("simba: lock %q: %w", c.name, err))
		c.clearWaiter()
		m.stop(c, false, 0, 0)
		return
	}
	// A release notified while this attempt was in flight may have come
	// after the store refused it: then try again at once (A1). So may a
	// release between the store's refusal and the watch this refusal
	// starts, which nothing would report: a new watch tries once more at
	// once, and that refusal is one the watch covers.
	newWatch := false
	if errors.Is(res.Err, backends.ErrLeaseHeld) && live && c.group == nil {
		newWatch = m.watch(c, s)
	}
	if !c.notified && !newWatch {
		c.retryAt = retry
	}
	c.notified = false
	m.wake(c)
}

// releaseUnwanted releases a lease the store gave this session that no
// contender here takes: a late reply to an abandoned attempt, a grant with a
// stale token, a lease the store lists that nobody holds (A3) — unless a
// term of the session holds it with that token. The token is
// noted as released: a reply that carries it later — the store answers an
// acquisition of a lease the session holds with the same token — is not
// adopted, since this release is about to free the lease in the store.
func (m *Machine) releaseUnwanted(s *session, name string, token Token) {
	if c := m.byName[name]; c != nil && c.term != nil && c.term.sess == s && c.term.token == token {
		// The grant is a term's of this session: the store answered two
		// attempts of the name with the one lease (an abandoned attempt,
		// handled late, and the attempt that was adopted). The term
		// releases it when it ends (H1); releasing it now would free the
		// lease while the term is valid.
		return
	}
	if mutant != "token-not-above-released" {
		s.released[name] = max(s.released[name], token)
	}
	m.send(Request{Kind: ReqRelease, Gen: s.gen, Name: name, Token: m.releaseToken(token), Timeout: s.period},
		&pendingReq{})
}

// releaseToken is the token a release carries: the term's own (T5).
func (m *Machine) releaseToken(t Token) Token {
	if mutant == "release-without-token" {
		return 0
	}
	return t
}

// released reports a possible release of name on session gen (A1).
func (m *Machine) released(gen uint64, name string) {
	if _, live := m.current(gen); !live {
		return
	}
	if c := m.byName[name]; c != nil && c.phase == phCandidate && !c.deferring(m.now) {
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

// add registers c by name and in start order.
func (m *Machine) add(c *contender) {
	m.byID[c.id] = c
	m.byName[c.name] = c
	m.contenders = append(m.contenders, c)
	m.active[c.kind]++
}

func (m *Machine) remove(c *contender) {
	c.phase, c.removed = phDone, true
	m.active[c.kind]--
	delete(m.byName, c.name)
	delete(m.byID, c.id)
	m.emit(Effect{Kind: EffForget, Contender: c.id})
	if g := c.group; g != nil && g.parts[c.part] == c {
		delete(g.parts, c.part)
	}
	m.removed++
	if c.group == nil { // a group watches its partitions itself
		m.unwatch(c)
	}
	if q := m.lockQueue[c.name]; c.kind == KindLock && len(q) > 0 {
		// The next Lock of the name on this client takes its turn.
		next := q[0]
		if len(q) == 1 {
			delete(m.lockQueue, c.name)
		} else {
			m.lockQueue[c.name] = q[1:]
		}
		next.waiting = false
		delete(m.byID, next.id) // contend registers it again
		m.contend(next)
	}
}
