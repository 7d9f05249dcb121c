package backendurl_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/simba-go/simba/backends"
	. "github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/memory"
)

func TestOpenMemory(t *testing.T) {
	ctx := context.Background()
	b, c, err := Open(ctx, "memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if b != memory.Open("") {
		t.Error("memory: is not the process-wide default store")
	}
	jobs1, _, _ := Open(ctx, "memory:jobs")
	jobs2, _, _ := Open(ctx, "memory:jobs")
	other, _, _ := Open(ctx, "memory:other")
	if jobs1 != jobs2 || jobs1 == other || jobs1 == b {
		t.Error("memory:NAME: want one store per name, shared within the process")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// §12: credentials in URLs are redacted in every error; a scheme whose
// backend is known but not imported names the package to import.
func TestOpenErrors(t *testing.T) {
	// This test binary imports backends/all (fuzz_test.go): every backend
	// of the module is registered, with the test's own "loggertest".
	const registered = "loggertest://…, mariadb://…, memory:, memory:NAME, mysql://…, postgres://…, postgresql://…, redis://…, rediss://…, unix://…, zk://…"
	for _, tt := range []struct{ url, want string }{
		{"ETCD://u:s3cret@h:2379/x", `simba: backend URL "ETCD://u:xxxxx@h:2379/x": no backend is registered for "etcd:"; import _ "github.com/simba-go/simba/backends/etcd", a module of its own, in the program`},
		{"gopher://u:s3cret@h/x", `simba: backend URL "gopher://u:xxxxx@h/x": unknown scheme "gopher"; want ` + registered},
		{"admin:s3cret@localhost", `simba: backend URL "admin:xxxxx@localhost": unknown scheme; want ` + registered},
		{"localhost", `simba: backend URL "localhost" has no scheme; want ` + registered},
		{"memory://x", `simba: backend URL "memory://x": write memory: or memory:NAME, without //`},
	} {
		b, c, err := Open(context.Background(), tt.url)
		if err == nil || b != nil || c != nil {
			t.Errorf("Open(%q) = %v, %v, %v; want an error", tt.url, b, c, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Open(%q) error:\n%s\nwant\n%s", tt.url, err, tt.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error leaks the password: %s", tt.url, err)
		}
	}
}

// Register refuses what would make Open ambiguous or crash later: a
// scheme twice, a scheme that is not lower-case, a nil Opener.
func TestRegisterPanics(t *testing.T) {
	open := func(context.Context, string, Options) (backends.Backend, io.Closer, error) { return nil, nil, nil }
	for name, f := range map[string]func(){
		"duplicate": func() { Register("memory", open) },
		"upper":     func() { Register("Redis2", open) },
		"empty":     func() { Register("", open) },
		"nil":       func() { Register("nothing", nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s: no panic", name)
				}
			}()
			f()
		}()
	}
	if slices.Contains(Schemes(), "nothing") || slices.Contains(Schemes(), "Redis2") {
		t.Errorf("Schemes() = %v after refused registrations", Schemes())
	}
}

// loggers records the loggers handed to the "loggertest" opener.
var loggers []*slog.Logger

func init() {
	Register("loggertest", func(_ context.Context, _ string, o Options) (backends.Backend, io.Closer, error) {
		loggers = append(loggers, o.Logger)
		return memory.New(), io.NopCloser(nil), nil
	})
}

// An Opener's logger is never nil, and WithLogger hands the caller's; the
// scheme matches whatever its case.
func TestOpenerGetsLogger(t *testing.T) {
	loggers = nil
	mine := slog.New(slog.DiscardHandler)
	if _, _, err := Open(context.Background(), "loggertest:"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(context.Background(), "LoggerTest:", WithLogger(mine)); err != nil {
		t.Fatal(err)
	}
	if len(loggers) != 2 || loggers[0] == nil || loggers[1] != mine {
		t.Errorf("loggers handed to the opener: %v; want a non-nil one, then the caller's", loggers)
	}
}
