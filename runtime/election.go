package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// ElectionOption configures an election.
type ElectionOption func(*electionOptions)

type electionOptions struct {
	task            TaskFunc
	taskEndCooldown time.Duration
	acceptHandOver  bool
	acceptRequests  bool
}

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
	handle
	client *Client // for HandOver's read of the successor's lease
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
	if err := checkCooldown("WithTaskEndCooldown", o.taskEndCooldown); err != nil {
		return nil, err
	}
	var st *started // none for an election without listener or task (see started)
	if l != nil || o.task != nil {
		st = &started{listener: l, task: o.task}
	}
	if l != nil {
		st.queue = newSerialQueue(c.d.exec)
	}
	in := engine.Start{Name: name, Kind: engine.KindElection, Listener: l != nil, Task: o.task != nil,
		TaskEndCooldown: o.taskEndCooldown}
	var successor string
	if o.acceptHandOver {
		successor = SuccessorName(name, c.identity)
		if err := backends.ValidateName(successor); err != nil {
			return nil, fmt.Errorf("simba: start election %q accepting a hand-over: its successor lease: %w", name, err)
		}
	}
	if o.acceptRequests {
		if err := backends.ValidateName(HandOverRequestName(name)); err != nil {
			return nil, fmt.Errorf("simba: start election %q accepting hand-over requests: its request lease: %w", name, err)
		}
	}
	id, err := c.d.start(in, st)
	if err != nil {
		return nil, fmt.Errorf("simba: start election %q: %w", name, err)
	}
	e := &Election{handle: handle{d: c.d, name: name, id: id}, client: c}
	if successor != "" {
		if err := c.startSuccessor(id, successor); err != nil {
			e.stop(context.Background())
			return nil, fmt.Errorf("simba: start election %q accepting a hand-over: %w", name, err)
		}
	}
	if o.acceptRequests {
		if err := c.followRequests(e); err != nil {
			e.Stop(context.Background())
			return nil, fmt.Errorf("simba: start election %q accepting hand-over requests: %w", name, err)
		}
	}
	return e, nil
}

// Name returns the lease name.
func (e *Election) Name() string { return e.name }

// Term returns the term this node currently holds, or nil. For an
// election with neither listener nor task, the client makes the term's
// record when Term first asks for it, and returns that one record until
// the term ends: a client leading a million such elections keeps no
// record of terms nobody looks at (388 B per held lease at 100,000, 476 B
// at 1,000,000, client and memory store together; BenchmarkHeldLeases).
func (e *Election) Term() *Term { return e.term() }

// Stop ends the election with the hand-off order (H1): the term is
// revoked, its task cancelled and awaited (at most until the validity the
// term had left), the lease released with its token, the revoked callback
// delivered; then Stop returns, and the listener gets no more callbacks (L3).
// ctx bounds only the wait, never the order. Called from inside a callback
// or task, Stop queues the request and returns nil (L5). Stopping a stopped
// election returns nil.
func (e *Election) Stop(ctx context.Context) error {
	e.d.stopRequests(e.id)
	if err := e.d.stopSuccessor(ctx, e.id); err != nil {
		return err
	}
	return e.stop(ctx)
}

// StepDown hands the lease over like Stop, but keeps the election started: it
// contends again cooldown after the moment it stepped down (H4). Use it
// to move leadership away before a deploy or to drain a node.
func (e *Election) StepDown(ctx context.Context, cooldown time.Duration) error {
	return e.stepDown(ctx, cooldown)
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
		return fmt.Errorf("simba: RunWhileLeader: nil function: %w", ErrNilArgument)
	}
	if err := checkContext("RunWhileLeader", ctx); err != nil {
		return err
	}
	e, err := c.StartElection(name, nil, append(opts, WithTask(fn))...)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return e.Stop(context.WithoutCancel(ctx))
	case <-c.d.quit:
		return fmt.Errorf("simba: run while leader %q: %w", name, ErrClosed)
	}
}
