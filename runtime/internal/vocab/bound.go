package vocab

import (
	"fmt"
	"time"
)

// MaxDuration is the longest duration a caller may set anywhere: in a
// [Config], a [Schedule], a cooldown. The engine adds durations to its
// clock and multiplies some by small factors (a derived LeaseDuration is
// 3 × RenewInterval, two renewals must fit in a lease); a duration near
// the largest time.Duration (about 292 years) wrapped around to a negative
// one, so a schedule's initial delay made it run at once, over and over. A
// hundred years leaves room for every sum and product the engine makes.
const MaxDuration = 100 * 365 * 24 * time.Hour

// maxDurationWant is the allowed range a *ConfigError gives for a duration
// over MaxDuration.
const maxDurationWant = "at most 100 years (876000h0m0s): the engine adds it to its clock"

// CheckDuration returns a *ConfigError naming field if d exceeds
// MaxDuration, and nil otherwise. Each caller checks its own lower bound.
func CheckDuration(field string, d time.Duration) error {
	if d > MaxDuration {
		return &ConfigError{Field: field, Value: d.String(), Want: maxDurationWant}
	}
	return nil
}

// checkBounds checks the durations of c as the caller set them, before any
// default is derived from them, so that the error names a field the caller
// set: RenewInterval near the largest duration made the derived
// LeaseDuration (3 × RenewInterval) wrap to a negative value, and the error
// blamed LeaseDuration, which the caller had left zero.
func (c Config) checkBounds() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"LeaseDuration", c.LeaseDuration}, {"RenewInterval", c.RenewInterval},
		{"Margin", c.Margin}, {"RetryJitter", c.RetryJitter}, {"MinBackoff", c.MinBackoff},
	} {
		if err := CheckDuration(f.name, f.d); err != nil {
			return err
		}
	}
	if c.LeaseDuration == 0 && c.RenewInterval > MaxDuration/3 {
		return &ConfigError{Field: "RenewInterval", Value: c.RenewInterval.String(), Want: fmt.Sprintf(
			"at most %v when LeaseDuration is left to its default, 3 × RenewInterval, which is at most 100 years", MaxDuration/3)}
	}
	return nil
}
