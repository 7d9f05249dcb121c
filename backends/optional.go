package backends

import (
	"context"
	"time"
)

// Notifier is implemented by sessions whose store broadcasts releases (Redis
// publishes them, ZooKeeper watches the lease node, PostgreSQL uses
// LISTEN/NOTIFY, the memory store calls back directly). Candidates use it to
// take over at once when a holder stops gracefully, instead of waiting for
// their next attempt (A1).
type Notifier interface {
	// Watch calls fn each time the lease name may have become free: it was
	// released, or its holder's session was closed or, where the store
	// notices it, expired. A store may limit the calls to sessions that
	// were refused the name (an Acquire that failed with ErrLeaseHeld)
	// since its last release, and to a few of them, so that a release costs
	// the same however many nodes wait — a candidate always tries before it
	// waits, and tries again on its own schedule. Calls may be spurious (a
	// reconnect, a release of a name the watcher already held); they are
	// hints to try again, never proof that the lease is free. fn must
	// return quickly and must not call the session. Watch itself must not
	// block on the store for long; a watch that the store cannot set up yet
	// may start late.
	//
	// The returned function stops the watch; after it returns, fn is not
	// called again. It may be called more than once, but not from fn (it
	// waits for a call of fn in progress). A nil fn watches nothing: Watch
	// returns a stop that does nothing.
	Watch(name string, fn func()) (stop func())
}

// HolderNotifier is implemented by sessions whose store tells each change
// of a lease's holder as it happens (the memory store; Redis by pub/sub and
// PostgreSQL by NOTIFY, for names a session of the backend watches), so
// that a watcher (the runtime's WatchHolder) sees every holder, short holds
// included, in order; a [Notifier] only hints that a lease may have become
// free, and the watcher then reads the holder, missing holds shorter than a
// read.
type HolderNotifier interface {
	// WatchHolder calls fn with each change of the holder of name, in the
	// order the store made them: after a grant, the new holder (Session,
	// Identity, Token and Remaining); after a release, or the end of the
	// holder's session, a Holder with no Session and the Token of the term
	// that ended. Changes made before WatchHolder returned may or may not
	// be told, and a store whose messages travel over a connection may
	// start telling a little later (it then reads the holder once and tells
	// it). Where messages can be lost (a subscription that reconnects), the
	// store reads the holder again and tells it: a gap, never a change
	// older than one told (a grant's Token is larger than every Token told
	// before; an end's is the last grant's, or larger where the grant was
	// missed). fn must return quickly and must not call the session; calls
	// of one watch never overlap. The returned function stops the watch;
	// after it returns, fn is not called again. A nil fn watches nothing.
	// A store that cannot deliver messages at all (PostgreSQL behind a
	// pooler in transaction mode, or with notifications off) never calls
	// fn: the watcher reads the holder on its own schedule.
	WatchHolder(name string, fn func(Holder)) (stop func())
}

// StoreClock is implemented by backends whose store has a clock that all
// nodes share (PostgreSQL's now(), Redis's TIME, ZooKeeper's mtime, the memory
// store's clock). Schedules number their slots on this clock, never on a
// node's, and refuse to start on a backend without one (§13).
//
// The renewal replies of such a backend carry [Renewal.StoreTime].
type StoreClock interface {
	// StoreTime returns the store's wall clock, read in one round trip.
	StoreTime(ctx context.Context) (time.Time, error)
}

// Inspector is implemented by backends that can list what their store holds,
// for status tools such as the simba command. It is read-only: it opens no
// session and changes nothing. It is not for the engine, and its cost may
// grow with what the store holds (it reads in bounded pages where the store
// allows, so that no single read blocks the store for long).
type Inspector interface {
	// Inspect returns the sessions, held leases and groups of the store,
	// each sorted by id or name. The lists are read close together but need
	// not be one snapshot: a lease may name a session that ended between
	// the reads.
	Inspect(ctx context.Context) (Inventory, error)
}

