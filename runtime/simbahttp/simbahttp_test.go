package simbahttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
	"github.com/simba-go/simba/runtime/simbahttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var cfg = runtime.Config{LeaseDuration: 3 * time.Second}

func newClient(t *testing.T, store *memory.Store, identity string) *runtime.Client {
	t.Helper()
	c, err := runtime.NewClient(store, cfg, runtime.WithIdentity(identity))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if err := c.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

// leading waits until c leads name.
func leading(t *testing.T, c *runtime.Client, name string) {
	t.Helper()
	for range 100 {
		for _, l := range c.Snapshot().Leases {
			if l.Name == name && l.Role == runtime.RoleLeader {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s does not lead %q", c.Identity(), name)
}

func get(t *testing.T, h http.Handler, method string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, "/", nil))
	return rec
}

// decodeStatus decodes a status document strictly: a field that the
// documented Status does not have fails the test, and so does any field
// missing that the package documentation does not mark "omitted when …".
func decodeStatus(t *testing.T, body []byte) simbahttp.Status {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var st simbahttp.Status
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("status JSON does not fit the documented schema: %v\n%s", err, body)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	required := func(where string, obj any, keys ...string) {
		m, ok := obj.(map[string]any)
		if !ok {
			t.Fatalf("%s: %v is not an object", where, obj)
		}
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s lacks the required field %q:\n%s", where, k, body)
			}
		}
	}
	required("status", raw, "schema", "time", "identity", "session", "leases", "groups")
	required("session", raw["session"], "id", "state", "remaining_ms", "renew_period_ms")
	for _, l := range raw["leases"].([]any) {
		required("lease", l, "name", "kind", "role", "token", "remaining_ms", "cooldown_ms", "holder")
		if h := l.(map[string]any)["holder"]; h != nil {
			required("holder", h, "free", "session", "identity", "token", "self")
		}
		if s := l.(map[string]any)["schedule"]; s != nil {
			required("schedule", s, "runs")
		}
	}
	for _, g := range raw["groups"].([]any) {
		required("group", g, "name", "partitions", "members", "joined", "held")
		for _, p := range g.(map[string]any)["held"].([]any) {
			required("partition", p, "index", "token", "remaining_ms")
		}
	}
	if st.Schema != simbahttp.SchemaVersion {
		t.Errorf("schema = %q; want %q", st.Schema, simbahttp.SchemaVersion)
	}
	return st
}

// The status handler serves the documented document: every kind of lease,
// the holder this client is and the holders it reads, a group's partitions.
func TestStatusSchema(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a := newClient(t, store, "node-a")
		b := newClient(t, store, "node-b")
		if _, err := a.StartElection("report", runtime.ListenerFuncs{}); err != nil {
			t.Fatal(err)
		}
		leading(t, a, "report")
		if _, err := a.StartSchedule("nightly", runtime.Schedule{Rate: time.Minute}, func(context.Context, *runtime.Term) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := b.StartElection("report", runtime.ListenerFuncs{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Lock(context.Background(), "maintenance"); err != nil {
			t.Fatal(err)
		}
		idle := func(ctx context.Context, _ *runtime.Term, _ int) error { <-ctx.Done(); return nil }
		if _, err := b.StartGroup("billing", 2, runtime.Schedule{}, idle); err != nil {
			t.Fatal(err)
		}
		leading(t, a, "nightly")
		time.Sleep(2 * time.Second) // the group settles, the schedule runs
		synctest.Wait()

		rec := get(t, simbahttp.NewStatus(b, simbahttp.StatusOptions{}), http.MethodGet)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("GET: %d %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		st := decodeStatus(t, rec.Body.Bytes())
		snap := b.Snapshot()
		if st.Identity != "node-b" || st.Session.ID != string(snap.Session) || st.Session.State != "live" ||
			st.Session.RemainingMS <= 0 || st.Session.RenewPeriodMS != cfg.LeaseDuration.Milliseconds()/3 || st.Session.LastError != "" {
			t.Errorf("identity and session: %+v %+v; want node-b's live session %s", st.Identity, st.Session, snap.Session)
		}
		if len(st.Leases) != 2 {
			t.Fatalf("leases: %+v; want report and maintenance", st.Leases)
		}
		report, maint := st.Leases[0], st.Leases[1]
		aSession := string(a.Snapshot().Session)
		if report.Name != "report" || report.Kind != "election" || report.Role != "candidate" || report.Token != 0 ||
			report.Holder == nil || report.Holder.Free || report.Holder.Identity != "node-a" ||
			report.Holder.Session != aSession || report.Holder.Token <= 0 || report.Holder.Self || report.HolderError != "" {
			t.Errorf("report on node-b: %+v (holder %+v); want a candidate that sees node-a hold it", report, report.Holder)
		}
		if maint.Name != "maintenance" || maint.Kind != "lock" || maint.Role != "leader" || maint.Token <= 0 ||
			maint.RemainingMS <= 0 || maint.Holder == nil || !maint.Holder.Self || maint.Holder.Token != maint.Token ||
			maint.Holder.Identity != "node-b" || maint.Schedule != nil {
			t.Errorf("maintenance on node-b: %+v (holder %+v); want the lock, held by itself", maint, maint.Holder)
		}
		if len(st.Groups) != 1 {
			t.Fatalf("groups: %+v", st.Groups)
		}
		g := st.Groups[0]
		if g.Name != "billing" || g.Partitions != 2 || g.Members != 1 || !g.Joined || len(g.Held) != 2 ||
			g.Held[0].Index != 0 || g.Held[1].Index != 1 || g.Held[0].Token <= 0 || g.Held[0].RemainingMS <= 0 || g.Held[0].Schedule != nil {
			t.Errorf("group: %+v; want both partitions held by its only member", g)
		}

		// node-a: a schedule that ran, and a lease it holds: no store read needed.
		st = decodeStatus(t, get(t, simbahttp.NewStatus(a, simbahttp.StatusOptions{SkipHolders: true}), http.MethodGet).Body.Bytes())
		if len(st.Leases) != 2 || st.Leases[1].Name != "nightly" || st.Leases[1].Kind != "schedule" ||
			st.Leases[1].Schedule == nil || st.Leases[1].Schedule.Runs != 1 || st.Leases[1].Schedule.LastRun.IsZero() ||
			st.Leases[1].Schedule.Next.IsZero() || st.Leases[1].Schedule.LastError != "" || !st.Leases[1].Holder.Self {
			t.Errorf("node-a's schedule: %+v", st.Leases)
		}
		if len(st.Groups) != 0 || st.Groups == nil {
			t.Errorf("node-a's groups: %#v; want [] (never null)", st.Groups)
		}

		if rec := get(t, simbahttp.NewStatus(a, simbahttp.StatusOptions{}), http.MethodPost); rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d; want 405", rec.Code)
		}
	})
}

// A holder that cannot be read is reported as such, with the lease's own
// view kept; the read is bounded by HolderTimeout.
func TestStatusHolderUnreadable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		a := newClient(t, store, "node-a")
		b := newClient(t, store, "node-b")
		if _, err := a.StartElection("report", runtime.ListenerFuncs{}); err != nil {
			t.Fatal(err)
		}
		leading(t, a, "report")
		if _, err := b.StartElection("report", runtime.ListenerFuncs{}); err != nil {
			t.Fatal(err)
		}
		store.Faults().SetReachability(memory.Blackhole)
		start := time.Now()
		st := decodeStatus(t, get(t, simbahttp.NewStatus(b, simbahttp.StatusOptions{HolderTimeout: 200 * time.Millisecond}), http.MethodGet).Body.Bytes())
		if took := time.Since(start); took > 200*time.Millisecond {
			t.Errorf("the request took %v; want at most the holder timeout", took)
		}
		if l := st.Leases[0]; l.Holder != nil || !strings.Contains(l.HolderError, `holder of "report"`) || l.Role != "candidate" {
			t.Errorf("lease with an unreadable holder: %+v", l)
		}
		store.Faults().SetReachability(memory.Reachable)
	})
}

