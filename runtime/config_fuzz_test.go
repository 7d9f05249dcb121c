package runtime

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// FuzzConfigValidate: Validate never panics, whatever the fields hold; it
// accepts or returns a *ConfigError that matches ErrInvalidConfig and names
// a field; and a config it accepts satisfies C1 as the engine runs it
// (defaults applied, "none" values zero): every field in range and two
// renewals in the local validity of a full lease,
//
//	2 × RenewInterval ≤ LeaseDuration × (1 − Drift) − Margin
func FuzzConfigValidate(f *testing.F) {
	f.Add(int64(0), int64(0), 0.0, int64(0), int64(0), int64(0))
	f.Add(int64(15*time.Second), int64(5*time.Second), 0.01, int64(50*time.Millisecond), int64(2500*time.Millisecond), int64(100*time.Millisecond))
	f.Add(int64(3*time.Second), int64(0), -1.0, int64(-1), int64(-1), int64(0))
	f.Add(int64(time.Second), int64(500*time.Millisecond), 0.49, int64(0), int64(0), int64(0))
	f.Add(int64(-1), int64(time.Second), math.NaN(), int64(math.MaxInt64), int64(math.MinInt64), int64(1))
	f.Add(int64(0), int64(2*time.Second), math.Inf(-1), int64(time.Hour), int64(0), int64(3*time.Second))
	f.Add(int64(0), int64(math.MaxInt64), 0.0, int64(0), int64(0), int64(0))
	f.Add(int64(0), int64(MaxDuration/3+1), 0.0, int64(0), int64(0), int64(0))
	f.Add(int64(MaxDuration), int64(0), 0.0, int64(0), int64(math.MaxInt64), int64(0))
	f.Fuzz(func(t *testing.T, lease, renew int64, drift float64, margin, jitter, backoff int64) {
		c := Config{LeaseDuration: time.Duration(lease), RenewInterval: time.Duration(renew), Drift: drift,
			Margin: time.Duration(margin), RetryJitter: time.Duration(jitter), MinBackoff: time.Duration(backoff)}
		err := c.Validate()
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) || ce.Field == "" {
				t.Fatalf("Validate(%+v) = %v: not a *ConfigError naming a field", c, err)
			}
			// A duration over MaxDuration is the one named, as the caller set
			// it (it was blamed on a derived field once it wrapped around).
			if over := firstOverMax(c); over != "" && ce.Field != over {
				t.Fatalf("Validate(%+v) = %v: want the error to name %s, over MaxDuration", c, err, over)
			}
			return
		}
		e := vocab.Effective(c)
		for _, d := range []time.Duration{e.LeaseDuration, e.RenewInterval, e.Margin, e.RetryJitter, e.MinBackoff} {
			if d > MaxDuration {
				t.Fatalf("Validate accepted %+v, which runs as %+v: a duration over MaxDuration", c, e)
			}
		}
		switch {
		case e.LeaseDuration <= 0, e.RenewInterval <= 0, e.MinBackoff <= 0, e.MinBackoff > e.RenewInterval,
			!(e.Drift >= 0 && e.Drift < 0.5), e.Margin < 0, e.RetryJitter < 0:
			t.Fatalf("Validate accepted %+v, which runs as %+v: a field out of range", c, e)
		}
		if local := vocab.LocalValidity(e, e.LeaseDuration); local <= 0 || 2*e.RenewInterval > local {
			t.Fatalf("Validate accepted %+v, which runs as %+v: 2 × RenewInterval > local validity %v (C1)", c, e, local)
		}
	})
}

// firstOverMax names the first duration field of c over MaxDuration, in the
// order Validate checks them, or "".
func firstOverMax(c Config) string {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"LeaseDuration", c.LeaseDuration}, {"RenewInterval", c.RenewInterval},
		{"Margin", c.Margin}, {"RetryJitter", c.RetryJitter}, {"MinBackoff", c.MinBackoff},
	} {
		if f.d > MaxDuration {
			return f.name
		}
	}
	return ""
}
