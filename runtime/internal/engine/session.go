package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// session is the core's record of one backend session (S1): its local
// deadline (D1), renewal period (C2) and back-off (C3), and what it owns as
// far as the core knows (T4).
type session struct {
	gen      uint64
	id       backends.SessionID
	deadline Mono // local deadline (D1); frozen once the session ended
	ended    bool
	period   time.Duration // current renewal period (RenewInterval, or less by C2)
	short    bool          // EventSessionLeaseShortened already published
	renewAt  Mono
	kaReq    RequestID       // in-flight keep-alive, 0 if none
	ownedReq RequestID       // in-flight Owned read, 0 if none
	digest   backends.Digest // what the session owns, as far as the engine knows
	recheck  bool            // read Owned at the next renewal, whatever its digest
	changing int             // acquisitions and releases in flight
	deferred bool            // a renewal's digest, seen, awaits their replies
	seen     backends.Digest
	early    map[uint64]int   // own changes answered ahead of the one expected: version → leases (ownChange)
	released map[string]Token // highest token released per name (A3)

	storeTime   time.Time // store clock at the last renewal or store-time read, if any
	storeTimeAt Mono      // when that call was sent
	storeReq    RequestID // in-flight ReqStoreTime, 0 if none
}

// current reports whether gen is the live session's generation.
func (m *Machine) current(gen uint64) (*session, bool) {
	if s := m.sess; s != nil && s.gen == gen && !s.ended {
		return s, true
	}
	return nil, false
}

func (m *Machine) setDeadline(s *session, at Mono) {
	s.deadline = at
	m.emit(Effect{Kind: EffSetDeadline, Gen: s.gen, At: at})
}

func (m *Machine) maybeOpen() {
	if m.sess != nil || m.openReq != 0 || m.closing != nil || m.state == vocab.SessionClosed || m.now < m.openAt {
		return
	}
	m.gen++
	m.openReq = m.send(Request{Kind: ReqOpen, Gen: m.gen, TTL: m.cfg.LeaseDuration, Timeout: m.cfg.RenewInterval},
		&pendingReq{})
}

func (m *Machine) openDone(p *pendingReq, res Result) {
	m.openReq = 0
	if res.Err == nil && (m.closing != nil || m.state == vocab.SessionClosed) {
		// Opened while closing: close it again.
		m.send(Request{Kind: ReqClose, Gen: p.req.Gen, Timeout: m.cfg.RenewInterval}, &pendingReq{})
		return
	}
	if res.Err == nil {
		local := m.localValidity(res.Renewal.Remaining)
		if p.sentAt+local <= m.now {
			res.Err = errors.New("simba: session granted no usable validity (reply too slow or lease too short)")
			m.send(Request{Kind: ReqClose, Gen: p.req.Gen, Timeout: m.cfg.RenewInterval}, &pendingReq{})
		} else {
			m.openBackoff = m.cfg.MinBackoff
			s := &session{gen: p.req.Gen, id: res.Session, released: make(map[string]Token), digest: res.Renewal.Digest}
			m.setDeadline(s, m.deadlineFrom(p.sentAt, local))
			m.sess = s
			m.lastErr = nil
			m.event(vocab.Event{Kind: vocab.EventSessionOpened, Session: s.id, Duration: local})
			m.setPeriod(s, p.sentAt, local)
			m.noteStoreTime(s, p.sentAt, res.Renewal.StoreTime)
			m.setState(vocab.SessionLive, nil)
			for _, c := range m.contenders {
				if !c.removed && c.phase != phDone && c.group == nil {
					m.wake(c) // it watches again once this session is refused the lease
				}
			}
			for _, g := range m.groupList {
				m.wakeGroup(g)
			}
			return
		}
	}
	m.lastErr = res.Err
	m.event(vocab.Event{Kind: vocab.EventBackendError, Err: res.Err})
	m.openAt = m.now + m.openBackoff
	m.openBackoff = min(2*m.openBackoff, m.cfg.RenewInterval)
}

// setPeriod picks the renewal period for a grant with local validity local:
// RenewInterval if two renewals fit in it, else a third of it (C2).
func (m *Machine) setPeriod(s *session, sentAt Mono, local time.Duration) {
	s.period = m.cfg.RenewInterval
	if 2*m.cfg.RenewInterval > local {
		s.period = max(local/3, time.Millisecond)
		if !s.short {
			s.short = true
			m.event(vocab.Event{Kind: vocab.EventSessionLeaseShortened, Session: s.id, Duration: local})
		}
	}
	s.renewAt = sentAt + s.period
}

// deadlineFrom is the local deadline of a grant of local validity to a call
// sent at sentAt (D1): counted from the send, not from the reply's arrival,
// so that a slow reply only shortens it.
func (m *Machine) deadlineFrom(sentAt Mono, local time.Duration) Mono {
	if mutant == "deadline-arrival" {
		return m.now + local
	}
	return sentAt + local
}

