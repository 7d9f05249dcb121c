package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/simba-go/simba/backends"
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
}

// closeBatch bounds the requests in flight while a Close stops its
// contenders, and so the leaders one input stops.
const closeBatch = 256

// closeStepMax bounds the contenders one input of a Close stops.
const closeStepMax = 4 * closeBatch

// stopNeedsRoom reports whether stopping c during a Close sends a request
// (a leader releases its lease, now or once its task returned).
func stopNeedsRoom(c *contender) bool { return c.phase == phLeader }

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
// next.
func (m *Machine) stopMore() bool {
	return m.closing != nil && len(m.closing.queue) > 0 &&
		(len(m.pending) < closeBatch || !stopNeedsRoom(m.closing.queue[0]))
}

// close starts closing the client.
func (m *Machine) close(w Waiter) {
	if m.state == Closed {
		m.complete(w, 0, nil)
		return
	}
	if m.closing == nil {
		m.closing = &closeOp{}
	}
	if w != 0 {
		m.closing.waiters = append(m.closing.waiters, w)
	}
}

func (m *Machine) closeStep() {
	// Each kind is stopped once, when its turn comes; then the counts tell
	// when it is done, so that each input costs O(1) while closing.
	op := m.closing
	for _, name := range slices.Sorted(maps.Keys(m.lockQueue)) {
		for _, c := range m.lockQueue[name] {
			c.waiting = false
			delete(m.byID, c.id)
			m.complete(c.lockW, 0, fmt.Errorf("simba: lock %q: %w", name, ErrClosed))
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
			room := closeBatch - len(m.pending)
			n := 0
			for ; n < len(op.queue) && n < closeStepMax; n++ {
				c := op.queue[n]
				if stopNeedsRoom(c) {
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
		if m.active[kind] > 0 || kind == kindPartition && len(m.groups) > 0 {
			return
		}
	}
	if op.sessionSent {
		return
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
	m.finishClose()
}

func (m *Machine) finishClose() {
	op := m.closing
	m.closing = nil
	m.setState(Closed, nil)
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
