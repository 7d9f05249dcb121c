package runtime

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// C1: DefaultConfig gives the defaults of §5.
func TestDefaultConfig(t *testing.T) {
	got := DefaultConfig()
	want := Config{
		LeaseDuration: 15 * time.Second,
		RenewInterval: 5 * time.Second,
		Drift:         0.01,
		Margin:        50 * time.Millisecond,
		RetryJitter:   2500 * time.Millisecond,
		MinBackoff:    100 * time.Millisecond,
	}
	if got != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	if vocab.WithDefaults(Config{}) != want {
		t.Fatalf("the zero Config does not mean DefaultConfig")
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("Config{}.Validate() = %v, want nil (it means DefaultConfig)", err)
	}
}

// C1: ConfigFor derives a valid configuration from any sensible lease.
func TestConfigForIsValid(t *testing.T) {
	for _, lease := range []time.Duration{100 * time.Millisecond, time.Second, 2 * time.Second, 15 * time.Second, time.Hour} {
		cfg := ConfigFor(lease)
		if err := cfg.Validate(); err != nil {
			t.Errorf("ConfigFor(%v) = %+v: %v", lease, cfg, err)
		}
		if cfg.RenewInterval != lease/3 {
			t.Errorf("ConfigFor(%v).RenewInterval = %v, want %v", lease, cfg.RenewInterval, lease/3)
		}
	}
}

// C1: zero fields take the defaults derived from the fields that are set,
// and a negative Drift, Margin or RetryJitter means none.
func TestConfigPartial(t *testing.T) {
	cases := []struct {
		name string
		in   Config
		want Config
	}{
		{"lease only", Config{LeaseDuration: 5 * time.Second}, ConfigFor(5 * time.Second)},
		{"renew only", Config{RenewInterval: 2 * time.Second}, Config{
			LeaseDuration: 6 * time.Second, RenewInterval: 2 * time.Second, Drift: 0.01,
			Margin: 50 * time.Millisecond, RetryJitter: time.Second, MinBackoff: 100 * time.Millisecond}},
		{"lease and renew", Config{LeaseDuration: 10 * time.Second, RenewInterval: 2 * time.Second}, Config{
			LeaseDuration: 10 * time.Second, RenewInterval: 2 * time.Second, Drift: 0.01,
			Margin: 50 * time.Millisecond, RetryJitter: time.Second, MinBackoff: 100 * time.Millisecond}},
		{"short lease", Config{LeaseDuration: 600 * time.Millisecond}, Config{
			LeaseDuration: 600 * time.Millisecond, RenewInterval: 200 * time.Millisecond, Drift: 0.01,
			Margin: 30 * time.Millisecond, RetryJitter: 100 * time.Millisecond, MinBackoff: 50 * time.Millisecond}},
		{"none", Config{LeaseDuration: 3 * time.Second, Drift: -1, Margin: -1, RetryJitter: -1}, Config{
			LeaseDuration: 3 * time.Second, RenewInterval: time.Second, Drift: -1,
			Margin: -1, RetryJitter: -1, MinBackoff: 100 * time.Millisecond}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.in.Validate(); err != nil {
				t.Fatalf("Validate(%+v) = %v; want nil", tc.in, err)
			}
			if got := vocab.WithDefaults(tc.in); got != tc.want {
				t.Errorf("with defaults: %+v; want %+v", got, tc.want)
			}
		})
	}
	e := vocab.Effective(Config{LeaseDuration: 3 * time.Second, Drift: -1, Margin: -1, RetryJitter: -1})
	if e.Drift != 0 || e.Margin != 0 || e.RetryJitter != 0 {
		t.Errorf("effective config of negative (none) values = %+v; want them zero", e)
	}
}

// C1: each field out of range is rejected with an error naming the field,
// its value and the allowed range; two renewals must fit in the local
// validity, and the margin must leave some.
func TestConfigValidateRejects(t *testing.T) {
	base := ConfigFor(3 * time.Second)
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
		value string
		want  string
	}{
		{"negative lease", func(c *Config) { c.LeaseDuration = -time.Second }, "LeaseDuration", "-1s", "> 0"},
		{"negative renew", func(c *Config) { c.RenewInterval = -time.Second }, "RenewInterval", "-1s", "> 0"},
		{"drift 0.5", func(c *Config) { c.Drift = 0.5 }, "Drift", "0.5", "< 0.5"},
		{"NaN drift", func(c *Config) { c.Drift = nan() }, "Drift", "NaN", "< 0.5"},
		{"negative backoff", func(c *Config) { c.MinBackoff = -1 }, "MinBackoff", "-1ns", "(0, RenewInterval"},
		{"backoff above renew", func(c *Config) { c.MinBackoff = 2 * time.Second }, "MinBackoff", "2s", "(0, RenewInterval"},
		// The seed's rule (2 × 1.5s ≤ 3s) passes; ours does not: 3s × 0.99 − 50ms < 3s.
		{"seed rule only", func(c *Config) { c.RenewInterval = 1500 * time.Millisecond }, "RenewInterval", "1.5s", "two renewals must fit"},
		{"margin eats validity", func(c *Config) { c.Margin = 2 * time.Second }, "RenewInterval", "1s", "two renewals must fit"},
		// A margin longer than the lease is the margin's fault, not the
		// renewal interval's.
		{"margin beyond the lease", func(c *Config) { c.Margin = 20 * time.Second }, "Margin", "20s", "< LeaseDuration × (1 − Drift) = 2.97s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error", cfg)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || ce.Value != tc.value || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %#v, want a *ConfigError for %s = %s matching ErrInvalidConfig", err, tc.field, tc.value)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.field+" = "+tc.value) {
				t.Fatalf("Validate() = %q, want it to name %s = %s and %q", err, tc.field, tc.value, tc.want)
			}
		})
	}
	// The 15s lease of the defaults with a 20s margin.
	err := Config{Margin: 20 * time.Second}.Validate()
	if want := "simba: invalid config: Margin = 20s; want < LeaseDuration × (1 − Drift) = 14.85s, so that a grant leaves some validity"; err == nil || err.Error() != want {
		t.Errorf("Validate(Margin 20s) = %v; want %q", err, want)
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}
