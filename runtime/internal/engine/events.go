package engine

import (
	"time"

	"github.com/simba-go/simba/backends"
)

// Reason says why a term or a session ended (T4). Its values are the
// runtime's Reason values.
type Reason int32

// The reasons, in the runtime's order.
const (
	NotEnded Reason = iota
	Stopped
	SteppedDown
	DeadlinePassed
	SessionExpired
	TakenOver
)

var reasonNames = [...]string{"not ended", "stopped", "stepped down", "deadline passed", "session expired", "taken over"}

// String returns the reason in words.
func (r Reason) String() string {
	if r < 0 || int(r) >= len(reasonNames) {
		return "unknown reason"
	}
	return reasonNames[r]
}

// SessionState is the state of the client's session (S5). Its values are
// the runtime's SessionState values.
type SessionState int

// The session states, in the runtime's order.
const (
	Opening SessionState = iota
	Live
	Suspended
	Closed
)

var stateNames = [...]string{"opening", "live", "suspended", "closed"}

// String returns the state in words.
func (s SessionState) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}

// EventKind says what an Event reports. Its values are the runtime's
// EventKind values.
type EventKind int

// The event kinds, in the runtime's order.
const (
	EventSessionOpened EventKind = iota + 1
	EventSessionState
	EventSessionRenewed
	EventSessionLeaseShortened
	EventSessionEnded
	EventElected
	EventRevoked
	EventTaskFailed
	EventTaskStuck
	EventCallbackPanicked
	EventCallbackRejected
	EventBackendError
	EventPartitionGained
	EventPartitionLost
	EventRunFailed
	EventRunSucceeded
	numEventKinds
)

var eventNames = [...]string{"", "session opened", "session state", "session renewed", "session lease shortened",
	"session ended", "elected", "revoked", "task failed", "task stuck", "callback panicked", "callback rejected",
	"backend error", "partition gained", "partition lost", "run failed", "run succeeded"}

// String returns the kind in words.
func (k EventKind) String() string {
	if k <= 0 || k >= numEventKinds {
		return "unknown event"
	}
	return eventNames[k]
}

// Event is something the core reports; the runtime converts it to its own
// Event, field by field.
type Event struct {
	Kind      EventKind
	Name      string
	Token     backends.Token
	Session   backends.SessionID
	State     SessionState
	Reason    Reason
	Duration  time.Duration
	Err       error
	Group     string
	Partition int
}
