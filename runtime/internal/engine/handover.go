package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/simba-go/simba/backends"
)

// A hand-over to a chosen successor (§13): the leader writes a record that
// names the successor's session into the lease's value, with its token, and
// then steps down with the hand-off order of H1, contending again at once.
// Every candidate reads the value with its grant (Grant.Value): one that is
// not the successor gives the lease back without adopting it (no term, no
// callback), and sits out until the deferral ends — LeaseDuration after it
// first saw the record, the bound of a crash fail-over, or until an attempt
// is refused by the successor's session, which then holds the lease.
// Meanwhile it tries at the usual pace of a candidate but is not woken by
// release notifications, so that the successor's attempts, woken by every
// give-back, are not raced by a storm of them. The successor adopts the
// lease and writes over the record, so that later grants are not deferred.
// If the successor is gone before it adopts, the others adopt after the
// deferral.

// Records in a lease's value, beside the schedule records of
// internal/schedulerecord (an election's value holds no schedule record).
const (
	handOverPrefix = "simba/v1 handover "
	handedOver     = "simba/v1 handed-over"
)

// ErrNotLeading reports a hand-over asked of an election that holds no term.
var ErrNotLeading = errors.New("not leading")

// handOverRecord is the record of a hand-over to the session to by the
// term with token from: "simba/v1 handover <session> <token>". The token
// makes every hand-over's record differ from the last, even to the same
// successor, so that a candidate tells a new one from one it has seen.
func handOverRecord(to backends.SessionID, from Token) []byte {
	return fmt.Appendf(nil, "%s%s %d", handOverPrefix, to, from)
}

// handOverTo returns the session a hand-over record names, if value is one.
func handOverTo(value []byte) (backends.SessionID, bool) {
	rest, ok := bytes.CutPrefix(value, []byte(handOverPrefix))
	if !ok {
		return "", false
	}
	to, _, ok := bytes.Cut(rest, []byte(" "))
	if !ok || len(to) == 0 {
		return "", false
	}
	return backends.SessionID(to), true
}

// handOver starts c's hand-over to the session to: it writes the record
// with the term's token, and steps down when the store has it (or completes
// w with the error that stopped it, the lease still held).
func (m *Machine) handOver(c *contender, to backends.SessionID, w Waiter) {
	switch {
	case c == nil || c.removed || c.op != nil:
		m.complete(w, 0, fmt.Errorf("simba: hand over: %w", ErrClosed))
		return
	case c.phase != phLeader || c.term == nil || c.term.ended:
		m.complete(w, 0, fmt.Errorf("simba: hand over %q: %w", c.name, ErrNotLeading))
		return
	case to == "" || strings.ContainsAny(string(to), " \n"):
		m.complete(w, 0, fmt.Errorf("simba: hand over %q: successor session %q: want a session id", c.name, to))
		return
	case to == c.term.sess.id:
		m.complete(w, 0, nil) // the successor already leads
		return
	}
	t := c.term
	s, live := m.current(t.sess.gen)
	if !live {
		m.complete(w, 0, fmt.Errorf("simba: hand over %q: %w", c.name, ErrNotLeading))
		return
	}
	m.send(Request{Kind: ReqPutValue, Gen: s.gen, Name: c.name, Token: t.token,
		Value: handOverRecord(to, t.token), Timeout: s.period},
		&pendingReq{c: c, t: t, w: w, handOver: true})
}

// handOverWritten handles the reply to a hand-over's record: the leader
// steps down if the term it was written for still leads.
func (m *Machine) handOverWritten(p *pendingReq, res Result) {
	c, t := p.c, p.t
	if p.done {
		return // the successor's own record: a failure only defers the next grant, once
	}
	if res.Err != nil {
		m.complete(p.w, 0, fmt.Errorf("simba: hand over %q: %w", c.name, res.Err))
		return
	}
	if c.term != t || c.phase != phLeader || c.op != nil {
		m.complete(p.w, 0, fmt.Errorf("simba: hand over %q: %w", c.name, ErrNotLeading))
		return
	}
	m.stop(c, true, 0, p.w)
}

// deferToSuccessor reports whether c, granted a lease whose value is
// value, must give it back to a successor a hand-over named, and sets its
// deferral when it sees the record first.
func (m *Machine) deferToSuccessor(c *contender, s *session, value []byte) bool {
	to, ok := handOverTo(value)
	if !ok || to == s.id || c.kind != KindElection {
		return false
	}
	x := c.extra()
	if !bytes.Equal(x.handOverSeen, value) {
		x.handOverSeen = bytes.Clone(value)
		x.deferUntil = m.now + m.cfg.LeaseDuration
	}
	if m.now >= x.deferUntil {
		return false
	}
	return true
}

// successorSeen ends c's deferral when the session that refused its attempt
// is the successor it defers to: the hand-over is done.
func (m *Machine) successorSeen(c *contender, holder backends.SessionID) {
	if c.x == nil || c.x.deferUntil == 0 {
		return
	}
	if to, ok := handOverTo(c.x.handOverSeen); ok && to == holder {
		c.x.deferUntil = 0
	}
}

// deferring reports whether c sits out a hand-over to another session.
func (c *contender) deferring(now Mono) bool { return c.x != nil && now < c.x.deferUntil }

// adoptedHandOver writes over the hand-over record a successor adopted
// with its grant, so that later grants are not deferred.
func (m *Machine) adoptedHandOver(c *contender, s *session, value []byte) {
	if to, ok := handOverTo(value); !ok || to != s.id || c.term == nil {
		return
	}
	m.send(Request{Kind: ReqPutValue, Gen: s.gen, Name: c.name, Token: c.term.token,
		Value: []byte(handedOver), Timeout: s.period}, &pendingReq{c: c, t: c.term, handOver: true, done: true})
}
