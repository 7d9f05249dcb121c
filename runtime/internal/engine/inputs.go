package engine

import (
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Input is one thing that happened, handed to [Machine.Step] with the time
// it happened: an API call, a backend reply, a task's or callback's end, a
// release notification. Timers are not inputs: [Machine.Tick] is.
type Input interface{ isInput() }

// Kind is what a started name is.
type Kind uint8

// The kinds of contenders, in the order Close stops them (H1).
const (
	KindElection Kind = iota
	KindLock
	KindSchedule
	kindPartition
	numKinds
)

// Start starts contender ID for lease Name. Step returns ErrClosed,
// ErrNameInUse, or (for a TryLock while another Lock of this client holds
// the name) an error matching backends.ErrLeaseHeld.
type Start struct {
	ID              ContenderID
	Name            string
	Kind            Kind
	Listener        bool           // it has a listener: dispatch callbacks
	Task            bool           // it has a task: start it once per term
	TaskEndCooldown time.Duration  // the step-down cooldown when the task returns early
	TryOnce         bool           // TryLock: one attempt
	Waiter          Waiter         // Lock, TryLock: who gets the term
	Schedule        vocab.Schedule // KindSchedule: when runs happen
}

// StartGroup joins the partition group Name of N partitions. A zero
// Schedule runs each partition's task once per term, after
// Schedule.Initial; otherwise each partition runs on the schedule. Step
// returns ErrClosed or ErrNameInUse.
type StartGroup struct {
	ID       GroupID
	Name     string
	N        int
	Schedule vocab.Schedule
}

// Stop stops contender ID with the hand-off order (H1), or steps it down for
// Cooldown (H4); Waiter completes when done.
type Stop struct {
	ID       ContenderID
	StepDown bool
	Cooldown time.Duration
	Waiter   Waiter
}

// HandOver hands election ID's term over to the session To (§13): the
// leader records To in the lease's value, then steps down with the
// hand-off order and contends again; the other candidates give the lease
// back to To for a while. Waiter completes when the lease is released, or
// with the error that left it held.
type HandOver struct {
	ID     ContenderID
	To     backends.SessionID
	Waiter Waiter
}

// StopGroup stops group ID (or steps it down for Cooldown): it leaves the
// group and hands every partition over; Waiter completes when done.
type StopGroup struct {
	ID       GroupID
	StepDown bool
	Cooldown time.Duration
	Waiter   Waiter
}

// Unlock releases the lock whose term is Term; Waiter completes when done.
type Unlock struct {
	Term   TermID
	Waiter Waiter
}

// Abandon gives up lock ID, whose caller stopped waiting.
type Abandon struct{ ID ContenderID }

// Close closes the client: everything is stopped with the hand-off order,
// then the session is closed (S4); Waiter completes when done.
type Close struct{ Waiter Waiter }

// Reply is the backend's answer to request ID.
type Reply struct {
	ID     RequestID
	Result Result
}

// Released reports that the store may have released Name, as the watch on
// session generation Gen saw it (A1).
type Released struct {
	Gen  uint64
	Name string
}

// TaskDone reports that the task of Term returned Err; Canceled says
// whether Err matches context.Canceled.
type TaskDone struct {
	Term     TermID
	Err      error
	Canceled bool
}

// RunDone reports that a scheduled run of Term returned Err; Canceled says
// whether Err matches context.Canceled.
type RunDone struct {
	Term     TermID
	Err      error
	Canceled bool
}

// CallbackDone reports that one callback of contender ID ran.
type CallbackDone struct{ ID ContenderID }

// DispatchFailed reports that the elected callback of Term (of contender
// ID) could not be dispatched (L6).
type DispatchFailed struct {
	ID   ContenderID
	Term TermID
	Err  error
}

func (Start) isInput()          {}
func (HandOver) isInput()       {}
func (StartGroup) isInput()     {}
func (Stop) isInput()           {}
func (StopGroup) isInput()      {}
func (Unlock) isInput()         {}
func (Abandon) isInput()        {}
func (Close) isInput()          {}
func (Reply) isInput()          {}
func (Released) isInput()       {}
func (TaskDone) isInput()       {}
func (RunDone) isInput()        {}
func (CallbackDone) isInput()   {}
func (DispatchFailed) isInput() {}
