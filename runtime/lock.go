package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// Lock acquires the lease name and returns its term, waiting until it is free
// or until ctx ends (then it returns an error that names the lease, says who
// held it, and wraps ctx's error). Release it with [Client.Unlock].
//
// It is a cluster-wide mutex that also serialises the goroutines of this
// client, as a sync.Mutex does: Locks of one name on one client take turns,
// first come, first served, one at a time, each turn a term of its own (a new
// token). Other nodes contend meanwhile as usual, so the next turn here
// starts once this client wins the lease again.
//
// The term ends early if the session is lost (H3): watch [Term.Done] and
// check [Term.EnsureValid] before each step. A lock is not retaken after it
// ends; the next Lock of the name on this client takes its turn at once.
//
// Lock, TryLock and Unlock make their acquire or release on the caller's
// goroutine when ctx has no end or a deadline no sooner than the call's own
// (one renewal period from its send, D2); a ctx that may end sooner — an
// earlier deadline, or a cancellation without a deadline — leaves the call
// to a goroutine of the client, so that they return as soon as ctx ends. A
// ctx with a later deadline that is cancelled early is noticed once the
// call in flight returns, within its timeout. With such a ctx, a Lock that
// waits also makes the later attempts itself, woken directly by the
// backend's release notification, so that a graceful hand-off to it wakes
// one goroutine, the caller's.
func (c *Client) Lock(ctx context.Context, name string) (*Term, error) {
	return c.lock(ctx, name, false)
}

// TryLock makes one attempt to acquire the lease name and returns its term,
// or an error matching [ErrLeaseHeld] if another node holds it — or another
// Lock of this client holds or awaits it, without waiting for its turn. It
// waits for the session to open, up to ctx's end.
func (c *Client) TryLock(ctx context.Context, name string) (*Term, error) {
	return c.lock(ctx, name, true)
}

func (c *Client) lock(ctx context.Context, name string, once bool) (*Term, error) {
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: lock: %w", err)
	}
	var (
		id  engine.ContenderID
		w   engine.Waiter
		ch  chan waitResult
		err error
	)
	// The caller's goroutine makes the acquire itself, if ctx allows.
	c.applySync(ctx, name, func(now mono) {
		id = engine.ContenderID(c.newID())
		w, ch = c.newWaiter()
		// A lock has no listener and no task: the driver keeps nothing of
		// it beside the core's contender (see started).
		if err = c.m.Step(now, engine.Start{ID: id, Name: name, Kind: engine.KindLock, TryOnce: once, Waiter: w}); err != nil {
			delete(c.waiters, w)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("simba: lock %q: %w", name, err)
	}
	if r, err := c.waitLock(ctx, name, ch); err == nil {
		return r.term, nil
	} else if ctx.Err() == nil {
		return nil, err // the lock's own failure
	}
	var refusal *backends.HeldError
	c.apply(func(now mono) {
		refusal = c.m.Refusal(id)
		c.m.Step(now, engine.Abandon{ID: id})
		delete(c.waiters, w) // an abandoned Lock is not completed
	})
	select {
	case r := <-ch: // won just as ctx ended: give it back
		if r.term != nil {
			_ = c.Unlock(context.WithoutCancel(ctx), r.term)
		}
	default:
	}
	if refusal != nil {
		return nil, fmt.Errorf("simba: lock %q: %w; it was %v", name, ctx.Err(), refusal)
	}
	return nil, fmt.Errorf("simba: lock %q: %w", name, ctx.Err())
}

// Unlock releases the lock held with term t: the term is revoked, then the
// lease is released with its token (T5). It returns when the backend
// answered or ctx ended. Unlocking a term that already ended returns nil.
func (c *Client) Unlock(ctx context.Context, t *Term) error {
	if t == nil {
		return errors.New("simba: Unlock: nil term")
	}
	if t.owner != c {
		return fmt.Errorf("simba: unlock %v: %w", t, ErrNotOwner)
	}
	if !t.lock {
		return fmt.Errorf("simba: Unlock: %v is an election's term; stop the election instead", t)
	}
	var ch chan waitResult
	c.applySync(ctx, t.name, func(now mono) { // the caller makes the release itself, if ctx allows
		var w engine.Waiter
		w, ch = c.newWaiter()
		c.m.Step(now, engine.Unlock{Term: t.id, Waiter: w})
	})
	_, err := c.waitReuse(ctx, ch)
	return err
}

// A locker is a Lock caller waiting for its lease: it makes the name's
// acquires itself, as Lock's first attempt does, and it is woken by the
// name's release notifications directly, not through the client's loop. A
// graceful hand-off to a waiting Lock thus wakes one goroutine — the
// waiter's, which steps the notification, makes the acquire and returns
// with the term — where it woke three (the loop, a call's goroutine, the
// waiter). Only the first Lock of a name on a client waits so, and only
// with a context that cannot end before a call's deadline without a
// deadline of its own (as for Lock's first attempt).
type locker struct {
	name  string
	until time.Time        // the caller's deadline; zero if its context never ends
	calls chan pendingCall // acquires of name handed to the caller
	wake  chan struct{}    // release notifications of name
}

// waitLock waits for the Lock waiter ch of name, as a locker when it can.
func (c *Client) waitLock(ctx context.Context, name string, ch chan waitResult) (waitResult, error) {
	until, bounded := ctx.Deadline()
	if !bounded && ctx.Done() != nil {
		return c.waitReuse(ctx, ch) // it may end at any moment: it must not make calls
	}
	lk := &locker{name: name, until: until, calls: make(chan pendingCall, 1), wake: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.lockers[name] != nil {
		c.mu.Unlock()
		return c.waitReuse(ctx, ch) // another Lock of this client waits for name
	}
	c.lockers[name] = lk
	c.notes.attend(name, lk.wake)
	c.mu.Unlock()
	defer c.leaveLock(lk)
	for {
		select {
		case r := <-ch:
			c.reuseWaiter(ch)
			return r, r.err
		case <-lk.wake:
			for _, n := range c.notes.takeName(name) {
				c.applySync(ctx, name, func(now mono) { c.m.Step(now, engine.Released{Gen: n.gen, Name: n.name}) })
			}
		case p := <-lk.calls:
			c.makeCalls(name, until, []pendingCall{p})
		case <-ctx.Done():
			return waitResult{}, ctx.Err()
		}
	}
}

// leaveLock ends lk's wait: notifications go to the client's loop again,
// and an acquire handed to lk that it did not make goes to a goroutine.
func (c *Client) leaveLock(lk *locker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.lockers, lk.name)
	c.notes.leave(lk.name)
	select {
	case p := <-lk.calls:
		c.startCall(p)
	default:
	}
}
