package runtime

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/runtime/internal/vocab"
)

// Configuration from outside the code: the Go way of the seed's
// simba.session.* properties. Each field of [Config] has an environment
// variable and a flag:
//
//	field          variable (prefix SIMBA)   flag
//	LeaseDuration  SIMBA_LEASE_DURATION      -simba-lease-duration
//	RenewInterval  SIMBA_RENEW_INTERVAL      -simba-renew-interval
//	Drift          SIMBA_DRIFT               -simba-drift
//	Margin         SIMBA_MARGIN              -simba-margin
//	RetryJitter    SIMBA_RETRY_JITTER        -simba-retry-jitter
//	MinBackoff     SIMBA_MIN_BACKOFF         -simba-min-backoff
//
// Durations are Go durations ("15s", "1m30s"), Drift a number; a field
// left unset keeps its default, derived as for any Config.

// configField is one field of Config as the environment and flags name it.
type configField struct {
	field string // the Config field, as a *ConfigError names it
	name  string // the variable's suffix; the flag is "simba-" and its lower-case, dashed form
	usage string
	dur   func(c *Config) *time.Duration // nil for Drift
}

var configFields = []configField{
	{"LeaseDuration", "LEASE_DURATION", "how long the store keeps a session after its last renewal; bounds fail-over (default 15s)",
		func(c *Config) *time.Duration { return &c.LeaseDuration }},
	{"RenewInterval", "RENEW_INTERVAL", "the renewal period (default a third of the lease duration)",
		func(c *Config) *time.Duration { return &c.RenewInterval }},
	{"Drift", "DRIFT", "the bound on the clock rate difference with the store, below 0.5 (default 0.01; negative for none)", nil},
	{"Margin", "MARGIN", "subtracted from every local deadline (default 50ms, or a twentieth of the lease if less; negative for none)",
		func(c *Config) *time.Duration { return &c.Margin }},
	{"RetryJitter", "RETRY_JITTER", "the width of candidates' random delay between attempts (default half the renewal interval; negative for none)",
		func(c *Config) *time.Duration { return &c.RetryJitter }},
	{"MinBackoff", "MIN_BACKOFF", "the shortest delay before retrying a failed renewal (default 100ms, or a quarter of the renewal interval if less)",
		func(c *Config) *time.Duration { return &c.MinBackoff }},
}

// flagName is f's flag: "simba-lease-duration".
func (f configField) flagName() string {
	return "simba-" + strings.ToLower(strings.ReplaceAll(f.name, "_", "-"))
}

// set parses s into f's field of c, or returns a *ConfigError naming what,
// the variable or the flag that held s.
func (f configField) set(c *Config, what, s string) error {
	s = strings.TrimSpace(s)
	if f.dur == nil {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return &ConfigError{Field: what, Value: strconv.Quote(s), Want: "a number below 0.5, such as 0.01"}
		}
		c.Drift = v
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return &ConfigError{Field: what, Value: strconv.Quote(s), Want: "a Go duration, such as 15s or 1m30s"}
	}
	if err := vocab.CheckDuration(what, d); err != nil {
		return err
	}
	*f.dur(c) = d
	return nil
}

// ConfigFromEnv reads a [Config] from the environment variables named
// prefix, an underscore and the field's name in capitals, snake case
// (prefix "SIMBA": SIMBA_LEASE_DURATION, SIMBA_RENEW_INTERVAL, SIMBA_DRIFT,
// SIMBA_MARGIN, SIMBA_RETRY_JITTER, SIMBA_MIN_BACKOFF; an empty prefix
// reads LEASE_DURATION, …). An unset or empty variable leaves its field
// zero, which means its default. The result is validated as
// [Config.Validate] does, and every error is a *[ConfigError] (matching
// [ErrInvalidConfig]) whose Field names the variable at fault: a value
// that does not parse, or a field out of range ("SIMBA_RENEW_INTERVAL =
// 20s; want <= 4.925s: two renewals must fit …"). A field out of range
// that no variable set (a default derived from the others) is named as
// the Config field.
func ConfigFromEnv(prefix string) (Config, error) {
	if prefix != "" && !strings.HasSuffix(prefix, "_") {
		prefix += "_"
	}
	var c Config
	set := make(map[string]string) // Config field → the variable that set it
	for _, f := range configFields {
		name := prefix + f.name
		v, ok := os.LookupEnv(name)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		if err := f.set(&c, name, v); err != nil {
			return Config{}, err
		}
		set[f.field] = name
	}
	if err := c.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			if name, ok := set[ce.Field]; ok {
				named := *ce
				named.Field = name
				return Config{}, &named
			}
		}
		return Config{}, err
	}
	return c, nil
}

// RegisterConfigFlags defines a flag on fs for each field of cfg
// (-simba-lease-duration, -simba-renew-interval, -simba-drift,
// -simba-margin, -simba-retry-jitter, -simba-min-backoff), which sets the
// field when it is given; a flag not given leaves the field as it was, so
// that flags override what [ConfigFromEnv] read. A value that does not
// parse, or a duration above [MaxDuration], is refused by fs.Parse with an
// error naming the flag; the relations between fields are checked by
// [Config.Validate] (and [NewClient]), whose error names the field a flag
// sets (-simba-renew-interval sets RenewInterval).
func RegisterConfigFlags(fs *flag.FlagSet, cfg *Config) {
	for _, f := range configFields {
		usage := f.usage
		if f.dur != nil {
			usage += " (a Go duration, such as 15s)"
		}
		fs.Var(&configFlag{f: f, cfg: cfg}, f.flagName(), usage)
	}
}

// configFlag is the flag.Value of one field of a Config.
type configFlag struct {
	f   configField
	cfg *Config
}

func (v *configFlag) String() string {
	if v == nil || v.cfg == nil {
		return ""
	}
	if v.f.dur == nil {
		if v.cfg.Drift == 0 {
			return ""
		}
		return strconv.FormatFloat(v.cfg.Drift, 'g', -1, 64)
	}
	if d := *v.f.dur(v.cfg); d != 0 {
		return d.String()
	}
	return ""
}

func (v *configFlag) Set(s string) error {
	if err := v.f.set(v.cfg, "-"+v.f.flagName(), s); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			// The flag package prefixes the flag and the value already.
			return fmt.Errorf("want %s", ce.Want)
		}
		return err
	}
	return nil
}
