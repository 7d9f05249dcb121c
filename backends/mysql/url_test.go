package simbamysql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
)

// URLs and DSNs are checked part by part before anything is dialled; an
// error names the part and what was expected, and never shows a byte of
// the password or of the query's values.
func TestParseURL(t *testing.T) {
	const secret = "s3cr/et@#?x"
	for _, tt := range []struct {
		raw, want string
	}{
		{"mysql://app:" + secret + "@db.internal/app", ""},
		{"mariadb://app:" + secret + "@db.internal:3307/app?timeout=3s&simba_prefix=jobs", ""},
		{"app:" + secret + "@tcp(db.internal:3306)/app?simba_max_lease=15s", ""},
		{"postgres://app@db/app", "want a mysql:// or mariadb:// URL"},
		{"mysql://app:" + secret + "@/app", "names no host"},
		{"mysql://app:" + secret + "@db:99999/app", "port is not a number"},
		{"mysql://app:" + secret + "@db/", "names no database"},
		{"mysql://app:" + secret + "@db/app?simba_max_lease=soon", "simba_max_lease: want a duration"},
		{"mysql://app:" + secret + "@db/app?simba_poll_interval=s3cret", "simba_poll_interval: want a duration"},
		{"mysql://app:" + secret + "@db/app?simba_migrate=perhaps", "simba_migrate: want true or false"},
		{"mysql://app:" + secret + "@db/app?simba_bells=2", ""},
		{"mysql://app:" + secret + "@db/app?simba_bells=-1", "simba_bells: want a count"},
		{"mysql://app:" + secret + "@db/app?simba_bells=many", "simba_bells: want a count"},
		{"mysql://app:" + secret + "@db/app?readTimeout=s3cret", "parameter readTimeout: not a setting"},
		{"app:" + secret + "@unix(/run/mysqld.sock)/app", "network part is not tcp"},
	} {
		cfg, o, err := parseURL(tt.raw)
		if tt.want == "" {
			if err != nil {
				t.Errorf("parseURL(%s): %v", Redact(tt.raw), err)
				continue
			}
			if cfg.Passwd != secret || cfg.User != "app" || cfg.DBName != "app" || cfg.Addr == "" {
				t.Errorf("parseURL(%s) = user %q, database %q, address %q; want app, app and an address", Redact(tt.raw), cfg.User, cfg.DBName, cfg.Addr)
			}
			if strings.Contains(tt.raw, "simba_prefix") && (o.prefix == nil || *o.prefix != "jobs") {
				t.Errorf("parseURL(%s): simba_prefix not taken", Redact(tt.raw))
			}
			if strings.Contains(tt.raw, "simba_bells") && (o.bells == nil || *o.bells != 2) {
				t.Errorf("parseURL(%s): simba_bells not taken", Redact(tt.raw))
			}
			if strings.Contains(cfg.FormatDSN(), "simba_") {
				t.Errorf("parseURL(%s): the driver's configuration keeps a simba_ parameter", Redact(tt.raw))
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseURL(%s) = %v; want an error containing %q", Redact(tt.raw), err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cr") || strings.Contains(err.Error(), "et@")) {
			t.Errorf("parseURL's error shows the secret: %v", err)
		}
	}
}

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"mysql://app:pw@db:3306/app?tls=true":  "mysql://app:xxxxx@db:3306/app?…",
		"app:p@ss@tcp(db:3306)/app?password=x": "xxxxx@tcp(db:3306)/app?…",
		"tcp(db:3306)/app":                     "tcp(db:3306)/app",
		"mariadb://app:p/w#x@db/app":           "mariadb://app:xxxxx@db/app",
		"app:pw@/app":                          "xxxxx@/app",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q; want %q", raw, got, want)
		}
	}
}

// Open fails on a server that refuses, and its error shows the URL
// redacted, in both forms.
func TestOpenErrorsHideCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, raw := range []string{
		"mysql://app:hunter2secret@127.0.0.1:1/app?simba_prefix=x",
		"app:hunter2secret@tcp(127.0.0.1:1)/app",
	} {
		b, err := Open(ctx, raw)
		if err == nil {
			b.Close()
			t.Fatalf("Open(%s) succeeded against a closed port", Redact(raw))
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open's error shows the password: %v", err)
		}
		if !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("Open(%s) = %v; want an error wrapping ErrUnavailable", Redact(raw), err)
		}
	}
}

// backendurl opens mysql:// and mariadb:// URLs with this package once it
// is imported; the backend it opens works.
func TestOpenByURL(t *testing.T) {
	url := sharedURL(t)
	admin := newDB(t, url, nil)
	prefix := uniquePrefix()
	t.Cleanup(func() { dropTables(t, admin, prefix) })
	ctx := testCtx(t)
	for _, scheme := range []string{"mysql", "mariadb"} {
		raw := scheme + strings.TrimPrefix(url, "mysql") + "?simba_prefix=" + prefix + "&simba_max_lease=2s"
		if strings.Contains(url, "?") {
			raw = scheme + strings.TrimPrefix(url, "mysql") + "&simba_prefix=" + prefix + "&simba_max_lease=2s"
		}
		b, c, err := backendurl.Open(ctx, raw)
		if err != nil {
			t.Fatalf("backendurl.Open(%s): %v", Redact(raw), err)
		}
		mb, ok := b.(*Backend)
		if !ok || mb.Prefix() != prefix || mb.MaxLease() != 2*time.Second {
			t.Errorf("backendurl.Open(%s) = %T; want a *simbamysql.Backend with prefix %s and MaxLease 2s", Redact(raw), b, prefix)
		}
		if ok && (!mb.bells.on() || mb.bells.max != DefaultBells || mb.bells.db == mb.db) {
			t.Errorf("backendurl.Open(%s): bells on %v, %d of them, on a pool of their own %v; want %d on a pool of their own",
				Redact(raw), mb.bells.on(), mb.bells.max, mb.bells.db != mb.db, DefaultBells)
		}
		s, r, err := b.OpenSession(ctx, backends.SessionOptions{TTL: time.Minute, Identity: "by-url"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Remaining != 2*time.Second {
			t.Errorf("granted %v; want the MaxLease of the URL, 2s", r.Remaining)
		}
		s.Close(ctx)
		c.Close()
	}
}
