package vocab

import (
	"time"

	"github.com/simba-go/simba/backends"
)

// Snapshot is a point-in-time view of a client (S5), for status pages
// and tests.
type Snapshot struct {
	State       SessionState       // the session's state: SessionOpening, SessionLive, SessionSuspended or SessionClosed
	Session     backends.SessionID // the live session's id, "" if none
	Deadline    time.Time          // the session's local deadline (monotonic), zero if none
	Remaining   time.Duration      // time left until Deadline
	RenewPeriod time.Duration      // current renewal period (shorter than RenewInterval under C2)
	LastError   error              // the backend's last failure, nil after a success
	Leases      []LeaseStatus      // every election, lock and schedule started, in start order
	Groups      []GroupStatus      // every partition group started, in start order

	// Recovering is set while the store refuses grants because it is new
	// or may have lost its state (its amnesia guard, design.md §15): no
	// lease is granted before Recovering.Until. Nil otherwise.
	Recovering *Recovering
}

// Recovering is the store's amnesia guard as a client met it: an acquire
// refused with a backends.RecoveringError. No lease is granted, to this
// client or any other, until the guard ends: the store is new or lost its
// state, and waits out the longest lease it could have granted, which an
// old holder may still believe it holds.
type Recovering struct {
	Until     time.Time     // when grants resume, on the local clock; zero if the store did not say
	Remaining time.Duration // time left until Until; 0 if the store did not say
	MaxLease  time.Duration // the guard's length: the longest lease the store grants (its simba_max_lease), 0 if unknown
	Why       string        // what the store may have lost, in the backend's words
	Err       error         // the refusal, a *backends.RecoveringError wrapped by the backend
}

// GroupStatus is a partition group's entry in a [Snapshot].
type GroupStatus struct {
	Name       string // the group's name, as given to StartGroup
	Partitions int    // the group's partition count
	Members    int    // members in the last view read, 0 before the first
	Held       []int  // partitions this member holds a valid term for, ascending
	Joined     bool   // a member on the current session
	LastError  error  // the last failed group call (a join with another count, ...)

	// PerPartition has one entry per partition in Held, in the same order:
	// its term and, for a group run on a schedule, the schedule's status.
	PerPartition []PartitionStatus
}

// PartitionStatus is one held partition's entry in a [GroupStatus].
type PartitionStatus struct {
	Index     int            // the partition's number, in [0, N)
	Token     backends.Token // the token of this member's term for the partition
	Remaining time.Duration  // the term's validity left

	// Schedule is the partition's schedule when the group runs on one
	// (Schedule.Rate or Delay set): next run, last run and its result, and
	// runs over every term of this partition on this client. It is nil for
	// a group whose task runs once per term.
	Schedule *ScheduleStatus
}

// Role is what a client is doing about one lease name.
type Role int

const (
	// RoleCandidate: contending for the lease.
	RoleCandidate Role = iota
	// RoleLeader: holding a term.
	RoleLeader
	// RoleHandingOff: the term was revoked by Stop or StepDown; waiting for the
	// task to return, or for the release.
	RoleHandingOff
	// RoleCoolingDown: stepped down, out of the contest until the cooldown ends.
	RoleCoolingDown
)

var roleNames = [...]string{"candidate", "leader", "handing off", "cooling down"}

// String returns the role in words.
func (r Role) String() string {
	if r < 0 || int(r) >= len(roleNames) {
		return "unknown"
	}
	return roleNames[r]
}

// LeaseStatus is one name's entry in a [Snapshot].
type LeaseStatus struct {
	Name      string          // the lease name
	Lock      bool            // a lock, not an election
	Role      Role            // what the client is doing about the lease
	Token     backends.Token  // the term's token while RoleLeader or RoleHandingOff
	Remaining time.Duration   // the term's validity left while RoleLeader
	Cooldown  time.Duration   // cooldown left while RoleCoolingDown
	Schedule  *ScheduleStatus // the schedule's status, for StartSchedule
}
