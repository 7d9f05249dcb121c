package runtime

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/runtime/internal/engine"
	"github.com/simba-go/simba/runtime/internal/vocab"
)

// validateSchedule checks s against cfg, with its defaults applied; onceOK
// tells whether "neither Rate nor Delay" is allowed.
func validateSchedule(s Schedule, cfg Config, onceOK bool) error {
	if err := validateTimetable(s); err != nil {
		return err
	}
	switch {
	case s.Rate < 0 || s.Rate > 0 && s.Rate < time.Millisecond || s.Rate%time.Millisecond != 0:
		return &ConfigError{Field: "Schedule.Rate", Value: s.Rate.String(), Want: ">= 1ms, a whole number of milliseconds (slots are counted in milliseconds of the store's clock)"}
	case s.Delay < 0 || s.Delay > 0 && s.Delay < time.Millisecond:
		return &ConfigError{Field: "Schedule.Delay", Value: s.Delay.String(), Want: ">= 1ms (the end of a run is recorded in milliseconds of the store's clock)"}
	case s.Rate > 0 && s.Delay > 0:
		return &ConfigError{Field: "Schedule.Rate", Value: s.Rate.String(), Want: "0 when Schedule.Delay is set: exactly one of Rate and Delay"}
	case vocab.Once(s) && !onceOK:
		return &ConfigError{Field: "Schedule.Rate", Value: "0", Want: "> 0, or Schedule.Delay > 0, Cron or Timetable set: exactly one of them"}
	case s.Initial < 0:
		return &ConfigError{Field: "Schedule.Initial", Value: s.Initial.String(), Want: ">= 0"}
	case s.Step < 0:
		return &ConfigError{Field: "Schedule.Step", Value: s.Step.String(), Want: ">= 0"}
	case s.Rate > vocab.MaxDuration || s.Delay > vocab.MaxDuration || s.Initial > vocab.MaxDuration || s.CatchUp > vocab.MaxDuration:
		return scheduleBound(s)
	}
	// A step that can never pass: after a renewal the term has at most the
	// local validity of a full grant left, and at least RenewInterval less
	// by the time the next renewal is due.
	if limit := vocab.LocalValidity(cfg, cfg.LeaseDuration) - cfg.RenewInterval; s.Step >= limit {
		return &ConfigError{Field: "Schedule.Step", Value: s.Step.String(), Want: fmt.Sprintf(
			"< %v (the local validity of a full lease minus RenewInterval); a longer step could never start", limit)}
	}
	return nil
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
		return nil, fmt.Errorf("simba: StartSchedule: nil function: %w", ErrNilArgument)
	}
	if err := backends.ValidateName(name); err != nil {
		return nil, fmt.Errorf("simba: start schedule: %w", err)
	}
	if err := validateSchedule(s, c.cfg, false); err != nil {
		return nil, fmt.Errorf("simba: start schedule %q: %w", name, err)
	}
	s, err := c.withTimetable(s, name)
	if err != nil {
		return nil, fmt.Errorf("simba: start schedule %q: %w", name, err)
	}
	if _, ok := c.d.backend.(backends.StoreClock); !ok {
		return nil, fmt.Errorf("simba: start schedule %q: the backend (%T) has no store clock to number slots with", name, c.d.backend)
	}
	in := engine.Start{Name: name, Kind: engine.KindSchedule, TaskEndCooldown: c.cfg.RenewInterval,
		Schedule: s}
	id, err := c.d.start(in, &started{task: fn})
	if err != nil {
		return nil, fmt.Errorf("simba: start schedule %q: %w", name, err)
	}
	return &ScheduledTask{handle{d: c.d, name: name, id: id}}, nil
}

// ScheduledTask is a schedule started on a client with [Client.StartSchedule]:
// an election whose terms run the schedule's work.
type ScheduledTask struct {
	handle
}

// Name returns the lease name.
func (s *ScheduledTask) Name() string { return s.name }

// Term returns the term this node currently holds, or nil.
func (s *ScheduledTask) Term() *Term { return s.term() }

// Status returns the schedule's next and last runs, over every term of this
// client.
func (s *ScheduledTask) Status() (st ScheduleStatus) {
	s.d.query(func(m *engine.Machine) { st, _ = m.ScheduleStatus(s.id, s.d.epoch) })
	return st
}

// Stop ends the schedule with the hand-off order: the run in progress is
// cancelled and awaited (at most until the term's validity runs out), then
// the lease is released (H1). ctx bounds only the wait.
func (s *ScheduledTask) Stop(ctx context.Context) error { return s.stop(ctx) }

// StepDown hands the lease over as Stop does, and keeps the schedule out of
// the contest for cooldown (H4).
func (s *ScheduledTask) StepDown(ctx context.Context, cooldown time.Duration) error {
	return s.stepDown(ctx, cooldown)
}
