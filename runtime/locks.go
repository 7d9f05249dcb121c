package runtime

import (
	"context"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// The driver's side of Lock, TryLock and Unlock: their callers wait for
// their acquire or release anyway, so, when their context allows, they make
// the calls themselves (applySync), and a waiting Lock is woken by the
// name's release notifications directly (locker).

// pendingLock is a Lock started in the core, whose caller waits for it.
type pendingLock struct {
	name string
	id   engine.ContenderID
	w    engine.Waiter
	ch   chan waitResult
}

// startLock starts the lock in (its ID set here) and its waiter; the
// caller's goroutine makes the acquire itself, if ctx allows. It returns
// the core's error for the start.
//
// A lock has no listener and no task: the driver keeps nothing of it beside
// the core's contender (see started).
func (d *driver) startLock(ctx context.Context, in engine.Start) (pendingLock, error) {
	l := pendingLock{name: in.Name}
	var err error
	d.applySync(ctx, in.Name, func(now mono) {
		l.id = engine.ContenderID(d.newID())
		in.ID = l.id
		l.w, l.ch = d.newWaiter()
		in.Waiter = l.w
		if err = d.m.Step(now, in); err != nil {
			delete(d.waiters, l.w)
		}
	})
	return l, err
}

// abandonLock gives up l once its caller's ctx ended: the core stops its
// attempts, and a term won just as ctx ended is given back. It returns the
// holder that refused l's last attempt, if any.
func (d *driver) abandonLock(ctx context.Context, l pendingLock) *backends.HeldError {
	var refusal *backends.HeldError
	d.apply(func(now mono) {
		refusal = d.m.Refusal(l.id)
		d.m.Step(now, engine.Abandon{ID: l.id})
		delete(d.waiters, l.w) // an abandoned Lock is not completed
	})
	select {
	case r := <-l.ch: // won just as ctx ended: give it back
		if r.term != nil {
			_ = d.unlock(context.WithoutCancel(ctx), r.term)
		}
	default:
	}
	return refusal
}

// unlock steps the Unlock of t, a lock's term of this driver, and waits for
// its release or for ctx; the caller's goroutine makes the release itself,
// if ctx allows.
func (d *driver) unlock(ctx context.Context, t *Term) error {
	var ch chan waitResult
	d.applySync(ctx, t.name, func(now mono) {
		var w engine.Waiter
		w, ch = d.newWaiter()
		d.m.Step(now, engine.Unlock{Term: t.id, Waiter: w})
	})
	_, err := d.waitReuse(ctx, ch)
	return err
}

// waitLock waits for l, as a locker when it can, and returns its term.
func (d *driver) waitLock(ctx context.Context, l pendingLock) (*Term, error) {
	until, bounded := ctx.Deadline()
	if !bounded && ctx.Done() != nil {
		r, err := d.waitReuse(ctx, l.ch) // it may end at any moment: it must not make calls
		return r.term, err
	}
	lk := &locker{name: l.name, until: until, calls: make(chan pendingCall, 1), wake: make(chan struct{}, 1)}
	d.mu.Lock()
	if d.lockers[l.name] != nil {
		d.mu.Unlock()
		r, err := d.waitReuse(ctx, l.ch) // another Lock of this client waits for the name
		return r.term, err
	}
	d.lockers[l.name] = lk
	d.notes.attend(l.name, lk.wake)
	d.mu.Unlock()
	defer d.leaveLock(lk)
	for {
		select {
		case r := <-l.ch:
			d.reuseWaiter(l.ch)
			return r.term, r.err
		case <-lk.wake:
			for _, n := range d.notes.takeName(l.name) {
				d.applySync(ctx, l.name, func(now mono) { d.m.Step(now, engine.Released{Gen: n.gen, Name: n.name}) })
			}
		case p := <-lk.calls:
			d.makeCalls(l.name, until, []pendingCall{p})
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// leaveLock ends lk's wait: notifications go to the driver's loop again,
// and an acquire handed to lk that it did not make goes to a goroutine.
func (d *driver) leaveLock(lk *locker) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.lockers, lk.name)
	d.notes.leave(lk.name)
	select {
	case p := <-lk.calls:
		d.startCall(p)
	default:
	}
}
