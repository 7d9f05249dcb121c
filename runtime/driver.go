package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// The driver: it hands the engine's core (runtime/internal/engine) its
// inputs, each with the time on the client's monotonic clock, and performs
// the effects the core asks for — backend calls, terms, callbacks, tasks,
// events — on real goroutines and one timer. The core decides; the driver
// never does.

// registry is what the driver keeps for the ids the core names, all
// guarded by the client's mutex.
type registry struct {
	sessions   map[uint64]backends.Session     // session generation → its handle
	watches    map[uint64]map[string]func()    // session generation → name → stop
	deadlines  map[uint64]*deadline            // session generation → its local deadline, read by Terms
	terms      map[engine.TermID]*Term         // the terms the core refers to
	contenders map[engine.ContenderID]*started // elections, locks and schedules started
	groupFns   map[engine.GroupID]PartitionFunc
	waiters    map[engine.Waiter]chan waitResult
	lockers    map[string]*locker // names whose Lock caller waits and makes the name's acquires (see locker)
	lastID     uint64             // the last contender, group or waiter id handed out
	sentAt     mono               // the time of the input being applied: when its requests are sent
	inl        inline             // the API caller being applied, if it makes its own calls
	freeWaits  []chan waitResult  // waiters' channels received from, for reuse
	leaseCalls int                // lease calls on goroutines of their own (see maxLeaseCalls)
	queued     []pendingCall      // lease calls waiting for one of those goroutines, oldest first
}

// started is the driver's half of an election, lock or schedule: what the
// core names by ContenderID but must not hold.
//
// Only contenders with a listener or a task have one: a client holding a
// million leases through elections without either, or through locks, keeps
// no driver state per lease but its Terms.
type started struct {
	listener Listener     // nil if none
	task     TaskFunc     // the task, or a schedule's run; nil if none
	queue    *serialQueue // the listener's dispatcher
}

func newRegistry() registry {
	return registry{
		sessions:   make(map[uint64]backends.Session),
		watches:    make(map[uint64]map[string]func()),
		deadlines:  make(map[uint64]*deadline),
		terms:      make(map[engine.TermID]*Term),
		contenders: make(map[engine.ContenderID]*started),
		groupFns:   make(map[engine.GroupID]PartitionFunc),
		waiters:    make(map[engine.Waiter]chan waitResult),
		lockers:    make(map[string]*locker),
		freeWaits:  make([]chan waitResult, 0, 4),
	}
}

// newID returns a fresh id for a contender, a group or a waiter. The
// caller holds c.mu.
func (r *registry) newID() uint64 {
	r.lastID++
	return r.lastID
}

// newWaiter returns a waiter and the channel its Complete effect is sent
// on. The caller holds c.mu.
func (r *registry) newWaiter() (engine.Waiter, chan waitResult) {
	w := engine.Waiter(r.newID())
	var ch chan waitResult
	if n := len(r.freeWaits); n > 0 {
		ch = r.freeWaits[n-1]
		r.freeWaits = r.freeWaits[:n-1]
	} else {
		ch = make(chan waitResult, 1)
	}
	r.waiters[w] = ch
	return w, ch
}

func (c *Client) now() mono { return time.Since(c.epoch) }

// apply runs input under the client's mutex, with the time now, and
// performs the effects it produced.
func (c *Client) apply(input func(now mono)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sentAt = c.now()
	input(c.sentAt)
	c.flush()
}

// step hands the core one input and performs its effects; it returns the
// input's error (Start and StartGroup only).
func (c *Client) step(in engine.Input) error {
	var err error
	c.apply(func(now mono) { err = c.m.Step(now, in) })
	return err
}

// flush performs the core's effects in order, until there are none, and
// sets the timer to the core's next wake-up. The caller holds c.mu.
func (c *Client) flush() {
	for {
		effs, wake, ok := c.m.Ready()
		if len(effs) == 0 {
			if c.shutdown {
				return
			}
			if ok {
				c.timer.Reset(max(0, wake-c.now()))
			} else {
				c.timer.Stop()
			}
			break
		}
		for i := range effs {
			c.perform(&effs[i])
		}
	}
	state, _, _ := c.m.State()
	isLive := state == SessionLive || state == SessionSuspended
	select {
	case <-c.live:
		if !isLive {
			c.live = make(chan struct{})
		}
	default:
		if isLive {
			close(c.live)
		}
	}
}

