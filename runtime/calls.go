package runtime

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// A backend call is made on a goroutine of its own (call), unless the API
// caller that caused it makes it itself (applySync): a Lock, TryLock or
// Unlock, an election's or a schedule's Stop or StepDown, waits for its
// acquire or release anyway, so its goroutine makes the call, when its
// context cannot end before the call's own deadline (D2) — then waiting on
// the call is waiting for what the caller waits for. The acquire that a
// release notification prompts, the goroutine of the driver's loop that
// took the notification makes (loop.go). Either way the call's deadline is
// counted from when the core sent it, or, for a lease call that waited for
// a goroutine, from when one took it.

// Lease calls — acquires, releases and value writes, one per lease — run on
// at most maxLeaseCalls goroutines at once; the others wait in order, and a
// goroutine that finishes one takes the next. Session calls (open,
// keep-alive, owned, close, groups, store clock) never wait behind them: a
// client that starts a million elections at once must still renew its
// session in time (one goroutine per call had a million goroutines, and the
// keep-alive, queue behind a million acquires for the store).
//
// A queued call's deadline (D2) counts from when a goroutine takes it, so
// that a storm of calls goes through at the store's pace: counted from when
// the core sent it, every call beyond the first few seconds' worth expired
// in the queue, and the elections retried in waves (a client starting a
// million elections on Redis held 580,000 after five minutes). A queued
// call the core no longer wants (an acquire whose election stopped meanwhile,
// a client closing during the storm) is answered without being made
// (engine.Machine.Wanted), up to maxUnwantedPerStep per step of the core.
const maxLeaseCalls = 128

// maxUnwantedPerStep bounds the queued calls one step of the core answers
// without making them, so that the driver's lock is never held for long.
const maxUnwantedPerStep = 1024

// leaseCall reports whether requests of kind k are lease calls.
func leaseCall(k engine.ReqKind) bool {
	return k == engine.ReqAcquire || k == engine.ReqRelease || k == engine.ReqPutValue
}

// send performs an EffSend: it hands the call to the API caller being
// applied, if it takes it, or starts a goroutine. The caller holds d.mu.
func (d *driver) send(req engine.Request, s backends.Session) {
	p := pendingCall{req: req, s: s, deadline: d.epoch.Add(d.sentAt + req.Timeout)}
	d.wg.Add(1)
	if in := &d.inl; in.active && (req.Kind == engine.ReqAcquire || req.Kind == engine.ReqRelease) &&
		req.Name == in.name && (in.until.IsZero() || !in.until.Before(p.deadline)) {
		in.calls = append(in.calls, p)
		return
	}
	if lk := d.lockers[req.Name]; lk != nil && req.Kind == engine.ReqAcquire && (lk.until.IsZero() || !lk.until.Before(p.deadline)) {
		select {
		case lk.calls <- p:
			return
		default:
		}
	}
	d.startCall(p)
}

// startCall starts a goroutine for p, or queues it behind the lease calls in
// flight. The caller holds d.mu.
func (d *driver) startCall(p pendingCall) {
	if leaseCall(p.req.Kind) {
		if d.leaseCalls >= leaseCallLimit(p) {
			d.queued = append(d.queued, p)
			return
		}
		d.leaseCalls++
	}
	go d.call(p)
}

// call performs one backend request on a goroutine of its own and hands
// the reply to the core; a lease call's goroutine then performs the lease
// calls queued meanwhile, one after the other, each with its whole timeout
// from when the goroutine takes it (D2).
func (d *driver) call(p pendingCall) {
	skip := false
	for {
		if !skip { // queued acquires or releases behind p go with it (batch.go)
			var done bool
			if p, skip, done = d.batches(p); done {
				return
			}
		}
		var res engine.Result
		var opened backends.Session
		if skip {
			res.Err = errNotSent
		} else {
			res, opened = d.invoke(p)
		}
		var next pendingCall
		more := false
		d.apply(func(now mono) {
			d.replied(now, p.req, res, opened)
			if leaseCall(p.req.Kind) {
				next, more = d.nextQueued(now)
				skip = d.shutdown // the core has closed: it wants no more calls
			}
		})
		d.wg.Done()
		if !more {
			return
		}
		p = next
		p.deadline = time.Now().Add(p.req.Timeout)
	}
}

// errNotSent is the reply to a queued lease call that was never made,
// because the client closed first.
var errNotSent = fmt.Errorf("simba: the call was not made: %w", ErrClosed)

// nextQueued takes the oldest queued lease call the core still wants for a
// goroutine that has finished one, or gives the goroutine's place up if
// none waits. Calls the core no longer wants are answered on the way,
// without being made (at most maxUnwantedPerStep; the goroutine then takes
// the next one whatever it is). The caller holds d.mu.
func (d *driver) nextQueued(now mono) (pendingCall, bool) {
	for answered := 0; ; answered++ {
		if len(d.queued) == 0 {
			d.leaseCalls--
			return pendingCall{}, false
		}
		p := d.queued[0]
		d.queued[0] = pendingCall{}
		d.queued = d.queued[1:]
		if len(d.queued) == 0 {
			d.queued = nil // let the array go
		}
		if answered == maxUnwantedPerStep || d.shutdown || d.m.Wanted(p.req.ID) {
			return p, true
		}
		d.replied(now, p.req, engine.Result{Err: errNotMade}, nil)
		d.wg.Done()
	}
}

