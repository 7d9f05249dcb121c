package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