// perform carries out one effect. It runs under c.mu and never blocks.
func (c *Client) perform(e *engine.Effect) {
	if c.shutdown && e.Kind != engine.EffComplete {
		if e.Kind == engine.EffEvent {
			logEvent(c.logger, e.Event) // too late for the observer queue
		}
		return
	}
	switch e.Kind {
	case engine.EffSend:
		s := c.sessions[e.Req.Gen]
		if s == nil && e.Req.Kind != engine.ReqOpen && e.Req.Kind != engine.ReqStoreTime {
			c.m.Step(c.now(), engine.Reply{ID: e.Req.ID, Result: engine.Result{Err: fmt.Errorf(
				"simba: %v: no session handle: %w", e.Req.Kind, backends.ErrSessionExpired)}})
			return
		}
		c.send(e.Req, s)
	case engine.EffSetDeadline:
		d := c.deadlines[e.Gen]
		if d == nil {
			d = &deadline{epoch: c.epoch}
			c.deadlines[e.Gen] = d
		}
		d.set(e.At)
	case engine.EffTermStarted:
		t := newTerm(c, e.Name, e.Token, c.deadlines[e.Gen])
		t.id, t.lock = e.Term, e.Lock
		c.terms[e.Term] = t
	case engine.EffTermEnded:
		c.terms[e.Term].end(e.Reason)
	case engine.EffDispatch:
		c.dispatch(e.Contender, c.contenders[e.Contender], c.terms[e.Term], e.Elected)
	case engine.EffStartTask:
		c.startTask(e)
	case engine.EffStartRun:
		c.startRun(e)
	case engine.EffEvent:
		ev := e.Event
		if ev.Kind == EventSessionRenewed || ev.Kind == EventSessionOpened {
			close(c.renewed)
			c.renewed = make(chan struct{})
		}
		if !c.wanted(ev) {
			return // nobody would see it: spare the event queue its goroutine
		}
		c.wg.Add(1)
		it := queued{run: func() { defer c.wg.Done(); c.deliver(ev) }, mustRun: true}
		if c.inl.active {
			// An API caller is applying its input (applySync): it
			// delivers the event itself once it has let go of the lock,
			// sparing a goroutine that would have to be woken.
			c.events.add(it)
		} else {
			c.events.push(it)
		}
	case engine.EffComplete:
		ch := c.waiters[e.Waiter]
		delete(c.waiters, e.Waiter)
		if ch != nil {
			ch <- waitResult{term: c.terms[e.Term], err: e.Err}
		}
	case engine.EffWatch:
		n, ok := c.sessions[e.Gen].(backends.Notifier)
		if !ok {
			return
		}
		byName := c.watches[e.Gen]
		if byName == nil {
			byName = make(map[string]func())
			c.watches[e.Gen] = byName
		}
		if _, dup := byName[e.Name]; !dup {
			gen, name := e.Gen, e.Name
			byName[name] = n.Watch(name, func() { c.notes.add(gen, name) })
		}
	case engine.EffUnwatch:
		if stop := c.watches[e.Gen][e.Name]; stop != nil {
			stop()
			delete(c.watches[e.Gen], e.Name)
		}
	case engine.EffForget:
		if e.Term != 0 {
			delete(c.terms, e.Term)
		}
		if e.Contender != 0 {
			delete(c.contenders, e.Contender)
		}
	case engine.EffShutdown:
		c.shutdown = true
		c.timer.Stop()
		close(c.quit)
	}
}

// loop turns timer ticks and release notifications into inputs.
func (c *Client) loop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.timer.C:
			c.apply(c.m.Tick)
		case <-c.notes.signal:
			for _, n := range c.notes.take() {
				c.step(engine.Released{Gen: n.gen, Name: n.name})
			}
		case <-c.quit:
			return
		}
	}
}

// notes collects release notifications from backends without blocking them.
// The client's loop takes them, unless a Lock caller waits for the name
// (attend): then it is woken instead, and takes them itself.
type notes struct {
	mu      sync.Mutex
	pending map[note]struct{}
	signal  chan struct{}
	direct  map[string]chan struct{} // name → the waiting Lock caller's wake-up
}

type note struct {
	gen  uint64
	name string
}

func (n *notes) add(gen uint64, name string) {
	n.mu.Lock()
	if n.pending == nil {
		n.pending = make(map[note]struct{})
	}
	n.pending[note{gen, name}] = struct{}{}
	wake := n.signal
	if ch := n.direct[name]; ch != nil {
		wake = ch
	}
	n.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// attend makes notifications of name wake ch rather than the client's loop.
func (n *notes) attend(name string, ch chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.direct == nil {
		n.direct = make(map[string]chan struct{})
	}
	n.direct[name] = ch
}

// leave ends attend's, and hands the loop what came for name meanwhile.
func (n *notes) leave(name string) {
	n.mu.Lock()
	delete(n.direct, name)
	left := false
	for k := range n.pending {
		if k.name == name {
			left = true
			break
		}
	}
	n.mu.Unlock()
	if left {
		select {
		case n.signal <- struct{}{}:
		default:
		}
	}
}

// takeName takes the notifications of name.
func (n *notes) takeName(name string) []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []note
	for k := range n.pending {
		if k.name == name {
			out = append(out, k)
			delete(n.pending, k)
		}
	}
	return out
}

func (n *notes) take() []note {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]note, 0, len(n.pending))
	for k := range n.pending {
		out = append(out, k)
	}
	clear(n.pending)
	return out
}

// wanted reports whether deliver would do anything with e: an observer
// sees every event, the logger those of the levels it enables, and a
// WatchHolder loop of e's lease its elections and revocations.
func (c *Client) wanted(e Event) bool {
	return c.observer != nil || c.logger.Enabled(context.Background(), eventLevel(e)) ||
		(e.Kind == EventElected || e.Kind == EventRevoked) && c.holderWatches.watched(e.Name)
}

// deliver hands an event to the log and the observer, on the event queue.
func (c *Client) deliver(e Event) {
	logEvent(c.logger, e)
	if e.Kind == EventElected || e.Kind == EventRevoked {
		c.holderWatches.wake(e.Name)
	}
	if c.observer == nil {
		return
	}
	if err := protect(func() error { c.observer.Observe(e); return nil }); err != nil {
		logEvent(c.logger, Event{Kind: EventCallbackPanicked, Name: e.Name, Err: err})
	}
}
