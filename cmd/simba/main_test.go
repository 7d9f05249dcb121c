package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/goleak"

	"github.com/simba-go/simba/backends"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/backends/memory"
	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/internal/schedulerecord"
	"github.com/simba-go/simba/internal/testkit/testservers"
	"github.com/simba-go/simba/runtime"
)

func TestMain(m *testing.M) {
	simbaredis.SetDriverLogger(nil) // as main does
	goleak.VerifyTestMain(m)
}

// backendCase is one backend the scripts in testdata/script run against.
type backendCase struct {
	name string

	// url returns the URL of a namespace of the test's own on the backend,
	// with a placeholder "NS" that each script replaces with a name of its
	// own, so that a script sees only its own leases. It skips the test
	// when the server is missing (fails it under make test and CI).
	url func(t *testing.T) string

	// unreachable is a URL of the backend's scheme, with a password, at
	// which no server answers; "" for a backend that cannot be unreachable
	// (memory). The scripts run `simba status` on it and expect exit 1, a
	// clear error and no password.
	unreachable string

	// withPassword returns ns's URL with the password s3cret in it, which
	// the server accepts (a server without authentication ignores it) or
	// refuses; "" if the scheme has no credentials. Either way, nothing the
	// command prints may contain it.
	withPassword func(url string) string
}

// backendCases are the backends the command is tested on. A new backend
// that implements backends.Inspector gets a line here, and every script
// runs on it.
var backendCases = []backendCase{
	{
		name: "memory",
		url:  func(t *testing.T) string { return "memory:cmdtest-" + runID + "-NS" },
	},
	{
		name: "redis",
		url: func(t *testing.T) string {
			addr := testservers.Redis(t)
			// Database 12 is this test's; each run has prefixes of its own.
			testservers.ClearRedis(t, addr, 12, "{cmdtest-"+runID+"-*")
			return "redis://" + addr + "/12?simba_prefix=cmdtest-" + runID + "-NS"
		},
		unreachable:  "redis://simba:s3cret@127.0.0.1:1/0",
		withPassword: func(u string) string { return strings.Replace(u, "redis://", "redis://:s3cret@", 1) },
	},
	{
		name: "postgres",
		url: func(t *testing.T) string {
			dsn := testservers.Postgres(t)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			return dsn + sep + "simba_max_lease=2s&simba_schema=cmdtest_" + runID + "_NS"
		},
		unreachable: "postgres://simba:s3cret@127.0.0.1:1/simba?sslmode=disable",
		withPassword: func(u string) string {
			return strings.Replace(u, "postgres://postgres@", "postgres://postgres:s3cret@", 1)
		},
	},
	{
		name: "zookeeper",
		url: func(t *testing.T) string {
			return "zk://" + strings.Join(testservers.ZooKeeper(t), ",") + "/simba-cmdtest-" + runID + "-NS?simba_max_lease=3s"
		},
		unreachable:  "zk://simba:s3cret@127.0.0.1:1/simba",
		withPassword: func(u string) string { return strings.Replace(u, "zk://", "zk://simba:s3cret@", 1) },
	},
}

