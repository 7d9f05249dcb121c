package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// node is one simulated client: an engine core and a driver that performs
// its effects on the simulated network, store, tasks and callbacks.
type node struct {
	w        *world
	i        int
	birth    time.Duration // true time of the core's Mono 0
	m        *engine.Machine
	life     int // restarts of this node so far, to tell its cores apart
	sessions map[uint64]backends.SessionID
	pending  map[engine.RequestID]bool
	watches  map[string]map[uint64]bool // name → session generations watching it
	wakeSeq  uint64

	paused      bool
	inbox       []func()
	resumedAt   time.Duration
	cutUntil    time.Duration // true time until which its messages are lost
	slowUntil   time.Duration // true time until which its messages are slow
	closed      bool
	lastID      uint64
	byName      map[string]*contender
	terms       map[engine.TermID]*nodeTerm
	contenders  map[engine.ContenderID]*contender
	lockWaiters map[engine.Waiter]*contender
}

// contender is the driver's half of a Start.
type contender struct {
	id      engine.ContenderID
	name    string
	kind    engine.Kind
	task    bool
	stopped bool // a Stop was asked for, or the lock was unlocked or abandoned
	waiting bool // a Lock not completed yet
	term    engine.TermID
}

// nodeTerm is a term as the node's driver knows it.
type nodeTerm struct {
	id      engine.TermID
	c       engine.ContenderID
	name    string
	token   engine.Token
	gen     uint64
	ended   bool
	task    bool // its task is running
	writing bool
}

func newNode(w *world, i int) *node {
	n := &node{w: w, i: i}
	n.reset()
	return n
}

// reset gives the node a fresh core, as a process that starts.
func (n *node) reset() {
	n.birth = n.w.now
	n.life++
	n.m = engine.New(n.w.p.cfg, n.w.seed*1000+uint64(n.i)*10+uint64(n.life))
	n.sessions = map[uint64]backends.SessionID{}
	n.pending = map[engine.RequestID]bool{}
	n.watches = map[string]map[uint64]bool{}
	n.byName = map[string]*contender{}
	n.terms = map[engine.TermID]*nodeTerm{}
	n.contenders = map[engine.ContenderID]*contender{}
	n.lockWaiters = map[engine.Waiter]*contender{}
	n.closed = false
}

func (n *node) mono() engine.Mono { return n.w.now - n.birth }

func (n *node) start() { n.tick() }

// input performs f now, or when the node resumes if it is paused; a core
// that crashed since does not get it.
func (n *node) input(f func()) {
	life := n.life
	do := func() {
		if n.life == life && !n.closed {
			f()
			n.flush()
		}
	}
	if n.paused {
		n.inbox = append(n.inbox, do)
		return
	}
	do()
}

func (n *node) step(in engine.Input) error { return n.stepNoting(in, nil) }

// stepNoting steps in, calling delivered first, when the core takes it: a
// paused node takes its inputs only when it resumes.
func (n *node) stepNoting(in engine.Input, delivered func()) error {
	var err error
	n.input(func() {
		if delivered != nil {
			delivered()
		}
		n.w.tracef("n%d <- %s", n.i, engine.DescribeInput(in))
		err = n.m.Step(n.mono(), in)
	})
	return err
}

func (n *node) tick() {
	n.input(func() { n.m.Tick(n.mono()) })
}

// pause freezes the node for d: no input, no timer; what arrives waits.
func (n *node) pause(d time.Duration) {
	if n.paused {
		return
	}
	n.paused = true
	n.w.check.paused(n.i)
	n.w.after(d, func() {
		n.paused = false
		n.resumedAt = n.w.now
		n.w.tracef("n%d resumes", n.i)
		n.tick()
		inbox := n.inbox
		n.inbox = nil
		for _, f := range inbox {
			f()
		}
	})
}

// crash ends the node's process and starts a new one: its session lives
// on in the store until it expires.
func (n *node) crash() {
	n.w.check.crashed(n.i)
	n.paused, n.inbox = false, nil
	n.reset()
	n.resumedAt = n.w.now
	n.tick()
	n.startCron()
}

// flush performs the core's effects, then sets the wake-up.
func (n *node) flush() {
	for {
		effs, wake, ok := n.m.Ready()
		if len(effs) == 0 {
			if ok && !n.closed {
				n.wakeSeq++
				seq, life := n.wakeSeq, n.life
				n.w.at(n.birth+wake, func() {
					if n.wakeSeq == seq && n.life == life {
						n.tick()
					}
				})
			}
			return
		}
		for i := range effs {
			n.perform(effs[i])
		}
	}
}

