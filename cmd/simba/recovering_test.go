package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

// While the store's amnesia guard refuses grants, status says so, how long
// it lasts and why, in the table and in --json; outside it, it says
// nothing of the kind. Memory: a simulated restart.
func TestStatusShowsGuardMemory(t *testing.T) {
	ctx := context.Background()
	url := "memory:cmdtest-guard-" + runID
	b, c, err := backendurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	store := b.(*memory.Store)
	out := runStatus(t, url)
	if strings.Contains(out, "grants resume") {
		t.Fatalf("status of a store without a guard says:\n%s", out)
	}
	store.Faults().Restart()
	out = runStatus(t, url)
	if !strings.Contains(out, "grants resume in ") || !strings.Contains(out, "the store is new or lost its state") ||
		!strings.Contains(out, "simba_max_lease") {
		t.Errorf("status during the guard:\n%s\nwant a line saying when grants resume and why", out)
	}
	var inv Inventory
	if err := json.Unmarshal([]byte(runStatus(t, url, "--json")), &inv); err != nil {
		t.Fatal(err)
	}
	if r := inv.Recovering; r == nil || r.RemainingMS <= 0 || r.MaxLeaseMS != store.MaxLease().Milliseconds() || r.Why == "" {
		t.Errorf("status --json recovering = %+v; want the guard", r)
	}
}

// Redis: a server that just booted guards a namespace a client has
// touched; status reads the guard without writing.
func TestStatusShowsGuardRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers")
	}
	srv := testservers.StartRedisServer(t)
	url := "redis://" + srv.Addr + "/0?simba_max_lease=5s"
	ctx := context.Background()
	b, c, err := backendurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client, err := runtime.NewClient(b, runtime.ConfigFor(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	if _, err := client.StartElection("report", nil); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Second); client.Snapshot().Recovering == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if client.Snapshot().Recovering == nil {
		t.Fatal("the client met no guard on a Redis that just booted")
	}
	out := runStatus(t, url)
	t.Logf("status:\n%s", out)
	if !strings.Contains(out, "grants resume in ") || !strings.Contains(out, "on the store's clock") {
		t.Errorf("status during the guard:\n%s\nwant a line saying when grants resume", out)
	}
}

// runStatus runs `simba status` on url with more args and returns its output.
func runStatus(t *testing.T, url string, args ...string) string {
	t.Helper()
	var out, errs bytes.Buffer
	if code := run(context.Background(), append([]string{"status", "--backend", url}, args...), noEnv, &out, &errs, false); code != 0 {
		t.Fatalf("simba status: exit %d: %s", code, errs.String())
	}
	return out.String()
}

// PostgreSQL: a schema just created in a new database guards its grants;
// status reads the guard from the schema's meta row.
func TestStatusShowsGuardPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers")
	}
	url := freshPostgresDatabase(t) + "&simba_max_lease=5s"
	ctx := context.Background()
	b, c, err := backendurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client, err := runtime.NewClient(b, runtime.ConfigFor(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	if err := client.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	out := runStatus(t, url)
	t.Logf("status:\n%s", out)
	if !strings.Contains(out, "grants resume in ") || !strings.Contains(out, "the store is new or lost its state") {
		t.Errorf("status during the guard:\n%s\nwant a line saying when grants resume", out)
	}
	time.Sleep(5 * time.Second) // the guard's end
	if out := runStatus(t, url); strings.Contains(out, "grants resume") {
		t.Errorf("status after the guard:\n%s", out)
	}
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
	name := fmt.Sprintf("simba_status_%d_%d", os.Getpid(), time.Now().UnixNano())
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
	u, err := neturl.Parse(dsn)
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
