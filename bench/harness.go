package bench

import (
	"context"
	"errors"
	"time"
)

// Lease is the lease (time to live, session timeout) every implementation
// runs with.
const Lease = 2 * time.Second

// Impl is one row of the table: a lock or election library on one store,
// with the configuration its row is measured with.
type Impl struct {
	// Name is the row's label, as in "simba Lock" or "redislock".
	Name string

	// Store names the store, as in "Redis".
	Store string

	// Config says, in one line, how the row is configured and why.
	Config string

	// Open connects to the store for one measurement. It fails with an
	// error wrapping [ErrUnavailable] when the store is not there.
	Open func(ctx context.Context, env *Env) (Target, error)
}

// ErrUnavailable marks a row that cannot run here: its store does not
// answer, or a program it needs is missing. The table shows the reason.
var ErrUnavailable = errors.New("not available")

// Target is an implementation connected to its store, in a namespace of its
// own (a key prefix, a path), for one measurement.
type Target interface {
	// Framing is how the harness counts the requests of the target's nodes
	// on the wire.
	Framing() Framing

	// NewNode starts a node whose every connection goes through net: its
	// own clients, connections and session, as a separate process would
	// have.
	NewNode(ctx context.Context, net *NodeNet) (Node, error)

	// Raw returns the baseline of the acquire+release rows: two bare round
	// trips of the same store on a connection of its own, the least an
	// acquire and a release can cost (see the package doc).
	Raw(ctx context.Context) (raw func(ctx context.Context) error, closeRaw func(), err error)

	// Close removes what the target wrote (keys, nodes) and closes its
	// connections. Its nodes are closed first.
	Close() error
}

// Node is one node of an implementation: a client holding leases.
type Node interface {
	// Acquire waits until the node holds name, or ctx ends. ctx always has a
	// deadline.
	Acquire(ctx context.Context, name string) (Held, error)

	// LastRenewal returns when the node last renewed what it holds (a
	// successful renewal's reply, as the node saw it), or the zero Time.
	LastRenewal() time.Time

	// RenewalPeriod returns how often the node renews what it holds, when
	// the configuration fixes it; 0 when the library decides (the node
	// then implements [renewalCounter]).
	RenewalPeriod() time.Duration

	// Close releases what the node holds and closes its connections. After
	// a crash (its NodeNet blackholed, then cut) it must return within
	// ctx's deadline, whatever it could not release.
	Close(ctx context.Context) error
}

// renewalCounter is implemented by nodes whose library chooses its renewal
// cadence: the harness derives the period from the renewals counted over a
// window.
type renewalCounter interface {
	// Renewals returns how many renewals the node has sent so far.
	Renewals() int64
}

// Held is a lease (a lock, a leadership) a node holds.
type Held interface {
	// Release gives it up, so that a waiting node gets it.
	Release(ctx context.Context) error
}
