package runtime

import (
	"context"
	"fmt"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// Lock acquires the lease name and returns its term, waiting until it is free
// or until ctx ends (then it returns an error that names the lease, says who
// held it, and wraps ctx's error). Release it with [Client.Unlock].
//
// It is a cluster-wide mutex that also serialises the goroutines of this
// client, as a sync.Mutex does: Locks of one name on one client take turns,
// first come, first served, one at a time, each turn a term of its own (a new
// token). Other nodes contend meanwhile as usual, so the next turn here
// starts once this client wins the lease again.
//
// The term ends early if the session is lost (H3): watch [Term.Done] and
// check [Term.EnsureValid] before each step. A lock is not retaken after it
// ends; the next Lock of the name on this client takes its turn at once.
//
// Lock, TryLock and Unlock make their acquire or release on the caller's
// goroutine when ctx has no end or a deadline no sooner than the call's own
// (one renewal period from its send, D2); a ctx that may end sooner — an
// earlier deadline, or a cancellation without a deadline — leaves the call
// to a goroutine of the client, so that they return as soon as ctx ends. A
// ctx with a later deadline that is cancelled early is noticed once the
// call in flight returns, within its timeout. With such a ctx, a Lock that
// waits also makes the later attempts itself, woken directly by the
// backend's release notification, so that a graceful hand-off to it wakes
// one goroutine, the caller's.
func (c *Client) Lock(ctx context.Context, name string) (*Term, error) {
	return c.lock(ctx, name, false)
}

// TryLock makes one attempt to acquire the lease name and returns its term,
// or an error matching [ErrLeaseHeld] if another node holds it — or another
// Lock of this client holds or awaits it, without waiting for its turn. It
// waits for the session to open, up to ctx's end.
func (c *Client) TryLock(ctx context.Context, name string) (*Term, error) {
	return c.lock(ctx, name, true)
}

func (c *Client) lock(ctx context.Context, name string, once bool) (*Term, error) {
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: lock: %w", err)
	}
	if err := checkContext("lock", ctx); err != nil {
		return nil, err
	}
	l, err := c.d.startLock(ctx, engine.Start{Name: name, Kind: engine.KindLock, TryOnce: once})
	if err != nil {
		return nil, fmt.Errorf("simba: lock %q: %w", name, err)
	}
	if t, err := c.d.waitLock(ctx, l); err == nil {
		return t, nil
	} else if ctx.Err() == nil {
		return nil, err // the lock's own failure
	}
	if refusal := c.d.abandonLock(ctx, l); refusal != nil {
		return nil, fmt.Errorf("simba: lock %q: %w; it was %v", name, ctx.Err(), refusal)
	}
	return nil, fmt.Errorf("simba: lock %q: %w", name, ctx.Err())
}

// Unlock releases the lock held with term t: the term is revoked, then the
// lease is released with its token (T5). It returns when the backend
// answered or ctx ended. Unlocking a term that already ended returns nil.
func (c *Client) Unlock(ctx context.Context, t *Term) error {
	if t == nil {
		return fmt.Errorf("simba: Unlock: nil term: %w", ErrNilArgument)
	}
	if err := checkContext("unlock", ctx); err != nil {
		return err
	}
	if t.owner != c.d {
		return fmt.Errorf("simba: unlock %v: %w", t, ErrNotOwner)
	}
	if !t.lock {
		return fmt.Errorf("simba: Unlock: %v is an election's term; stop the election instead", t)
	}
	return c.d.unlock(ctx, t)
}
