package runtime

import (
	"context"
	"log/slog"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// What the API asks of the driver: it builds the core's inputs and hands
// them over here (start, startGroup, await, close; the Lock family in
// locks.go), and asks its questions here (query, leaderTerm, session). Every
// one takes the driver's mutex for as long as the core needs, and no
// longer.

// driverConfig is what a driver is made with.
type driverConfig struct {
	backend  backends.Backend
	cfg      vocab.Config // the configuration the core runs with (vocab.Effective)
	seed     uint64       // the seed of the core's retry jitter
	identity string
	logger   *slog.Logger // never nil
	observer Observer     // nil for none
	exec     func(func()) error
}

// newDriver starts a driver: its loop, and the core's first tick, which
// opens a session.
func newDriver(dc driverConfig) *driver {
	d := &driver{
		backend:  dc.backend,
		cfg:      dc.cfg,
		identity: dc.identity,
		logger:   dc.logger,
		observer: dc.observer,
		exec:     dc.exec,
		epoch:    time.Now(),
		registry: newRegistry(),
		live:     make(chan struct{}),
		renewed:  make(chan struct{}),
		quit:     make(chan struct{}),
		events:   newSerialQueue(nil),
	}
	d.notes.signal = make(chan struct{}, 1)
	d.m = engine.New(dc.cfg, dc.seed)
	d.timer = time.NewTimer(time.Hour)
	d.timer.Stop()
	d.loopTurn = make(chan struct{}, 1)
	d.loopTurn <- struct{}{}
	d.wg.Add(2)
	go d.runLoop()
	go d.runLoop()
	d.apply(d.m.Tick)
	return d
}

// start starts the election or schedule in (its ID set here) with the
// driver's half st (nil if none), and returns its id or the core's error.
func (d *driver) start(in engine.Start, st *started) (engine.ContenderID, error) {
	var err error
	d.apply(func(now mono) {
		in.ID = engine.ContenderID(d.newID())
		if st != nil {
			d.contenders[in.ID] = st
		}
		if err = d.m.Step(now, in); err != nil {
			delete(d.contenders, in.ID)
		}
	})
	return in.ID, err
}

// startGroup starts the group in (its ID set here) whose partitions run
// fn, and returns its id or the core's error.
func (d *driver) startGroup(in engine.StartGroup, fn PartitionFunc) (engine.GroupID, error) {
	var err error
	d.apply(func(now mono) {
		in.ID = engine.GroupID(d.newID())
		d.groupFns[in.ID] = fn
		if err = d.m.Step(now, in); err != nil {
			delete(d.groupFns, in.ID)
		}
	})
	return in.ID, err
}

// await steps an input that completes a waiter, and waits for it or for
// ctx. Called with a context the engine gave a callback or task, it steps
// the input without a waiter and returns nil at once: waiting there could
// wait for the caller itself (L5).
func (d *driver) await(ctx context.Context, input func(w engine.Waiter) engine.Input) error {
	return d.awaitName(ctx, "", input)
}

// awaitName is await for an input about the lease name (an election's or a
// schedule's Stop): the release of name it sends, the caller makes itself
// if ctx allows (applySync), as Unlock does — it waits for that release
// anyway, and a goroutine started for the call would have to be woken. An
// empty name makes no calls.
func (d *driver) awaitName(ctx context.Context, name string, input func(w engine.Waiter) engine.Input) error {
	if d.inside(ctx) {
		d.step(input(0))
		return nil
	}
	var ch chan waitResult
	in := func(now mono) {
		var w engine.Waiter
		w, ch = d.newWaiter()
		d.m.Step(now, input(w))
	}
	if name == "" {
		d.apply(in)
	} else {
		d.applySync(ctx, name, in)
	}
	_, err := d.waitReuse(ctx, ch)
	return err
}

// close steps the core's Close and waits, up to ctx's end, until every
// goroutine of the driver has ended. Called from inside a callback or task,
// it returns once the Close is stepped (L5).
func (d *driver) close(ctx context.Context) error {
	if err := d.await(ctx, func(w engine.Waiter) engine.Input { return engine.Close{Waiter: w} }); err != nil {
		return err
	}
	if d.inside(ctx) {
		return nil // closing goes on; waiting for our goroutines would wait for the caller
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitLive waits until the session is live, and returns nil; or returns
// ErrClosed once the client is closing; or, when ctx ends first, the
// backend's last error (nil if none) and ctx's error.
func (d *driver) awaitLive(ctx context.Context) (lastErr, err error) {
	d.mu.Lock()
	state, closing, _ := d.m.State()
	live, closed := d.live, state == SessionClosed || closing
	d.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	select {
	case <-live:
		return nil, nil
	case <-ctx.Done():
		d.mu.Lock()
		_, _, last := d.m.State()
		d.mu.Unlock()
		return last, ctx.Err()
	}
}

// query runs q with the core under the driver's mutex, for a question: q
// must only read.
func (d *driver) query(q func(m *engine.Machine)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q(d.m)
}

// leaderTerm returns the term contender id holds, or nil.
func (d *driver) leaderTerm(id engine.ContenderID) *Term {
	d.mu.Lock()
	defer d.mu.Unlock()
	tid, name, token, gen, ok := d.m.LeaderTermInfo(id)
	if !ok {
		return nil
	}
	t := d.terms[tid]
	if t == nil { // a quiet term, first asked for: its end and forgetting find it here
		t = newTerm(d, name, token, d.deadlines[gen])
		t.id = tid
		d.terms[tid] = t
	}
	return t
}

// session returns the live session's handle, id and renewal period, or a
// nil handle and a channel closed when a session is live, or ErrClosed
// once the client is closing.
func (d *driver) session() (s backends.Session, id backends.SessionID, period time.Duration,
	live <-chan struct{}, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if state, closing, _ := d.m.State(); state == SessionClosed || closing {
		return nil, "", 0, nil, ErrClosed
	}
	if gen, sid, p, ok := d.m.Session(); ok {
		if h := d.sessions[gen]; h != nil {
			return h, sid, p, nil, nil
		}
	}
	return nil, "", 0, d.live, nil
}

// waitSessionChange waits, for at most limit, until the live session is no
// longer old.
func (d *driver) waitSessionChange(ctx context.Context, old backends.SessionID, limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		d.mu.Lock()
		_, id, _, ok := d.m.Session()
		changed := !ok || id != old
		renewed := d.renewed
		d.mu.Unlock()
		if changed {
			return
		}
		select {
		case <-renewed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// watchHolder runs follow on a goroutine of the driver's, which Close waits
// for, with the channel that wakes it on name's elections and revocations
// on this client (holderWatches); or returns ErrClosed once the client is
// closing.
func (d *driver) watchHolder(name string, follow func(wake chan struct{})) error {
	d.mu.Lock()
	if state, closing, _ := d.m.State(); d.shutdown || state == SessionClosed || closing {
		d.mu.Unlock()
		return ErrClosed
	}
	d.wg.Add(1)
	w := d.holderWatches.add(name)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		defer d.holderWatches.remove(name, w)
		follow(w)
	}()
	return nil
}