// Health: ok while live; suspended is ok for the grace, then 503 with the
// state, how long and the last error; ok again once live; closed is 503.
func TestHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store, "node-a")
		h := simbahttp.NewHealth(c, simbahttp.HealthOptions{Grace: 1500 * time.Millisecond})
		if h.Name() != "simba" {
			t.Errorf("Name() = %q", h.Name())
		}
		check := func(wantCode int, wantBody ...string) {
			t.Helper()
			rec := get(t, h, http.MethodGet)
			if rec.Code != wantCode {
				t.Errorf("%v (%v): %d %q; want %d", time.Now().Format("05.000"), c.Snapshot().State, rec.Code, rec.Body, wantCode)
			}
			for _, w := range wantBody {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("body %q lacks %q", rec.Body, w)
				}
			}
		}
		check(http.StatusOK, "ok")
		store.Faults().SetReachability(memory.Refuse)
		// Renewals every second fail from the next one on: suspended,
		// then (the deadline passes at about 3s) opening.
		for c.Snapshot().State == runtime.SessionLive {
			time.Sleep(10 * time.Millisecond)
		}
		check(http.StatusOK, "ok") // first seen suspended: the grace starts
		time.Sleep(time.Second)
		check(http.StatusOK, "ok")
		time.Sleep(time.Second)
		check(http.StatusServiceUnavailable, "simba: session ", "longer than the grace of 1.5s", "last backend error: ", "refused")
		store.Faults().SetReachability(memory.Reachable)
		for c.Snapshot().State != runtime.SessionLive {
			time.Sleep(10 * time.Millisecond)
		}
		check(http.StatusOK, "ok")
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		check(http.StatusServiceUnavailable, "simba: the client is closed")
	})
}

// The zero grace is the client's lease duration; a negative one fails a
// check as soon as the session is not live.
func TestHealthGraceDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New()
		c := newClient(t, store, "node-a")
		def := simbahttp.NewHealth(c, simbahttp.HealthOptions{})
		strict := simbahttp.NewHealth(c, simbahttp.HealthOptions{Grace: -1})
		store.Faults().SetReachability(memory.Refuse)
		for c.Snapshot().State == runtime.SessionLive {
			time.Sleep(10 * time.Millisecond)
		}
		var at []time.Duration
		start := time.Now()
		for range 50 {
			if def.Check(nil) != nil {
				at = append(at, time.Since(start))
				break
			}
			if strict.Check(nil) == nil {
				t.Fatal("Grace < 0: a check passed while the session is not live")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(at) != 1 || at[0] <= cfg.LeaseDuration || at[0] > cfg.LeaseDuration+200*time.Millisecond {
			t.Errorf("the default grace failed the check after %v; want just after the lease, %v", at, cfg.LeaseDuration)
		}
	})
}