// Inventory is the reply to [Inspector.Inspect].
type Inventory struct {
	// StoreTime is the store's clock when it was read, or the zero Time if
	// the store has none.
	StoreTime time.Time

	// Sessions are the live sessions, sorted by id.
	Sessions []SessionInfo

	// Leases are the held leases, sorted by name.
	Leases []LeaseInfo

	// Groups are the groups with members, sorted by name.
	Groups []GroupInfo

	// Recovering is set while the store's amnesia guard refuses every
	// grant (§15), as an acquire would be refused then; nil when it grants,
	// and where the backend cannot tell without writing. Memory, Redis,
	// PostgreSQL (with the MaxLease the backend was opened with), ZooKeeper
	// (measured on this host's clock when read-only) and etcd tell; a
	// Redis namespace nobody has used since a restart starts its guard at
	// the first call, which Inspect does not make.
	Recovering *RecoveringError
}

// SessionInfo describes one live session in an [Inventory].
type SessionInfo struct {
	ID       SessionID
	Identity string // as given to OpenSession

	// Remaining is the session's time left unless renewed, as the store
	// measured it; 0 if the store does not measure it (ZooKeeper).
	Remaining time.Duration

	// Leases is the number of leases the session holds.
	Leases int
}

// LeaseInfo describes one held lease in an [Inventory].
type LeaseInfo struct {
	Name     string
	Session  SessionID // the holder
	Identity string    // the holder's identity
	Token    Token

	// Value is the value stored with [Session.PutValue] for the name, or
	// nil (a schedule records its last completed slot there).
	Value []byte
}

// GroupInfo describes one group with members in an [Inventory].
type GroupInfo struct {
	Name       string
	Partitions int
	Members    []SessionID // sorted
}

// BatchSession is implemented by sessions that can acquire, or release, many
// leases in one call to the store (one Redis round trip, one PostgreSQL
// statement), so that a client starting or stopping many elections at once
// pays a round trip and a commit per batch rather than per lease. The
// runtime groups the acquires and the releases it has to make at one time
// for one session into batches when its session implements it, and feeds
// each result back as the reply to its own call.
//
// Each name's result is what [Session.Acquire] or [Session.Release] would
// have returned for it had the names been handled by so many calls one
// after the other, in the order given, with nothing else between them
// that the batch did not see: the same errors (a *[HeldError], a
// *[RecoveringError], ErrSessionExpired), tokens strictly increasing per
// name, the idempotent grant of a name the session already holds (a name
// given twice is granted once, with one token), and the digest right after
// that name's own change. A batch need not be atomic: another session's
// call may come between two of its names.
type BatchSession interface {
	// AcquireBatch acquires each of names, in order, as [Session.Acquire]
	// does. It returns one result per name, or an error if the call failed
	// as a whole (the context ended, the store could not be reached, the
	// session expired): then each name may or may not have been acquired,
	// as after an Acquire that failed so, and the caller treats each as
	// failed with that error. An empty names makes no call.
	AcquireBatch(ctx context.Context, names []string) ([]AcquireResult, error)

	// ReleaseBatch releases each lease of leases, in order, as
	// [Session.Release] does: a lease this session does not hold with that
	// token is left alone. It returns one result per lease, or an error if
	// the call failed as a whole, as AcquireBatch does.
	ReleaseBatch(ctx context.Context, leases []Held) ([]ReleaseResult, error)
}

// AcquireResult is one name's result of [BatchSession.AcquireBatch]: its
// grant, or the error Acquire would have returned (Grant is then zero).
type AcquireResult struct {
	Grant Grant
	Err   error
}

// ReleaseResult is one lease's result of [BatchSession.ReleaseBatch]: the
// session's digest right after its release, or the error Release would have
// returned.
type ReleaseResult struct {
	Digest Digest
	Err    error
}
