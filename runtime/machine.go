package runtime

import (
	"container/heap"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/simba-go/simba/backends"
)

// machine is the engine: sessions, terms, elections, locks and hand-off as a
// deterministic state machine, shaped like etcd's raft package. It has no
// goroutines, reads no clock and performs no I/O. Its inputs are method calls
// that carry the current monotonic time (API calls, backend replies, task and
// callback completions, release notifications, timer ticks); its outputs are
// effects (backend requests, callbacks and tasks to run, events, completions),
// taken with takeEffects, and the next wake-up time, from nextWake.
//
// Given the same inputs and seed it makes the same decisions, so a simulator
// can drive it alone through many seeded schedules. It is not safe for
// concurrent use; the Client serialises calls under its mutex.
//
// Terms are the one shared structure: the machine creates them and ends them
// (closing channels, cancelling contexts — no I/O), and users read them
// concurrently through atomics.
type machine struct {
	cfg   Config
	rng   *rand.Rand
	clock func() mono // handed to Terms; the machine itself never calls it
	owner *Client     // recorded in Terms; nil in a simulator

	now     mono
	state   SessionState
	sess    *session // the current session, nil while opening or closed
	gen     uint64   // last session generation
	lastErr error    // the last backend failure of the session

	openReq     uint64 // in-flight reqOpen, 0 if none
	openAt      mono   // when to (re)open if no session
	openBackoff time.Duration

	reqSeq  uint64
	pending map[uint64]*pendingReq

	byName     map[string]*contender
	lockQueue  map[string][]*contender // Locks waiting for their turn, by name
	contenders []*contender            // in start order; removed ones are compacted away
	removed    int
	active     [numCategories]int // contenders not removed, per category
	groups     map[string]*groupState
	groupList  []*groupState // in start order
	timers     timerHeap
	adoptSeq   uint64

	closing *closeOp
	effects []effect
}

type session struct {
	gen      uint64
	id       backends.SessionID
	deadline deadline // local deadline (D1); frozen once the session ended
	ended    bool
	period   time.Duration // current renewal period (RenewInterval, or less by C2)
	short    bool          // SessionLeaseShortened already published
	renewAt  mono
	kaReq    uint64          // in-flight keep-alive, 0 if none
	ownedReq uint64          // in-flight Owned read, 0 if none
	digest   backends.Digest // what the session owns, as far as the engine knows
	recheck  bool            // read Owned at the next renewal, whatever its digest
	changing int             // acquisitions and releases in flight
	deferred bool            // a renewal's digest, seen, awaits their replies
	seen     backends.Digest
	released map[string]Token // highest token released per name (A3)

	storeTime   time.Time // store clock at the last renewal, if any
	storeTimeAt mono      // when that renewal was sent
}

type pendingReq struct {
	req       request
	sentAt    mono
	c         *contender  // reqAcquire, reqRelease
	term      *Term       // reqRelease
	abandoned bool        // reqAcquire whose election no longer wants it (A3)
	seq       uint64      // reqOwned: adoptSeq when sent
	g         *groupState // reqJoin, reqLeave, reqMembers
	w         waiter      // reqPutValue
}

type closeOp struct {
	errs        []error             // what could not be handed over
	stopped     [numCategories]bool // the category's stop has begun
	waiters     []waiter
	sessionSent bool               // the session's close request is in flight
	gen         uint64             // its generation
	id          backends.SessionID // and id
}

// SessionState is the state of a client's session (SPEC S5).
type SessionState int

const (
	// SessionOpening: no session yet, or opening a new one after the last ended.
	SessionOpening SessionState = iota
	// SessionLive: the last renewal succeeded.
	SessionLive
	// SessionSuspended: the last renewal failed; the local deadline has not passed.
	SessionSuspended
	// SessionClosed: the client was closed.
	SessionClosed
)

var stateNames = [...]string{"opening", "live", "suspended", "closed"}

// String returns the state in words.
func (s SessionState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}

func newMachine(cfg Config, seed uint64, clock func() mono, owner *Client) *machine {
	return &machine{
		cfg:         cfg,
		rng:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		clock:       clock,
		owner:       owner,
		openBackoff: cfg.MinBackoff,
		pending:     make(map[uint64]*pendingReq),
		byName:      make(map[string]*contender),
		lockQueue:   make(map[string][]*contender),
		groups:      make(map[string]*groupState),
	}
}

