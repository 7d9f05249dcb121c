package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// closeOp is a Close in progress: every contender is stopped with the
// hand-off order, elections first, then locks, schedules and groups; then
// the session is closed (H1, S4).
type closeOp struct {
	errs        []error        // what could not be handed over
	stopped     [numKinds]bool // the kind's stop has begun
	waiters     []Waiter
	sessionSent bool               // the session's close request is in flight
	gen         uint64             // its generation
	id          backends.SessionID // and id

	// The contenders of the kind being stopped that are still to be
	// stopped, in order. A leader's stop releases its lease: leaders are
	// stopped while fewer than closeBatch requests are in flight, as many
	// as fill that room, so that releases do not pile up past their
	// deadlines. A candidate's stop sends nothing (its attempt in flight, if
	// any, is abandoned, and the driver does not make it if it has not yet:
	// Wanted), so candidates need no room — a Close during a storm of
	// acquires must not wait for them. No input stops more than closeBatch
	// leaders or closeStepMax contenders, so that no input stops a million
	// at once (its effects held in memory together, the driver's lock held
	// meanwhile, the session's renewal waiting behind it). While some wait
	// and there is room, the core asks to be woken at once (nextWake).
	queue []*contender

	dropped int // errors beyond maxCloseErrors, counted only

	// A bulk Close lets the session's close release the leases of its
	// elections, locks and schedules, instead of one request each: the
	// store frees every lease of a closed session at once (S4). It is
	// chosen when the Close begins, for a client leading more than
	// closeBatch leases outside groups with no task or run in progress:
	// then no hand-off waits, so no release waits for others longer than
	// it takes to revoke every term (a task in progress would keep every
	// deferred release waiting for it). The order of H1 stands for each
	// term: revoked, then released (by the session's close), then its
	// revoked callback, delivered once the close is answered. A client
	// leading a million leases on Redis closed in 40 s and more, a release
	// at a time; in bulk, in the time the store takes to end the session.
	bulk          bool
	deferred      []*contender  // leaders whose release is the session's close (releaseReq bulkRelease)
	deferredBy    [numKinds]int // of them, per kind, not yet handed off
	sessionClosed bool          // the session's close was answered
}

// bulkRelease marks a term whose release is its session's close (a bulk
// Close).
const bulkRelease = ^RequestID(0)

// decideBulk decides, when a Close begins, whether it is a bulk Close.
func (m *Machine) decideBulk(op *closeOp) {
	if m.sess == nil {
		return
	}
	leaders := 0
	for _, c := range m.contenders {
		if c.removed || c.term == nil {
			continue
		}
		if c.term.taskRunning {
			return
		}
		if c.group == nil && c.phase == phLeader {
			leaders++
		}
	}
	if op.bulk = leaders > closeBatch; op.bulk {
		op.deferred = make([]*contender, 0, leaders)
	}
}

// deferRelease makes the session's close the release of c's revoked term,
// in a bulk Close; it reports false if it is not one.
func (m *Machine) deferRelease(c *contender) bool {
	op := m.closing
	if op == nil || !op.bulk || op.sessionSent || c.group != nil {
		return false
	}
	c.term.releaseReq = bulkRelease
	op.deferred = append(op.deferred, c)
	op.deferredBy[c.kind]++
	return true
}

// handedOffDeferred notes that c, whose release was deferred, is handed off.
func (m *Machine) handedOffDeferred(c *contender) {
	if op := m.closing; op != nil {
		op.deferredBy[c.kind]--
	}
}

// noneActive reports whether every contender and group is gone.
func (m *Machine) noneActive() bool {
	for _, n := range m.active {
		if n > 0 {
			return false
		}
	}
	return len(m.groups) == 0
}

// closeBatch bounds the requests in flight while a Close stops its
// contenders, and so the leaders one input stops.
const closeBatch = 256

// closeStepMax bounds the contenders one input of a Close stops, or hands
// over after a bulk Close's session close; and no input does either while
// closeStepMax effects wait for the driver (a driver may step many inputs
// before it takes the effects, as it does with a batch of callbacks that
// ended: without this bound, each of them would add another chunk).
const closeStepMax = 4 * closeBatch

// stopNeedsRoom reports whether stopping c during a Close sends a request
// (a leader releases its lease, now or once its task returned, unless the
// session's close releases it: a bulk Close).
func (m *Machine) stopNeedsRoom(c *contender) bool {
	return c.phase == phLeader && !(m.closing.bulk && c.group == nil)
}

// maxCloseErrors bounds the failures a Close reports one by one.
const maxCloseErrors = 8

// fail records a failure of the hand-over.
func (op *closeOp) fail(err error) {
	if len(op.errs) < maxCloseErrors {
		op.errs = append(op.errs, err)
	} else {
		op.dropped++
	}
}

