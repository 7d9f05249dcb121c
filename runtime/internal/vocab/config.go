package vocab

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the timing knobs of a client (design.md, "Timing"). Like the
// standard library's configuration structs, a zero field takes its default,
// derived from the fields that are set: Config{LeaseDuration: 5 * time.Second}
// renews every 5s/3. Drift, Margin and RetryJitter default to non-zero
// values; set one negative for none. [Config.Validate] names the first field
// out of range.
//
// The engine runs with [Effective] of it: defaults applied, "none" made 0.
type Config struct {
	// LeaseDuration is how long the backend keeps a session after its last
	// renewal. It bounds fail-over after a crash or a partition. Default
	// 15s, or 3 × RenewInterval when only that is set.
	LeaseDuration time.Duration

	// RenewInterval is the renewal period. Default LeaseDuration/3.
	RenewInterval time.Duration

	// Drift is the upper bound on the rate difference between this node's
	// clock and the backend's, below 0.5. Default 0.01; negative for none.
	Drift float64

	// Margin is subtracted from every local deadline. Default 50ms, or
	// LeaseDuration/20 if less; negative for none.
	Margin time.Duration

	// RetryJitter is the width of the random delay candidates add to
	// RenewInterval/2 between attempts. Default RenewInterval/2; negative
	// for none.
	RetryJitter time.Duration

	// MinBackoff is the shortest delay before retrying a failed renewal, at
	// most RenewInterval. Default 100ms, or RenewInterval/4 if less.
	MinBackoff time.Duration
}

// ErrInvalidConfig is matched by the *ConfigError of [Config.Validate].
var ErrInvalidConfig = errors.New("invalid config")

// WithDefaults returns c with every zero field set to its default, derived
// from the fields that are set. Negative Drift, Margin and RetryJitter (none)
// are kept as given.
func WithDefaults(c Config) Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
		if c.RenewInterval > 0 {
			c.LeaseDuration = 3 * c.RenewInterval
		}
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.LeaseDuration / 3
	}
	if c.Drift == 0 {
		c.Drift = 0.01
	}
	if c.Margin == 0 {
		c.Margin = min(50*time.Millisecond, c.LeaseDuration/20)
	}
	if c.RetryJitter == 0 {
		c.RetryJitter = c.RenewInterval / 2
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = min(100*time.Millisecond, c.RenewInterval/4)
	}
	return c
}

// Effective returns the configuration the engine runs with: defaults
// applied, and the negative "none" values of Drift, Margin and RetryJitter
// made zero.
func Effective(c Config) Config {
	c = WithDefaults(c)
	c.Drift = max(c.Drift, 0)
	c.Margin = max(c.Margin, 0)
	c.RetryJitter = max(c.RetryJitter, 0)
	return c
}

// LocalValidity is how long a grant of remaining is trusted locally (D1),
// for an effective configuration c:
//
//	remaining × (1 − Drift) − Margin
//
// It is the one place the formula is written: the engine's local deadlines,
// [Config.Validate] and the runtime's schedule checks all use it.
func LocalValidity(c Config, remaining time.Duration) time.Duration {
	return time.Duration(float64(remaining)*(1-c.Drift)) - c.Margin
}

// ConfigError reports a field of a [Config] outside its allowed range. It
// matches [ErrInvalidConfig] with errors.Is.
type ConfigError struct {
	Field string // the offending field, as in "RenewInterval"
	Value string // its value, formatted
	Want  string // the allowed range
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("simba: invalid config: %s = %s; want %s", e.Field, e.Value, e.Want)
}

// Is reports whether target is [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Validate reports the first field of c, with its defaults applied, that is
// out of range, as a *ConfigError naming the field and its value (C1).
// Besides each field's own range, the margin must leave some validity, and
// two renewals must fit in the local validity of a full lease:
//
//	2 × RenewInterval ≤ LeaseDuration × (1 − Drift) − Margin
//
// No duration may exceed [MaxDuration]; that is checked first, on the
// fields as set, so that the error names a field the caller set.
func (c Config) Validate() error {
	if err := c.checkBounds(); err != nil {
		return err
	}
	c = WithDefaults(c)
	switch {
	case c.LeaseDuration < 0:
		return &ConfigError{Field: "LeaseDuration", Value: c.LeaseDuration.String(), Want: "> 0 (or 0 for the default)"}
	case c.RenewInterval < 0:
		return &ConfigError{Field: "RenewInterval", Value: c.RenewInterval.String(), Want: "> 0 (or 0 for the default, LeaseDuration/3)"}
	case !(c.Drift < 0.5):
		return &ConfigError{Field: "Drift", Value: fmt.Sprint(c.Drift), Want: "< 0.5 (0 for the default 0.01, negative for none)"}
	case c.MinBackoff <= 0 || c.MinBackoff > c.RenewInterval: // a derived 0 (RenewInterval under 4ns) would retry without pause
		return &ConfigError{Field: "MinBackoff", Value: c.MinBackoff.String(),
			Want: fmt.Sprintf("in (0, RenewInterval = %v] (or 0 for the default)", c.RenewInterval)}
	}
	e := Effective(c)
	if trusted := time.Duration(float64(e.LeaseDuration) * (1 - e.Drift)); e.Margin >= trusted {
		return &ConfigError{Field: "Margin", Value: c.Margin.String(), Want: fmt.Sprintf(
			"< LeaseDuration × (1 − Drift) = %v, so that a grant leaves some validity", trusted)}
	}
	if local := LocalValidity(e, e.LeaseDuration); 2*e.RenewInterval > local {
		return &ConfigError{Field: "RenewInterval", Value: c.RenewInterval.String(), Want: fmt.Sprintf(
			"<= %v: two renewals must fit in LeaseDuration × (1 − Drift) − Margin = %v", local/2, local)}
	}
	return nil
}
