package engine

import (
	"errors"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// A session given up locally — its deadline passed while replies came
// late, or the store said it expired — is closed on the store, so that
// what it held is free at once rather than at the store's own expiry
// (S4): otherwise, under added latency, its leases stay taken for the rest
// of the store's lease, even to this client's new session. The close is
// best effort and bounded: it is sent at once, and again after each
// failure (a timeout, a store unreachable), with a backoff from MinBackoff
// doubling up to RenewInterval, until one gets through or until
// LeaseDuration after the session was given up, by when the store has
// expired it anyway.

// lostSession is a session given up and not yet closed on the store.
type lostSession struct {
	gen     uint64
	until   Mono          // the last moment a close is worth sending
	retryAt Mono          // when to send the next close, if req is 0
	backoff time.Duration // the wait after the next failure
	req     RequestID     // the close in flight, 0 if none
}

// giveUp plans the closes of session s, which the core gave up for reason.
func (m *Machine) giveUp(s *session, reason vocab.Reason) {
	l := &lostSession{gen: s.gen, until: m.now + m.cfg.LeaseDuration, backoff: max(m.cfg.MinBackoff, time.Millisecond)}
	m.lost = append(m.lost, l)
	if reason == vocab.ReasonSessionExpired {
		m.sendLostClose(l)
		return
	}
	l.retryAt = m.now + m.cfg.Margin + time.Duration(m.cfg.Drift*float64(m.cfg.LeaseDuration))
}

func (m *Machine) sendLostClose(l *lostSession) {
	again := m.now+l.backoff < l.until
	l.req = m.send(Request{Kind: ReqClose, Gen: l.gen, Timeout: m.cfg.RenewInterval, Again: again}, &pendingReq{lost: l})
}

// lostCloseDone handles the reply to a close of a session given up: done
// if it got through (or the store says the session is gone), else tried
// again after the backoff while that is before the bound.
func (m *Machine) lostCloseDone(l *lostSession, res Result) {
	l.req = 0
	if res.Err == nil || errors.Is(res.Err, backends.ErrSessionExpired) || !(m.now+l.backoff < l.until) ||
		m.state == vocab.SessionClosed {
		m.lost = slices.DeleteFunc(m.lost, func(x *lostSession) bool { return x == l })
		return
	}
	l.retryAt = m.now + l.backoff
	l.backoff = min(2*l.backoff, m.cfg.RenewInterval)
}

// closeLost sends the closes of sessions given up that are due again.
func (m *Machine) closeLost() {
	for _, l := range m.lost {
		if l.req == 0 && m.now >= l.retryAt {
			m.sendLostClose(l)
		}
	}
}