// stopMore reports whether a Close has contenders to stop and room for the
// next, or deferred hand-offs to finish after its session's close.
func (m *Machine) stopMore() bool {
	op := m.closing
	if op == nil {
		return false
	}
	if op.sessionClosed && len(op.deferred) > 0 {
		return true
	}
	return len(op.queue) > 0 && (len(m.pending) < closeBatch || !m.stopNeedsRoom(op.queue[0]))
}

// close starts closing the client.
func (m *Machine) close(w Waiter) {
	if m.state == vocab.SessionClosed {
		m.complete(w, 0, nil)
		return
	}
	if m.closing == nil {
		m.closing = &closeOp{}
		m.decideBulk(m.closing)
	}
	if w != 0 {
		m.closing.waiters = append(m.closing.waiters, w)
	}
}

func (m *Machine) closeStep() {
	// Each kind is stopped once, when its turn comes; then the counts tell
	// when it is done, so that each input costs O(1) while closing.
	op := m.closing
	if op.sessionSent {
		// Every kind was handed over before the session's close was sent.
		if !op.sessionClosed || len(m.effects) >= closeStepMax {
			return
		}
		// The deferred releases are done: their revoked callbacks follow
		// (H1), closeStepMax hand-offs per input, and the Close completes
		// once the callbacks have run (L3).
		n := min(len(op.deferred), closeStepMax)
		for _, c := range op.deferred[:n] {
			if t := c.term; t != nil && t.releaseReq == bulkRelease && c.phase == phHandoff {
				m.afterRelease(c)
			}
		}
		clear(op.deferred[:n])
		if op.deferred = op.deferred[n:]; len(op.deferred) > 0 {
			return
		}
		op.deferred = nil
		if m.noneActive() {
			m.finishClose()
		}
		return
	}
	for _, name := range slices.Sorted(maps.Keys(m.lockQueue)) {
		for _, c := range m.lockQueue[name] {
			c.waiting = false
			delete(m.byID, c.id)
			m.complete(c.waiter(), 0, fmt.Errorf("simba: lock %q: %w", name, ErrClosed))
		}
		delete(m.lockQueue, name)
	}
	for kind := range numKinds {
		if !op.stopped[kind] {
			op.stopped[kind] = true
			if kind == kindPartition {
				for _, g := range m.groupList {
					if !g.removed {
						m.stopGroup(g, false, 0, 0) // a stop overrides a step-down in progress
					}
				}
			}
			for _, c := range m.contenders {
				if !c.removed && c.kind == kind && c.group == nil {
					op.queue = append(op.queue, c)
				}
			}
		}
		if len(op.queue) > 0 {
			if len(m.effects) >= closeStepMax {
				return // the driver takes them first; nextWake brings it back
			}
			room := closeBatch - len(m.pending)
			n := 0
			for ; n < len(op.queue) && n < closeStepMax; n++ {
				c := op.queue[n]
				if m.stopNeedsRoom(c) {
					if room <= 0 {
						break // the replies come back here
					}
					room--
				}
				m.stop(c, false, 0, 0) // a stop overrides a step-down in progress
			}
			clear(op.queue[:n])
			if op.queue = op.queue[n:]; len(op.queue) > 0 {
				return
			}
			op.queue = nil
		}
		if m.active[kind] > op.deferredBy[kind] || kind == kindPartition && len(m.groups) > 0 {
			return
		}
	}
	if s := m.sess; s != nil {
		op.sessionSent, op.gen, op.id = true, s.gen, s.id
		s.ended = true
		m.sess = nil
		m.send(Request{Kind: ReqClose, Gen: s.gen, Timeout: m.cfg.RenewInterval}, &pendingReq{})
		return
	}
	if m.openReq != 0 {
		return // openDone closes what it opened; settle comes back here
	}
	m.finishClose()
}

func (m *Machine) closeDone(p *pendingReq, res Result) {
	op := m.closing
	if op == nil || !op.sessionSent || p.req.Gen != op.gen {
		return
	}
	if res.Err != nil {
		// The store keeps what the session held until it expires.
		op.fail(fmt.Errorf("session %s not closed (what it holds stays taken until it expires): %w", op.id, res.Err))
	}
	op.sessionClosed = true // closeStep goes on
}

func (m *Machine) finishClose() {
	op := m.closing
	m.closing = nil
	m.setState(vocab.SessionClosed, nil)
	var err error
	if len(op.errs) > 0 {
		// One line, each failure wrapped (errors.Join would print lines).
		args := make([]any, len(op.errs))
		for i, e := range op.errs {
			args[i] = e
		}
		format := strings.TrimSuffix(strings.Repeat("%w; ", len(args)), "; ")
		if op.dropped > 0 {
			format += fmt.Sprintf("; and %d more", op.dropped)
		}
		err = fmt.Errorf(format, args...)
	}
	for _, w := range op.waiters {
		m.complete(w, 0, err)
	}
	m.emit(Effect{Kind: EffShutdown})
}