func (n *node) perform(e engine.Effect) {
	w := n.w
	w.tracef("n%d -> %s", n.i, engine.DescribeEffect(e))
	w.check.effect(n, e)
	switch e.Kind {
	case engine.EffSend:
		n.send(e.Req)
	case engine.EffTermStarted:
		t := &nodeTerm{id: e.Term, c: e.Contender, name: e.Name, token: e.Token, gen: e.Gen}
		n.terms[e.Term] = t
		if c := n.contenders[e.Contender]; c != nil {
			c.term = e.Term
		}
		n.writes(t)
	case engine.EffTermEnded:
		if t := n.terms[e.Term]; t != nil {
			t.ended = true
			if t.task {
				// The task sees its context cancelled; it returns after
				// cleaning up, sometimes long after (H2).
				d := w.between(0, 2*w.p.maxDelay)
				if w.chance(0.05) {
					d = w.between(0, 2*w.p.cfg.LeaseDuration)
				}
				n.taskReturns(t, d, true)
			}
		}
	case engine.EffDispatch:
		life := n.life
		if e.Elected && w.chance(w.p.rejectProb) {
			w.check.rejected(n, e.Term)
			w.after(w.between(0, time.Millisecond), func() {
				if n.life == life {
					n.stepNoting(engine.DispatchFailed{ID: e.Contender, Term: e.Term, Err: errPoolFull},
						func() { w.check.rejectDelivered(n, e.Term) })
				}
			})
			return
		}
		w.after(w.between(0, 2*time.Millisecond), func() {
			if n.life == life {
				n.step(engine.CallbackDone{ID: e.Contender})
			}
		})
	case engine.EffStartTask:
		t := n.terms[e.Term]
		t.task = true
		if w.chance(0.3) { // a task that returns while its term is valid
			n.taskReturns(t, w.between(0, 2*w.p.cfg.LeaseDuration), false)
		}
	case engine.EffStartRun:
		n.run(e)
	case engine.EffComplete:
		if c := n.lockWaiters[e.Waiter]; c != nil {
			delete(n.lockWaiters, e.Waiter)
			c.waiting = false
			if e.Term != 0 {
				c.term = e.Term
			} else {
				c.stopped = true // a TryLock refused, or the client closed
			}
		}
	case engine.EffWatch:
		if n.watches[e.Name] == nil {
			n.watches[e.Name] = map[uint64]bool{}
		}
		n.watches[e.Name][e.Gen] = true
	case engine.EffUnwatch:
		delete(n.watches[e.Name], e.Gen)
	case engine.EffForget:
		if e.Term != 0 {
			delete(n.terms, e.Term)
		}
		if c := n.contenders[e.Contender]; c != nil && e.Contender != 0 {
			delete(n.contenders, e.Contender)
			if n.byName[c.name] == c {
				delete(n.byName, c.name)
			}
		}
	case engine.EffShutdown:
		n.closed = true
	}
}

var errPoolFull = fmt.Errorf("sim: the callback pool is full")

// taskReturns answers t's task with a TaskDone after d.
func (n *node) taskReturns(t *nodeTerm, d time.Duration, canceled bool) {
	life := n.life
	n.w.after(d, func() {
		if n.life == life && t.task {
			t.task = false
			n.step(engine.TaskDone{Term: t.id, Canceled: canceled})
		}
	})
}

// writes has t's holder write to the name's fenced resource now and then
// while its term is valid as the node sees it (E1); a write is in flight a
// while, sometimes long (a pause after the check), and lands at the
// resource, which checks the token (F1).
func (n *node) writes(t *nodeTerm) {
	w, life := n.w, n.life
	var next func()
	next = func() {
		if n.life != life || t.ended || n.closed {
			return
		}
		if !n.paused && w.check.validNow(n.i, n.life, t.id) {
			d := w.delay()
			if w.chance(0.05) {
				d = w.between(0, 2*w.p.cfg.LeaseDuration)
			}
			tok := t.token
			w.after(d, func() { w.write(w.res[t.name], n.i, tok) })
		}
		w.after(w.between(w.p.cfg.RenewInterval/8, w.p.cfg.RenewInterval), next)
	}
	w.after(w.between(0, w.p.cfg.RenewInterval/4), next)
}

// send carries a request to the store and its reply back, through the
// faults; the call times out after its Timeout (D2), as the driver's
// context does, even if the store handled it.
func (n *node) send(req engine.Request) {
	w, life := n.w, n.life
	var id backends.SessionID
	if req.Kind != engine.ReqOpen && req.Kind != engine.ReqStoreTime {
		var ok bool
		if id, ok = n.sessionOf(req.Gen); !ok {
			// The driver has no handle for the session: it answers at once.
			n.m.Step(n.mono(), engine.Reply{ID: req.ID, Result: engine.Result{Err: errExpired}})
			return
		}
	}
	n.pending[req.ID] = true
	w.after(req.Timeout, func() {
		if n.life == life && n.pending[req.ID] {
			delete(n.pending, req.ID)
			n.step(engine.Reply{ID: req.ID, Result: engine.Result{Err: errTimeout}})
		}
	})
	copies := 1
	if w.chance(w.p.dup) {
		copies = 2
	}
	for range copies {
		if w.now < n.cutUntil || w.chance(w.p.loss) {
			continue
		}
		w.after(n.delay(), func() {
			if w.now < w.store.downUntil {
				return // the store is down: the call times out
			}
			res := w.store.handle(req, id)
			if w.now < n.cutUntil || w.chance(w.p.loss) {
				return
			}
			w.after(n.delay(), func() {
				if n.life != life || !n.pending[req.ID] {
					return // a late reply: the call already returned
				}
				delete(n.pending, req.ID)
				n.input(func() {
					switch req.Kind {
					case engine.ReqOpen:
						if res.Err == nil {
							n.sessions[req.Gen] = res.Session
							n.w.check.sessionOpened(n, req.Gen, res.Session)
						}
					case engine.ReqClose:
						delete(n.sessions, req.Gen)
					}
					n.w.tracef("n%d <- reply %s", n.i, engine.DescribeInput(engine.Reply{ID: req.ID, Result: res}))
					n.m.Step(n.mono(), engine.Reply{ID: req.ID, Result: res})
				})
			})
		})
	}
}