// runID keeps the namespaces of one test run apart from another's, on a
// server other checkouts share.
var runID = func() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// TestScripts runs every script in testdata/script on every backend.
// Each script gets $SIMBA_BACKEND (its own namespace, which simba reads), $UNREACHABLE and
// $WITH_PASSWORD (see backendCase), and these commands, in this process:
//
//	simba ARGS...                    the command itself (run, in-process)
//	exitcode N                       the last simba's exit code was N
//	node start ID election NAME      node ID (a client with identity ID) contends for NAME
//	node start ID schedule NAME RATE node ID runs a schedule on NAME every RATE
//	node start ID group NAME N       node ID joins the group NAME of N partitions
//	node holds ID NAME [N]           wait until node ID leads NAME, or holds N partitions of group NAME
//	node stop ID [after D]           close node ID (a graceful hand-off), now or after D in the background
//	node crash ID [after D]          node ID stops reaching the store, as a crashed process: its session expires
//	slot NAME                        wait until the store has a schedule record under NAME
//	faults refuse|reachable [after D] (memory only) the store refuses every call, or answers again
//
// The condition [server] holds for server backends ($UNREACHABLE set).
func TestScripts(t *testing.T) {
	for _, bc := range backendCases {
		t.Run(bc.name, func(t *testing.T) {
			base := bc.url(t)
			testscript.Run(t, testscript.Params{
				Dir:                 "testdata/script",
				RequireExplicitExec: true,
				Setup: func(env *testscript.Env) error {
					ns := strings.ReplaceAll(strings.TrimSuffix(env.WorkDir[strings.LastIndex(env.WorkDir, "/")+1:], ""), "/", "-")
					name := strconv.Itoa(int(nsSeq.Add(1))) + "-" + scriptName(ns)
					if strings.HasPrefix(base, "postgres") {
						name = strings.ReplaceAll(name, "-", "_") // a schema name
					}
					url := strings.Replace(base, "NS", name, 1)
					env.Setenv(backendEnv, url)
					env.Setenv("UNREACHABLE", bc.unreachable)
					if bc.withPassword != nil {
						env.Setenv("WITH_PASSWORD", bc.withPassword(url))
					}
					sc := &scenario{url: url, nodes: make(map[string]*node)}
					env.Values[scenarioKey{}] = sc
					env.Defer(sc.close)
					return nil
				},
				Condition: func(cond string) (bool, error) {
					if cond == "server" {
						return bc.unreachable != "", nil
					}
					return false, fmt.Errorf("unknown condition %q", cond)
				},
				Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
					"simba":    cmdSimba,
					"exitcode": cmdExitCode,
					"node":     cmdNode,
					"slot":     cmdSlot,
					"faults":   cmdFaults,
				},
			})
		})
	}
}

var nsSeq atomic.Int64

