package simbaotel_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/extra/simbaotel"
	"github.com/simba-go/simba/runtime"
)

var cfg = runtime.Config{LeaseDuration: 3 * time.Second}

// node is one process: a client and its own meter provider and reader.
type node struct {
	client *runtime.Client
	reader *sdkmetric.ManualReader
}

func newNode(t *testing.T, store *memory.Store, id string) *node {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	m, err := simbaotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := runtime.NewClient(store, cfg, runtime.WithIdentity(id), runtime.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if err := c.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &node{client: c, reader: reader}
}

// read collects n's metrics: instrument → attribute set → value (the sum,
// or a histogram's count).
func (n *node) read(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	synctest.Wait() // events are delivered on the client's event queue
	var rm metricdata.ResourceMetrics
	if err := n.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]map[string]int64)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != simbaotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			vals := make(map[string]int64)
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Value
					checkAttrs(t, m.Name, p.Attributes, n)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					vals[p.Attributes.Encoded(attribute.DefaultEncoder())] = int64(p.Count)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
			out[m.Name] = vals
		}
	}
	return out
}

// checkAttrs fails if a point carries anything but a lease or group name,
// a reason, a state or an outcome.
func checkAttrs(t *testing.T, name string, set attribute.Set, n *node) {
	for _, kv := range set.ToSlice() {
		switch kv.Key {
		case "simba.lease", "simba.group", "simba.reason", "simba.state", "simba.outcome":
		default:
			t.Errorf("%s: attribute %s", name, kv.Key)
		}
		if kv.Value.AsString() == string(n.client.Snapshot().Session) {
			t.Errorf("%s: a session id as %s", name, kv.Key)
		}
	}
}

func set(kv ...attribute.KeyValue) string {
	s := attribute.NewSet(kv...)
	return s.Encoded(attribute.DefaultEncoder())
}

func lease(name string) attribute.KeyValue { return attribute.String("simba.lease", name) }
func reason(r string) attribute.KeyValue   { return attribute.String("simba.reason", r) }
func group(name string) attribute.KeyValue { return attribute.String("simba.group", name) }
func state(s string) attribute.KeyValue    { return attribute.String("simba.state", s) }
func outcome(o string) attribute.KeyValue  { return attribute.String("simba.outcome", o) }
func leads(c *runtime.Client, n string) bool {
	for _, l := range c.Snapshot().Leases {
		if l.Name == n && l.Role == runtime.RoleLeader {
			return true
		}
	}
	return false
}

type want struct {
	instrument string
	attrs      string // attribute.DefaultEncoder's encoding
	value      int64
}

func expect(t *testing.T, who string, got map[string]map[string]int64, wants ...want) {
	t.Helper()
	for _, w := range wants {
		if v, ok := got[w.instrument][w.attrs]; !ok || v != w.value {
			t.Errorf("%s: %s{%s} = %d (recorded: %v); want %d", who, w.instrument, w.attrs, v, ok, w.value)
		}
	}
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

// The scenario of simbaprometheus's test, read through a ManualReader.
func TestInstruments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a := newNode(t, store, "node-a")
		b := newNode(t, store, "node-b")
		ea, err := a.client.StartElection("report", runtime.ListenerFuncs{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a leads", func() bool { return leads(a.client, "report") })
		if _, err := b.client.StartElection("report", runtime.ListenerFuncs{}); err != nil {
			t.Fatal(err)
		}
		expect(t, "a", a.read(t),
			want{"simba.lease.held", set(lease("report")), 1},
			want{"simba.lease.ownership_changes", set(lease("report")), 1},
			want{"simba.session.state", set(state("live")), 1},
			want{"simba.session.state", set(state("opening")), 0},
		)

		// Hand-off by step-down.
		if err := ea.StepDown(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "b leads", func() bool { return leads(b.client, "report") })
		expect(t, "a", a.read(t),
			want{"simba.lease.held", set(lease("report")), 0},
			want{"simba.lease.terms_ended", set(lease("report"), reason("stepped_down")), 1},
		)
		expect(t, "b", b.read(t),
			want{"simba.lease.held", set(lease("report")), 1},
			want{"simba.lease.ownership_changes", set(lease("report")), 1},
		)

		// An expiry behind b's back.
		before := b.client.Snapshot().Session
		store.Faults().ExpireSession(before)
		waitFor(t, "b leads on a new session", func() bool {
			return leads(b.client, "report") && b.client.Snapshot().Session != before
		})
		got := b.read(t)
		expect(t, "b", got,
			want{"simba.lease.held", set(lease("report")), 1},
			want{"simba.lease.ownership_changes", set(lease("report")), 2},
			want{"simba.lease.terms_ended", set(lease("report"), reason("session_expired")), 1},
			want{"simba.session.ended", set(reason("session_expired")), 1},
		)

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
		time.Sleep(100 * time.Millisecond)
		expect(t, "a", a.read(t),
			want{"simba.schedule.runs", set(lease("nightly"), outcome("failed")), 1},
			want{"simba.schedule.runs", set(lease("nightly"), outcome("succeeded")), 2},
		)

		// A group of 4 over both.
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
		got = a.read(t)
		expect(t, "a", got,
			want{"simba.group.partitions.held", set(group("billing")), 2},
			want{"simba.group.partitions.lost", set(group("billing"), reason("stopped")), 2},
		)
		for attrs := range got["simba.lease.held"] {
			if attrs != set(lease("report")) && attrs != set(lease("nightly")) {
				t.Errorf("a: simba.lease.held{%s}: partitions are counted per group", attrs)
			}
		}
		got = b.read(t)
		expect(t, "b", got, want{"simba.group.partitions.held", set(group("billing")), 2})
		if got["simba.session.renewal.duration"][set()] == 0 {
			t.Error("b: no renewal recorded")
		}

		// Closed.
		if err := b.client.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		expect(t, "b", b.read(t),
			want{"simba.lease.held", set(lease("report")), 0},
			want{"simba.session.state", set(state("closed")), 1},
			want{"simba.session.state", set(state("live")), 0},
		)
	})
}
