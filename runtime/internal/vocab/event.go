package vocab

import (
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
	// EventStoreRecovering: the store refused an acquire of Name because it
	// is new or may have lost its state (its amnesia guard, design.md §15):
	// no lease is granted for Duration. Err is the refusal, matching
	// backends.ErrRecovering; it says why and how to shorten the wait.
	// Once per guard period, not once per refused acquire.
	EventStoreRecovering
)

// eventNames holds each kind's words, by value: a new kind adds its
// constant above and its words here.
var eventNames = [...]string{"", "session opened", "session state", "session renewed", "session lease shortened",
	"session ended", "elected", "revoked", "task failed", "task stuck", "callback panicked", "callback rejected",
	"backend error", "partition gained", "partition lost", "run failed", "run succeeded", "store recovering"}

// String returns the kind in words.
func (k EventKind) String() string {
	if k <= 0 || int(k) >= len(eventNames) {
		return "unknown event"
	}
	return eventNames[k]
}

// Event is something the engine reports to an observer. Only the fields
// meaningful for its Kind are set. Events that concern one lease carry its
// Name, so that metrics can be tagged by lease name only.
type Event struct {
	Kind      EventKind          // what the event reports; it says which other fields are set
	Name      string             // the lease name, if the event concerns one
	Token     backends.Token     // the term's token, if the event concerns a term
	Session   backends.SessionID // the session concerned
	State     SessionState       // the new session state (EventSessionState)
	Reason    Reason             // why a term or session ended
	Duration  time.Duration      // a latency or a validity, per Kind
	Err       error              // the failure reported
	Group     string             // the partition group: for partition events, and for the elected, revoked and run events of a partition's term
	Partition int                // the partition index, where Group is set
}