// takeEffects returns the effects produced since the last call, in order.
func (m *machine) takeEffects() []effect {
	e := m.effects
	m.effects = nil
	return e
}

func (m *machine) emit(e effect) { m.effects = append(m.effects, e) }
func (m *machine) event(e Event) { m.emit(effect{kind: effEvent, ev: e}) }
func (m *machine) complete(w waiter, t *Term, err error) {
	if w != nil {
		m.emit(effect{kind: effComplete, w: w, term: t, err: err})
	}
}

func (m *machine) send(req request, p *pendingReq) uint64 {
	m.reqSeq++
	req.id = m.reqSeq
	p.req, p.sentAt = req, m.now
	m.pending[req.id] = p
	if req.kind == reqAcquire || req.kind == reqRelease {
		if s, ok := m.current(req.gen); ok {
			s.changing++
		}
	}
	m.emit(effect{kind: effSend, req: req})
	return req.id
}

// nextWake returns when the machine next needs a tick, if ever.
func (m *machine) nextWake() (mono, bool) {
	var at mono
	ok := false
	consider := func(t mono) {
		if !ok || t < at {
			at, ok = t, true
		}
	}
	if s := m.sess; s != nil {
		consider(s.deadline.get())
		if s.kaReq == 0 && s.renewAt > 0 {
			consider(s.renewAt)
		}
	} else if m.state != SessionClosed && m.closing == nil && m.openReq == 0 {
		consider(m.openAt)
	}
	for len(m.timers) > 0 && !m.timers[0].live() {
		heap.Pop(&m.timers)
	}
	if len(m.timers) > 0 {
		consider(m.timers[0].at)
	}
	return at, ok
}

// tick advances time; nothing else happened.
func (m *machine) tick(now mono) {
	m.advance(now)
	m.settle()
}

// advance moves the machine to now and handles everything that is due: a
// passed deadline first (D4), then contender timers, then renewals and
// session opening.
func (m *machine) advance(now mono) {
	if now > m.now {
		m.now = now
	}
	if m.state == SessionClosed {
		return
	}
	if s := m.sess; s != nil && m.now >= s.deadline.get() {
		m.sessionLost(ReasonDeadlinePassed)
	}
	for len(m.timers) > 0 && m.timers[0].at <= m.now {
		e := heap.Pop(&m.timers).(timerEntry)
		switch {
		case !e.live():
		case e.c != nil:
			e.c.timerSeq++ // consumed
			m.wake(e.c)
		default:
			e.g.timerSeq++
			m.wakeGroup(e.g)
		}
	}
	if s := m.sess; s != nil && s.kaReq == 0 && s.renewAt > 0 && m.now >= s.renewAt {
		s.kaReq = m.send(request{kind: reqKeepAlive, gen: s.gen, timeout: s.period}, &pendingReq{})
	}
	m.maybeOpen()
}

func (m *machine) maybeOpen() {
	if m.sess != nil || m.openReq != 0 || m.closing != nil || m.state == SessionClosed || m.now < m.openAt {
		return
	}
	m.gen++
	m.openReq = m.send(request{kind: reqOpen, gen: m.gen, ttl: m.cfg.LeaseDuration, timeout: m.cfg.RenewInterval},
		&pendingReq{})
}

// settle finishes an input: it moves a pending close forward.
func (m *machine) settle() {
	for _, g := range m.groupList {
		if !g.removed && g.op != nil {
			m.groupProgress(g)
		}
	}
	if m.closing != nil {
		m.closeStep()
	}
	m.compact()
}

func (m *machine) setState(s SessionState, err error) {
	if m.state == s {
		return
	}
	m.state = s
	var id backends.SessionID
	if m.sess != nil {
		id = m.sess.id
	}
	m.event(Event{Kind: EventSessionState, State: s, Session: id, Err: err})
}

