package runtime

import (
	"strconv"
	"time"

	"github.com/simba-go/simba/internal/cronexpr"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Timetable gives the instants a [Schedule] runs at, in River's shape: Next
// returns the first instant strictly after t, or the zero time when there
// is none. Set it as Schedule.Timetable to bring a schedule of your own in
// place of Schedule.Cron. t and the instants are on the store's clock;
// slots are counted in whole milliseconds (a finer instant is rounded up).
// Next must be a pure function of t, since every node computes the same
// slots from it, and quick, since the engine calls it while it plans. A
// Next that panics ends the schedule's planning (reported as
// EventRunFailed with a *PanicError) until the next term.
type Timetable = vocab.Timetable

// Overlap is what a Cron or Timetable [Schedule] does with a slot that comes
// while the previous run goes on.
type Overlap = vocab.Overlap

const (
	// OverlapSkip, the default, skips the slots that came while the
	// previous run went on: the next run is the next slot after it returns.
	OverlapSkip = vocab.OverlapSkip
	// OverlapAfter runs the latest slot that came while the previous run
	// went on as soon as it returns: once, never in a burst.
	OverlapAfter = vocab.OverlapAfter
)

// ParseCron reads a cron expression as [Schedule].Cron does, with its
// wall-clock times in loc (UTC when nil), and returns it as a Timetable.
// An error names the field at fault.
func ParseCron(expr string, loc *time.Location) (Timetable, error) {
	tt, err := cronexpr.Parse(expr, loc)
	if err != nil {
		return nil, err
	}
	return tt, nil
}

// guardedTimetable turns a panic in a user's Next into the end of the
// schedule's slots, reported: the engine calls Next on the driver's
// goroutine, which must not crash (L7).
type guardedTimetable struct {
	tt   Timetable
	d    *driver
	name string
}

func (g guardedTimetable) Next(t time.Time) (at time.Time) {
	err := protect(func() error { at = g.tt.Next(t); return nil })
	if err != nil {
		g.d.report(Event{Kind: EventRunFailed, Name: g.name, Err: err})
		return time.Time{}
	}
	return at
}

// withTimetable returns s with its Timetable set from s.Cron, or s's own
// Timetable guarded against panics, for the engine, which plans with
// Timetable only.
func (c *Client) withTimetable(s Schedule, name string) (Schedule, error) {
	switch {
	case s.Cron != "":
		tt, err := cronexpr.Parse(s.Cron, s.Location)
		if err != nil {
			return s, &ConfigError{Field: "Schedule.Cron", Value: strconv.Quote(s.Cron), Want: "a cron expression: " + err.Error()}
		}
		s.Timetable = tt
	case s.Timetable != nil:
		s.Timetable = guardedTimetable{tt: s.Timetable, d: c.d, name: name}
	}
	return s, nil
}

// validateTimetable checks the fields of s that only Cron and Timetable
// schedules use.
func validateTimetable(s Schedule) error {
	cal := s.Cron != "" || s.Timetable != nil
	set := 0
	for _, on := range [...]bool{s.Rate != 0, s.Delay != 0, s.Cron != "", s.Timetable != nil} {
		if on {
			set++
		}
	}
	switch {
	case set > 1 && cal:
		return &ConfigError{Field: "Schedule", Value: "more than one of Rate, Delay, Cron and Timetable", Want: "exactly one"}
	case s.Location != nil && s.Cron == "":
		return &ConfigError{Field: "Schedule.Location", Value: s.Location.String(), Want: "nil unless Schedule.Cron is set"}
	case s.CatchUp < 0:
		return &ConfigError{Field: "Schedule.CatchUp", Value: s.CatchUp.String(), Want: ">= 0"}
	case s.CatchUp != 0 && !cal:
		return &ConfigError{Field: "Schedule.CatchUp", Value: s.CatchUp.String(), Want: "0 unless Schedule.Cron or Timetable is set"}
	case s.Overlap != OverlapSkip && s.Overlap != OverlapAfter:
		return &ConfigError{Field: "Schedule.Overlap", Value: s.Overlap.String(), Want: "OverlapSkip or OverlapAfter"}
	case s.Overlap != OverlapSkip && !cal:
		return &ConfigError{Field: "Schedule.Overlap", Value: s.Overlap.String(), Want: "OverlapSkip unless Schedule.Cron or Timetable is set"}
	}
	return nil
}
