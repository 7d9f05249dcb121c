package runtime

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/simba-go/simba/backends"
)

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
	logKeyLease     = "lease"
	logKeyToken     = "token"
	logKeySession   = "session"
	logKeyState     = "state"
	logKeyReason    = "reason"
	logKeyErr       = "err"
	logKeyLatency   = "latency"
	logKeyValid     = "validity"
	logKeyStack     = "stack"
	logKeyRemaining = "remaining"
	logKeyUntil     = "until"
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
	case EventStoreRecovering:
		msg = recoveringMessage(e.Duration)
		attrs = append(attrs, slog.Duration(logKeyRemaining, e.Duration), slog.Time(logKeyUntil, time.Now().Add(e.Duration)))
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
	case EventSessionLeaseShortened, EventStoreRecovering:
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