// done delivers a backend reply to the request id.
func (m *machine) done(now mono, id uint64, res result) {
	m.advance(now)
	defer m.settle()
	p, ok := m.pending[id]
	if !ok {
		return
	}
	delete(m.pending, id)
	if k := p.req.kind; k == reqAcquire || k == reqRelease {
		defer m.changeDone(p.req.gen)
	}
	switch p.req.kind {
	case reqOpen:
		m.openDone(p, res)
	case reqKeepAlive:
		m.keepAliveDone(p, res)
	case reqOwned:
		m.ownedDone(p, res)
	case reqAcquire:
		m.acquireDone(p, res)
	case reqRelease:
		m.releaseDone(p, res)
	case reqPutValue:
		m.complete(p.w, nil, res.err)
	case reqJoin, reqLeave, reqMembers:
		m.groupDone(p, res)
	case reqClose:
		if m.closing != nil && m.closing.sessionSent && p.req.gen == m.closing.gen {
			if res.err != nil {
				// The store keeps what the session held until it expires.
				m.closing.errs = append(m.closing.errs, fmt.Errorf("session %s not closed (what it holds stays taken until it expires): %w", m.closing.id, res.err))
			}
			m.finishClose()
		}
	}
}

// current reports whether gen is the live session's generation.
func (m *machine) current(gen uint64) (*session, bool) {
	if s := m.sess; s != nil && s.gen == gen && !s.ended {
		return s, true
	}
	return nil, false
}

func (m *machine) openDone(p *pendingReq, res result) {
	m.openReq = 0
	if res.err == nil && (m.closing != nil || m.state == SessionClosed) {
		// Opened while closing: close it again.
		m.send(request{kind: reqClose, gen: p.req.gen, timeout: m.cfg.RenewInterval}, &pendingReq{})
		return
	}
	if res.err == nil {
		local := m.cfg.localValidity(res.renewal.Remaining)
		if p.sentAt+local <= m.now {
			res.err = errors.New("simba: session granted no usable validity (reply too slow or lease too short)")
			m.send(request{kind: reqClose, gen: p.req.gen, timeout: m.cfg.RenewInterval}, &pendingReq{})
		} else {
			m.openBackoff = m.cfg.MinBackoff
			s := &session{gen: p.req.gen, id: res.session, released: make(map[string]Token), digest: res.renewal.Digest}
			s.deadline.set(p.sentAt + local)
			m.sess = s
			m.lastErr = nil
			m.event(Event{Kind: EventSessionOpened, Session: s.id, Duration: local})
			m.setPeriod(s, p.sentAt, local)
			m.noteStoreTime(s, p.sentAt, res.renewal)
			m.setState(SessionLive, nil)
			for _, c := range m.contenders {
				if !c.removed && c.phase != phDone && c.group == nil {
					m.emit(effect{kind: effWatch, req: request{gen: s.gen, name: c.name}})
					m.wake(c)
				}
			}
			for _, g := range m.groupList {
				m.wakeGroup(g)
			}
			return
		}
	}
	m.lastErr = res.err
	m.event(Event{Kind: EventBackendError, Err: res.err})
	m.openAt = m.now + m.openBackoff
	m.openBackoff = min(2*m.openBackoff, m.cfg.RenewInterval)
}

// setPeriod picks the renewal period for a grant with local validity local:
// RenewInterval if two renewals fit in it, else a third of it (C2).
func (m *machine) setPeriod(s *session, sentAt mono, local time.Duration) {
	s.period = m.cfg.RenewInterval
	if 2*m.cfg.RenewInterval > local {
		s.period = max(local/3, time.Millisecond)
		if !s.short {
			s.short = true
			m.event(Event{Kind: EventSessionLeaseShortened, Session: s.id, Duration: local})
		}
	}
	s.renewAt = sentAt + s.period
}

func (m *machine) noteStoreTime(s *session, sentAt mono, r backends.Renewal) {
	if !r.StoreTime.IsZero() {
		s.storeTime, s.storeTimeAt = r.StoreTime, sentAt
	}
}

func (m *machine) keepAliveDone(p *pendingReq, res result) {
	s, ok := m.current(p.req.gen)
	if !ok {
		return // D4: a reply for a session that ended changes nothing
	}
	s.kaReq = 0
	switch {
	case res.err == nil:
		local := m.cfg.localValidity(res.renewal.Remaining)
		s.deadline.set(p.sentAt + local) // D1: from when the request was sent
		if m.now >= s.deadline.get() {
			m.sessionLost(ReasonDeadlinePassed)
			return
		}
		m.lastErr = nil
		m.setPeriod(s, p.sentAt, local)
		m.noteStoreTime(s, p.sentAt, res.renewal)
		m.event(Event{Kind: EventSessionRenewed, Session: s.id, Duration: m.now - p.sentAt})
		m.setState(SessionLive, nil)
		d := res.renewal.Digest
		m.checkDigest(s, d) // T4
		if d.Groups != s.digest.Groups {
			s.digest.Groups = d.Groups
			m.refreshGroups()
		}
	case errors.Is(res.err, backends.ErrSessionExpired):
		m.sessionLost(ReasonSessionExpired)
	default:
		// C3: retry after half the time left, within [MinBackoff, RenewInterval].
		m.lastErr = res.err
		m.event(Event{Kind: EventBackendError, Session: s.id, Err: res.err})
		m.setState(SessionSuspended, res.err)
		left := s.deadline.get() - m.now
		backoff := min(max(left/2, m.cfg.MinBackoff), m.cfg.RenewInterval)
		if m.now+backoff < s.deadline.get() {
			s.renewAt = m.now + backoff
		} else {
			s.renewAt = 0 // no retry fits: the deadline ends the session
		}
	}
}

