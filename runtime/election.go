package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
)

// ErrStopped reports a call on an election that was stopped.
var ErrStopped = errors.New("election stopped")

// Listener receives an election's callbacks. They run one at a time, in
// order, never while the engine holds a lock, and every Elected is followed
// by exactly one Revoked for the same term (SPEC L1, L2). The engine does not
// wait for them, except that Stop and StepDown return after the last Revoked
// has run (L3).
//
// An Elected callback may arrive for a term that has already ended, for
// example when the client was closed just after winning: check
// [Term.Valid] or the context before starting work. Such a term still gets
// its Revoked callback, after Elected, so the two stay paired (L1).
//
// The context passed to a callback marks it as running inside the engine:
// Stop, StepDown or Close called with it (or a context derived from it) does
// not wait for the callback to return, which would deadlock, but queues the
// request and returns nil (L5). In Elected it is cancelled when the term
// ends.
//
// A panic in a callback is recovered and reported (L7).
type Listener interface {
	// Elected is called when this node wins the lease with term t.
	Elected(ctx context.Context, t *Term)
	// Revoked is called when term t has ended for reason r.
	Revoked(ctx context.Context, t *Term, r Reason)
}

// ListenerFuncs adapts a pair of functions to [Listener]; nil fields are
// skipped.
type ListenerFuncs struct {
	// OnElected is called as [Listener.Elected]: this node won the lease
	// with term t.
	OnElected func(ctx context.Context, t *Term)
	// OnRevoked is called as [Listener.Revoked]: term t ended for reason r.
	OnRevoked func(ctx context.Context, t *Term, r Reason)
}

// Elected calls OnElected, if set.
func (l ListenerFuncs) Elected(ctx context.Context, t *Term) {
	if l.OnElected != nil {
		l.OnElected(ctx, t)
	}
}

// Revoked calls OnRevoked, if set.
func (l ListenerFuncs) Revoked(ctx context.Context, t *Term, r Reason) {
	if l.OnRevoked != nil {
		l.OnRevoked(ctx, t, r)
	}
}

// ElectionOption configures an election.
type ElectionOption func(*contender)

// WithTask runs task once per term while this node holds the lease, on a
// goroutine of its own, with a context cancelled when the term ends. Stop and
// StepDown wait for it to return before releasing the lease — at most until
// the term's validity at that moment runs out (SPEC H1, H2). If it returns
// while the term is still valid, the election steps down for the task-end
// cooldown (see [WithTaskEndCooldown]). A returned error or a panic is
// reported to the log and the observer.
func WithTask(task TaskFunc) ElectionOption { return func(c *contender) { c.task = task } }

// WithTaskEndCooldown sets how long an election sits out after its task
// returned while its term was still valid. The default is RenewInterval.
func WithTaskEndCooldown(d time.Duration) ElectionOption {
	return func(c *contender) { c.taskEndCooldown = d }
}

// Election is a named election started on a client. Create it with
// [Client.StartElection].
type Election struct {
	client *Client
	c      *contender
}

// StartElection makes this node a candidate for the lease name: it tries to
// acquire it every RenewInterval/2 plus jitter, and at once when a backend
// that broadcasts releases reports one (SPEC A1). l (which may be nil)
// receives the elected and revoked callbacks. A name can be started only once
// per client, across elections and locks ([ErrNameInUse], L4, L8).
func (c *Client) StartElection(name string, l Listener, opts ...ElectionOption) (*Election, error) {
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: start election: %w", err)
	}
	ct := &contender{name: name, cat: catElection, listener: l, taskEndCooldown: c.cfg.RenewInterval}
	for _, opt := range opts {
		if opt != nil {
			opt(ct)
		}
	}
	if ct.taskEndCooldown < 0 {
		return nil, &ConfigError{"WithTaskEndCooldown", ct.taskEndCooldown.String(), ">= 0"}
	}
	if l != nil {
		ct.queue = newSerialQueue(c.exec)
	}
	return c.startContender("start election", ct)
}