func (m *Machine) noteStoreTime(s *session, sentAt Mono, at time.Time) {
	if !at.IsZero() {
		s.storeTime, s.storeTimeAt = at, sentAt
	}
}

func (m *Machine) keepAliveDone(p *pendingReq, res Result) {
	s, ok := m.current(p.req.Gen)
	if !ok {
		return // D4: a reply for a session that ended changes nothing
	}
	s.kaReq = 0
	switch {
	case res.Err == nil:
		local := m.localValidity(res.Renewal.Remaining)
		m.setDeadline(s, m.deadlineFrom(p.sentAt, local)) // D1: from when the request was sent
		if m.now >= s.deadline && mutant != "late-reply-revives" {
			m.sessionLost(vocab.ReasonDeadlinePassed)
			return
		}
		m.lastErr = nil
		m.setPeriod(s, p.sentAt, local)
		m.noteStoreTime(s, p.sentAt, res.Renewal.StoreTime)
		m.event(vocab.Event{Kind: vocab.EventSessionRenewed, Session: s.id, Duration: m.now - p.sentAt})
		m.setState(vocab.SessionLive, nil)
		d := res.Renewal.Digest
		m.checkDigest(s, d) // T4
		if d.Groups != s.digest.Groups {
			s.digest.Groups = d.Groups
			m.refreshGroups()
		}
		m.wakeWaiters()
	case errors.Is(res.Err, backends.ErrSessionExpired):
		m.sessionLost(vocab.ReasonSessionExpired)
	default:
		// C3: retry after half the time left, within [MinBackoff, RenewInterval].
		m.lastErr = res.Err
		m.event(vocab.Event{Kind: vocab.EventBackendError, Session: s.id, Err: res.Err})
		m.setState(vocab.SessionSuspended, res.Err)
		if at, ok := m.retryRenewalAt(s); ok {
			s.renewAt = at
		} else {
			s.renewAt = 0 // no retry fits: the deadline ends the session
		}
	}
}

// retryRenewalAt is when to retry a failed renewal (C3): after half the
// time left, within [MinBackoff, RenewInterval], if that is before the
// deadline.
func (m *Machine) retryRenewalAt(s *session) (Mono, bool) {
	left := s.deadline - m.now
	backoff := min(max(left/2, m.cfg.MinBackoff), m.cfg.RenewInterval)
	if mutant == "unbounded-backoff" {
		backoff = max(left/2, m.cfg.MinBackoff)
	}
	return m.now + backoff, m.now+backoff < s.deadline
}

// checkDigest compares a renewal's digest d with what the engine expects
// the session to own, and reads the list (Owned) unless d is the one
// expected, or an older one (a reply of ours that the store handled later
// overtook it: versions only grow). While acquisitions or releases of ours
// are in flight, their replies may yet explain a newer d: the check waits
// for them (changeDone).
func (m *Machine) checkDigest(s *session, d backends.Digest) {
	newer := d.Version > s.digest.Version || d.Version == s.digest.Version && d.Leases != s.digest.Leases
	switch {
	case s.ownedReq != 0:
	case s.changing > 0 && newer:
		s.seen, s.deferred = d, true
	case newer || s.recheck:
		s.recheck, s.deferred = false, false
		s.ownedReq = m.send(Request{Kind: ReqOwned, Gen: s.gen, Timeout: s.period}, &pendingReq{seq: m.adoptSeq})
	}
}

// changeDone notes that an acquisition or release of session gen was
// answered, and makes the check a renewal deferred for it.
func (m *Machine) changeDone(gen uint64) {
	s, ok := m.current(gen)
	if !ok {
		return
	}
	s.changing--
	if s.changing == 0 && s.deferred {
		s.deferred = false
		m.checkDigest(s, s.seen)
	}
}

// ownChange follows a change this session made, from the digest its reply
// carried (an acquire's or a release's): if the store's version is one above
// the one expected, the change was this call's alone, and the expected digest
// moves with it, so the next keep-alive needs no Owned read. A reply that
// overtook others (its version further above) is kept, up to maxEarly of
// them, until the replies before it fill the gap: then the expectation moves
// past it too — a client with many calls in flight (a storm of acquires, in
// batches) sees its replies out of order all the time, and read every lease
// again at the storm's end. Anything else — a change someone else made, a
// lost reply — leaves a gap, and the next keep-alive's digest tells (S1, T4).
func (m *Machine) ownChange(s *session, d backends.Digest) {
	if s.ownedReq != 0 {
		return
	}
	switch {
	case d.Version == s.digest.Version+1:
		s.digest.Leases, s.digest.Version = d.Leases, d.Version
		delete(s.early, d.Version) // told twice (an idempotent acquire's reply came first)
		for len(s.early) > 0 {
			n, ok := s.early[s.digest.Version+1]
			if !ok {
				break
			}
			delete(s.early, s.digest.Version+1)
			s.digest.Leases, s.digest.Version = n, s.digest.Version+1
		}
	case d.Version > s.digest.Version+1 && len(s.early) < maxEarly:
		if s.early == nil {
			s.early = make(map[uint64]int)
		}
		s.early[d.Version] = d.Leases
	}
}

