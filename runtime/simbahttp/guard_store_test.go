package simbahttp_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	_ "github.com/simba-go/simba/backends/all"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/internal/testkit/logtext"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
	"github.com/simba-go/simba/runtime/simbahttp"
)

// A process started against a new store — a Redis server that just booted,
// a PostgreSQL database just created — waits out the store's amnesia guard
// (design.md §15) before any lease is granted, and says so: one warning in
// its log and a /healthz answer (200, "ok, waiting: …") that say why and
// until when; once the guard ends it leads, and /healthz says "ok". Real
// servers, real time: the guard is the backend's simba_max_lease, 3s.
func TestNewStoreSaysWhyItWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers")
	}
	const maxLease = 3 * time.Second
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", func(t *testing.T) string {
			srv := testservers.StartRedisServer(t) // booted now: a new namespace is guarded
			return "redis://" + srv.Addr + "/0?simba_max_lease=" + maxLease.String()
		}},
		{"postgres", func(t *testing.T) string {
			return freshPostgresDatabase(t) + "&simba_max_lease=" + maxLease.String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rawURL := tc.url(t)
			var logs logtext.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			ctx := context.Background()
			b, closer, err := backendurl.Open(ctx, rawURL, backendurl.WithLogger(logger))
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			start := time.Now()
			c, err := runtime.NewClient(b, runtime.ConfigFor(time.Second), runtime.WithLogger(logger))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			if _, err := c.StartElection("report", nil); err != nil {
				t.Fatal(err)
			}
			health := simbahttp.NewHealth(c, simbahttp.HealthOptions{})

			var rec *runtime.Recovering
			for deadline := time.Now().Add(maxLease); rec == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				rec = c.Snapshot().Recovering
			}
			if rec == nil {
				t.Fatalf("no Snapshot.Recovering within %v on a new store; log:\n%s", maxLease, logs.String())
			}
			if latest := start.Add(maxLease + time.Second); rec.Until.After(latest) || rec.MaxLease != maxLease {
				t.Errorf("Recovering = %+v; want it to end by %v (the guard is %v)", rec, latest, maxLease)
			}
			resp := get(t, health, http.MethodGet)
			body, _ := io.ReadAll(resp.Result().Body)
			if resp.Code != http.StatusOK || !strings.HasPrefix(string(body), "ok, waiting: no lease is granted until ") ||
				!strings.Contains(string(body), "the store is new or lost its state") || !strings.Contains(string(body), "simba_max_lease") {
				t.Errorf("/healthz during the guard: %d %q; want 200 saying why and until when", resp.Code, body)
			}
			t.Logf("/healthz during the guard: %d %s", resp.Code, body)
			st := simbahttp.StatusOf(ctx, c, simbahttp.StatusOptions{SkipHolders: true})
			if st.Recovering == nil || st.Recovering.RemainingMS <= 0 || st.Recovering.MaxLeaseMS != maxLease.Milliseconds() {
				t.Errorf("/status recovering = %+v; want the guard", st.Recovering)
			}
			out := logs.String()
			if !strings.Contains(out, `msg="simba: no lease is granted for`) || !strings.Contains(out, "until=") {
				t.Errorf("the client's log says nothing of the guard:\n%s", out)
			}

			t.Logf("the client's log:\n%s", out)

			// The guard ends: the client leads, and says ok.
			for deadline := time.Now().Add(maxLease + 3*time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if led(c, "report") {
					break
				}
			}
			if !led(c, "report") {
				t.Fatalf("no lease %v after start, with a guard of %v", time.Since(start), maxLease)
			}
			if waited := time.Since(start); waited > maxLease+2*time.Second {
				t.Errorf("led %v after start; want within the guard (%v) and a retry", waited, maxLease)
			}
			resp = get(t, health, http.MethodGet)
			if body, _ := io.ReadAll(resp.Result().Body); resp.Code != http.StatusOK || string(body) != "ok\n" || c.Snapshot().Recovering != nil {
				t.Errorf("/healthz after the guard: %d %q, recovering %+v; want 200 ok and none", resp.Code, body, c.Snapshot().Recovering)
			}
			if n := strings.Count(logs.String(), `msg="simba: no lease is granted for`); n != 1 {
				t.Errorf("the guard logged %d times by the client; want once:\n%s", n, logs.String())
			}
		})
	}
}

func led(c *runtime.Client, name string) bool {
	for _, l := range c.Snapshot().Leases {
		if l.Name == name && l.Role == runtime.RoleLeader {
			return true
		}
	}
	return false
}

// freshPostgresDatabase creates a database of its own on the test server,
// dropped when the test ends, and returns its URL (with a query).
func freshPostgresDatabase(t *testing.T) string {
	t.Helper()
	dsn := testservers.Postgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("simba_new_%d_%d", os.Getpid(), time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("dropping %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("the test server's DSN %q is not a URL: %v", dsn, err)
	}
	u.Path = "/" + name
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String()
}
