package runtime

import (
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// The driver's heart: every input goes through apply, under the driver's
// mutex, and flush performs the effects it produced, in order. perform
// never blocks: what takes time — a backend call, a task, a callback, an
// event — it hands to a goroutine (calls.go, tasks.go, events.go), which
// answers with the next input.

// apply runs input under the driver's mutex, with the time now, and
// performs the effects it produced; the callbacks they queued start once
// the mutex is released (see kickCallbacks).
func (d *driver) apply(input func(now mono)) {
	d.mu.Lock()
	d.sentAt = d.now()
	input(d.sentAt)
	d.flush()
	var buf [4]*serialQueue
	kicks := d.takeKicks(buf[:0])
	d.mu.Unlock()
	kickCallbacks(kicks)
}

// takeKicks appends to buf the callback queues that effects performed under
// the mutex filled, and forgets them. The caller holds d.mu.
func (d *driver) takeKicks(buf []*serialQueue) []*serialQueue {
	if len(d.kicks) == 0 {
		return buf
	}
	buf = append(buf, d.kicks...)
	clear(d.kicks)
	d.kicks = d.kicks[:0]
	return buf
}

// kickCallbacks starts the callbacks queued on qs, each queue in order,
// once the driver's mutex is released: an executor may run a callback on
// the caller's goroutine (a direct executor, func(f func()) error { f();
// return nil }), and a callback that ran under the mutex deadlocked the
// client when it ended (its CallbackDone takes the mutex) — and any call
// it made on the client would too.
func kickCallbacks(qs []*serialQueue) {
	for _, q := range qs {
		q.kick()
	}
}

// step hands the core one input and performs its effects; it returns the
// input's error (Start and StartGroup only).
func (d *driver) step(in engine.Input) error {
	var err error
	d.apply(func(now mono) { err = d.m.Step(now, in) })
	return err
}

// flush performs the core's effects in order, until there are none, and
// sets the timer to the core's next wake-up. The caller holds d.mu.
func (d *driver) flush() {
	for {
		effs, wake, ok := d.m.Ready()
		if len(effs) == 0 {
			if d.shutdown {
				return
			}
			if ok {
				d.timer.Reset(max(0, wake-d.now()))
			} else {
				d.timer.Stop()
			}
			break
		}
		for i := range effs {
			d.perform(&effs[i])
		}
	}
	state, _, _ := d.m.State()
	isLive := state == SessionLive || state == SessionSuspended
	select {
	case <-d.live:
		if !isLive {
			d.live = make(chan struct{})
		}
	default:
		if isLive {
			close(d.live)
		}
	}
}

// perform carries out one effect. It runs under d.mu and never blocks.
func (d *driver) perform(e *engine.Effect) {
	if d.shutdown && e.Kind != engine.EffComplete {
		if e.Kind == engine.EffEvent {
			logEvent(d.logger, e.Event) // too late for the observer queue
		}
		return
	}
	switch e.Kind {
	case engine.EffSend:
		s := d.sessions[e.Req.Gen]
		if s == nil && e.Req.Kind != engine.ReqOpen && e.Req.Kind != engine.ReqStoreTime {
			d.m.Step(d.now(), engine.Reply{ID: e.Req.ID, Result: engine.Result{Err: fmt.Errorf(
				"simba: %v: no session handle: %w", e.Req.Kind, backends.ErrSessionExpired)}})
			return
		}
		d.send(e.Req, s)
	case engine.EffSetDeadline:
		dl := d.deadlines[e.Gen]
		if dl == nil {
			dl = &deadline{epoch: d.epoch}
			d.deadlines[e.Gen] = dl
		}
		dl.set(e.At)
	case engine.EffTermStarted:
		if e.Quiet {
			return // made when asked for (leaderTerm)
		}
		t := newTerm(d, e.Name, e.Token, d.deadlines[e.Gen])
		t.id, t.lock = e.Term, e.Lock
		d.terms[e.Term] = t
	case engine.EffTermEnded:
		if t := d.terms[e.Term]; t != nil {
			t.end(e.Reason)
		}
	case engine.EffDispatch:
		d.dispatch(e.Contender, d.contenders[e.Contender], d.terms[e.Term], e.Elected)
	case engine.EffStartTask:
		d.startTask(e)
	case engine.EffStartRun:
		d.startRun(e)
	case engine.EffEvent:
		if e.Event.Kind == EventSessionRenewed || e.Event.Kind == EventSessionOpened {
			close(d.renewed)
			d.renewed = make(chan struct{})
		}
		d.queueEvent(e.Event)
	case engine.EffComplete:
		ch := d.waiters[e.Waiter]
		delete(d.waiters, e.Waiter)
		if ch != nil {
			ch <- waitResult{term: d.terms[e.Term], err: e.Err}
		}
	case engine.EffWatch:
		n, ok := d.sessions[e.Gen].(backends.Notifier)
		if !ok {
			return
		}
		byName := d.watches[e.Gen]
		if byName == nil {
			byName = make(map[string]func())
			d.watches[e.Gen] = byName
		}
		if _, dup := byName[e.Name]; !dup {
			gen, name := e.Gen, e.Name
			byName[name] = n.Watch(name, func() { d.notes.add(gen, name) })
		}
	case engine.EffUnwatch:
		if stop := d.watches[e.Gen][e.Name]; stop != nil {
			stop()
			delete(d.watches[e.Gen], e.Name)
		}
	case engine.EffForget:
		if e.Term != 0 {
			delete(d.terms, e.Term)
		}
		if e.Contender != 0 {
			delete(d.contenders, e.Contender)
		}
	case engine.EffShutdown:
		d.shutdown = true
		d.timer.Stop()
		close(d.quit)
	}
}

// The loop turns timer ticks and release notifications into inputs. Two
// goroutines take turns at it (leader/followers): one runs it while the
// other waits for its turn. When a release notification makes the core
// send the acquire of its name, the running one hands the loop to the
// waiting one and makes the acquire itself (onNote), then waits for its
// turn again. A graceful hand-off thus neither starts nor wakes a goroutine
// between the notification and the new holder's acquire, as a waiting Lock
// makes its own (locker), and the goroutine that makes the acquire has run
// the core before: a goroutine started for the call had to be scheduled,
// and grew its stack on the way to the grant (stack copies were a quarter
// of the in-process hand-off benchmark's CPU).
//
// One acquire at a time is made so (loopCalls): while it waits for the
// store, the other goroutine runs the loop, and the acquires of other
// notifications go to goroutines of their own as usual (calls.go).

// runLoop is one of the loop's two goroutines.
func (d *driver) runLoop() {
	defer d.wg.Done()
	for {
		select {
		case <-d.loopTurn:
		case <-d.quit:
			return
		}
		if !d.loop() {
			return
		}
	}
}

// loop runs the loop until the driver's core has closed (it reports false)
// or until it has handed the loop over and made an acquire (true).
func (d *driver) loop() bool {
	for {
		select {
		case <-d.timer.C:
			d.apply(d.m.Tick)
		case <-d.notes.signal:
			ns := d.notes.take()
			if len(ns) == 1 && d.loopCalls.Load() == 0 {
				if d.onNote(ns[0]) {
					return true
				}
				continue
			}
			for _, n := range ns {
				d.step(engine.Released{Gen: n.gen, Name: n.name})
			}
		case <-d.quit:
			return false
		}
	}
}

// onNote steps the release notification n, taking the acquire of its name
// that the core sends, if any: then it hands the loop over and makes the
// call, and reports true.
func (d *driver) onNote(n note) bool {
	var buf [2]pendingCall
	var kbuf [4]*serialQueue
	calls, kicks := d.applyInlineLocked(n.name, time.Time{}, func(now mono) {
		d.m.Step(now, engine.Released{Gen: n.gen, Name: n.name})
	}, buf[:0], kbuf[:0])
	kickCallbacks(kicks)
	if len(calls) == 0 {
		d.events.kick() // the loop delivers no events itself
		return false
	}
	d.loopCalls.Add(1)
	d.loopTurn <- struct{}{}
	d.events.runHere(inlineEvents)
	d.makeCalls(n.name, time.Time{}, calls)
	d.loopCalls.Add(-1)
	return true
}
