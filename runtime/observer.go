package runtime

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/simba-go/simba/backends"
)

// EventKind says what an [Event] reports.
type EventKind int

const (
	// EventSessionOpened: a session opened; Session is its id, Duration the
	// local validity granted.
	EventSessionOpened EventKind = iota + 1
	// EventSessionState: the session state changed to State; Err is the
	// failure that caused a change to SessionSuspended.
	EventSessionState
	// EventSessionRenewed: a renewal succeeded; Duration is its latency.
	EventSessionRenewed
	// EventSessionLeaseShortened: the backend granted too little for two
	// renewals RenewInterval apart; the client renews every third of the
	// local validity (Duration) instead (C2). Once per session.
	EventSessionLeaseShortened
	// EventSessionEnded: the session ended for Reason (ReasonDeadlinePassed,
	// ReasonSessionExpired, or ReasonStopped when the client closed).
	EventSessionEnded
	// EventElected: this node holds the lease Name with Token.
	EventElected
	// EventRevoked: the term Name#Token ended for Reason.
	EventRevoked
	// EventTaskFailed: a leader task returned Err (or panicked: Err is a
	// *PanicError).
	EventTaskFailed
	// EventTaskStuck: a task ignored its cancellation past the term's
	// validity; the lease was released anyway (H2). The task is the
	// user's from then on: only fencing protects what it still writes.
	EventTaskStuck
	// EventCallbackPanicked: a listener or observer callback panicked; Err is
	// a *PanicError (L7).
	EventCallbackPanicked
	// EventCallbackRejected: the callback executor refused the elected
	// callback of Name#Token; the term was given up (L6).
	EventCallbackRejected
	// EventBackendError: a backend call for Name (or for the session, when
	// Name is empty) failed with Err, other than "lease held". For a group
	// call, Name and Group are the group's name.
	EventBackendError
	// EventPartitionGained: this member holds Partition of Group (lease Name).
	EventPartitionGained
	// EventPartitionLost: this member no longer holds Partition of Group,
	// for Reason (ReasonStopped when a rebalance moved it away).
	EventPartitionLost
	// EventRunFailed: a scheduled run of Name returned Err (or panicked: Err
	// is a *PanicError). The schedule goes on. Duration is how long the run
	// took; Group and Partition are set for a partition's run.
	EventRunFailed
	// EventRunSucceeded: a scheduled run of Name returned nil; Duration is
	// how long it took, Group and Partition are set for a partition's run.
	// It is reported before the run is recorded in the lease's value. Added
	// for the metrics adapters' runs-by-outcome series: it changes nothing
	// in how schedules run.
	EventRunSucceeded
)

var eventNames = [...]string{"", "session opened", "session state", "session renewed", "session lease shortened",
	"session ended", "elected", "revoked", "task failed", "task stuck", "callback panicked", "callback rejected",
	"backend error", "partition gained", "partition lost", "run failed", "run succeeded"}

// String returns the kind in words.
func (k EventKind) String() string {
	if k <= 0 || int(k) >= len(eventNames) {
		return "unknown event"
	}
	return eventNames[k]
}

// Event is something the engine reports to an [Observer]. Only the fields
// meaningful for its Kind are set. Events that concern one lease carry its
// Name, so that metrics can be tagged by lease name only.
type Event struct {
	Kind      EventKind          // what the event reports; it says which other fields are set
	Name      string             // the lease name, if the event concerns one
	Token     Token              // the term's token, if the event concerns a term
	Session   backends.SessionID // the session concerned
	State     SessionState       // the new session state (EventSessionState)
	Reason    Reason             // why a term or session ended
	Duration  time.Duration      // a latency or a validity, per Kind
	Err       error              // the failure reported
	Group     string             // the partition group: for partition events, and for the elected, revoked and run events of a partition's term
	Partition int                // the partition index, where Group is set
}

