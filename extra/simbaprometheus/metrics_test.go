package simbaprometheus_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/extra/simbaprometheus"
	"github.com/simba-go/simba/runtime"
)

var cfg = runtime.Config{LeaseDuration: 3 * time.Second}

// node is one process: a client and its own registry.
type node struct {
	client  *runtime.Client
	metrics *simbaprometheus.Metrics
	reg     *prometheus.Registry
}

func newNode(t *testing.T, store *memory.Store, id string) *node {
	t.Helper()
	m := simbaprometheus.New(simbaprometheus.Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	m.Expect("report")
	c, err := runtime.NewClient(store, cfg, runtime.WithIdentity(id), runtime.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if err := c.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &node{client: c, metrics: m, reg: reg}
}

// scrape compares the named series of n's registry with want, in the text
// exposition format (HELP and TYPE lines left out: only the samples).
func (n *node) scrape(t *testing.T, want string, names ...string) {
	t.Helper()
	synctest.Wait() // events are delivered on the client's event queue
	got, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var help strings.Builder
	for _, mf := range got {
		for _, name := range names {
			if mf.GetName() == name {
				help.WriteString("# HELP " + name + " " + mf.GetHelp() + "\n# TYPE " + name + " " + strings.ToLower(mf.GetType().String()) + "\n")
				for line := range strings.Lines(want) {
					if strings.HasPrefix(strings.TrimSpace(line), name) {
						help.WriteString(strings.TrimSpace(line) + "\n")
					}
				}
			}
		}
	}
	if err := testutil.GatherAndCompare(n.reg, strings.NewReader(help.String()), names...); err != nil {
		t.Errorf("%s: %v", n.client.Identity(), err)
	}
}

func leads(c *runtime.Client, name string) bool {
	for _, l := range c.Snapshot().Leases {
		if l.Name == name && l.Role == runtime.RoleLeader {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 600 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting until %s", what)
}

// An election, a hand-off by step-down, an expiry, a schedule that fails
// then succeeds, a group: each process's registry shows what it did.
func TestSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a := newNode(t, store, "node-a")
		b := newNode(t, store, "node-b")

		// a is elected; b waits.
		ea, err := a.client.StartElection("report", runtime.ListenerFuncs{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a leads", func() bool { return leads(a.client, "report") })
		if _, err := b.client.StartElection("report", runtime.ListenerFuncs{}); err != nil {
			t.Fatal(err)
		}
		a.scrape(t, `
			simba_lease_held{lease="report"} 1
			simba_lease_ownership_changes_total{lease="report"} 1
			simba_session_state{state="closed"} 0
			simba_session_state{state="live"} 1
			simba_session_state{state="opening"} 0
			simba_session_state{state="suspended"} 0
		`, "simba_lease_held", "simba_lease_ownership_changes_total", "simba_session_state")
		b.scrape(t, `simba_lease_held{lease="report"} 0`, "simba_lease_held", "simba_lease_ownership_changes_total")

		// a steps down: b takes over.
		if err := ea.StepDown(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "b leads", func() bool { return leads(b.client, "report") })
		a.scrape(t, `
			simba_lease_held{lease="report"} 0
			simba_lease_ownership_changes_total{lease="report"} 1
			simba_lease_terms_ended_total{lease="report",reason="stepped_down"} 1
		`, "simba_lease_held", "simba_lease_ownership_changes_total", "simba_lease_terms_ended_total")
		b.scrape(t, `
			simba_lease_held{lease="report"} 1
			simba_lease_ownership_changes_total{lease="report"} 1
		`, "simba_lease_held", "simba_lease_ownership_changes_total", "simba_lease_terms_ended_total")

		// b's session expires in the store behind its back: its term ends
		// with session_expired, it opens a new session and is elected again
		// (a is cooling down).
		before := b.client.Snapshot().Session
		if !store.Faults().ExpireSession(before) {
			t.Fatal("ExpireSession: no such session")
		}
		waitFor(t, "b leads on a new session", func() bool {
			return leads(b.client, "report") && b.client.Snapshot().Session != before
		})
		b.scrape(t, `
			simba_lease_held{lease="report"} 1
			simba_lease_ownership_changes_total{lease="report"} 2
			simba_lease_terms_ended_total{lease="report",reason="session_expired"} 1
			simba_sessions_ended_total{reason="session_expired"} 1
		`, "simba_lease_held", "simba_lease_ownership_changes_total", "simba_lease_terms_ended_total", "simba_sessions_ended_total")

		// A schedule whose first run fails.
		var runs atomic.Int32
		if _, err := a.client.StartSchedule("nightly", runtime.Schedule{Rate: time.Second}, func(context.Context, *runtime.Term) error {
			if runs.Add(1) == 1 {
				return errors.New("downstream unavailable")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "three runs", func() bool { return runs.Load() >= 3 })
		time.Sleep(100 * time.Millisecond) // within the slot after the third run
		a.scrape(t, `
			simba_schedule_runs_total{lease="nightly",outcome="failed"} 1
			simba_schedule_runs_total{lease="nightly",outcome="succeeded"} 2
		`, "simba_schedule_runs_total")

		// A group of 4 partitions over both: 2 each, counted per group.
		idle := func(ctx context.Context, _ *runtime.Term, _ int) error { <-ctx.Done(); return nil }
		ga, err := a.client.StartGroup("billing", 4, runtime.Schedule{}, idle)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a holds all 4", func() bool { return len(ga.Partitions()) == 4 })
		if _, err := b.client.StartGroup("billing", 4, runtime.Schedule{}, idle); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "2 each", func() bool { return len(ga.Partitions()) == 2 && len(b.client.Snapshot().Groups[0].Held) == 2 })
		a.scrape(t, `
			simba_group_partitions_held{group="billing"} 2
			simba_group_partitions_lost_total{group="billing",reason="stopped"} 2
			simba_lease_held{lease="nightly"} 1
			simba_lease_held{lease="report"} 0
		`, "simba_group_partitions_held", "simba_group_partitions_lost_total", "simba_lease_held")
		b.scrape(t, `simba_group_partitions_held{group="billing"} 2`, "simba_group_partitions_held", "simba_group_partitions_lost_total")

		// Renewals were timed; the labels never carry a session or a token.
		for _, n := range []*node{a, b} {
			if c := testutil.CollectAndCount(n.metrics, "simba_session_renewal_duration_seconds"); c != 1 {
				t.Errorf("renewal histogram: %d series", c)
			}
			mfs, _ := n.reg.Gather()
			for _, mf := range mfs {
				if mf.GetName() == "simba_session_renewal_duration_seconds" && mf.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
					t.Errorf("%s: no renewal observed", n.client.Identity())
				}
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						if v := l.GetValue(); strings.Contains(v, string(n.client.Snapshot().Session)) || len(v) > 20 {
							t.Errorf("%s{%s=%q}: a label that is not a lease or group name", mf.GetName(), l.GetName(), v)
						}
					}
				}
			}
		}

		// Closed: the state moves to closed, the lease held here is
		// released.
		if err := b.client.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		b.scrape(t, `
			simba_lease_held{lease="report"} 0
			simba_session_state{state="closed"} 1
			simba_session_state{state="live"} 0
			simba_session_state{state="opening"} 0
			simba_session_state{state="suspended"} 0
		`, "simba_lease_held", "simba_session_state")
	})
}

// Several clients of one process add up in one registry; each counts its
// own session state.
func TestObserverPerClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		m := simbaprometheus.New(simbaprometheus.Options{Namespace: "app"})
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		var clients []*runtime.Client
		for i, ob := range []runtime.Observer{m, m.Observer(), m.Observer()} {
			c, err := runtime.NewClient(store, cfg, runtime.WithIdentity("node-"+string(rune('a'+i))), runtime.WithObserver(ob))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if _, err := c.StartElection("report", runtime.ListenerFuncs{}); err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		waitFor(t, "one leads", func() bool {
			for _, c := range clients {
				if leads(c, "report") {
					return true
				}
			}
			return false
		})
		synctest.Wait()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP app_lease_held 1 while a client of this process holds a term of the lease (the number of such clients, with several).
# TYPE app_lease_held gauge
app_lease_held{lease="report"} 1
# HELP app_session_state Clients of this process whose session is in the state: opening, live, suspended, closed.
# TYPE app_session_state gauge
app_session_state{state="closed"} 0
app_session_state{state="live"} 3
app_session_state{state="opening"} 0
app_session_state{state="suspended"} 0
`), "app_lease_held", "app_session_state"); err != nil {
			t.Error(err)
		}
	})
}
