package vocab

import (
	"strconv"
	"time"
)

// Schedule says when leader-only work runs (§13). Exactly one of Rate
// and Delay is set for a schedule; for a partition group, both zero means
// "once per term".
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
type Schedule struct {
	// Rate runs the work in every slot of this length: a whole number of
	// milliseconds, at least 1ms, since slots are counted in milliseconds
	// of the store's clock.
	Rate time.Duration
	// Delay runs the work this long after the previous run ended. It is at
	// least 1ms: the end of a run is recorded in milliseconds of the
	// store's clock, so a shorter delay would not survive a fail-over.
	Delay time.Duration
	// Initial waits this long after each election before the first run.
	Initial time.Duration
	// Step is the validity a run needs: before each run the engine calls
	// EnsureValid(Step); a run that fails the check is not started, and is
	// tried again after the next successful renewal within the same slot.
	Step time.Duration
	// Cron runs the work at the instants a cron expression names (R1):
	// five fields (minute hour day-of-month month day-of-week) or six with
	// seconds first, or a descriptor such as @daily, read as wall-clock
	// times in Location.
	Cron string
	// Location is where Cron's wall-clock times are read; nil is UTC, never
	// the node's local zone, which may differ between nodes.
	Location *time.Location
	// Timetable runs the work at the instants its Next gives: a schedule
	// of the user's own, in place of Cron (R1).
	Timetable Timetable
	// Overlap says what happens to a Cron or Timetable slot that comes
	// while the previous run goes on: OverlapSkip (the default) skips it,
	// OverlapAfter runs the latest such slot once the run returns.
	Overlap Overlap
	// CatchUp is, for Cron or Timetable, how old a missed slot may be and
	// still run: after a fail-over or a pause, the latest slot missed runs
	// once if it is at most CatchUp old, else it is skipped. 0 runs no
	// missed slot.
	CatchUp time.Duration
}

// Timetable gives the instants a schedule runs at, in River's shape: Next
// returns the first instant strictly after t, or the zero time when there
// is none. t and the instants are on the store's clock; instants are
// counted in whole milliseconds (a finer one is rounded up). Next must be
// a pure function of t: every node computes the same slots from it.
type Timetable interface {
	Next(t time.Time) time.Time
}

// Overlap is what a Cron or Timetable schedule does with a slot that comes
// while the previous run goes on.
type Overlap int

const (
	// OverlapSkip skips the slots that came while the previous run went
	// on; the next run is the next slot after it returns.
	OverlapSkip Overlap = iota
	// OverlapAfter runs the latest slot that came while the previous run
	// went on as soon as it returns, once, never in a burst.
	OverlapAfter
)

// String returns "skip" or "after", as the directive spells them.
func (o Overlap) String() string {
	switch o {
	case OverlapSkip:
		return "skip"
	case OverlapAfter:
		return "after"
	}
	return "Overlap(" + strconv.Itoa(int(o)) + ")"
}

// Once reports whether s runs a task once per term (none of Rate, Delay,
// Cron and Timetable) rather than on a schedule. It is a function, not a
// method, so that the runtime's Schedule, an alias of this type, gains no
// method.
func Once(s Schedule) bool {
	return s.Rate == 0 && s.Delay == 0 && s.Cron == "" && s.Timetable == nil
}

// ScheduleStatus is a schedule's entry in a [Snapshot].
type ScheduleStatus struct {
	Next    time.Time // when the next run is due (local clock), zero if none is planned
	LastRun time.Time // when the last run started
	LastErr error     // the last run's error, nil if it succeeded
	Runs    int       // runs started, over every term of this client
}
