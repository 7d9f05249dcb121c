package runtime

import "context"

// What user code the engine calls looks like: an election's [Listener],
// the [TaskFunc] of an election or schedule, and the [PartitionFunc] of a
// group.

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

// TaskFunc is work an election runs while this node holds the lease: it is
// called once per term with the term's context (cancelled when the term ends,
// with the reason as cause) and the term.
type TaskFunc func(ctx context.Context, t *Term) error

// PartitionFunc is the work of one partition of a group: it gets the
// partition's term (its own token) and index.
type PartitionFunc func(ctx context.Context, t *Term, partition int) error
