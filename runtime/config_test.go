package runtime

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// C1: DefaultConfig gives the defaults of SPEC §5.
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
	if (Config{}).orDefault() != want {
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

// C1: each field out of range is rejected with an error naming the field and
// the allowed range; two renewals must fit in the local validity.
func TestConfigValidateRejects(t *testing.T) {
	base := ConfigFor(3 * time.Second)
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
		want  string
	}{
		{"zero lease", func(c *Config) { c.LeaseDuration = 0 }, "LeaseDuration", "> 0"},
		{"negative lease", func(c *Config) { c.LeaseDuration = -time.Second }, "LeaseDuration", "> 0"},
		{"zero renew", func(c *Config) { c.RenewInterval = 0 }, "RenewInterval", "> 0"},
		{"negative drift", func(c *Config) { c.Drift = -0.1 }, "Drift", "[0, 0.5)"},
		{"drift 0.5", func(c *Config) { c.Drift = 0.5 }, "Drift", "[0, 0.5)"},
		{"NaN drift", func(c *Config) { c.Drift = nan() }, "Drift", "[0, 0.5)"},
		{"negative margin", func(c *Config) { c.Margin = -1 }, "Margin", ">= 0"},
		{"negative jitter", func(c *Config) { c.RetryJitter = -1 }, "RetryJitter", ">= 0"},
		{"zero backoff", func(c *Config) { c.MinBackoff = 0 }, "MinBackoff", "(0, RenewInterval"},
		{"backoff above renew", func(c *Config) { c.MinBackoff = 2 * time.Second }, "MinBackoff", "(0, RenewInterval"},
		// The seed's rule (2 × 1.5s ≤ 3s) passes; ours does not: 3s × 0.99 − 50ms < 3s.
		{"seed rule only", func(c *Config) { c.RenewInterval = 1500 * time.Millisecond }, "RenewInterval", "two renewals must fit"},
		{"margin eats validity", func(c *Config) { c.Margin = 2 * time.Second }, "RenewInterval", "two renewals must fit"},
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
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %#v, want a *ConfigError for %s matching ErrInvalidConfig", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %q, want it to name %s and %q", err, tc.field, tc.want)
			}
		})
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}