// scriptName shortens a work directory name ("script-status") to
// characters every backend's namespace takes.
func scriptName(dir string) string {
	dir = strings.TrimPrefix(dir, "script-")
	var b strings.Builder
	for _, r := range dir {
		if 'a' <= r && r <= 'z' || '0' <= r && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

type scenarioKey struct{}

// scenario is one script's nodes, on its backend namespace.
type scenario struct {
	url      string
	mu       sync.Mutex
	nodes    map[string]*node
	lastCode int
	bg       sync.WaitGroup
}

type node struct {
	client  *runtime.Client
	backend *crashable
	closer  io.Closer
}

func state(ts *testscript.TestScript) *scenario { return ts.Value(scenarioKey{}).(*scenario) }

func (sc *scenario) close() {
	sc.bg.Wait()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for id, n := range sc.nodes {
		n.shut()
		delete(sc.nodes, id)
	}
}

func (n *node) shut() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n.client.Close(ctx)
	n.closer.Close()
}

// scenarioConfig is the nodes' timing: a short lease, so that a crash is
// seen within seconds.
var scenarioConfig = runtime.Config{LeaseDuration: 2 * time.Second}

func (sc *scenario) node(ts *testscript.TestScript, id string) *node {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if n := sc.nodes[id]; n != nil {
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, c, err := backendurl.Open(ctx, sc.url)
	ts.Check(err)
	cb := &crashable{Backend: b}
	client, err := runtime.NewClient(cb, scenarioConfig, runtime.WithIdentity(id))
	ts.Check(err)
	ts.Check(client.Ready(ctx))
	n := &node{client: client, backend: cb, closer: c}
	sc.nodes[id] = n
	return n
}

func cmdSimba(ts *testscript.TestScript, neg bool, args []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	getenv := func(k string) string { return ts.Getenv(k) }
	code := run(ctx, args, getenv, ts.Stdout(), ts.Stderr(), false)
	state(ts).lastCode = code
	switch {
	case neg && code == 0:
		ts.Fatalf("simba succeeded; want a non-zero exit")
	case !neg && code != 0:
		ts.Fatalf("simba exited %d", code)
	}
}

func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: exitcode N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	if got := state(ts).lastCode; (got == want) == neg {
		ts.Fatalf("simba exited %d; want %s%d", got, map[bool]string{true: "not "}[neg], want)
	}
}

func cmdNode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: node start|holds|stop|crash ID ...")
	}
	sc := state(ts)
	verb, id, rest := args[0], args[1], args[2:]
	switch verb {
	case "start":
		n := sc.node(ts, id)
		if len(rest) < 2 {
			ts.Fatalf("usage: node start ID election|schedule|group NAME [RATE|N]")
		}
		switch kind, name := rest[0], rest[1]; kind {
		case "election":
			_, err := n.client.StartElection(name, runtime.ListenerFuncs{})
			ts.Check(err)
		case "schedule":
			if len(rest) != 3 {
				ts.Fatalf("usage: node start ID schedule NAME RATE")
			}
			rate, err := time.ParseDuration(rest[2])
			ts.Check(err)
			_, err = n.client.StartSchedule(name, runtime.Schedule{Rate: rate},
				func(context.Context, *runtime.Term) error { return nil })
			ts.Check(err)
		case "group":
			if len(rest) != 3 {
				ts.Fatalf("usage: node start ID group NAME N")
			}
			parts, err := strconv.Atoi(rest[2])
			ts.Check(err)
			_, err = n.client.StartGroup(name, parts, runtime.Schedule{},
				func(ctx context.Context, _ *runtime.Term, _ int) error { <-ctx.Done(); return nil })
			ts.Check(err)
		default:
			ts.Fatalf("node start: unknown kind %q", kind)
		}
	case "holds":
		if len(rest) < 1 {
			ts.Fatalf("usage: node holds ID NAME [N]")
		}
		n := sc.node(ts, id)
		want := -1
		if len(rest) == 2 {
			var err error
			want, err = strconv.Atoi(rest[1])
			ts.Check(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !holds(n.client.Snapshot(), rest[0], want) {
			if time.Now().After(deadline) {
				ts.Fatalf("node %s does not hold %s (%d) after 20s: %+v", id, rest[0], want, n.client.Snapshot())
			}
			time.Sleep(20 * time.Millisecond)
		}
	case "stop", "crash":
		var delay time.Duration
		if len(rest) == 2 && rest[0] == "after" {
			var err error
			delay, err = time.ParseDuration(rest[1])
			ts.Check(err)
		} else if len(rest) != 0 {
			ts.Fatalf("usage: node %s ID [after D]", verb)
		}
		n := sc.node(ts, id)
		act := func() {
			if verb == "crash" {
				n.backend.dead.Store(true)
				return
			}
			sc.mu.Lock()
			delete(sc.nodes, id)
			sc.mu.Unlock()
			n.shut()
		}
		if delay == 0 {
			act()
			return
		}
		sc.bg.Go(func() { time.Sleep(delay); act() })
	default:
		ts.Fatalf("node: unknown verb %q", verb)
	}
}

// holds reports whether snap leads name, or holds want partitions of the
// group name (want >= 0).
func holds(snap runtime.Snapshot, name string, want int) bool {
	if want >= 0 {
		for _, g := range snap.Groups {
			if g.Name == name && len(g.Held) == want {
				return true
			}
		}
		return false
	}
	for _, l := range snap.Leases {
		if l.Name == name && l.Role == runtime.RoleLeader {
			return true
		}
	}
	return false
}

func cmdSlot(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: slot NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, c, err := backendurl.Open(ctx, state(ts).url)
	ts.Check(err)
	defer c.Close()
	for {
		inv, err := b.(backends.Inspector).Inspect(ctx)
		ts.Check(err)
		for _, l := range inv.Leases {
			if _, ok := schedulerecord.Decode(l.Value); ok && l.Name == args[0] {
				return
			}
		}
		select {
		case <-ctx.Done():
			ts.Fatalf("no schedule record under %q: %v", args[0], ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// crashable passes calls to a backend until it is dead: then every call
// fails as if the store were unreachable, as for a crashed process, so
// that the store expires its session.
type crashable struct {
	backends.Backend
	dead atomic.Bool
}

var errCrashed = fmt.Errorf("the node crashed: %w", backends.ErrUnavailable)

func (c *crashable) OpenSession(ctx context.Context, opts backends.SessionOptions) (backends.Session, backends.Renewal, error) {
	if c.dead.Load() {
		return nil, backends.Renewal{}, errCrashed
	}
	s, r, err := c.Backend.OpenSession(ctx, opts)
	if err != nil {
		return nil, r, err
	}
	return &crashSession{Session: s, c: c}, r, nil
}

func (c *crashable) StoreTime(ctx context.Context) (time.Time, error) {
	return c.Backend.(backends.StoreClock).StoreTime(ctx)
}

type crashSession struct {
	backends.Session
	c *crashable
}

func (s *crashSession) KeepAlive(ctx context.Context) (backends.Renewal, error) {
	if s.c.dead.Load() {
		return backends.Renewal{}, errCrashed
	}
	return s.Session.KeepAlive(ctx)
}

func (s *crashSession) Owned(ctx context.Context) ([]backends.Held, backends.Digest, error) {
	if s.c.dead.Load() {
		return nil, backends.Digest{}, errCrashed
	}
	return s.Session.Owned(ctx)
}

func (s *crashSession) Acquire(ctx context.Context, name string) (backends.Grant, error) {
	if s.c.dead.Load() {
		return backends.Grant{}, errCrashed
	}
	return s.Session.Acquire(ctx, name)
}

func (s *crashSession) Release(ctx context.Context, name string, token backends.Token) (backends.Digest, error) {
	if s.c.dead.Load() {
		return backends.Digest{}, errCrashed
	}
	return s.Session.Release(ctx, name, token)
}

func (s *crashSession) PutValue(ctx context.Context, name string, token backends.Token, value []byte) error {
	if s.c.dead.Load() {
		return errCrashed
	}
	return s.Session.PutValue(ctx, name, token, value)
}

func (s *crashSession) Join(ctx context.Context, group string, partitions int) error {
	if s.c.dead.Load() {
		return errCrashed
	}
	return s.Session.Join(ctx, group, partitions)
}

func (s *crashSession) Leave(ctx context.Context, group string) error {
	if s.c.dead.Load() {
		return errCrashed
	}
	return s.Session.Leave(ctx, group)
}

func (s *crashSession) Members(ctx context.Context, group string) (backends.GroupView, error) {
	if s.c.dead.Load() {
		return backends.GroupView{}, errCrashed
	}
	return s.Session.Members(ctx, group)
}

func (s *crashSession) Holder(ctx context.Context, name string) (backends.Holder, error) {
	if s.c.dead.Load() {
		return backends.Holder{}, errCrashed
	}
	return s.Session.Holder(ctx, name)
}

func (s *crashSession) Close(ctx context.Context) error {
	if s.c.dead.Load() {
		return errCrashed // the store expires it
	}
	return s.Session.Close(ctx)
}

// Watch passes release notifications on while the node is alive.
func (s *crashSession) Watch(name string, fn func()) (stop func()) {
	n, ok := s.Session.(backends.Notifier)
	if !ok {
		return func() {}
	}
	return n.Watch(name, func() {
		if !s.c.dead.Load() {
			fn()
		}
	})
}

// The JSON that status --json prints is the documented Inventory, with no
// other field, and every field the documentation does not mark optional.
func TestStatusJSONSchema(t *testing.T) {
	ctx := context.Background()
	url := "memory:cmdtest-json-" + runID
	b, c, err := backendurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client, err := runtime.NewClient(b, scenarioConfig, runtime.WithIdentity("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	if _, err := client.Lock(ctx, "maintenance"); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run(ctx, []string{"status", "--json", "--backend", url}, noEnv, &out, &errs, false); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	dec.DisallowUnknownFields()
	var inv Inventory
	if err := dec.Decode(&inv); err != nil {
		t.Fatalf("status --json does not fit Inventory: %v\n%s", err, out.String())
	}
	var raw struct {
		Leases   []map[string]any
		Sessions []map[string]any
		Groups   []map[string]any
	}
	json.Unmarshal(out.Bytes(), &raw)
	if inv.Schema != inventorySchema || inv.Backend != url || inv.StoreTime.IsZero() || len(raw.Leases) != 1 || len(raw.Sessions) != 1 {
		t.Fatalf("inventory: %+v", inv)
	}
	for _, k := range []string{"name", "session", "identity", "token", "remaining_ms"} {
		if _, ok := raw.Leases[0][k]; !ok {
			t.Errorf("lease lacks %q: %v", k, raw.Leases[0])
		}
	}
	for _, k := range []string{"id", "identity", "remaining_ms", "leases"} {
		if _, ok := raw.Sessions[0][k]; !ok {
			t.Errorf("session lacks %q: %v", k, raw.Sessions[0])
		}
	}
	l := inv.Leases[0]
	if l.Name != "maintenance" || l.Identity != "node-1" || l.Token <= 0 || l.RemainingMS == nil ||
		*l.RemainingMS <= 0 || l.Session != string(client.Snapshot().Session) || l.Partition != nil || l.LastSlot != nil {
		t.Errorf("lease: %+v", l)
	}
}

func noEnv(string) string { return "" }

// Usage errors exit 2 and say what is wrong; help exits 0.
func TestUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  string
		code int
		want string
	}{
		{nil, "", exitUsage, "usage:"},
		{[]string{"help"}, "", exitOK, "usage:"},
		{[]string{"statuz"}, "", exitUsage, `simba: unknown command "statuz"; want status, watch or handover`},
		{[]string{"status"}, "", exitUsage, "simba status: no backend: give --backend URL or set $SIMBA_BACKEND"},
		{[]string{"status", "--bogus"}, "memory:", exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"status", "extra"}, "memory:", exitUsage, `simba status: unexpected argument "extra"; flags only`},
		{[]string{"status", "--lease", "a/b"}, "memory:", exitUsage, `simba status: --lease: invalid name "a/b"`},
		{[]string{"status", "--timeout", "0s"}, "memory:", exitUsage, "simba status: --timeout 0s: want > 0"},
		{[]string{"watch", "--count", "-1"}, "memory:", exitUsage, "simba watch: --count -1: want >= 0"},
		{[]string{"watch", "--interval", "1ms"}, "memory:", exitUsage, "simba watch: --interval 1ms: want at least 10ms"},
		{[]string{"status", "--interval", "1s"}, "memory:", exitUsage, "flag provided but not defined: -interval"},
		{[]string{"status", "--backend", "gopher://u:s3cret@h/db"}, "", exitFailed, `simba: backend URL "gopher://u:xxxxx@h/db": unknown scheme "gopher"`},
		{[]string{"status"}, "memory:cmdtest-usage", exitOK, "no lease is held"},
	} {
		var out, errs bytes.Buffer
		getenv := func(k string) string {
			if k == backendEnv {
				return tt.env
			}
			return ""
		}
		code := run(context.Background(), tt.args, getenv, &out, &errs, false)
		if code != tt.code || !strings.Contains(out.String()+errs.String(), tt.want) {
			t.Errorf("simba %q: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.args, code, out.String(), errs.String(), tt.code, tt.want)
		}
		if strings.Contains(out.String()+errs.String(), "s3cret") {
			t.Errorf("simba %q printed the password", tt.args)
		}
	}
}

// On a terminal, watch redraws the table, marks the lease that changed
// holder and lists the change under the table.
func TestWatchTerminal(t *testing.T) {
	ctx := context.Background()
	url := "memory:cmdtest-tty-" + runID
	b, c, err := backendurl.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var clients []*runtime.Client
	for _, id := range []string{"node-1", "node-2"} {
		cl, err := runtime.NewClient(b, scenarioConfig, runtime.WithIdentity(id))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close(ctx)
		clients = append(clients, cl)
	}
	first, err := clients[0].Lock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(300 * time.Millisecond)
		clients[0].Unlock(ctx, first)
		clients[1].Lock(ctx, "report")
	}()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"watch", "--backend", url, "--interval", "100ms", "--for", "1s"}, noEnv, &out, &errs, true)
	<-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	frames := strings.Split(out.String(), "\x1b[H\x1b[2J")
	if len(frames) < 5 || frames[0] != "" {
		t.Fatalf("%d frames; want one per read, each starting with a clear screen:\n%q", len(frames), out.String())
	}
	var marked int
	for _, f := range frames {
		if strings.Contains(f, "« new holder") {
			marked++
			if !strings.Contains(f, "recent changes:") || !regexpMatch(`report: (HANDOFF node-1 \(.*\) token \d+ → node-2|acquired by node-2)`, f) ||
				!regexpMatch(`(?m)^report +node-2 .*« new holder$`, f) {
				t.Errorf("the frame that marks the hand-off:\n%s", f)
			}
		}
	}
	if marked < 1 || marked > markReads {
		t.Errorf("%d frames mark the hand-off; want 1 to %d (a read may see it half done):\n%s", marked, markReads, out.String())
	}
	if last := frames[len(frames)-1]; !strings.Contains(last, "recent changes:") || strings.Contains(last, "« new holder") {
		t.Errorf("the last frame keeps the change listed, unmarked:\n%s", last)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func cmdFaults(ts *testscript.TestScript, neg bool, args []string) {
	sc := state(ts)
	name, ok := strings.CutPrefix(sc.url, "memory:")
	if neg || !ok || len(args) != 1 && (len(args) != 3 || args[1] != "after") {
		ts.Fatalf("usage: faults refuse|reachable [after D], on the memory store")
	}
	mode := map[string]memory.Reachability{"refuse": memory.Refuse, "reachable": memory.Reachable}[args[0]]
	var delay time.Duration
	if len(args) == 3 {
		var err error
		delay, err = time.ParseDuration(args[2])
		ts.Check(err)
	}
	set := func() { memory.Open(name).Faults().SetReachability(mode) }
	if delay == 0 {
		set()
		return
	}
	sc.bg.Go(func() { time.Sleep(delay); set() })
}
