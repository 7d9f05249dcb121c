package engine

import "time"

// Config is the timing the core runs with: the runtime's Config with its
// defaults applied and the negative "none" values of Drift, Margin and
// RetryJitter made zero. Its fields are those of the runtime's Config, in the
// same order, so that one converts to the other directly.
type Config struct {
	LeaseDuration time.Duration // how long the store keeps a session after a renewal
	RenewInterval time.Duration // the renewal period
	Drift         float64       // bound on the clock-rate difference with the store
	Margin        time.Duration // subtracted from every local deadline
	RetryJitter   time.Duration // width of the random delay between attempts
	MinBackoff    time.Duration // shortest delay before retrying a failed renewal
}

// LocalValidity is how long a grant of remaining is trusted locally (D1):
// remaining × (1 − Drift) − Margin.
func (c Config) LocalValidity(remaining time.Duration) time.Duration {
	drift, margin := c.Drift, c.Margin
	if mutant == "drift-ignored" {
		drift = 0
	}
	if mutant == "margin-ignored" {
		margin = 0
	}
	return time.Duration(float64(remaining)*(1-drift)) - margin
}
