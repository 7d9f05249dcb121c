package backends

import (
	"errors"
	"strings"
	"time"
)

// Sentinel errors. Backends return them wrapped (fmt.Errorf("...: %w", ErrX))
// so that callers test them with errors.Is. Their messages state a fact
// without a package prefix: the error that wraps one starts with the prefix
// of the package that returns it ("simbaredis: acquire "x": session
// expired"), so that a message has one prefix. Any error that wraps none of them
// is treated by the engine as "the store could not be reached".
var (
	// ErrSessionExpired reports that the session expired, was closed, or is
	// unknown to the store (for example after the store lost its state). An
	// expired session never comes back (S3).
	ErrSessionExpired = errors.New("session expired")

	// ErrLeaseHeld reports that another live session holds the lease (the
	// error is then a *HeldError, which names the holder), or that the
	// store is within its amnesia guard and may not grant it yet (§15).
	ErrLeaseHeld = errors.New("lease held by another session")

	// ErrRecovering reports that the store lost its state (a restart
	// without persistence, an older snapshot, a fail-over) and grants no
	// lease until the longest lease it could have granted has passed (the
	// amnesia guard, §15). Errors matching it also match ErrLeaseHeld:
	// the lease may still be held by a session the store forgot. Backends
	// return it as a *RecoveringError, which says until when.
	ErrRecovering = errors.New("store recovering from a loss of state")

	// ErrNotHolder reports a write by a session that does not hold the lease
	// with the given token.
	ErrNotHolder = errors.New("session does not hold the lease with this token")

	// ErrValueTooLarge reports a value larger than MaxValueSize.
	ErrValueTooLarge = errors.New("lease value too large")

	// ErrGroupMismatch reports a join with a partition count different from
	// the one the group's members agreed on.
	ErrGroupMismatch = errors.New("group partition count mismatch")

	// ErrUnavailable reports that the store could not be reached or did not
	// answer in time. Backends wrap the driver's error together with it.
	ErrUnavailable = errors.New("store unavailable")

	// ErrInvalidName reports a lease or group name that breaks T1; the
	// error is a *NameError.
	ErrInvalidName = errors.New("invalid name")

	// ErrInvalidIdentity reports a session identity that breaks
	// ValidateIdentity.
	ErrInvalidIdentity = errors.New("invalid identity")

	// ErrInvalidGroup reports a partition count out of range.
	ErrInvalidGroup = errors.New("invalid group")

	// ErrClosed reports a call on a Backend that was closed.
	ErrClosed = errors.New("backend closed")
)

// HeldError is the error of an [Session.Acquire] refused because another
// live session holds the lease. It matches [ErrLeaseHeld] with errors.Is.
type HeldError struct {
	Name   string // the lease name
	Holder Holder // its holder, as the store saw it when it refused
}

// Error implements error: "held by node-2 (session 3fa0…)". The lease name
// is left to the errors that wrap it, which name it already.
func (e *HeldError) Error() string {
	if e.Holder.Identity != "" {
		return "held by " + e.Holder.Identity + " (session " + string(e.Holder.Session) + ")"
	}
	return "held by session " + string(e.Holder.Session)
}

// Is reports whether target is [ErrLeaseHeld].
func (e *HeldError) Is(target error) bool { return target == ErrLeaseHeld }

// RecoveringError is the error of an [Session.Acquire] refused by the
// store's amnesia guard (§15): the store may have lost its state, so it
// grants no lease until the longest lease it could have granted has passed.
// It matches [ErrRecovering] and [ErrLeaseHeld] with errors.Is; errors.As
// finds it through the backend's wrapping, so that a client can say why it
// waits and until when.
type RecoveringError struct {
	// Remaining is how long the store goes on refusing grants, as it
	// measured when it handled the call (a duration, never a point in
	// time, as [Renewal.Remaining]).
	Remaining time.Duration

	// Until is when the store grants again, on its own clock, or the zero
	// Time if the store has no clock.
	Until time.Time

	// MaxLease is the length of the guard: the longest lease the store
	// grants, which the backend's WithMaxLease option (simba_max_lease= in
	// a backend URL) sets. A shorter maximum shortens the guard.
	MaxLease time.Duration

	// Why says what the store may have lost, for people ("Redis lost its
	// state (a restart without persistence, an older snapshot or a
	// fail-over)").
	Why string
}

// Error implements error. It says why no lease is granted, until when, and
// how to shorten the wait:
//
//	store recovering from a loss of state: Redis lost its state (…); grants
//	resume in 41s (at 12:00:41.123Z on the store's clock): the amnesia guard
//	waits out the longest lease the store grants (1m0s), which an old holder
//	may still believe it holds; a shorter one (the backend's WithMaxLease,
//	simba_max_lease= in its URL) shortens the wait
//
// The lease name is left to the errors that wrap it.
func (e *RecoveringError) Error() string {
	var b strings.Builder
	b.WriteString(ErrRecovering.Error())
	if e.Why != "" {
		b.WriteString(": " + e.Why)
	}
	b.WriteString("; grants resume in " + e.Remaining.Round(time.Millisecond).String())
	if !e.Until.IsZero() {
		b.WriteString(" (at " + e.Until.UTC().Format("15:04:05.000Z07:00") + " on the store's clock)")
	}
	b.WriteString(": the amnesia guard waits out the longest lease the store grants")
	if e.MaxLease > 0 {
		b.WriteString(" (" + e.MaxLease.String() + ")")
	}
	b.WriteString(", which an old holder may still believe it holds; a shorter one " +
		"(the backend's WithMaxLease, simba_max_lease= in its URL) shortens the wait")
	return b.String()
}

// Is reports whether target is [ErrRecovering] or [ErrLeaseHeld].
func (e *RecoveringError) Is(target error) bool {
	return target == ErrRecovering || target == ErrLeaseHeld
}