var errTimeout = fmt.Errorf("sim: call timed out: %w", backends.ErrUnavailable)

// delay is one message's delay to or from this node.
func (n *node) delay() time.Duration {
	d := n.w.delay()
	if n.w.now < n.slowUntil {
		d += n.w.between(0, n.w.p.cfg.RenewInterval)
	}
	return d
}

// notify delivers the store's release notification of name to each of
// the node's sessions watching it: late, lost or twice, as a broadcast may.
func (n *node) notify(name string) {
	w := n.w
	for _, gen := range slices.Sorted(maps.Keys(n.watches[name])) {
		if w.now < n.cutUntil || w.chance(0.1) {
			continue // lost
		}
		copies := 1
		if w.chance(0.1) {
			copies = 2
		}
		for range copies {
			life := n.life
			w.after(n.delay(), func() {
				if n.life == life {
					n.step(engine.Released{Gen: gen, Name: name})
				}
			})
		}
	}
}

func (n *node) newID() uint64 {
	n.lastID++
	return n.lastID
}

// startElection starts an election of name, with a task or a listener or
// both, drawn at random.
func (n *node) startElection(name string) {
	if n.byName[name] != nil || n.closed {
		return
	}
	w := n.w
	c := &contender{id: engine.ContenderID(n.newID()), name: name, kind: engine.KindElection, task: w.chance(0.5)}
	listener := w.chance(0.6)
	n.contenders[c.id], n.byName[name] = c, c
	if err := n.step(engine.Start{ID: c.id, Name: name, Kind: engine.KindElection, Listener: listener, Task: c.task,
		TaskEndCooldown: w.between(0, w.p.cfg.RenewInterval)}); err != nil {
		delete(n.contenders, c.id)
		delete(n.byName, name)
	}
}

// ensure starts an election of name unless one runs here, trying again
// while something else holds the name on this node (a stopped election
// still handing over, a lock).
func (n *node) ensure(name string) {
	c := n.byName[name]
	if c != nil && c.kind == engine.KindElection && !c.stopped {
		return
	}
	if c != nil && n.contenders[c.id] == nil {
		delete(n.byName, name)
	}
	if n.byName[name] == nil {
		n.startElection(name)
	}
	if c := n.byName[name]; c == nil || c.kind != engine.KindElection || c.stopped {
		n.w.after(n.w.p.cfg.RenewInterval/4, func() { n.ensure(name) })
	}
}

// act performs one of the scenario's API calls on name.
func (n *node) act(op int, name string) {
	if n.closed || n.paused {
		return
	}
	w := n.w
	c := n.byName[name]
	switch {
	case op < 3:
		n.startElection(name)
	case op == 3 && c != nil && !c.stopped:
		c.stopped = true
		n.step(engine.Stop{ID: c.id, Waiter: engine.Waiter(n.newID())})
	case op == 4 && c != nil && !c.stopped && c.kind == engine.KindElection:
		n.step(engine.Stop{ID: c.id, StepDown: true, Cooldown: w.between(0, w.p.cfg.LeaseDuration), Waiter: engine.Waiter(n.newID())})
	case (op == 5 || op == 6) && c == nil:
		lc := &contender{id: engine.ContenderID(n.newID()), name: name, kind: engine.KindLock, waiting: true}
		n.contenders[lc.id], n.byName[name] = lc, lc
		wt := engine.Waiter(n.newID())
		n.lockWaiters[wt] = lc
		if err := n.step(engine.Start{ID: lc.id, Name: name, Kind: engine.KindLock, TryOnce: op == 6,
			Waiter: wt}); err != nil {
			delete(n.contenders, lc.id)
			delete(n.byName, name)
		}
	case (op == 7 || op == 8) && c != nil && c.kind == engine.KindLock && !c.stopped:
		// The caller stops waiting (abandon), or unlocks what it won.
		c.stopped = true
		if c.waiting {
			n.step(engine.Abandon{ID: c.id})
		} else if c.term != 0 {
			n.step(engine.Unlock{Term: c.term, Waiter: engine.Waiter(n.newID())})
		}
	case op == 9 && w.chance(0.2):
		w.check.fault("crash")
		n.crash()
	}
}

// close closes the node's core.
func (n *node) close() {
	n.step(engine.Close{Waiter: engine.Waiter(n.newID())})
}
