package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime"
)

// simbaConfig is the runtime's configuration in every simba row: the common
// 2 s lease, and what it derives from it (renewal every 667 ms, candidates
// retrying every 333–667 ms, a 50 ms margin… see runtime.ConfigFor).
var simbaConfig = runtime.Config{LeaseDuration: Lease}

// simbaStore is what a simba row needs of its store: a backend per node, in
// the target's namespace, whose connections go through the node's path.
type simbaStore struct {
	framing Framing

	// newBackend opens one node's backend (with its own driver client or
	// connection) through net; done closes both.
	newBackend func(ctx context.Context, net *NodeNet) (b backends.Backend, done func(), err error)

	// raw is the store's raw pair, on a connection of its own.
	raw func(ctx context.Context) (func(ctx context.Context) error, func(), error)

	// renewalFromTraffic: the store keeps the session alive on any traffic
	// of the connection (ZooKeeper: the driver pings, the server resets the
	// session's timer on every packet), so the last renewal is the node's
	// last reply from the store, not the engine's last keep-alive.
	renewalFromTraffic bool

	cleanup func() error
	addr    string // Redis only: the server whose INFO counters are read
}

// simbaTarget runs the runtime (Lock and Unlock, or StartElection and Stop)
// on one of our backends.
type simbaTarget struct {
	s        simbaStore
	election bool
}

// simbaRedisTarget is a simbaTarget on Redis, whose INFO counters the
// harness reads.
type simbaRedisTarget struct{ *simbaTarget }

func (t simbaRedisTarget) redisAddr() string { return t.s.addr }

func newSimbaTarget(s simbaStore, election bool) Target {
	t := &simbaTarget{s: s, election: election}
	if s.addr != "" {
		return simbaRedisTarget{t}
	}
	return t
}

func (t *simbaTarget) Framing() Framing { return t.s.framing }

func (t *simbaTarget) Raw(ctx context.Context) (func(ctx context.Context) error, func(), error) {
	return t.s.raw(ctx)
}

func (t *simbaTarget) Close() error {
	if t.s.cleanup == nil {
		return nil
	}
	return t.s.cleanup()
}

func (t *simbaTarget) NewNode(ctx context.Context, net *NodeNet) (Node, error) {
	b, done, err := t.s.newBackend(ctx, net)
	if err != nil {
		return nil, err
	}
	n := &simbaNode{done: done, election: t.election}
	if t.s.renewalFromTraffic {
		n.net = net
	}
	// The renewal time is taken when the observer sees the event, a
	// goroutine hop after the reply arrived.
	observe := runtime.ObserverFunc(func(e runtime.Event) {
		if e.Kind == runtime.EventSessionRenewed || e.Kind == runtime.EventSessionOpened {
			n.renewed.Store(time.Now().UnixNano())
		}
	})
	c, err := runtime.NewClient(b, simbaConfig, runtime.WithObserver(observe))
	if err != nil {
		done()
		return nil, err
	}
	n.c = c
	rctx, cancel := context.WithTimeout(ctx, callWithin)
	defer cancel()
	if err := c.Ready(rctx); err != nil {
		n.Close(ctx)
		return nil, err
	}
	return n, nil
}

// simbaNode is one runtime.Client on a backend of its own.
type simbaNode struct {
	c        *runtime.Client
	done     func()
	election bool
	net      *NodeNet // set when the last renewal is the last reply
	renewed  atomic.Int64
}

func (n *simbaNode) Acquire(ctx context.Context, name string) (Held, error) {
	if !n.election {
		t, err := n.c.Lock(ctx, name)
		if err != nil {
			return nil, err
		}
		return simbaLock{n.c, t}, nil
	}
	elected := make(chan *runtime.Term, 1)
	e, err := n.c.StartElection(name, runtime.ListenerFuncs{
		OnElected: func(_ context.Context, t *runtime.Term) {
			select {
			case elected <- t:
			default:
			}
		},
	})
	if err != nil {
		return nil, err
	}
	select {
	case <-elected:
		return simbaLeader{e}, nil
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callWithin)
		defer cancel()
		return nil, errors.Join(ctx.Err(), e.Stop(sctx))
	}
}

func (n *simbaNode) LastRenewal() time.Time {
	if n.net != nil {
		return n.net.LastReply()
	}
	ns := n.renewed.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func (n *simbaNode) RenewalPeriod() time.Duration { return n.c.Config().RenewInterval }

func (n *simbaNode) Close(ctx context.Context) error {
	err := n.c.Close(ctx)
	n.done()
	return err
}

// simbaLock is a term taken with Lock.
type simbaLock struct {
	c *runtime.Client
	t *runtime.Term
}

func (l simbaLock) Release(ctx context.Context) error { return l.c.Unlock(ctx, l.t) }

// simbaLeader is an election that won a term; releasing it stops the
// election (the lease is handed over in the hand-off order, H1).
type simbaLeader struct{ e *runtime.Election }

func (l simbaLeader) Release(ctx context.Context) error { return l.e.Stop(ctx) }
