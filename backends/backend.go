package backends

import (
	"context"
	"time"
)

// Token is a fencing token: greater than zero, constant within one term,
// strictly increasing across the terms of one lease name. Protected resources
// accept a write only if its token is not lower than the highest they have
// accepted (F1).
//
// Tokens of one store come from one counter per store (a PostgreSQL sequence, a
// Redis counter, ZooKeeper's czxid), so they also increase across names; the
// engine relies only on the per-name order. On Redis they stay below 2^53.
type Token int64

// SessionID identifies one session instance and is never reused (S2):
// 128 random bits on PostgreSQL, Redis and the memory store; the ZooKeeper
// session id on ZooKeeper. The empty SessionID means "no session".
type SessionID string

// Backend opens sessions in one store. It is safe for concurrent use; several
// sessions opened from one Backend act as separate nodes.
//
// A Backend built from a client the caller already has (a *pgxpool.Pool, a
// redis.UniversalClient) never closes that client. Backends that own
// resources also implement io.Closer.
type Backend interface {
	// OpenSession opens a new session that the store expires opts.TTL after
	// its last renewal, recording opts.Identity with it. The store may grant
	// less than the TTL asked (ZooKeeper clamps it to its maxSessionTimeout;
	// a store with an amnesia guard clamps it to its configured maximum); the
	// reply says what was granted, measured by the store (C2). A TTL ≤ 0 or
	// an identity that breaks [ValidateIdentity] is an error.
	//
	// The context bounds the call; its cancellation after the store opened
	// the session may leave a session that expires on its own.
	OpenSession(ctx context.Context, opts SessionOptions) (Session, Renewal, error)
}

// SessionOptions are the arguments of [Backend.OpenSession].
type SessionOptions struct {
	// TTL is how long the store keeps the session after its last renewal.
	TTL time.Duration

	// Identity names the node that owns the session, for people: a host and
	// process, a pod name. The store records it with the session and reports
	// it as the holder of the session's leases ([Session.Holder],
	// [HeldError], [Inspector]). It need not be unique; the session id is.
	// Empty means none. See [ValidateIdentity].
	Identity string
}

// Session is one node's session in a store. Its methods are safe for
// concurrent use, and each is one round trip to the store unless its
// documentation says otherwise. Every method takes a context that bounds the
// call (the engine sets a deadline of one renewal period, D2); a call
// whose context ends returns an error wrapping the context's error.
//
// Every method of a session that expired, was closed or that the store no
// longer knows returns an error wrapping [ErrSessionExpired].
type Session interface {
	// ID returns the session's id. It makes no call to the store.
	ID() SessionID

	// KeepAlive renews the session: the store extends its expiry to the
	// granted time to live from the moment it handles the call. The reply
	// carries the remaining time as the store measured it, the store's time
	// where it has a clock, and the digest of what the session owns. Its cost
	// must not grow with the number of leases held.
	KeepAlive(ctx context.Context) (Renewal, error)

	// Owned returns every lease the session holds, sorted by name, with the
	// digest as of the same instant. The engine calls it only when a
	// KeepAlive digest differs from the one it expects.
	Owned(ctx context.Context) ([]Held, Digest, error)

	// Acquire takes the lease name for this session if it is free, with a new
	// token greater than every token ever issued for that name. If this
	// session already holds it, Acquire is idempotent and returns the same
	// token. If another live session holds it, it returns a *[HeldError]
	// (which wraps [ErrLeaseHeld]) describing the holder; if the store is
	// within its amnesia guard (§15), a *[RecoveringError] (which matches
	// [ErrRecovering] and [ErrLeaseHeld]) saying until when. The grant carries the value last stored with
	// [Session.PutValue] for this name, by any session, and the session's
	// digest right after the acquisition.
	Acquire(ctx context.Context, name string) (Grant, error)

	// Release gives up the lease name if, and only if, this session holds it
	// with this token; otherwise it does nothing (T5). It returns the
	// session's digest right after the call. A release wakes the watchers
	// of the name (see [Notifier]) of other sessions.
	Release(ctx context.Context, name string, token Token) (Digest, error)

	// Holder returns who holds the lease name, as of one instant: the
	// zero Holder if it is free. Any session may ask about any name; a
	// lease held by a session that has expired counts as free.
	Holder(ctx context.Context, name string) (Holder, error)

	// PutValue stores a small value beside the lease record of name. It
	// succeeds only if this session holds name with this token, and returns
	// an error wrapping [ErrNotHolder] otherwise. The value outlives the term
	// and is returned by the next [Session.Acquire] of the name, by any
	// session; it is at most [MaxValueSize] bytes ([ErrValueTooLarge]).
	PutValue(ctx context.Context, name string, token Token, value []byte) error

	// Join makes this session a member of group, a set of partitions whose
	// partition i is the lease [PartitionName](group, i). The group's
	// partition count is recorded by the first join while the group has no
	// members; a join with a different count returns an error wrapping
	// [ErrGroupMismatch]. Joining twice is idempotent. Membership dies with
	// the session.
	Join(ctx context.Context, group string, partitions int) error

	// Leave ends this session's membership of group. Leases it holds are not
	// released. Leaving a group one is not a member of does nothing.
	Leave(ctx context.Context, group string) error

	// Members returns the group's members and the holder of each of its
	// partitions, as of one instant. Members of expired sessions are not
	// listed, and partitions held by expired sessions show as free. For a
	// group without members it returns a view with no members and zero
	// partitions.
	Members(ctx context.Context, group string) (GroupView, error)

	// Close ends the session at once: the store releases every lease it holds
	// and ends its memberships (S4), waking watchers. Closing a session
	// that has already ended returns nil. After Close, other methods return
	// errors wrapping [ErrSessionExpired].
	Close(ctx context.Context) error
}

