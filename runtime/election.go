package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// ErrStopped reports a call on an election that was stopped.
var ErrStopped = errors.New("election stopped")

// Listener receives an election's callbacks. They run one at a time, in
// order, never while the engine holds a lock, and every Elected is followed
// by exactly one Revoked for the same term (L1, L2). The engine does not
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
type ElectionOption func(*electionOptions)

type electionOptions struct {
	task            TaskFunc
	taskEndCooldown time.Duration
}

// TaskFunc is work an election runs while this node holds the lease: it is
// called once per term with the term's context (cancelled when the term ends,
// with the reason as cause) and the term.
type TaskFunc func(ctx context.Context, t *Term) error

// WithTask runs task once per term while this node holds the lease, on a
// goroutine of its own, with a context cancelled when the term ends. Stop and
// StepDown wait for it to return before releasing the lease — at most until
// the term's validity at that moment runs out (H1, H2). If it returns
// while the term is still valid, the election steps down for the task-end
// cooldown (see [WithTaskEndCooldown]). A returned error or a panic is
// reported to the log and the observer.
func WithTask(task TaskFunc) ElectionOption { return func(o *electionOptions) { o.task = task } }

// WithTaskEndCooldown sets how long an election sits out after its task
// returned while its term was still valid. The default is RenewInterval.
func WithTaskEndCooldown(d time.Duration) ElectionOption {
	return func(o *electionOptions) { o.taskEndCooldown = d }
}

// Election is a named election started on a client. Create it with
// [Client.StartElection].
type Election struct {
	client *Client
	id     engine.ContenderID
	name   string
}

// StartElection makes this node a candidate for the lease name: it tries to
// acquire it every RenewInterval/2 plus jitter, and at once when a backend
// that broadcasts releases reports one (A1). l (which may be nil)
// receives the elected and revoked callbacks. A name can be started only once
// per client, across elections and locks ([ErrNameInUse], L4, L8).
func (c *Client) StartElection(name string, l Listener, opts ...ElectionOption) (*Election, error) {
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: start election: %w", err)
	}
	o := electionOptions{taskEndCooldown: c.cfg.RenewInterval}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.taskEndCooldown < 0 {
		return nil, &ConfigError{Field: "WithTaskEndCooldown", Value: o.taskEndCooldown.String(), Want: ">= 0"}
	}
	var st *started // none for an election without listener or task (see started)
	if l != nil || o.task != nil {
		st = &started{listener: l, task: o.task}
	}
	if l != nil {
		st.queue = newSerialQueue(c.exec)
	}
	in := engine.Start{Name: name, Kind: engine.KindElection, Listener: l != nil, Task: o.task != nil,
		TaskEndCooldown: o.taskEndCooldown}
	return c.startContender("start election", in, st)
}

// startContender starts in with the driver's half st; op names the call in
// errors.
func (c *Client) startContender(op string, in engine.Start, st *started) (*Election, error) {
	var err error
	c.apply(func(now mono) {
		in.ID = engine.ContenderID(c.newID())
		if st != nil {
			c.contenders[in.ID] = st
		}
		if err = c.m.Step(now, in); err != nil {
			delete(c.contenders, in.ID)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("simba: %s %q: %w", op, in.Name, err)
	}
	return &Election{client: c, id: in.ID, name: in.Name}, nil
}

// Name returns the lease name.
func (e *Election) Name() string { return e.name }

// Term returns the term this node currently holds, or nil.
func (e *Election) Term() *Term {
	e.client.mu.Lock()
	defer e.client.mu.Unlock()
	if id, ok := e.client.m.LeaderTerm(e.id); ok {
		return e.client.terms[id]
	}
	return nil
}

// Stop ends the election with the hand-off order (H1): the term is
// revoked, its task cancelled and awaited (at most until the validity the
// term had left), the lease released with its token, the revoked callback
// delivered; then Stop returns, and the listener gets no more callbacks (L3).
// ctx bounds only the wait, never the order. Called from inside a callback
// or task, Stop queues the request and returns nil (L5). Stopping a stopped
// election returns nil.
func (e *Election) Stop(ctx context.Context) error {
	return e.client.stop(ctx, e.id, false, 0)
}

// StepDown hands the lease over like Stop, but keeps the election started: it
// contends again cooldown after the moment it stepped down (H4). Use it
// to move leadership away before a deploy or to drain a node.
func (e *Election) StepDown(ctx context.Context, cooldown time.Duration) error {
	if cooldown < 0 {
		return &ConfigError{Field: "cooldown", Value: cooldown.String(), Want: ">= 0"}
	}
	e.client.mu.Lock()
	stopped := e.client.m.Stopped(e.id)
	e.client.mu.Unlock()
	if stopped {
		return fmt.Errorf("simba: step down %q: %w", e.name, ErrStopped)
	}
	return e.client.stop(ctx, e.id, true, cooldown)
}

func (c *Client) stop(ctx context.Context, id engine.ContenderID, stepDown bool, cooldown time.Duration) error {
	return c.await(ctx, func(w engine.Waiter) engine.Input {
		return engine.Stop{ID: id, StepDown: stepDown, Cooldown: cooldown, Waiter: w}
	})
}

// RunWhileLeader runs fn each time this node is elected for name, with the
// term, until ctx ends; then it stops the election with the hand-off order
// and returns nil (§13). fn's context is cancelled when the term ends. If
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
