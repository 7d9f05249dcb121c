package engine

import (
	"errors"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/internal/schedulerecord"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// RunStatus is a schedule's runs so far, over every term of this client.
type RunStatus struct {
	Next       Mono // when the next run is due, if HasNext
	HasNext    bool
	LastRun    Mono // when the last run started, if HasLastRun
	HasLastRun bool
	LastErr    error // the last run's error, nil if it succeeded
	Runs       int   // runs started
}

// At returns r as the runtime's ScheduleStatus shows it: the Mono times
// are made local times on the driver's clock whose zero is epoch. It is
// the one conversion between the two.
func (r *RunStatus) At(epoch time.Time) vocab.ScheduleStatus {
	st := vocab.ScheduleStatus{LastErr: r.LastErr, Runs: r.Runs}
	if r.HasNext {
		st.Next = epoch.Add(r.Next)
	}
	if r.HasLastRun {
		st.LastRun = epoch.Add(r.LastRun)
	}
	return st
}

type runState uint8

const (
	runPlanned     runState = iota // a timer is set for the next run
	runWaitStore                   // waiting for the store's clock to plan
	runWaitRenewal                 // the step check failed: waiting for the next renewal (E1)
	runRunning                     // a run is in progress
	runRecordWait                  // a fixed-delay run ended; waiting for the store's clock to record it
	runRecording                   // the record is being written
	runClaiming                    // a Cron or Timetable slot is being claimed before its run
	runOver                        // the term's runs are over
)

// run is the planner of one scheduled term's runs.
type run struct {
	spec    vocab.Schedule
	kind    string    // schedulerecord.Rate, Delay or Cron, as recorded
	last    time.Time // the last slot (rate) or end (delay) recorded, if hasLast
	hasLast bool
	firstAt Mono      // no run before (the initial delay)
	slot    int64     // the fixed-rate slot planned or running
	slotAt  time.Time // a Cron or Timetable schedule's slot planned or running
	// slotReady is when slotAt was ready to run, on the store's clock: its
	// instant, or when it was planned if later (a slot caught up)
	slotReady time.Time
	// claimed: slotAt is claimed in the store, and its run waits for a
	// renewal that passes the step check
	claimed bool
	// afterRun: the plan follows a run of this term, so slots are skipped
	// or run as spec.Overlap says, not as spec.CatchUp does
	afterRun bool
	state    runState
	started  Mono  // when the run in progress started
	failed   error // runRecordWait: the run's error
	cancel   bool  // runRecordWait: it matched context.Canceled
	status   *RunStatus
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// spec returns the schedule c's terms run on, and its status.
func (c *contender) spec() (vocab.Schedule, *RunStatus) {
	if g := c.group; g != nil {
		return g.sched, g.status[c.part]
	}
	if c.x == nil {
		return vocab.Schedule{}, nil
	}
	return c.x.sched, c.x.status
}

// startWork starts what c does with its new term t: a task at once, a
// group's once-per-term task after its initial delay and step check, or a
// schedule's planner, which reads the last slot recorded in value, the
// lease's value at acquisition.
func (m *Machine) startWork(c *contender, t *term, value []byte) {
	s, status := c.spec()
	switch {
	case c.kind == KindSchedule || c.group != nil && !vocab.Once(s):
		r := &run{spec: s, kind: schedulerecord.Rate, firstAt: m.now + s.Initial, status: status}
		if s.Delay > 0 {
			r.kind = schedulerecord.Delay
		} else if s.Timetable != nil {
			r.kind = schedulerecord.Cron
		}
		r.last, r.hasLast = schedulerecord.DecodeKind(value, r.kind)
		t.run = r
		m.planRun(t)
	case c.group != nil && s.Initial > 0:
		t.delay = delayTimer
		m.scheduleTerm(t, m.now+s.Initial)
	case c.group != nil:
		m.delayDue(t)
	default:
		m.startTask(c, t)
	}
}

func (m *Machine) startTask(c *contender, t *term) {
	t.taskRunning = true
	c.tasks++
	e := Effect{Kind: EffStartTask, Contender: c.id, Term: t.id}
	if g := c.group; g != nil {
		e.Group, e.Partition = g.id, c.part
	}
	m.emit(e)
}

// stepOK reports whether t stays valid for more than step (E1).
func (m *Machine) stepOK(t *term, step time.Duration) bool {
	return !t.ended && t.sess.deadline-m.now > step
}

// The states of a partition's once-per-term task before it starts.
const (
	delayNone    uint8 = iota
	delayTimer         // waiting for the initial delay
	delayRenewal       // waiting for a renewal that passes the step check
)

// delayDue starts a partition's task once its initial delay is over and
// the term stays valid for its step.
func (m *Machine) delayDue(t *term) {
	s, _ := t.c.spec()
	if !m.stepOK(t, s.Step) {
		t.delay = delayRenewal
		m.waiting = append(m.waiting, t)
		return
	}
	t.delay = delayNone
	m.startTask(t.c, t)
}

// planRun plans t's next run on the store's clock: the next slot not
// recorded (fixed rate) or the last end plus Delay (fixed delay), not
// before the initial delay. The store's clock is estimated from the last
// renewal, ahead of the store by up to one round trip, so a slot may start
// slightly before its boundary on the store's clock; that cannot run a
// slot twice, since runs are recorded by slot number.
func (m *Machine) planRun(t *term) {
	r := t.run
	s, live := m.current(t.sess.gen)
	if !live || t.ended {
		return
	}
	store, ok := m.storeNow()
	if !ok {
		r.state = runWaitStore
		r.status.HasNext = false
		m.waiting = append(m.waiting, t)
		m.needStoreTime(s)
		return
	}
	var due time.Time
	if r.spec.Timetable != nil {
		var ok bool
		if due, ok = r.planSlot(store); !ok {
			// No slot to come: the term's runs are over, though it goes on.
			r.state, r.status.HasNext, r.afterRun = runOver, false, false
			return
		}
		r.slotAt, r.slotReady, r.afterRun, r.claimed = due, due, false, false
		if store.After(due) {
			r.slotReady = store
		}
	} else if rate := r.spec.Rate.Milliseconds(); rate > 0 {
		r.slot = max(floorDiv(store.UnixMilli(), rate), 0)
		if r.hasLast && r.slot*rate <= r.last.UnixMilli() {
			r.slot = floorDiv(r.last.UnixMilli(), rate) + 1
		}
		due = time.UnixMilli(r.slot * rate)
	} else {
		due = store
		if r.hasLast {
			due = r.last.Add(r.spec.Delay)
		}
	}
	at := m.now + max(r.firstAt-m.now, due.Sub(store), 0)
	r.state = runPlanned
	r.status.Next, r.status.HasNext = at, true
	if at <= m.now {
		m.runDue(t)
		return
	}
	m.scheduleTerm(t, at)
}

// runDue starts t's planned run, unless the step check fails (E1): then
// the run waits for the next renewal, within the same slot.
func (m *Machine) runDue(t *term) {
	r := t.run
	if r.spec.Timetable != nil {
		// The slot was missed while it waited (a pause, a later slot
		// come): plan again, with the catch-up window.
		grace := slotGrace
		if r.state == runWaitRenewal {
			grace += m.cfg.RenewInterval
		}
		if store, ok := m.storeNow(); ok && r.slotPassed(store, grace) {
			m.planRun(t)
			return
		}
	}
	if rate := r.spec.Rate.Milliseconds(); rate > 0 {
		// A slot missed while waiting (the initial delay, a long run) is
		// skipped: run the slot current now.
		if store, ok := m.storeNow(); ok {
			r.slot = max(r.slot, floorDiv(store.UnixMilli(), rate))
		}
	}
	if !m.stepOK(t, r.spec.Step) {
		r.state = runWaitRenewal
		m.waiting = append(m.waiting, t)
		return
	}
	t.taskRunning = true
	t.c.tasks++
	if r.spec.Timetable != nil && !r.claimed {
		m.claim(t)
		return
	}
	m.startRun(t)
}

// startRun starts t's run now.
func (m *Machine) startRun(t *term) {
	r := t.run
	r.state, r.started = runRunning, m.now
	r.status.LastRun, r.status.HasLastRun, r.status.HasNext = m.now, true, false
	r.status.Runs++
	e := Effect{Kind: EffStartRun, Contender: t.c.id, Term: t.id}
	if g := t.c.group; g != nil {
		e.Group, e.Partition = g.id, t.c.part
	}
	if rate := r.spec.Rate.Milliseconds(); rate > 0 {
		e.Slot, e.HasSlot = time.UnixMilli(r.slot*rate), true
	} else if r.spec.Timetable != nil {
		e.Slot, e.HasSlot = r.slotAt, true
	}
	m.emit(e)
}

// runDone reports that t's run returned err: a run that succeeded is
// recorded, with the term's token, even if the term was revoked meanwhile
// (during the hand-off the lease is still ours until the run's work is
// over); a failed run is reported and not recorded.
func (m *Machine) runDone(t *term, err error, canceled bool) {
	r := t.run
	if r == nil || r.state != runRunning {
		return
	}
	r.status.LastErr = err
	// The run's outcome, for the metrics adapters' runs by outcome: a
	// failure (unless the term's end cancelled it), or a success, reported
	// before the run is recorded. Nothing below depends on it.
	e := vocab.Event{Kind: vocab.EventRunSucceeded, Name: t.c.name, Token: t.token, Duration: m.now - r.started}
	if err != nil {
		e.Kind, e.Err = vocab.EventRunFailed, err
	}
	if g := t.c.group; g != nil {
		e.Group, e.Partition = g.name, t.c.part
	}
	if err == nil || !(t.ended && canceled) {
		m.event(e)
	}
	m.record(t, err, canceled)
}

func (m *Machine) record(t *term, err error, canceled bool) {
	r := t.run
	if r.spec.Timetable != nil { // claimed before the run: nothing to record
		m.runFinished(t, false)
		return
	}
	var at time.Time
	if rate := r.spec.Rate.Milliseconds(); rate > 0 {
		at = time.UnixMilli(r.slot * rate)
	} else if r.spec.Timetable != nil {
		at = r.slotAt
	} else if store, ok := m.storeNow(); ok {
		at = store
	} else if s, live := m.current(t.sess.gen); live {
		r.state, r.failed, r.cancel = runRecordWait, err, canceled
		m.waiting = append(m.waiting, t)
		m.needStoreTime(s)
		return
	} else {
		m.runFinished(t, true) // the session is gone: nothing can be recorded
		return
	}
	r.last, r.hasLast = at, true // never rerun this slot in this term
	if err != nil {
		m.runFinished(t, false)
		return
	}
	c := t.c
	handingOver := c.phase == phHandoff && c.term == t && t.releaseReq == 0
	s, live := m.current(t.sess.gen)
	if !live || t.ended && !handingOver {
		m.runFinished(t, true)
		return
	}
	r.state = runRecording
	m.send(Request{Kind: ReqPutValue, Gen: s.gen, Name: t.c.name, Token: t.token, Value: schedulerecord.Encode(r.kind, at),
		Timeout: s.period}, &pendingReq{t: t})
}

func (m *Machine) putValueDone(p *pendingReq, res Result) {
	t := p.t
	if t != nil && t.run != nil && t.run.state == runClaiming {
		m.claimDone(t, res.Err)
		return
	}
	if t == nil || t.run == nil || t.run.state != runRecording {
		return
	}
	if res.Err != nil {
		if errors.Is(res.Err, backends.ErrNotHolder) {
			m.runFinished(t, true) // the store gave the lease away: no more runs in this term
			return
		}
		m.event(vocab.Event{Kind: vocab.EventBackendError, Name: t.c.name, Token: t.token, Err: res.Err})
	}
	m.runFinished(t, false)
}

// runFinished notes that t's run is over, and plans the next one; with
// quit, or once the term has ended, t's runs are over.
func (m *Machine) runFinished(t *term, quit bool) {
	r := t.run
	if t.ended || quit {
		r.state = runOver
		r.status.HasNext = false
		m.taskEnded(t)
		return
	}
	t.taskRunning = false
	t.c.tasks--
	r.afterRun = true
	m.planRun(t)
}

// workEnds stops what waits in t's schedule or initial delay when t ends; a
// run in progress goes on until it returns (H1).
func (m *Machine) workEnds(t *term) {
	t.timerSeq++
	t.delay = delayNone
	if r := t.run; r != nil && (r.state == runPlanned || r.state == runWaitStore || r.state == runWaitRenewal) {
		r.state = runOver
		r.status.HasNext = false
	}
}

// wakeWaiters goes on with what waits for a renewal or the store's clock
// (m.waiting): runs and delayed tasks whose step check failed (E1), runs
// that wait for the store's clock to plan or to record (B5). It is called
// after a renewal, a store-time read and the end of a session; what must
// wait longer waits again. Each renewal costs O(waiting), not O(leases).
func (m *Machine) wakeWaiters() {
	if len(m.waiting) == 0 {
		return
	}
	waiting := m.waiting
	m.waiting = nil
	for _, t := range waiting {
		if t.delay == delayRenewal && !t.ended {
			m.delayDue(t)
		}
		r := t.run
		if r == nil {
			continue
		}
		switch {
		case r.state == runWaitRenewal && !t.ended && r.spec.Timetable != nil:
			m.runDue(t) // it replans if the slot was missed meanwhile
		case r.state == runWaitRenewal && !t.ended:
			if rate := r.spec.Rate.Milliseconds(); rate > 0 {
				if store, ok := m.storeNow(); ok && floorDiv(store.UnixMilli(), rate) > r.slot {
					m.planRun(t) // the slot is over: plan the current one
					continue
				}
			}
			r.state = runPlanned
			m.runDue(t)
		case r.state == runWaitStore && !t.ended:
			m.planRun(t)
		case r.state == runRecordWait:
			m.record(t, r.failed, r.cancel)
		}
	}
}
