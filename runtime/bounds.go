package runtime

import (
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// MaxDuration is the longest duration accepted anywhere a caller sets one:
// a [Config] field, a [Schedule] field, a cooldown. The engine adds
// durations to its clock; a longer one is refused with a *[ConfigError]
// naming the field, where it would have wrapped around to a negative
// duration (a schedule's initial delay near the largest duration ran the
// schedule at once, over and over). It is a hundred years.
const MaxDuration = vocab.MaxDuration

// scheduleBound returns the error for the first of s's durations over
// MaxDuration (see validateSchedule).
func scheduleBound(s Schedule) error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"Schedule.Rate", s.Rate}, {"Schedule.Delay", s.Delay}, {"Schedule.Initial", s.Initial}, {"Schedule.CatchUp", s.CatchUp}} {
		if err := vocab.CheckDuration(f.name, f.d); err != nil {
			return err
		}
	}
	return nil
}

// checkCooldown refuses a cooldown outside [0, MaxDuration], naming field.
func checkCooldown(field string, d time.Duration) error {
	if d < 0 {
		return &ConfigError{Field: field, Value: d.String(), Want: ">= 0"}
	}
	return vocab.CheckDuration(field, d)
}
