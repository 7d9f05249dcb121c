package runtime_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// Every duration a caller sets is refused above MaxDuration, with an error
// naming the field the caller set and the bound, before the engine adds it
// to its clock: near the largest duration it wrapped around (a schedule's
// initial delay ran the schedule over and over; a renewal interval made the
// derived lease negative and the error blamed LeaseDuration).
func TestDurationsBounded(t *testing.T) {
	const huge = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		cfg   runtime.Config
		field string
	}{
		{runtime.Config{LeaseDuration: huge}, "LeaseDuration"},
		{runtime.Config{LeaseDuration: runtime.MaxDuration + 1}, "LeaseDuration"},
		{runtime.Config{RenewInterval: huge}, "RenewInterval"},
		{runtime.Config{RenewInterval: huge / 3}, "RenewInterval"},
		{runtime.Config{RenewInterval: runtime.MaxDuration/3 + 1}, "RenewInterval"},
		{runtime.Config{LeaseDuration: time.Hour, RetryJitter: huge}, "RetryJitter"},
		{runtime.Config{LeaseDuration: time.Hour, Margin: huge}, "Margin"},
		{runtime.Config{LeaseDuration: time.Hour, MinBackoff: huge}, "MinBackoff"},
	} {
		err := tc.cfg.Validate()
		var ce *runtime.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), "at most") {
			t.Errorf("Validate(%+v) = %v; want a *ConfigError naming %s and its bound", tc.cfg, err, tc.field)
		}
	}
	// The bound itself is accepted, and so is a renewal interval whose
	// derived lease reaches it.
	for _, cfg := range []runtime.Config{
		{LeaseDuration: runtime.MaxDuration},
		{RenewInterval: runtime.MaxDuration / 3},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; want nil", cfg, err)
		}
	}

	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		task := func(context.Context, *runtime.Term) error { return nil }
		part := func(context.Context, *runtime.Term, int) error { return nil }
		for _, tc := range []struct {
			s     runtime.Schedule
			field string
		}{
			{runtime.Schedule{Rate: time.Second, Initial: huge}, "Schedule.Initial"},
			{runtime.Schedule{Rate: time.Second, Initial: runtime.MaxDuration + 1}, "Schedule.Initial"},
			{runtime.Schedule{Rate: huge / time.Millisecond * time.Millisecond}, "Schedule.Rate"},
			{runtime.Schedule{Delay: huge}, "Schedule.Delay"},
		} {
			_, err := c.StartSchedule("report", tc.s, task)
			var ce *runtime.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), "at most 100 years") {
				t.Errorf("StartSchedule(%+v) = %v; want a *ConfigError naming %s and its bound", tc.s, err, tc.field)
			}
			_, err = c.StartGroup("billing", 2, tc.s, part)
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("StartGroup(%+v) = %v; want a *ConfigError naming %s", tc.s, err, tc.field)
			}
		}
		if _, err := c.StartElection("task", nil, runtime.WithTask(task), runtime.WithTaskEndCooldown(huge)); !isConfigError(err, "WithTaskEndCooldown") {
			t.Errorf("WithTaskEndCooldown(max) = %v; want a *ConfigError naming it", err)
		}
		e, err := c.StartElection("report", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.StepDown(context.Background(), huge); !isConfigError(err, "cooldown") {
			t.Errorf("StepDown(max) = %v; want a *ConfigError naming the cooldown", err)
		}
		// The bound is accepted, and the election sits out, not back at once.
		if err := e.StepDown(context.Background(), runtime.MaxDuration); err != nil {
			t.Fatalf("StepDown(MaxDuration) = %v", err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if term := e.Term(); term != nil {
			t.Errorf("an election stepped down for 100 years leads again an hour later: %v", term)
		}
	})
}

// A schedule whose initial delay is the bound waits: it does not run.
func TestScheduleLongInitialWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClient(t, memory.New())
		defer closeClient(t, c)
		var runs atomic.Int32
		if _, err := c.StartSchedule("report", runtime.Schedule{Rate: time.Millisecond, Initial: runtime.MaxDuration},
			func(context.Context, *runtime.Term) error { runs.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := runs.Load(); n != 0 {
			t.Errorf("a schedule with a 100-year initial delay ran %d times in an hour", n)
		}
	})
}

func isConfigError(err error, field string) bool {
	var ce *runtime.ConfigError
	return errors.As(err, &ce) && ce.Field == field
}
