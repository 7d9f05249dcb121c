package runtime

import (
	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// The words the runtime shares with its engine (runtime/internal/engine)
// are declared once, in runtime/internal/vocab, and re-exported here under
// their own names: each type below is that type, so that a value crosses
// from the engine to the caller without conversion. Their methods (String,
// Error, Validate) are documented with each alias. Token, first, is the
// backends' own.

// Token is a fencing token (§7): greater than zero, constant within a
// term, strictly increasing across the terms of one name. Pass it with every
// write to a protected resource. It is backends.Token, so that fencing
// recipes take [Term.Token] without conversion.
type Token = backends.Token

// Reason says why a term ended (T4). A Reason is also an error — its Error
// method returns its String, the reason in words, as in "deadline passed" —
// so that it can be the cause of the term's context:
//
//	errors.Is(context.Cause(t.Context()), runtime.ReasonDeadlinePassed)
type Reason = vocab.Reason

// The reasons a term ends for, and ReasonNotEnded.
const (
	// ReasonNotEnded is the Reason of a term that has not ended.
	ReasonNotEnded Reason = vocab.ReasonNotEnded
	// ReasonStopped: the election was stopped, the lock released, or the client closed.
	ReasonStopped Reason = vocab.ReasonStopped
	// ReasonSteppedDown: the election stepped down.
	ReasonSteppedDown Reason = vocab.ReasonSteppedDown
	// ReasonDeadlinePassed: the session's local deadline passed with no successful renewal.
	ReasonDeadlinePassed Reason = vocab.ReasonDeadlinePassed
	// ReasonSessionExpired: the backend reported the session expired.
	ReasonSessionExpired Reason = vocab.ReasonSessionExpired
	// ReasonTakenOver: a renewal showed the lease is no longer this session's.
	ReasonTakenOver Reason = vocab.ReasonTakenOver
)

// SessionState is the state of a client's session (S5), as
// [Snapshot.State] and [EventSessionState] report it. Its String method
// gives it in words: "opening", "live", "suspended", "closed".
type SessionState = vocab.SessionState

// The session states.
const (
	// SessionOpening: no session yet, or opening a new one after the last ended.
	SessionOpening SessionState = vocab.SessionOpening
	// SessionLive: the last renewal succeeded.
	SessionLive SessionState = vocab.SessionLive
	// SessionSuspended: the last renewal failed; the local deadline has not passed.
	SessionSuspended SessionState = vocab.SessionSuspended
	// SessionClosed: the client was closed.
	SessionClosed SessionState = vocab.SessionClosed
)

// Role is what a client is doing about one lease name, as a [LeaseStatus]
// reports it. Its String method gives it in words: "candidate", "leader",
// "handing off", "cooling down".
type Role = vocab.Role

// The roles.
const (
	// RoleCandidate: contending for the lease.
	RoleCandidate Role = vocab.RoleCandidate
	// RoleLeader: holding a term.
	RoleLeader Role = vocab.RoleLeader
	// RoleHandingOff: the term was revoked by Stop or StepDown; waiting for the
	// task to return, or for the release.
	RoleHandingOff Role = vocab.RoleHandingOff
	// RoleCoolingDown: stepped down, out of the contest until the cooldown ends.
	RoleCoolingDown Role = vocab.RoleCoolingDown
)

// EventKind says what an [Event] reports. Its String method gives it in
// words, as in "session renewed"; the log messages use them.
type EventKind = vocab.EventKind

// The event kinds.
const (
	// EventSessionOpened: a session opened; Session is its id, Duration the
	// local validity granted.
	EventSessionOpened EventKind = vocab.EventSessionOpened
	// EventSessionState: the session state changed to State; Err is the
	// failure that caused a change to SessionSuspended.
	EventSessionState EventKind = vocab.EventSessionState
	// EventSessionRenewed: a renewal succeeded; Duration is its latency.
	EventSessionRenewed EventKind = vocab.EventSessionRenewed
	// EventSessionLeaseShortened: the backend granted too little for two
	// renewals RenewInterval apart; the client renews every third of the
	// local validity (Duration) instead (C2). Once per session.
	EventSessionLeaseShortened EventKind = vocab.EventSessionLeaseShortened
	// EventSessionEnded: the session ended for Reason (ReasonDeadlinePassed,
	// ReasonSessionExpired, or ReasonStopped when the client closed).
	EventSessionEnded EventKind = vocab.EventSessionEnded
	// EventElected: this node holds the lease Name with Token.
	EventElected EventKind = vocab.EventElected
	// EventRevoked: the term Name#Token ended for Reason.
	EventRevoked EventKind = vocab.EventRevoked
	// EventTaskFailed: a leader task returned Err (or panicked: Err is a
	// *PanicError).
	EventTaskFailed EventKind = vocab.EventTaskFailed
	// EventTaskStuck: a task ignored its cancellation past the term's
	// validity; the lease was released anyway (H2). The task is the
	// user's from then on: only fencing protects what it still writes.
	EventTaskStuck EventKind = vocab.EventTaskStuck
	// EventCallbackPanicked: a listener or observer callback panicked; Err is
	// a *PanicError (L7).
	EventCallbackPanicked EventKind = vocab.EventCallbackPanicked
	// EventCallbackRejected: the callback executor refused the elected
	// callback of Name#Token; the term was given up (L6).
	EventCallbackRejected EventKind = vocab.EventCallbackRejected
	// EventBackendError: a backend call for Name (or for the session, when
	// Name is empty) failed with Err, other than "lease held". For a group
	// call, Name and Group are the group's name.
	EventBackendError EventKind = vocab.EventBackendError
	// EventPartitionGained: this member holds Partition of Group (lease Name).
	EventPartitionGained EventKind = vocab.EventPartitionGained
	// EventPartitionLost: this member no longer holds Partition of Group,
	// for Reason (ReasonStopped when a rebalance moved it away).
	EventPartitionLost EventKind = vocab.EventPartitionLost
	// EventRunFailed: a scheduled run of Name returned Err (or panicked: Err
	// is a *PanicError). The schedule goes on. Duration is how long the run
	// took; Group and Partition are set for a partition's run.
	EventRunFailed EventKind = vocab.EventRunFailed
	// EventRunSucceeded: a scheduled run of Name returned nil; Duration is
	// how long it took, Group and Partition are set for a partition's run.
	// It is reported before the run is recorded in the lease's value. Added
	// for the metrics adapters' runs-by-outcome series: it changes nothing
	// in how schedules run.
	EventRunSucceeded EventKind = vocab.EventRunSucceeded
	// EventStoreRecovering: the store refused an acquire of Name because it
	// is new or may have lost its state (its amnesia guard, design.md §15):
	// no lease is granted for Duration. Err is the refusal, matching
	// backends.ErrRecovering; it says why and how to shorten the wait.
	// Logged as a warning, once per guard period; [Snapshot.Recovering]
	// holds it meanwhile.
	EventStoreRecovering EventKind = vocab.EventStoreRecovering
)

// Event is something the engine reports to an [Observer]. Only the fields
// meaningful for its Kind are set. Events that concern one lease carry its
// Name, so that metrics can be tagged by lease name only. Its fields:
//
//	Kind      EventKind           what the event reports; it says which other fields are set
//	Name      string              the lease name, if the event concerns one
//	Token     Token               the term's token, if the event concerns a term
//	Session   backends.SessionID  the session concerned
//	State     SessionState        the new session state (EventSessionState)
//	Reason    Reason              why a term or session ended
//	Duration  time.Duration       a latency or a validity, per Kind
//	Err       error               the failure reported
//	Group     string              the partition group: for partition events, and for the
//	                              elected, revoked and run events of a partition's term
//	Partition int                 the partition index, where Group is set
type Event = vocab.Event

// Config holds the timing knobs of a client (design.md, "Timing"). Like the
// standard library's configuration structs, a zero field takes its default,
// derived from the fields that are set: Config{LeaseDuration: 5 * time.Second}
// renews every 5s/3. Drift, Margin and RetryJitter default to non-zero
// values; set one negative for none. Its fields:
//
//	LeaseDuration time.Duration  how long the backend keeps a session after its last renewal;
//	                             it bounds fail-over after a crash or a partition. Default 15s,
//	                             or 3 × RenewInterval when only that is set.
//	RenewInterval time.Duration  the renewal period. Default LeaseDuration/3.
//	Drift         float64        the upper bound on the rate difference between this node's
//	                             clock and the backend's, below 0.5. Default 0.01; negative
//	                             for none.
//	Margin        time.Duration  subtracted from every local deadline. Default 50ms, or
//	                             LeaseDuration/20 if less; negative for none.
//	RetryJitter   time.Duration  the width of the random delay candidates add to
//	                             RenewInterval/2 between attempts. Default RenewInterval/2;
//	                             negative for none.
//	MinBackoff    time.Duration  the shortest delay before retrying a failed renewal, at most
//	                             RenewInterval. Default 100ms, or RenewInterval/4 if less.
//
// Its method Validate() error reports the first field, with its defaults
// applied, that is out of range, as a *[ConfigError] naming the field and
// its value (C1). Besides each field's own range, the margin must leave
// some validity, and two renewals must fit in the local validity of a full
// lease:
//
//	2 × RenewInterval ≤ LeaseDuration × (1 − Drift) − Margin
type Config = vocab.Config

// ConfigError reports a field of a [Config] outside its allowed range: Field
// (as in "RenewInterval"), Value (its value, formatted) and Want (the
// allowed range), all strings. It matches [ErrInvalidConfig] with
// errors.Is.
type ConfigError = vocab.ConfigError

// Schedule says when leader-only work runs (§13). Exactly one of Rate,
// Delay, Cron and Timetable is set for [Client.StartSchedule]; for
// [Client.StartGroup], none means "once per term". Its fields (Rate,
// Delay, Initial and Step are time.Durations):
//
//	Rate     runs the work in every slot of this length: a whole number of
//	         milliseconds, at least 1ms, since slots are counted in
//	         milliseconds of the store's clock.
//	Delay    runs the work this long after the previous run ended. It is at
//	         least 1ms: the end of a run is recorded in milliseconds of the
//	         store's clock, so a shorter delay would not survive a fail-over.
//	Initial  waits this long after each election before the first run.
//	Step     is the validity a run needs: before each run the engine calls
//	         EnsureValid(Step); a run that fails the check is not started, and
//	         is tried again after the next successful renewal within the same
//	         slot.
//	Cron     (string) runs the work at the instants a cron expression names:
//	         five fields (minute hour day-of-month month day-of-week), or six
//	         with seconds first, or @yearly, @monthly, @weekly, @daily,
//	         @hourly (R1). See "Cron schedules" in the package documentation.
//	Location (*time.Location) is where Cron's wall-clock times are read;
//	         nil is UTC, never the node's local zone.
//	Timetable (Timetable) runs the work at the instants its Next gives: a
//	         schedule of your own in place of Cron (R1).
//	Overlap  (Overlap) for Cron or Timetable: OverlapSkip (the default) skips
//	         the slots that come while a run goes on, OverlapAfter runs the
//	         latest of them when it returns (R3).
//	CatchUp  (time.Duration) for Cron or Timetable: after a fail-over or a
//	         pause, the latest slot missed runs once if it is at most this
//	         old, else it is skipped; 0 runs none (R3).
//
// Fixed rate numbers runs by slot on the store's clock, never a node's: slot
// k is [k·Rate, (k+1)·Rate) in Unix time. The start of the last slot whose
// run succeeded is recorded in the lease's value, written with the term's
// token, so a node elected mid-period does not run a slot the previous leader
// completed, and clock skew between nodes cannot cause a second run. Runs
// never overlap; a run longer than Rate delays the next start to the slot
// current when it ends, and the slots missed meanwhile are skipped, never run
// in a burst.
//
// Fixed delay waits Delay between the end of one run and the start of the
// next; the store-clock time the last successful run ended is recorded the
// same way, so the next leader waits until then plus Delay.
//
// The guarantee, honestly stated: a slot recorded complete is never started
// again by a later term (a higher token); a run interrupted by a fail-over
// before it was recorded runs again on the next leader. Make runs idempotent,
// or fence their writes with the term's token.
type Schedule = vocab.Schedule

// ScheduleStatus is a schedule's entry in a [Snapshot], and what
// [ScheduledTask.Status] returns. Its fields:
//
//	Next    time.Time  when the next run is due (local clock), zero if none is planned
//	LastRun time.Time  when the last run started
//	LastErr error      the last run's error, nil if it succeeded
//	Runs    int        runs started, over every term of this client
type ScheduleStatus = vocab.ScheduleStatus

// Snapshot is a point-in-time view of a client (S5), for status pages
// and tests, as [Client.Snapshot] returns it. Its fields:
//
//	State       SessionState        the session's state: SessionOpening, SessionLive,
//	                                SessionSuspended or SessionClosed
//	Session     backends.SessionID  the live session's id, "" if none
//	Deadline    time.Time           the session's local deadline (monotonic), zero if none
//	Remaining   time.Duration       time left until Deadline
//	RenewPeriod time.Duration       current renewal period (shorter than RenewInterval under C2)
//	LastError   error               the backend's last failure, nil after a success
//	Leases      []LeaseStatus       every election, lock and schedule started, in start order
//	Groups      []GroupStatus       every partition group started, in start order
//	Recovering  *Recovering         set while the store refuses grants after it was created
//	                                or lost its state (its amnesia guard), nil otherwise
type Snapshot = vocab.Snapshot

// Recovering is the store's amnesia guard as a client met it (design.md
// §15): an acquire refused with a backends.RecoveringError, because the
// store is new or may have lost its state. No lease is granted, to this
// client or any other, until Until: the store waits out the longest lease
// it could have granted, which an old holder may still believe it holds;
// the backend's simba_max_lease shortens the wait. Its fields:
//
//	Until     time.Time      when grants resume, on the local clock; zero if the store did
//	                         not say (its error only wraps backends.ErrRecovering)
//	Remaining time.Duration  time left until Until; 0 if the store did not say
//	MaxLease  time.Duration  the guard's length, the store's longest lease; 0 if unknown
//	Why       string         what the store may have lost, in the backend's words
//	Err       error          the refusal, matching backends.ErrRecovering
type Recovering = vocab.Recovering

// LeaseStatus is one name's entry in a [Snapshot]. Its fields:
//
//	Name      string           the lease name
//	Lock      bool             a lock, not an election
//	Role      Role             what the client is doing about the lease
//	Token     Token            the term's token while RoleLeader or RoleHandingOff
//	Remaining time.Duration    the term's validity left while RoleLeader
//	Cooldown  time.Duration    cooldown left while RoleCoolingDown
//	Schedule  *ScheduleStatus  the schedule's status, for StartSchedule
type LeaseStatus = vocab.LeaseStatus

// GroupStatus is a partition group's entry in a [Snapshot]. Its fields:
//
//	Name         string             the group's name, as given to StartGroup
//	Partitions   int                the group's partition count
//	Members      int                members in the last view read, 0 before the first
//	Held         []int              partitions this member holds a valid term for, ascending
//	Joined       bool               a member on the current session
//	LastError    error              the last failed group call (a join with another count, ...)
//	PerPartition []PartitionStatus  one entry per partition in Held, in the same order: its
//	                                term and, for a group run on a schedule, the schedule's status
type GroupStatus = vocab.GroupStatus

// PartitionStatus is one held partition's entry in a [GroupStatus]. Its
// fields:
//
//	Index     int              the partition's number, in [0, N)
//	Token     Token            the token of this member's term for the partition
//	Remaining time.Duration    the term's validity left
//	Schedule  *ScheduleStatus  the partition's schedule when the group runs on one
//	                           (Schedule.Rate or Delay set): next run, last run and its
//	                           result, and runs over every term of this partition on this
//	                           client; nil for a group whose task runs once per term
type PartitionStatus = vocab.PartitionStatus