// maxEarly bounds the replies ownChange keeps ahead of the expected digest
// (a gap that never fills — a change someone else made — keeps them until
// the next Owned read). A reply can be overtaken by many more than the calls
// in flight: its goroutine may wait for the driver's lock while the others
// go round many times (a million acquires on the memory store, 128 calls
// in flight, saw one overtaken by more than 4,096).
const maxEarly = 1 << 16

// ownedDone compares the store's list with the terms held (T4): a term the
// store no longer lists for this session was taken over; a lease the store
// lists that no election wants is released.
func (m *Machine) ownedDone(p *pendingReq, res Result) {
	s, ok := m.current(p.req.Gen)
	if !ok {
		return
	}
	s.ownedReq = 0
	if res.Err != nil {
		if errors.Is(res.Err, backends.ErrSessionExpired) {
			m.sessionLost(vocab.ReasonSessionExpired)
			return
		}
		s.recheck = true // the next keep-alive asks again, whatever its digest
		return
	}
	s.digest, s.early = res.Digest, nil
	held := make(map[string]Token, len(res.Held))
	for _, h := range res.Held {
		held[h.Name] = h.Token
	}
	for _, c := range m.contenders {
		t := c.term
		if c.removed || t == nil {
			continue
		}
		if tok, ok := held[t.c.name]; ok && tok == t.token || t.sess != s || t.adopted >= p.seq || t.ended {
			delete(held, t.c.name)
			continue
		}
		m.loseTerm(c, vocab.ReasonTakenOver)
	}
	for _, h := range res.Held {
		tok, stray := held[h.Name]
		switch c := m.byName[h.Name]; {
		case !stray:
		case c == nil || c.attempt == 0 && c.phase == phCandidate:
			m.releaseUnwanted(s, h.Name, tok)
		default:
			// An attempt in flight may yet adopt it, or a release free
			// it; if neither does, the next renewal reads the list again.
			s.recheck = true
		}
	}
}

// sessionLost ends the current session for reason (DeadlinePassed or
// SessionExpired): every term of it is revoked at once (H3), the session is
// closed on a best-effort basis, and a new one opens.
func (m *Machine) sessionLost(reason vocab.Reason) {
	s := m.sess
	s.ended = true
	m.sess = nil
	m.event(vocab.Event{Kind: vocab.EventSessionEnded, Session: s.id, Reason: reason})
	for _, c := range m.contenders {
		if !c.removed && c.term != nil && c.term.sess == s {
			m.loseTerm(c, reason)
		}
	}
	for _, g := range m.groupList {
		g.joined, g.viewed = false, false // membership died with the session
	}
	m.wakeWaiters() // a run waiting to be recorded ends with its session
	m.giveUp(s, reason)
	if m.closing != nil {
		m.closing.fail(fmt.Errorf("session %s ended (%v) before it could hand over: what it held stays taken until the store expires it", s.id, reason))
	}
	if m.closing == nil {
		m.setState(vocab.SessionOpening, m.lastErr)
		m.openAt = m.now
		m.maybeOpen()
	}
}

// storeNow estimates the store's clock at now, from the last call that
// carried it (the store's time then, plus the local time elapsed since the
// call was sent: an overestimate by at most that round trip); ok is false
// if the backend reported none.
func (m *Machine) storeNow() (time.Time, bool) {
	s := m.sess
	if s == nil || s.storeTime.IsZero() {
		return time.Time{}, false
	}
	return s.storeTime.Add(m.now - s.storeTimeAt), true
}

// needStoreTime reads the store's clock for session s, unless a read is in
// flight; its reply plans the runs that wait for it.
func (m *Machine) needStoreTime(s *session) {
	if s.storeReq == 0 {
		s.storeReq = m.send(Request{Kind: ReqStoreTime, Gen: s.gen, Timeout: s.period}, &pendingReq{})
	}
}

func (m *Machine) storeTimeDone(p *pendingReq, res Result) {
	s, ok := m.current(p.req.Gen)
	if !ok {
		return
	}
	s.storeReq = 0
	if res.Err != nil {
		// B5: the runs wait for the next renewal, which asks again.
		m.event(vocab.Event{Kind: vocab.EventBackendError, Session: s.id, Err: res.Err})
		return
	}
	m.noteStoreTime(s, p.sentAt, res.StoreTime)
	m.wakeWaiters()
}
