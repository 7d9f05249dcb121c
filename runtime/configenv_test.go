package runtime_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/runtime"
)

// ConfigFromEnv reads every field from its variable, leaves unset ones to
// their defaults, and refuses bad values with a *ConfigError naming the
// variable: the same range checks, and the same allowed range, as
// Config.Validate.
func TestConfigFromEnv(t *testing.T) {
	vars := []string{"LEASE_DURATION", "RENEW_INTERVAL", "DRIFT", "MARGIN", "RETRY_JITTER", "MIN_BACKOFF"}
	clear := func(prefix string) {
		for _, v := range vars {
			t.Setenv(prefix+v, "")
		}
	}
	clear("APP_")
	t.Setenv("APP_LEASE_DURATION", "6s")
	t.Setenv("APP_RENEW_INTERVAL", " 2s ")
	t.Setenv("APP_DRIFT", "0.02")
	t.Setenv("APP_MARGIN", "-1ns")
	t.Setenv("APP_RETRY_JITTER", "500ms")
	t.Setenv("APP_MIN_BACKOFF", "50ms")
	want := runtime.Config{LeaseDuration: 6 * time.Second, RenewInterval: 2 * time.Second, Drift: 0.02,
		Margin: -1, RetryJitter: 500 * time.Millisecond, MinBackoff: 50 * time.Millisecond}
	for _, prefix := range []string{"APP", "APP_"} {
		got, err := runtime.ConfigFromEnv(prefix)
		if err != nil || got != want {
			t.Errorf("ConfigFromEnv(%q) = %+v, %v; want %+v", prefix, got, err, want)
		}
	}

	clear("APP_")
	if got, err := runtime.ConfigFromEnv("APP"); err != nil || got != (runtime.Config{}) {
		t.Errorf("ConfigFromEnv with nothing set = %+v, %v; want the zero Config (the defaults)", got, err)
	}
	clear("")
	t.Setenv("LEASE_DURATION", "9s")
	if got, err := runtime.ConfigFromEnv(""); err != nil || got.LeaseDuration != 9*time.Second {
		t.Errorf("ConfigFromEnv(\"\") = %+v, %v; want LEASE_DURATION read", got, err)
	}

	for _, tc := range []struct {
		env       map[string]string
		field     string
		sameAs    *runtime.Config // the Config whose Validate gives the same allowed range
		wantInMsg string
	}{
		{map[string]string{"APP_LEASE_DURATION": "fifteen"}, "APP_LEASE_DURATION", nil, `APP_LEASE_DURATION = "fifteen"; want a Go duration`},
		{map[string]string{"APP_DRIFT": "a lot"}, "APP_DRIFT", nil, `APP_DRIFT = "a lot"; want a number`},
		{map[string]string{"APP_LEASE_DURATION": "-5s"}, "APP_LEASE_DURATION", &runtime.Config{LeaseDuration: -5 * time.Second}, "APP_LEASE_DURATION = -5s"},
		{map[string]string{"APP_LEASE_DURATION": "15s", "APP_RENEW_INTERVAL": "20s"}, "APP_RENEW_INTERVAL",
			&runtime.Config{LeaseDuration: 15 * time.Second, RenewInterval: 20 * time.Second}, "APP_RENEW_INTERVAL = 20s; want <="},
		{map[string]string{"APP_DRIFT": "0.7"}, "APP_DRIFT", &runtime.Config{Drift: 0.7}, "APP_DRIFT = 0.7"},
		{map[string]string{"APP_RENEW_INTERVAL": "1000000h"}, "APP_RENEW_INTERVAL", nil, "at most 100 years"},
	} {
		clear("APP_")
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		_, err := runtime.ConfigFromEnv("APP")
		var ce *runtime.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, runtime.ErrInvalidConfig) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.wantInMsg) {
			t.Errorf("ConfigFromEnv with %v = %v; want a *ConfigError naming %s, containing %q", tc.env, err, tc.field, tc.wantInMsg)
			continue
		}
		if tc.sameAs != nil {
			var direct *runtime.ConfigError
			if !errors.As(tc.sameAs.Validate(), &direct) || direct.Want != ce.Want || direct.Value != ce.Value {
				t.Errorf("ConfigFromEnv with %v: %v; Validate of the same Config: %v; want the same value and range", tc.env, err, tc.sameAs.Validate())
			}
		}
	}
}

// RegisterConfigFlags: flags override the fields they name and leave the
// others (read from the environment, say) as they were; a bad value is
// refused by Parse, naming the flag.
func TestRegisterConfigFlags(t *testing.T) {
	cfg := runtime.Config{LeaseDuration: 6 * time.Second, RenewInterval: 2 * time.Second}
	fs := flag.NewFlagSet("app", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runtime.RegisterConfigFlags(fs, &cfg)
	if err := fs.Parse([]string{"-simba-lease-duration", "9s", "-simba-drift=0.05", "-simba-margin", "-1ns"}); err != nil {
		t.Fatal(err)
	}
	want := runtime.Config{LeaseDuration: 9 * time.Second, RenewInterval: 2 * time.Second, Drift: 0.05, Margin: -1}
	if cfg != want {
		t.Errorf("after flags: %+v; want %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, args := range [][]string{
		{"-simba-renew-interval", "soon"},
		{"-simba-min-backoff", "1000000h"},
		{"-simba-drift", "x"},
	} {
		fs := flag.NewFlagSet("app", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c runtime.Config
		runtime.RegisterConfigFlags(fs, &c)
		err := fs.Parse(args)
		if err == nil || !strings.Contains(err.Error(), args[0]) || !strings.Contains(err.Error(), "want ") {
			t.Errorf("Parse(%q) = %v; want an error naming the flag and what it wants", args, err)
		}
	}
	// Every flag has a usage line; defaults print as unset.
	var usage strings.Builder
	fs.SetOutput(&usage)
	fs.PrintDefaults()
	for _, name := range []string{"lease-duration", "renew-interval", "drift", "margin", "retry-jitter", "min-backoff"} {
		if !strings.Contains(usage.String(), "-simba-"+name) {
			t.Errorf("usage lacks -simba-%s:\n%s", name, usage.String())
		}
	}
}