// Observer receives the engine's events, one at a time and in order, on a
// goroutine of the engine's, never while an internal lock is held. The events
// a Lock, TryLock or Unlock causes while it makes its backend call on its
// caller's goroutine (see [Client.Lock]) are delivered on that goroutine too,
// before the call goes out or returns, unless older events are still being
// delivered: waking a goroutine for each cost a Lock and Unlock on Redis about
// 50 µs on a 2-core machine. It must return promptly; a panic in it is
// recovered and logged. It is the hook for metrics: who leads each lease,
// ownership changes, renewal latency, session state, expirations. The modules extra/simbaprometheus and extra/simbaotel
// implement it.
type Observer interface {
	// Observe receives one event, after the previous call returned; it
	// must not block.
	Observe(Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(Event)

// Observe calls f(e).
func (f ObserverFunc) Observe(e Event) { f(e) }

// Log attribute keys, in one place.
const (
	logKeyLease   = "lease"
	logKeyToken   = "token"
	logKeySession = "session"
	logKeyState   = "state"
	logKeyReason  = "reason"
	logKeyErr     = "err"
	logKeyLatency = "latency"
	logKeyValid   = "validity"
	logKeyStack   = "stack"
)

// logEvent writes e to logger at a level that fits it: warnings for what
// costs safety or availability, errors for user code that failed, debug for
// routine renewals.
func logEvent(logger *slog.Logger, e Event) {
	level := eventLevel(e)
	if !logger.Enabled(context.Background(), level) {
		return // the attributes would cost allocations nobody reads
	}
	msg := "simba: " + e.Kind.String()
	var attrs []slog.Attr
	if e.Name != "" {
		attrs = append(attrs, slog.String(logKeyLease, e.Name))
	}
	if e.Token != 0 {
		attrs = append(attrs, slog.Int64(logKeyToken, int64(e.Token)))
	}
	if e.Session != "" {
		attrs = append(attrs, slog.String(logKeySession, string(e.Session)))
	}
	switch e.Kind {
	case EventSessionRenewed, EventRunSucceeded:
		attrs = append(attrs, slog.Duration(logKeyLatency, e.Duration))
	case EventSessionOpened:
		attrs = append(attrs, slog.Duration(logKeyValid, e.Duration))
	case EventSessionState:
		attrs = append(attrs, slog.String(logKeyState, e.State.String()))
	case EventSessionLeaseShortened:
		msg = "simba: backend granted a shorter lease than LeaseDuration; renewing every third of it"
		attrs = append(attrs, slog.Duration(logKeyValid, e.Duration))
	case EventSessionEnded, EventRevoked:
		attrs = append(attrs, slog.String(logKeyReason, e.Reason.String()))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.Any(logKeyErr, e.Err))
		if p, ok := e.Err.(*PanicError); ok {
			attrs = append(attrs, slog.String(logKeyStack, string(p.Stack)))
		}
	}
	logger.LogAttrs(context.Background(), level, msg, attrs...)
}

// eventLevel is the level logEvent writes e at.
func eventLevel(e Event) slog.Level {
	switch e.Kind {
	case EventSessionRenewed, EventRunSucceeded:
		return slog.LevelDebug
	case EventSessionState:
		if e.State == SessionSuspended {
			return slog.LevelWarn
		}
	case EventSessionLeaseShortened:
		return slog.LevelWarn
	case EventSessionEnded, EventRevoked:
		if e.Reason == ReasonDeadlinePassed || e.Reason == ReasonSessionExpired || e.Reason == ReasonTakenOver {
			return slog.LevelWarn
		}
	case EventTaskFailed, EventCallbackPanicked, EventRunFailed:
		return slog.LevelError
	case EventTaskStuck, EventCallbackRejected:
		return slog.LevelWarn
	case EventBackendError:
		if e.Name == "" || errors.Is(e.Err, backends.ErrGroupMismatch) {
			return slog.LevelWarn // the session, or a group this member cannot join
		}
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
