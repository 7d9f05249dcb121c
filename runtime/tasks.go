package runtime

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/simba-go/simba/runtime/internal/engine"
)

// Tasks, scheduled runs and callbacks run on goroutines of their own; each
// is answered with an input when it returns.

// insideKey marks the contexts the engine passes to callbacks and tasks, so
// that a Stop, StepDown or Close called with them does not wait for itself
// (L5). Its value is the driver.
type insideKey struct{}

// inside reports whether ctx is one the driver passed to a callback or a
// task of its own (or derives from one).
func (d *driver) inside(ctx context.Context) bool {
	return ctx != nil && ctx.Value(insideKey{}) == d
}

// taskContext is the context a task or run gets: the term's, marked as
// inside the engine (L5).
func (d *driver) taskContext(t *Term) context.Context {
	return context.WithValue(t.Context(), insideKey{}, d)
}

// work returns the function a task or run effect runs: the partition
// function of its group, or its contender's task.
func (d *driver) work(e *engine.Effect) TaskFunc {
	if e.Group != 0 {
		fn, part := d.groupFns[e.Group], e.Partition
		return func(ctx context.Context, t *Term) error { return fn(ctx, t, part) }
	}
	return d.contenders[e.Contender].task
}

// startTask runs a term's task, once (EffStartTask).
func (d *driver) startTask(e *engine.Effect) {
	t, fn := d.terms[e.Term], d.work(e)
	go func() {
		err := protect(func() error { return fn(d.taskContext(t), t) })
		d.step(engine.TaskDone{Term: t.id, Err: err, Canceled: errors.Is(err, context.Canceled)})
	}()
}

// startRun runs one scheduled run of a term (EffStartRun), with its slot
// (fixed-rate, Cron or Timetable) in the context.
func (d *driver) startRun(e *engine.Effect) {
	t, fn := d.terms[e.Term], d.work(e)
	slot, hasSlot := e.Slot, e.HasSlot
	go func() {
		ctx := d.taskContext(t)
		if hasSlot {
			ctx = context.WithValue(ctx, slotKey{}, slot)
		}
		err := protect(func() error { return fn(ctx, t) })
		d.step(engine.RunDone{Term: t.id, Err: err, Canceled: errors.Is(err, context.Canceled)})
	}()
}

type slotKey struct{}

// ScheduledSlot returns the slot a run was started for, from the run's
// context, on the store's clock: the start of a fixed-rate slot, or the
// scheduled instant of a Cron or Timetable slot (R1); ok is false outside
// such a run (a fixed-delay one). The slot names the run across nodes and
// fail-overs, so it serves as an idempotency key.
func ScheduledSlot(ctx context.Context) (start time.Time, ok bool) {
	start, ok = ctx.Value(slotKey{}).(time.Time)
	return start, ok
}

// dispatch queues one callback of contender id on its serial dispatcher
// (EffDispatch). A callback that a ListenerFuncs leaves nil does nothing:
// when the dispatcher is idle, it is done at once, with no goroutine (a bulk
// Close of a client leading a million leases through such listeners would
// start a million). The caller holds d.mu, in flush; the callback starts
// when the caller releases it.
func (d *driver) dispatch(id engine.ContenderID, ct *started, t *Term, elected bool) {
	if lf, ok := ct.listener.(ListenerFuncs); ok && (elected && lf.OnElected == nil || !elected && lf.OnRevoked == nil) &&
		ct.queue.idle() {
		d.m.Step(d.now(), engine.CallbackDone{ID: id})
		return
	}
	d.wg.Add(1)
	run := func() {
		defer d.wg.Done()
		if elected || !t.rejected.Load() {
			err := protect(func() error {
				if elected {
					ct.listener.Elected(context.WithValue(t.Context(), insideKey{}, d), t)
				} else {
					// The term's context, without its cancellation, is a
					// background context: the term's ended.
					ct.listener.Revoked(context.WithValue(context.Background(), insideKey{}, d), t, t.Reason())
				}
				return nil
			})
			if err != nil {
				d.report(Event{Kind: EventCallbackPanicked, Name: t.name, Token: t.token, Err: err})
			}
		}
		d.callbackDone(id)
	}
	rejected := func(err error) {
		t.rejected.Store(true) // its revoked callback, if queued, is skipped
		go func() {
			defer d.wg.Done()
			d.step(engine.DispatchFailed{ID: id, Term: t.id, Err: err})
		}()
	}
	// Queued now, in order; started once the driver's mutex is released
	// (kickCallbacks), since the executor may run it on this goroutine.
	ct.queue.add(queued{run: run, mustRun: !elected, rejected: rejected})
	d.kicks = append(d.kicks, ct.queue)
}

// maxDonesPerStep bounds the CallbackDone inputs one hold of the driver's
// lock steps.
const maxDonesPerStep = 1024

// callbackDone tells the core that a callback of contender id has run.
// The caller is a goroutine counted in d.wg; it returns once its input, and
// those of the batches it took on, are stepped.
func (d *driver) callbackDone(id engine.ContenderID) {
	q := &d.dones
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
		d.apply(func(now mono) {
			for _, id := range batch {
				d.m.Step(now, engine.CallbackDone{ID: id})
			}
		})
		q.mu.Lock()
	}
	q.busy = false
	q.mu.Unlock()
}
