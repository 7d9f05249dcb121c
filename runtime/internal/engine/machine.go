package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Machine is the engine: sessions, candidates, terms, hand-off, schedules
// and groups as one deterministic state machine. Inputs go in through Step
// and Tick, each with its time; effects come out through Ready. It is not
// safe for concurrent use: the driver serialises calls.
type Machine struct {
	cfg vocab.Config
	rng *rand.Rand

	now     Mono
	state   vocab.SessionState
	sess    *session // the current session, nil while opening or closed
	gen     uint64   // last session generation
	lastErr error    // the last backend failure of the session

	openReq     RequestID // in-flight ReqOpen, 0 if none
	openAt      Mono      // when to (re)open if no session
	openBackoff time.Duration

	reqSeq  RequestID
	pending map[RequestID]*pendingReq

	byID       map[ContenderID]*contender
	byName     map[string]*contender
	lockQueue  map[string][]*contender // Locks waiting for their turn, by name
	contenders []*contender            // in start order; removed ones are compacted away
	removed    int
	active     [numKinds]int // contenders not removed, per kind
	partSeq    ContenderID

	groups    map[string]*group
	groupByID map[GroupID]*group
	groupList []*group // in start order

	terms    map[TermID]*term
	termSeq  TermID
	adoptSeq uint64

	timers  timerHeap
	waiting []*term // terms whose runs or task wait for a renewal or the store's clock
	closing *closeOp
	lost    []*lostSession // sessions given up, still to be closed on the store (lost.go)
	pace    pacer          // acquisitions in flight, and the candidates waiting for a slot (pace.go)

	effects []Effect
	out     []Effect // the batch Ready last returned, reused
}

type pendingReq struct {
	req       Request
	sentAt    Mono
	c         *contender   // ReqAcquire, ReqRelease
	t         *term        // ReqRelease, ReqPutValue
	abandoned bool         // ReqAcquire whose election no longer wants it (A3)
	seq       uint64       // ReqOwned: adoptSeq when sent
	g         *group       // ReqJoin, ReqLeave, ReqMembers
	w         Waiter       // ReqPutValue
	handOver  bool         // ReqPutValue: a hand-over's record (handover.go)
	done      bool         // ReqPutValue: the successor's record over it
	lost      *lostSession // ReqClose of a session given up
}

// New returns a machine with configuration cfg, whose only randomness (the
// candidates' retry jitter) comes from seed. It runs with cfg as given: the
// driver passes vocab.Effective of the user's Config (defaults applied, the
// "none" values zero).
func New(cfg vocab.Config, seed uint64) *Machine {
	return &Machine{
		cfg:         cfg,
		rng:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		openBackoff: cfg.MinBackoff,
		pending:     make(map[RequestID]*pendingReq),
		byID:        make(map[ContenderID]*contender),
		byName:      make(map[string]*contender),
		lockQueue:   make(map[string][]*contender),
		groups:      make(map[string]*group),
		groupByID:   make(map[GroupID]*group),
		terms:       make(map[TermID]*term),
	}
}

// Config returns the machine's configuration.
func (m *Machine) Config() vocab.Config { return m.cfg }

// Step hands the machine one input that happened at now. It returns an error
// only for Start and StartGroup, which the caller is told synchronously.
func (m *Machine) Step(now Mono, in Input) error {
	m.advance(now)
	defer m.settle()
	switch in := in.(type) {
	case Reply:
		m.reply(in.ID, in.Result)
	case Start:
		return m.start(in)
	case StartGroup:
		return m.startGroup(in)
	case HandOver:
		m.handOver(m.byID[in.ID], in.To, in.Waiter)
	case Stop:
		if c := m.byID[in.ID]; c != nil {
			m.stop(c, in.StepDown, in.Cooldown, in.Waiter)
		} else {
			m.complete(in.Waiter, 0, nil)
		}
	case StopGroup:
		if g := m.groupByID[in.ID]; g != nil {
			m.stopGroup(g, in.StepDown, in.Cooldown, in.Waiter)
		} else {
			m.complete(in.Waiter, 0, nil)
		}
	case Unlock:
		m.unlock(in.Term, in.Waiter)
	case Abandon:
		if c := m.byID[in.ID]; c != nil {
			m.abandon(c)
		}
	case Close:
		m.close(in.Waiter)
	case Released:
		m.released(in.Gen, in.Name)
	case TaskDone:
		if t := m.terms[in.Term]; t != nil {
			m.taskDone(t, in.Err, in.Canceled)
		}
	case RunDone:
		if t := m.terms[in.Term]; t != nil {
			m.runDone(t, in.Err, in.Canceled)
		}
	case CallbackDone:
		if c := m.byID[in.ID]; c != nil {
			m.callbackDone(c)
		}
	case DispatchFailed:
		if c := m.byID[in.ID]; c != nil {
			m.dispatchFailed(c, m.terms[in.Term], in.Err)
		}
	default:
		panic(fmt.Sprintf("engine: unknown input %T", in))
	}
	return nil
}

