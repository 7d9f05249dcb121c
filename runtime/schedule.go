package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
)

// Schedule says when leader-only work runs (§13). Exactly one of Rate
// and Delay is set for [Client.StartSchedule]; for [Client.StartGroup], both
// zero means "once per term".
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
}

func (s Schedule) once() bool { return s.Rate == 0 && s.Delay == 0 }

// validate checks s against cfg; once tells whether "neither Rate nor Delay"
// is allowed.
func (s Schedule) validate(cfg Config, onceOK bool) error {
	switch {
	case s.Rate < 0 || s.Rate > 0 && s.Rate < time.Millisecond || s.Rate%time.Millisecond != 0:
		return &ConfigError{"Schedule.Rate", s.Rate.String(), ">= 1ms, a whole number of milliseconds (slots are counted in milliseconds of the store's clock)"}
	case s.Delay < 0 || s.Delay > 0 && s.Delay < time.Millisecond:
		return &ConfigError{"Schedule.Delay", s.Delay.String(), ">= 1ms (the end of a run is recorded in milliseconds of the store's clock)"}
	case s.Rate > 0 && s.Delay > 0:
		return &ConfigError{"Schedule.Rate", s.Rate.String(), "0 when Schedule.Delay is set: exactly one of Rate and Delay"}
	case s.once() && !onceOK:
		return &ConfigError{"Schedule.Rate", "0", "> 0, or Schedule.Delay > 0: exactly one of Rate and Delay"}
	case s.Initial < 0:
		return &ConfigError{"Schedule.Initial", s.Initial.String(), ">= 0"}
	case s.Step < 0:
		return &ConfigError{"Schedule.Step", s.Step.String(), ">= 0"}
	}
	// A step that can never pass: after a renewal the term has at most the
	// local validity of a full grant left, and at least RenewInterval less
	// by the time the next renewal is due.
	if limit := cfg.localValidity(cfg.LeaseDuration) - cfg.RenewInterval; s.Step >= limit {
		return &ConfigError{"Schedule.Step", s.Step.String(), fmt.Sprintf(
			"< %v (the local validity of a full lease minus RenewInterval); a longer step could never start", limit)}
	}
	return nil
}

// ScheduleStatus is a schedule's entry in a [Snapshot].
type ScheduleStatus struct {
	Next    time.Time // when the next run is due (local clock), zero if none is planned
	LastRun time.Time // when the last run started
	LastErr error     // the last run's error, nil if it succeeded
	Runs    int       // runs started, over every term of this client
}

// StartSchedule runs fn while this node leads the lease name, as s says
// (§13). Each run gets the term's context, cancelled when the term ends,
// and the term; a failed or panicking run is reported and the schedule goes
// on. Stop and StepDown follow the hand-off order: the run in progress is
// cancelled and awaited (H1, H2).
//
// Schedules need the store's clock: StartSchedule fails on a backend that
// does not implement backends.StoreClock.
func (c *Client) StartSchedule(name string, s Schedule, fn TaskFunc) (*ScheduledTask, error) {
	if fn == nil {
		return nil, errors.New("simba: StartSchedule: nil function")
	}
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: start schedule: %w", err)
	}
	if err := s.validate(c.cfg, false); err != nil {
		return nil, fmt.Errorf("simba: start schedule %q: %w", name, err)
	}
	if _, ok := c.backend.(backends.StoreClock); !ok {
		return nil, fmt.Errorf("simba: start schedule %q: the backend (%T) has no store clock to number slots with", name, c.backend)
	}
	st := &started{task: fn}
	in := engine.Start{Name: name, Kind: engine.KindSchedule, TaskEndCooldown: c.cfg.RenewInterval,
		Schedule: engine.Schedule(s)}
	e, err := c.startContender("start schedule", in, st)
	if err != nil {
		return nil, err
	}
	return &ScheduledTask{e: e, st: st}, nil
}

// ScheduledTask is a schedule started on a client with [Client.StartSchedule]:
// an election whose terms run the schedule's work.
type ScheduledTask struct {
	e  *Election
	st *started
}

// Name returns the lease name.
func (s *ScheduledTask) Name() string { return s.e.Name() }

// Term returns the term this node currently holds, or nil.
func (s *ScheduledTask) Term() *Term { return s.e.Term() }

// Status returns the schedule's next and last runs, over every term of this
// client.
func (s *ScheduledTask) Status() ScheduleStatus {
	c := s.e.client
	c.mu.Lock()
	defer c.mu.Unlock()
	if rs, ok := c.m.ScheduleStatus(s.e.id); ok {
		return c.scheduleStatus(rs)
	}
	if s.st.final != nil {
		return *s.st.final
	}
	return ScheduleStatus{}
}

// scheduleStatus converts the core's run status to local times.
func (c *Client) scheduleStatus(rs engine.RunStatus) ScheduleStatus {
	st := ScheduleStatus{LastErr: rs.LastErr, Runs: rs.Runs}
	if rs.HasNext {
		st.Next = c.epoch.Add(rs.Next)
	}
	if rs.HasLastRun {
		st.LastRun = c.epoch.Add(rs.LastRun)
	}
	return st
}

// Stop ends the schedule with the hand-off order: the run in progress is
// cancelled and awaited (at most until the term's validity runs out), then
// the lease is released (H1). ctx bounds only the wait.
func (s *ScheduledTask) Stop(ctx context.Context) error { return s.e.Stop(ctx) }

// StepDown hands the lease over as Stop does, and keeps the schedule out of
// the contest for cooldown (H4).
func (s *ScheduledTask) StepDown(ctx context.Context, cooldown time.Duration) error {
	return s.e.StepDown(ctx, cooldown)
}

// ScheduleRecord is what a schedule records beside its lease, in the
// lease's value, after each successful run: the record a node elected next
// reads to know what not to run again. Status tools read it from the store
// (backends.LeaseInfo.Value) with [DecodeScheduleValue].
type ScheduleRecord struct {
	// Kind is "rate" for a fixed-rate schedule, "delay" for a fixed-delay
	// one.
	Kind string
	// At is, for "rate", the start of the last slot whose run succeeded;
	// for "delay", when the last successful run ended. Both are on the
	// store's clock, to the millisecond.
	At time.Time
}

// DecodeScheduleValue decodes the value a schedule writes beside its lease
// ("simba/v1 rate <unix ms>" or "simba/v1 delay <unix ms>"). It reports
// false for any other value: a lease that no schedule ran under, or a value
// written by something else. The format is stored, so it is stable across
// versions: a new version reads what an older one wrote.
func DecodeScheduleValue(v []byte) (ScheduleRecord, bool) {
	for _, kind := range [...]string{"rate", "delay"} {
		if at, ok := engine.DecodeRecord(v, kind); ok {
			return ScheduleRecord{Kind: kind, At: at}, true
		}
	}
	return ScheduleRecord{}, false
}
