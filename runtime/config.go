package runtime

import (
	"fmt"
	"time"
)

// Config holds the timing knobs of a client (SPEC §5). The zero Config means
// [DefaultConfig]; any other value is taken as given, zero fields included,
// and must pass [Config.Validate].
type Config struct {
	// LeaseDuration is how long the backend keeps a session after its last
	// renewal. It bounds fail-over after a crash or a partition. Default 15s.
	LeaseDuration time.Duration

	// RenewInterval is the renewal period. Default LeaseDuration/3.
	RenewInterval time.Duration

	// Drift is the upper bound on the rate difference between this node's
	// clock and the backend's, in [0, 0.5). Default 0.01.
	Drift float64

	// Margin is subtracted from every local deadline. Default 50ms.
	Margin time.Duration

	// RetryJitter is the width of the random delay candidates add to
	// RenewInterval/2 between attempts. Default RenewInterval/2.
	RetryJitter time.Duration

	// MinBackoff is the shortest delay before retrying a failed renewal.
	// Default 100ms.
	MinBackoff time.Duration
}

// DefaultConfig returns the defaults of SPEC §5: a 15s lease renewed every 5s.
func DefaultConfig() Config { return ConfigFor(15 * time.Second) }

// ConfigFor derives a valid configuration from a lease duration: renewals every
// third of it, the default drift, and a margin and minimum back-off scaled
// down for short leases (50ms and 100ms at 15s; at most a twentieth of the
// lease and a quarter of the renewal interval).
func ConfigFor(leaseDuration time.Duration) Config {
	renew := leaseDuration / 3
	return Config{
		LeaseDuration: leaseDuration,
		RenewInterval: renew,
		Drift:         0.01,
		Margin:        min(50*time.Millisecond, leaseDuration/20),
		RetryJitter:   renew / 2,
		MinBackoff:    min(100*time.Millisecond, renew/4),
	}
}

// orDefault returns DefaultConfig for the zero Config and c otherwise.
func (c Config) orDefault() Config {
	if c == (Config{}) {
		return DefaultConfig()
	}
	return c
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

// Validate reports the first field of c outside its range (SPEC C1), as a
// *ConfigError. Besides each field's own range, two renewals must fit in
// the local validity of a full lease:
//
//	2 × RenewInterval ≤ LeaseDuration × (1 − Drift) − Margin
//
// The zero Config is valid (it means DefaultConfig).
func (c Config) Validate() error {
	if c == (Config{}) {
		return nil
	}
	switch {
	case c.LeaseDuration <= 0:
		return &ConfigError{"LeaseDuration", c.LeaseDuration.String(), "> 0"}
	case c.RenewInterval <= 0:
		return &ConfigError{"RenewInterval", c.RenewInterval.String(), "> 0"}
	case !(c.Drift >= 0 && c.Drift < 0.5):
		return &ConfigError{"Drift", fmt.Sprint(c.Drift), "in [0, 0.5)"}
	case c.Margin < 0:
		return &ConfigError{"Margin", c.Margin.String(), ">= 0"}
	case c.RetryJitter < 0:
		return &ConfigError{"RetryJitter", c.RetryJitter.String(), ">= 0"}
	case c.MinBackoff <= 0 || c.MinBackoff > c.RenewInterval:
		return &ConfigError{"MinBackoff", c.MinBackoff.String(),
			fmt.Sprintf("in (0, RenewInterval = %v]", c.RenewInterval)}
	}
	if local := c.localValidity(c.LeaseDuration); 2*c.RenewInterval > local {
		return &ConfigError{"RenewInterval", c.RenewInterval.String(), fmt.Sprintf(
			"<= %v: two renewals must fit in LeaseDuration × (1 − Drift) − Margin = %v", local/2, local)}
	}
	return nil
}

// localValidity is how long a grant of remaining is trusted locally (D1):
// remaining × (1 − Drift) − Margin.
func (c Config) localValidity(remaining time.Duration) time.Duration {
	return time.Duration(float64(remaining)*(1-c.Drift)) - c.Margin
}
