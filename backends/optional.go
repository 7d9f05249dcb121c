package backends

import (
	"context"
	"time"
)

// Notifier is implemented by sessions whose store broadcasts releases (Redis
// publishes them, ZooKeeper watches the lease node, PostgreSQL uses
// LISTEN/NOTIFY, the memory store calls back directly). Candidates use it to
// take over at once when a holder stops gracefully, instead of waiting for
// their next attempt (SPEC A1).
type Notifier interface {
	// Watch calls fn each time the lease name may have become free: it was
	// released, or its holder's session was closed or, where the store
	// notices it, expired. Calls may be spurious (a reconnect, a release of a
	// name the watcher already held); they are hints to try again, never
	// proof that the lease is free. fn must return quickly and must not call
	// the session. Watch itself must not block on the store for long; a
	// watch that the store cannot set up yet may start late.
	//
	// The returned function stops the watch; after it returns, fn is not
	// called again. It may be called more than once, but not from fn (it
	// waits for a call of fn in progress).
	Watch(name string, fn func()) (stop func())
}

// StoreClock is implemented by backends whose store has a clock that all
// nodes share (PostgreSQL's now(), Redis's TIME, ZooKeeper's mtime, the memory
// store's clock). Schedules number their slots on this clock, never on a
// node's, and refuse to start on a backend without one (SPEC §13).
//
// The renewal replies of such a backend carry [Renewal.StoreTime].
type StoreClock interface {
	// StoreTime returns the store's wall clock, read in one round trip.
	StoreTime(ctx context.Context) (time.Time, error)
}
