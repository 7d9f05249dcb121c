package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/simba-go/simba/runtime/internal/engine"
)

// Tasks, scheduled runs and callbacks run on goroutines of their own; each
// is answered with an input when it returns.

// taskContext is the context a task or run gets: the term's, marked as
// inside the engine (L5).
func (c *Client) taskContext(t *Term) context.Context {
	return context.WithValue(t.Context(), insideKey{}, c)
}

// work returns the function a task or run effect runs: the partition
// function of its group, or its contender's task.
func (c *Client) work(e *engine.Effect) TaskFunc {
	if e.Group != 0 {
		fn, part := c.groupFns[e.Group], e.Partition
		return func(ctx context.Context, t *Term) error { return fn(ctx, t, part) }
	}
	return c.contenders[e.Contender].task
}

// startTask runs a term's task, once (EffStartTask).
func (c *Client) startTask(e *engine.Effect) {
	t, fn := c.terms[e.Term], c.work(e)
	go func() {
		err := protect(func() error { return fn(c.taskContext(t), t) })
		c.step(engine.TaskDone{Term: t.id, Err: err, Canceled: errors.Is(err, context.Canceled)})
	}()
}

// startRun runs one scheduled run of a term (EffStartRun), with its
// fixed-rate slot in the context.
func (c *Client) startRun(e *engine.Effect) {
	t, fn := c.terms[e.Term], c.work(e)
	slot, hasSlot := e.Slot, e.HasSlot
	go func() {
		ctx := c.taskContext(t)
		if hasSlot {
			ctx = context.WithValue(ctx, slotKey{}, slot)
		}
		err := protect(func() error { return fn(ctx, t) })
		c.step(engine.RunDone{Term: t.id, Err: err, Canceled: errors.Is(err, context.Canceled)})
	}()
}

type slotKey struct{}

// ScheduledSlot returns the start, on the store's clock, of the fixed-rate
// slot a run was started for, from the run's context; ok is false outside a
// fixed-rate run. The slot start names the run across nodes and fail-overs,
// so it serves as an idempotency key.
func ScheduledSlot(ctx context.Context) (start time.Time, ok bool) {
	start, ok = ctx.Value(slotKey{}).(time.Time)
	return start, ok
}

// dispatch queues one callback of contender id on its serial dispatcher
// (EffDispatch).
func (c *Client) dispatch(id engine.ContenderID, ct *started, t *Term, elected bool) {
	c.wg.Add(1)
	run := func() {
		defer c.wg.Done()
		if elected || !t.rejected.Load() {
			err := protect(func() error {
				if elected {
					ct.listener.Elected(context.WithValue(t.Context(), insideKey{}, c), t)
				} else {
					ct.listener.Revoked(context.WithValue(context.WithoutCancel(t.Context()), insideKey{}, c), t, t.Reason())
				}
				return nil
			})
			if err != nil {
				c.report(Event{Kind: EventCallbackPanicked, Name: t.name, Token: t.token, Err: err})
			}
		}
		c.step(engine.CallbackDone{ID: id})
	}
	rejected := func(err error) {
		t.rejected.Store(true) // its revoked callback, if queued, is skipped
		go func() {
			defer c.wg.Done()
			c.step(engine.DispatchFailed{ID: id, Term: t.id, Err: err})
		}()
	}
	ct.queue.push(queued{run: run, mustRun: !elected, rejected: rejected})
}

// report queues an event the driver itself noticed. The caller must be a
// goroutine counted in c.wg.
func (c *Client) report(e Event) {
	c.wg.Add(1)
	c.events.push(queued{run: func() { defer c.wg.Done(); c.deliver(e) }, mustRun: true})
}