// checkDigest compares a renewal's digest d with what the engine expects
// the session to own, and reads the list (Owned) unless d is the one
// expected, or an older one (a reply of ours that the store handled later
// overtook it: versions only grow). While acquisitions or releases of ours
// are in flight, their replies may yet explain a newer d: the check waits
// for them (changeDone).
func (m *machine) checkDigest(s *session, d backends.Digest) {
	newer := d.Version > s.digest.Version || d.Version == s.digest.Version && d.Leases != s.digest.Leases
	switch {
	case s.ownedReq != 0:
	case s.changing > 0 && newer:
		s.seen, s.deferred = d, true
	case newer || s.recheck:
		s.recheck, s.deferred = false, false
		s.ownedReq = m.send(request{kind: reqOwned, gen: s.gen, timeout: s.period}, &pendingReq{seq: m.adoptSeq})
	}
}

// changeDone notes that an acquisition or release of session gen was
// answered, and makes the check a renewal deferred for it.
func (m *machine) changeDone(gen uint64) {
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
// moves with it, so the next keep-alive needs no Owned read. Anything else —
// replies overtaking each other, a change someone else made, a lost reply —
// leaves the expectation, and the next keep-alive's digest tells (S1, T4).
func (m *machine) ownChange(s *session, d backends.Digest) {
	if s.ownedReq == 0 && d.Version == s.digest.Version+1 {
		s.digest.Leases, s.digest.Version = d.Leases, d.Version
	}
}

// ownedDone compares the store's list with the terms held (T4): a term the
// store no longer lists for this session was taken over; a lease the store
// lists that no election wants is released.
func (m *machine) ownedDone(p *pendingReq, res result) {
	s, ok := m.current(p.req.gen)
	if !ok {
		return
	}
	s.ownedReq = 0
	if res.err != nil {
		if errors.Is(res.err, backends.ErrSessionExpired) {
			m.sessionLost(ReasonSessionExpired)
		}
		return // the next keep-alive asks again
	}
	s.digest = res.digest
	held := make(map[string]Token, len(res.held))
	for _, h := range res.held {
		held[h.Name] = h.Token
	}
	for _, c := range m.contenders {
		t := c.term
		if c.removed || t == nil {
			continue
		}
		if tok, ok := held[t.name]; ok && tok == t.token || t.eng.sess != s || t.eng.adopted >= p.seq || t.ended.Load() {
			delete(held, t.name)
			continue
		}
		m.loseTerm(c, ReasonTakenOver)
	}
	for _, h := range res.held {
		tok, stray := held[h.Name]
		if c := m.byName[h.Name]; stray && (c == nil || c.attempt == 0 && c.phase == phCandidate) {
			m.send(request{kind: reqRelease, gen: s.gen, name: h.Name, token: tok, timeout: s.period}, &pendingReq{})
		}
	}
}

// sessionLost ends the current session for reason (DeadlinePassed or
// SessionExpired): every term of it is revoked at once (H3), the session is
// closed on a best-effort basis, and a new one opens.
func (m *machine) sessionLost(reason Reason) {
	s := m.sess
	s.ended = true
	m.sess = nil
	m.event(Event{Kind: EventSessionEnded, Session: s.id, Reason: reason})
	for _, c := range m.contenders {
		if !c.removed && c.term != nil && c.term.eng.sess == s {
			m.loseTerm(c, reason)
		}
	}
	for _, g := range m.groupList {
		g.joined, g.viewed = false, false // membership died with the session
	}
	m.send(request{kind: reqClose, gen: s.gen, timeout: m.cfg.RenewInterval}, &pendingReq{})
	if m.closing != nil {
		m.closing.errs = append(m.closing.errs, fmt.Errorf("session %s ended (%v) before it could hand over: what it held stays taken until the store expires it", s.id, reason))
	}
	if m.closing == nil {
		m.setState(SessionOpening, m.lastErr)
		m.openAt = m.now
		m.maybeOpen()
	}
}

// close starts closing the client: every contender is stopped with the
// hand-off order, elections first, then locks; then the session is closed.
func (m *machine) close(now mono, w waiter) {
	m.advance(now)
	defer m.settle()
	if m.state == SessionClosed {
		m.complete(w, nil, nil)
		return
	}
	if m.closing == nil {
		m.closing = &closeOp{}
	}
	if w != nil {
		m.closing.waiters = append(m.closing.waiters, w)
	}
}

func (m *machine) closeStep() {
	// Each category is stopped once, when its turn comes; then the counts
	// tell when it is done, so that each input costs O(1) while closing.
	op := m.closing
	for _, name := range slices.Sorted(maps.Keys(m.lockQueue)) {
		for _, c := range m.lockQueue[name] {
			c.waiting = false
			m.complete(c.lockW, nil, fmt.Errorf("simba: lock %q: %w", name, ErrClosed))
		}
		delete(m.lockQueue, name)
	}
	for cat := range category(numCategories) {
		if !op.stopped[cat] {
			op.stopped[cat] = true
			if cat == catGroup {
				for _, g := range m.groupList {
					if !g.removed {
						m.stopGroup(g, false, 0, nil) // a stop overrides a step-down in progress
					}
				}
			}
			for i := 0; i < len(m.contenders); i++ {
				if c := m.contenders[i]; !c.removed && c.cat == cat && c.group == nil {
					m.stop(c, false, 0, nil)
				}
			}
		}
		if m.active[cat] > 0 || cat == catGroup && len(m.groups) > 0 {
			return
		}
	}
	if m.closing.sessionSent {
		return
	}
	if s := m.sess; s != nil {
		m.closing.sessionSent, m.closing.gen, m.closing.id = true, s.gen, s.id
		s.ended = true
		m.sess = nil
		m.send(request{kind: reqClose, gen: s.gen, timeout: m.cfg.RenewInterval}, &pendingReq{})
		return
	}
	if m.openReq != 0 {
		return // openDone closes what it opened; settle comes back here
	}
	m.finishClose()
}

func (m *machine) finishClose() {
	op := m.closing
	m.closing = nil
	m.setState(SessionClosed, nil)
	var err error
	if len(op.errs) > 0 {
		// One line, each failure wrapped (errors.Join would print lines).
		args := make([]any, len(op.errs))
		for i, e := range op.errs {
			args[i] = e
		}
		err = fmt.Errorf(strings.TrimSuffix(strings.Repeat("%w; ", len(args)), "; "), args...)
	}
	for _, w := range op.waiters {
		m.complete(w, nil, err)
	}
	m.emit(effect{kind: effShutdown})
}

// storeNow estimates the store's clock at now, from the last renewal that
// carried it (the store's time then, plus the local time elapsed since the
// renewal was sent: an overestimate by at most that round trip); ok is false
// if the backend reported none.
func (m *machine) storeNow(now mono) (time.Time, bool) {
	s := m.sess
	if s == nil || s.storeTime.IsZero() {
		return time.Time{}, false
	}
	return s.storeTime.Add(now - s.storeTimeAt), true
}

// timerEntry is a contender's or a group's wake-up; entries superseded by a
// later schedule are skipped (lazy deletion).
type timerEntry struct {
	at  mono
	c   *contender  // or
	g   *groupState // this one
	seq uint64
}

func (e timerEntry) live() bool {
	if e.c != nil {
		return !e.c.removed && e.c.timerSeq == e.seq
	}
	return !e.g.removed && e.g.timerSeq == e.seq
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// schedule makes c wake at at, replacing any earlier schedule.
func (m *machine) schedule(c *contender, at mono) {
	c.timerSeq++
	m.pushTimer(timerEntry{at: at, c: c, seq: c.timerSeq})
}

func (m *machine) pushTimer(e timerEntry) { heap.Push(&m.timers, e) }

func (m *machine) jitter() time.Duration {
	if m.cfg.RetryJitter <= 0 {
		return 0
	}
	return time.Duration(m.rng.Int64N(int64(m.cfg.RetryJitter)))
}