// StepReply is Step(now, *r): a backend call's answer, without boxing it
// in an Input, which would cost the driver an allocation per call.
func (m *Machine) StepReply(now Mono, r *Reply) {
	m.advance(now)
	defer m.settle()
	m.reply(r.ID, r.Result)
}

// Tick advances time to now; nothing else happened. The driver calls it at
// the wake-up time Ready reported.
func (m *Machine) Tick(now Mono) {
	m.advance(now)
	m.settle()
}

// Ready returns the effects produced since the last call, in the order they
// must be performed, and when the machine next needs a Tick (ok false:
// never). The slice is valid until the next call of Ready.
func (m *Machine) Ready() (effects []Effect, wake Mono, ok bool) {
	clear(m.out)
	m.out = m.out[:0]
	m.out, m.effects = m.effects, m.out
	wake, ok = m.nextWake()
	return m.out, wake, ok
}

func (m *Machine) emit(e Effect)       { m.effects = append(m.effects, e) }
func (m *Machine) event(e vocab.Event) { m.emit(Effect{Kind: EffEvent, Event: e}) }

func (m *Machine) complete(w Waiter, t TermID, err error) {
	if w != 0 {
		m.emit(Effect{Kind: EffComplete, Waiter: w, Term: t, Err: err})
	}
}

func (m *Machine) send(req Request, p *pendingReq) RequestID {
	m.reqSeq++
	req.ID = m.reqSeq
	p.req, p.sentAt = req, m.now
	m.pending[req.ID] = p
	if req.Kind == ReqAcquire || req.Kind == ReqRelease {
		if s, ok := m.current(req.Gen); ok {
			s.changing++
		}
	}
	m.emit(Effect{Kind: EffSend, Req: req})
	return req.ID
}

// advance moves the machine to now and handles everything that is due: a
// passed deadline first (D4), then timers, then renewals and session
// opening.
func (m *Machine) advance(now Mono) {
	if now > m.now {
		m.now = now
	}
	if m.state == vocab.SessionClosed {
		return
	}
	if s := m.sess; s != nil && m.now >= s.deadline && !(mutant == "late-reply-revives" && s.kaReq != 0) {
		m.sessionLost(vocab.ReasonDeadlinePassed)
	}
	m.fireTimers()
	m.closeLost()
	if s := m.sess; s != nil && s.kaReq == 0 && s.renewAt > 0 && m.now >= s.renewAt {
		s.kaReq = m.send(Request{Kind: ReqKeepAlive, Gen: s.gen, Timeout: s.period}, &pendingReq{})
	}
	m.maybeOpen()
}

// settle finishes an input: it moves pending group stops and a pending
// close forward, and compacts the lists.
func (m *Machine) settle() {
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

func (m *Machine) setState(s vocab.SessionState, err error) {
	if m.state == s {
		return
	}
	m.state = s
	var e vocab.Event
	e.Kind, e.State, e.Err = vocab.EventSessionState, s, err
	if m.sess != nil {
		e.Session = m.sess.id
	}
	m.event(e)
}

// reply delivers a backend reply to its request.
func (m *Machine) reply(id RequestID, res Result) {
	p, ok := m.pending[id]
	if !ok {
		return
	}
	delete(m.pending, id)
	if k := p.req.Kind; k == ReqAcquire || k == ReqRelease {
		defer m.changeDone(p.req.Gen)
	}
	switch p.req.Kind {
	case ReqOpen:
		m.openDone(p, res)
	case ReqKeepAlive:
		m.keepAliveDone(p, res)
	case ReqOwned:
		m.ownedDone(p, res)
	case ReqAcquire:
		m.acquireDone(p, res)
	case ReqRelease:
		m.releaseDone(p, res)
	case ReqPutValue:
		if p.handOver {
			m.handOverWritten(p, res)
		} else {
			m.putValueDone(p, res)
		}
	case ReqStoreTime:
		m.storeTimeDone(p, res)
	case ReqJoin, ReqLeave, ReqMembers:
		m.groupDone(p, res)
	case ReqClose:
		if p.lost != nil {
			m.lostCloseDone(p.lost, res)
		} else {
			m.closeDone(p, res)
		}
	}
}

// compact drops removed contenders and groups from the ordered lists; it
// runs at the end of an input, never while a list is being walked.
func (m *Machine) compact() {
	m.groupList = slices.DeleteFunc(m.groupList, func(g *group) bool { return g.removed })
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

func (m *Machine) jitter() time.Duration {
	if m.cfg.RetryJitter <= 0 {
		return 0
	}
	return time.Duration(m.rng.Int64N(int64(m.cfg.RetryJitter)))
}