// startContender starts ct; op names the call in errors.
func (c *Client) startContender(op string, ct *contender) (*Election, error) {
	var err error
	c.apply(func(now mono) { err = c.m.start(now, ct) })
	if err != nil {
		return nil, fmt.Errorf("simba: %s %q: %w", op, ct.name, err)
	}
	return &Election{client: c, c: ct}, nil
}

// Name returns the lease name.
func (e *Election) Name() string { return e.c.name }

// Term returns the term this node currently holds, or nil.
func (e *Election) Term() *Term {
	e.client.mu.Lock()
	defer e.client.mu.Unlock()
	if e.c.phase == phLeader {
		return e.c.term
	}
	return nil
}

// Stop ends the election with the hand-off order (SPEC H1): the term is
// revoked, its task cancelled and awaited (at most until the validity the
// term had left), the lease released with its token, the revoked callback
// delivered; then Stop returns, and the listener gets no more callbacks (L3).
// ctx bounds only the wait, never the order. Called from inside a callback
// or task, Stop queues the request and returns nil (L5). Stopping a stopped
// election returns nil.
func (e *Election) Stop(ctx context.Context) error {
	return e.client.stop(ctx, e.c, false, 0)
}

// StepDown hands the lease over like Stop, but keeps the election started: it
// contends again cooldown after the moment it stepped down (SPEC H4). Use it
// to move leadership away before a deploy or to drain a node.
func (e *Election) StepDown(ctx context.Context, cooldown time.Duration) error {
	if cooldown < 0 {
		return &ConfigError{"cooldown", cooldown.String(), ">= 0"}
	}
	e.client.mu.Lock()
	stopped := e.c.removed || e.c.phase == phDone
	e.client.mu.Unlock()
	if stopped {
		return fmt.Errorf("simba: step down %q: %w", e.c.name, ErrStopped)
	}
	return e.client.stop(ctx, e.c, true, cooldown)
}

func (c *Client) stop(ctx context.Context, ct *contender, stepDown bool, cooldown time.Duration) error {
	return c.await(ctx, func(now mono, w waiter) { c.m.stopInput(now, ct, stepDown, cooldown, w) })
}

// RunWhileLeader runs fn each time this node is elected for name, with the
// term, until ctx ends; then it stops the election with the hand-off order
// and returns nil (SPEC §13). fn's context is cancelled when the term ends. If
// fn returns while the term is still valid, finished or failed, the node steps
// down for the task-end cooldown (RenewInterval unless [WithTaskEndCooldown]
// says otherwise), so that leadership never sits idle on a node whose task
// ended; a returned error or panic is reported to the log and the observer.
//
// It returns an error if the election cannot start (an invalid name, a name
// in use, a closed client), or one matching [ErrClosed] if the client is
// closed under it.
func (c *Client) RunWhileLeader(ctx context.Context, name string, fn TaskFunc, opts ...ElectionOption) error {
	if fn == nil {
		return errors.New("simba: RunWhileLeader: nil function")
	}
	e, err := c.StartElection(name, nil, append(opts, WithTask(fn))...)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return e.Stop(context.WithoutCancel(ctx))
	case <-c.quit:
		return fmt.Errorf("simba: run while leader %q: %w", name, ErrClosed)
	}
}

// dispatch queues one callback on the election's serial dispatcher.
func (c *Client) dispatch(ct *contender, t *Term, elected bool) {
	c.wg.Add(1)
	run := func() {
		defer c.wg.Done()
		if elected || !t.rejected.Load() {
			err := protect(func() error {
				if elected {
					ct.listener.Elected(context.WithValue(t.ctx, insideKey{}, c), t)
				} else {
					ct.listener.Revoked(context.WithValue(context.WithoutCancel(t.ctx), insideKey{}, c), t, t.Reason())
				}
				return nil
			})
			if err != nil {
				c.report(Event{Kind: EventCallbackPanicked, Name: t.name, Token: t.token, Err: err})
			}
		}
		c.apply(func(now mono) { c.m.callbackDone(now, ct) })
	}
	rejected := func(err error) {
		t.rejected.Store(true) // its revoked callback, if queued, is skipped
		go func() {
			defer c.wg.Done()
			c.apply(func(now mono) { c.m.dispatchFailed(now, ct, t, err) })
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