// errNotMade is the reply to a queued lease call the core no longer wanted
// when a goroutine was free to make it.
var errNotMade = fmt.Errorf("simba: %w", engine.ErrNotMade)

// applySync is apply for an API caller that waits for the lease name with
// ctx: the acquires and releases of name that the input (and their replies)
// send, it makes itself, one after the other, if ctx cannot end before
// their deadline; the others go to goroutines as usual.
func (d *driver) applySync(ctx context.Context, name string, input func(now mono)) {
	until, bounded := ctx.Deadline()
	if !bounded && ctx.Done() != nil {
		d.apply(input) // it may end at any moment: it must not wait on a call
		return
	}
	var buf [4]pendingCall
	d.makeCalls(name, until, d.applyInline(name, until, input, buf[:0]))
}

// makeCalls makes calls, the calls of name handed to an API caller whose
// context ends no sooner than until, one after the other, applying each
// reply with the calls it sends in turn.
func (d *driver) makeCalls(name string, until time.Time, calls []pendingCall) {
	for i := 0; i < len(calls); i++ {
		p := calls[i]
		res, opened := d.invoke(p)
		calls = d.applyInline(name, until, func(now mono) { d.replied(now, p.req, res, opened) }, calls)
		d.wg.Done()
	}
}

// applyInline applies input with the calls of name handed to this caller,
// and appends them to calls.
func (d *driver) applyInline(name string, until time.Time, input func(now mono), calls []pendingCall) []pendingCall {
	var buf [4]*serialQueue
	calls, kicks := d.applyInlineLocked(name, until, input, calls, buf[:0])
	kickCallbacks(kicks)
	// The events the input caused, this caller delivers (see queueEvent):
	// a few, before its calls go out; more go to a goroutine.
	d.events.runHere(inlineEvents)
	return calls
}

func (d *driver) applyInlineLocked(name string, until time.Time, input func(now mono), calls []pendingCall,
	kicks []*serialQueue) ([]pendingCall, []*serialQueue) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := &d.inl
	in.active, in.name, in.until = true, name, until
	d.sentAt = d.now()
	input(d.sentAt)
	d.flush()
	calls = append(calls, in.calls...)
	clear(in.calls)
	in.active, in.name, in.calls = false, "", in.calls[:0]
	return calls, d.takeKicks(kicks)
}

// inlineEvents is how many events an API caller delivers itself per input
// (applyInline), at most.
const inlineEvents = 8

// invoke makes the backend call of p, bounded by its deadline (D2). A
// backend that panics fails the call with a *PanicError: the call runs on
// a goroutine of the client's, where a panic would end the process.
func (d *driver) invoke(p pendingCall) (res engine.Result, opened backends.Session) {
	ctx := &callCtx{deadline: p.deadline}
	defer ctx.end()
	defer func() {
		if v := recover(); v != nil {
			res = engine.Result{Err: fmt.Errorf("simba: %v: the backend (%T) panicked: %w", p.req.Kind, d.backend,
				&PanicError{Value: v, Stack: debug.Stack()})}
			opened = nil
		}
	}()
	req, s := p.req, p.s
	switch req.Kind {
	case engine.ReqOpen:
		opened, res.Renewal, res.Err = d.backend.OpenSession(ctx, backends.SessionOptions{TTL: req.TTL, Identity: d.identity})
		if res.Err == nil {
			res.Session = opened.ID()
		}
	case engine.ReqKeepAlive:
		res.Renewal, res.Err = s.KeepAlive(ctx)
	case engine.ReqOwned:
		res.Held, res.Digest, res.Err = s.Owned(ctx)
	case engine.ReqAcquire:
		res.Grant, res.Err = s.Acquire(ctx, req.Name)
	case engine.ReqRelease:
		res.Digest, res.Err = s.Release(ctx, req.Name, req.Token)
	case engine.ReqClose:
		res.Err = s.Close(ctx)
	case engine.ReqPutValue:
		res.Err = s.PutValue(ctx, req.Name, req.Token, req.Value)
	case engine.ReqJoin:
		res.Err = s.Join(ctx, req.Group, req.N)
	case engine.ReqLeave:
		res.Err = s.Leave(ctx, req.Group)
	case engine.ReqMembers:
		res.View, res.Err = s.Members(ctx, req.Group)
	case engine.ReqStoreTime:
		if sc, ok := d.backend.(backends.StoreClock); ok {
			res.StoreTime, res.Err = sc.StoreTime(ctx)
		} else {
			res.Err = fmt.Errorf("simba: the backend (%T) has no store clock", d.backend)
		}
	}
	return res, opened
}

// replied hands the core the reply to req. The caller holds d.mu.
func (d *driver) replied(now mono, req engine.Request, res engine.Result, opened backends.Session) {
	if req.Kind == engine.ReqAcquire {
		d.noteGuard(now, req.Name, res.Err)
	}
	switch {
	case opened != nil:
		d.sessions[req.Gen] = opened
	case req.Kind == engine.ReqClose:
		for _, stop := range d.watches[req.Gen] {
			stop()
		}
		delete(d.watches, req.Gen)
		if res.Err == nil || !req.Again { // else the core may close it again (engine/lost.go)
			delete(d.sessions, req.Gen)
			delete(d.deadlines, req.Gen)
		}
	}
	d.m.StepReply(now, &engine.Reply{ID: req.ID, Result: res})
}