// Renewal is the reply to [Backend.OpenSession] and [Session.KeepAlive].
type Renewal struct {
	// Remaining is the session's time to live as the store measured it when
	// it handled the call. It is a duration, never a point in time: the
	// engine turns it into a deadline on its own monotonic clock (D1).
	Remaining time.Duration

	// StoreTime is the store's wall clock when it handled the call, or the
	// zero Time if the store has no clock.
	StoreTime time.Time

	// Digest summarises what the session owns.
	Digest Digest
}

// Digest summarises what a session owns, so that a keep-alive need not list
// it. Two digests are equal if and only if nothing the engine tracks changed
// between them; the engine compares them with ==.
type Digest struct {
	// Leases is the number of leases the session holds.
	Leases int

	// Version increases by exactly one with each change of the set of
	// leases the session holds (one lease acquired or released), whoever
	// made it, and never otherwise. The engine uses it to tell its own
	// change, reported in the reply to [Session.Acquire] or
	// [Session.Release], from one it did not make.
	Version uint64

	// Groups changes whenever the members of a group the session has joined
	// change (a join, a leave, a member's session ending) or a partition of
	// such a group changes holder. It is only compared for equality.
	Groups uint64
}

// Held is one lease a session holds, as listed by [Session.Owned].
type Held struct {
	Name  string // the lease name
	Token Token  // the token of the session's term
}

// Grant is the reply to a successful [Session.Acquire].
type Grant struct {
	// Token is the term's fencing token.
	Token Token

	// Value is the value last stored for this lease name with
	// [Session.PutValue], or nil if none was ever stored.
	Value []byte

	// Digest is the session's digest right after the acquisition.
	Digest Digest
}

// Holder describes the holder of a lease, as reported by [Session.Holder]
// and [HeldError]. The zero Holder means the lease is free.
type Holder struct {
	// Session is the holding session's id, or "" if the lease is free.
	Session SessionID

	// Identity is the identity the holding session was opened with
	// ([SessionOptions.Identity]), or "" if none.
	Identity string

	// Token is the holder's fencing token.
	Token Token

	// Remaining is how long the holding session has left unless it is
	// renewed, as the store measured it when it handled the call; 0 if the
	// store does not measure it (ZooKeeper). A candidate may try again at
	// that moment instead of waiting for its next attempt.
	Remaining time.Duration
}

// Free reports whether h describes a free lease.
func (h Holder) Free() bool { return h.Session == "" }

// GroupView is the reply to [Session.Members].
type GroupView struct {
	// Partitions is the group's partition count, 0 if it has no members.
	Partitions int

	// Members are the live members' session ids, sorted.
	Members []SessionID

	// Holders has one entry per partition: the id of the session holding
	// partition i, or "" if it is free.
	Holders []SessionID
}

// MaxValueSize is the largest value [Session.PutValue] accepts, in bytes.
const MaxValueSize = 4096
