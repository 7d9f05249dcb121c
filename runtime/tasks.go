package runtime

import (
	"context"
	"errors"
	"slices"
	"sync"
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
// (EffDispatch). A callback that a ListenerFuncs leaves nil does nothing:
// when the dispatcher is idle, it is done at once, with no goroutine (a bulk
// Close of a client leading a million leases through such listeners would
// start a million). The caller holds c.mu, in flush.
func (c *Client) dispatch(id engine.ContenderID, ct *started, t *Term, elected bool) {
	if lf, ok := ct.listener.(ListenerFuncs); ok && (elected && lf.OnElected == nil || !elected && lf.OnRevoked == nil) &&
		ct.queue.idle() {
		c.m.Step(c.now(), engine.CallbackDone{ID: id})
		return
	}
	c.wg.Add(1)
	run := func() {
		defer c.wg.Done()
		if elected || !t.rejected.Load() {
			err := protect(func() error {
				if elected {
					ct.listener.Elected(context.WithValue(t.Context(), insideKey{}, c), t)
				} else {
					// The term's context, without its cancellation, is a
					// background context: the term's ended.
					ct.listener.Revoked(context.WithValue(context.Background(), insideKey{}, c), t, t.Reason())
				}
				return nil
			})
			if err != nil {
				c.report(Event{Kind: EventCallbackPanicked, Name: t.name, Token: t.token, Err: err})
			}
		}
		c.callbackDone(id)
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

// callbackDones collects the core's CallbackDone inputs from the goroutines
// whose callbacks ran, so that many callbacks ending together — a bulk
// Close's revoked callbacks, one per lease — step the core in batches under
// one lock, not one lock and one flush each. The first goroutine to find no
// batch in progress steps the batch, and the next ones while it does.
type callbackDones struct {
	mu   sync.Mutex
	ids  []engine.ContenderID
	busy bool
}

// maxDonesPerStep bounds the CallbackDone inputs one hold of the client's
// lock steps.
const maxDonesPerStep = 1024

// callbackDone tells the core that a callback of contender id has run.
// The caller is a goroutine counted in c.wg; it returns once its input, and
// those of the batches it took on, are stepped.
func (c *Client) callbackDone(id engine.ContenderID) {
	q := &c.dones
	q.mu.Lock()
	q.ids = append(q.ids, id)
	if q.busy {
		q.mu.Unlock()
		return // the goroutine stepping a batch takes this one too
	}
	q.busy = true
	for len(q.ids) > 0 {
		n := min(len(q.ids), maxDonesPerStep)
		batch := slices.Clone(q.ids[:n])
		q.ids = q.ids[n:]
		if len(q.ids) == 0 {
			q.ids = nil
		}
		q.mu.Unlock()
		c.apply(func(now mono) {
			for _, id := range batch {
				c.m.Step(now, engine.CallbackDone{ID: id})
			}
		})
		q.mu.Lock()
	}
	q.busy = false
	q.mu.Unlock()
}
