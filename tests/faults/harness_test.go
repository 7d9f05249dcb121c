package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/simba-go/simba/backends/backendtest"
	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/internal/testkit/testservers"
)

// server is a backend server a test started for itself, so that a
// schedule may restart it.
type server interface {
	Addr() string           // its client address, host:port
	URL(addr string) string // the backend URL that reaches it through addr
	Restart(t testing.TB)   // kill it and start it again with its data
}

// backendKind is a landed backend: how to start a server of its own.
type backendKind struct {
	name  string
	start func(t *testing.T, lease time.Duration) server
}

var kinds = []backendKind{
	{"Redis", func(t *testing.T, lease time.Duration) server {
		return redisServer{testservers.StartRedisServer(t), lease}
	}},
	{"PostgreSQL", func(t *testing.T, lease time.Duration) server {
		return pgServer{testservers.StartPostgres(t), lease}
	}},
	{"ZooKeeper", func(t *testing.T, lease time.Duration) server {
		return zkServer{testservers.StartZooKeeper(t, testservers.ZooKeeperConfig{TickTime: zkTick}), lease}
	}},
	{"MySQL", func(t *testing.T, lease time.Duration) server {
		return mariaServer{testservers.StartMariaDB(t), lease}
	}},
}

// zkTick is the private ZooKeeper server's tick: its shortest session is two
// ticks, shorter than the leases.
const zkTick = 200 * time.Millisecond

type redisServer struct {
	s     *testservers.RedisServer
	lease time.Duration
}

func (r redisServer) Addr() string { return r.s.Addr }
func (r redisServer) URL(addr string) string {
	return fmt.Sprintf("redis://%s/0?simba_max_lease=%v", addr, r.lease)
}
func (r redisServer) Restart(testing.TB) { r.s.Restart() }

type pgServer struct {
	s     *testservers.PostgresServer
	lease time.Duration
}

func (p pgServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.s.Port()) }
func (p pgServer) URL(addr string) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&simba_max_lease=%v", addr, p.lease)
}
func (p pgServer) Restart(testing.TB) { p.s.Restart() }

type mariaServer struct {
	s     *testservers.MariaDBServer
	lease time.Duration
}

func (m mariaServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", m.s.Port()) }
func (m mariaServer) URL(addr string) string {
	return fmt.Sprintf("mysql://root@%s/test?simba_max_lease=%v", addr, m.lease)
}
func (m mariaServer) Restart(testing.TB) { m.s.Restart() }

type zkServer struct {
	s     *testservers.ZooKeeperServer
	lease time.Duration
}

func (z zkServer) Addr() string { return z.s.Addr }
func (z zkServer) URL(addr string) string {
	return fmt.Sprintf("zk://%s/simba?simba_max_lease=%v&simba_tick_time=%v", addr, z.lease, zkTick)
}
func (z zkServer) Restart(testing.TB) { z.s.Stop(); z.s.Start() }
func (z zkServer) logFile() string    { return filepath.Join(z.s.Dir, "zookeeper.log") }

// prime opens the backend once from the parent, so that the nodes find its
// schema or root in place, and waits until it grants leases (the amnesia
// guard of a new store).
func prime(t *testing.T, srv server, lease time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, closer, err := backendurl.Open(ctx, srv.URL(srv.Addr()))
	if err != nil {
		t.Fatalf("opening the backend: %v", err)
	}
	defer closer.Close()
	backendtest.WaitGranting(t, b, 60*time.Second, lease)
}

// liveBound is the generous bound on fail-over after the last fault of a
// schedule: every name has a holder again within it. The figures report
// the gaps themselves.
const liveBound = 20 * time.Second

// proc is one node process (one incarnation of a node).
type proc struct {
	id   string
	node int
	cmd  *exec.Cmd
	done chan struct{}
	log  string // its events
	errs string // its stderr
}

func (p *proc) signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// schedule is one run of a plan: nodes, each behind a proxy of its own, on
// a server of the schedule's own.
type schedule struct {
	t       *testing.T
	plan    plan
	srv     server
	fence   *fence
	lease   time.Duration
	dir     string
	proxies []*toxiproxy.Proxy
	procs   []*proc // every incarnation, in start order
	current []*proc // by node
	faults  []appliedFault
	end     int64
	env     []string // extra environment of the nodes
}

// appliedFault is a fault as it ran: what it hit and when (CLOCK_MONOTONIC).
type appliedFault struct {
	fault
	target     string // the process it hit, or "server"
	start, end int64
}

func (s *schedule) startNode(i int) {
	inc := 0
	for _, p := range s.procs {
		if p.node == i {
			inc++
		}
	}
	p := &proc{id: fmt.Sprintf("n%d.%d", i, inc), node: i, done: make(chan struct{})}
	p.log = filepath.Join(s.dir, p.id+".jsonl")
	p.errs = filepath.Join(s.dir, p.id+".stderr")
	errf, err := os.Create(p.errs)
	if err != nil {
		s.t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(),
		nodeEnv+"="+p.id,
		nodeURLEnv+"="+s.srv.URL(s.proxies[i].Listen),
		nodeNamesEnv+"="+strings.Join(s.plan.Names, ","),
		nodeLeaseEnv+"="+s.lease.String(),
		nodeFenceEnv+"="+s.fence.srv.URL,
		nodeLogEnv+"="+p.log)
	p.cmd.Env = append(p.cmd.Env, s.env...)
	p.cmd.Stdout, p.cmd.Stderr = errf, errf
	if err := p.cmd.Start(); err != nil {
		errf.Close()
		s.t.Fatalf("starting node %s: %v", p.id, err)
	}
	go func() { p.cmd.Wait(); errf.Close(); close(p.done) }()
	s.procs = append(s.procs, p)
	s.current[i] = p
}

// events reads every process's log.
func (s *schedule) events() []event {
	var all []event
	for _, p := range s.procs {
		f, err := os.Open(p.log)
		if err != nil {
			continue // not started yet
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil { // a line cut by SIGKILL is skipped
				all = append(all, e)
			}
		}
		f.Close()
	}
	return all
}

// holder returns the node whose term of name is valid now, by the logs, or
// -1.
func (s *schedule) holder(name string) int {
	now := mono()
	terms := buildTerms(s.events())
	for _, tm := range terms[name] {
		if tm.begin <= now && now < tm.validEnd() && !tm.ended {
			for _, p := range s.procs {
				if p.id == tm.proc {
					return p.node
				}
			}
		}
	}
	return -1
}

// waitHeld waits until every name has a holder, up to within.
func (s *schedule) waitHeld(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		all := true
		for _, n := range s.plan.Names {
			all = all && s.holder(n) >= 0
		}
		if all {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (s *schedule) toxic(p *toxiproxy.Proxy, name, kind string, attrs string) {
	for _, stream := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":"%s-%s","type":"%s","stream":"%s","attributes":%s}`, name, stream, kind, stream, attrs)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			s.t.Fatalf("adding toxic %s to %s: %v", name, p.Name, err)
		}
	}
}

func (s *schedule) untoxic(p *toxiproxy.Proxy, name string) {
	for _, stream := range []string{"upstream", "downstream"} {
		p.Toxics.RemoveToxic(context.Background(), name+"-"+stream)
	}
}

// apply runs one fault to its end.
func (s *schedule) apply(f fault) appliedFault {
	node := f.Node
	if f.Holder != "" {
		if h := s.holder(f.Holder); h >= 0 {
			node = h
		}
	}
	a := appliedFault{fault: f, target: "server", start: mono()}
	var p *proc
	var px *toxiproxy.Proxy
	if node >= 0 {
		p, px = s.current[node], s.proxies[node]
		a.target = p.id
	}
	switch f.Kind {
	case faultStop:
		p.signal(syscall.SIGSTOP)
		time.Sleep(f.For)
		p.signal(syscall.SIGCONT)
	case faultStopWrite:
		// The fence holds the target's next write until after the pause
		// (it writes every writeStep while it leads), then lands it:
		// the new holder has written with a higher token by then.
		held, cancel := s.fence.holdNext(fmt.Sprintf("s%d.", s.plan.Seed), p.id, f.For+s.lease/2)
		select {
		case <-held:
		case <-time.After(s.lease):
			cancel() // it does not lead: a plain pause
		}
		p.signal(syscall.SIGSTOP)
		time.Sleep(f.For)
		p.signal(syscall.SIGCONT)
	case faultKill:
		p.kill()
		time.Sleep(f.For)
		s.startNode(node)
	case faultCut:
		px.Stop()
		time.Sleep(f.For)
		if err := px.Start(); err != nil {
			s.t.Fatalf("re-enabling proxy %s: %v", px.Name, err)
		}
	case faultBlackhole:
		s.toxic(px, "blackhole", "timeout", `{"timeout":0}`)
		time.Sleep(f.For)
		s.untoxic(px, "blackhole")
	case faultLatency:
		ms := f.Delay.Milliseconds()
		s.toxic(px, "latency", "latency", fmt.Sprintf(`{"latency":%d,"jitter":%d}`, ms, ms/4))
		time.Sleep(f.For)
		s.untoxic(px, "latency")
	case faultRestart:
		s.srv.Restart(s.t)
	}
	a.end = mono()
	return a
}

// runSchedule runs plan p with nodes nodes on srv and returns what the
// checker made of it.
func runSchedule(t *testing.T, api *toxiproxy.ApiServer, srv server, fe *fence, p plan, nodes int, lease time.Duration, env ...string) *report {
	dir, err := os.MkdirTemp("", fmt.Sprintf("simba-faults-%d-", p.Seed))
	if err != nil {
		t.Fatal(err)
	}
	s := &schedule{t: t, plan: p, srv: srv, fence: fe, lease: lease, dir: dir, current: make([]*proc, nodes), env: env}
	for i := range nodes {
		px := toxiproxy.NewProxy(api, fmt.Sprintf("s%d-n%d", p.Seed, i), "127.0.0.1:0", srv.Addr())
		if err := px.Start(); err != nil {
			t.Fatalf("starting a proxy: %v", err)
		}
		s.proxies = append(s.proxies, px)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for _, pr := range s.procs {
				pr.kill()
			}
			for _, px := range s.proxies {
				px.Stop()
			}
		})
	}
	t.Cleanup(stop)
	for i := range nodes {
		s.startNode(i)
	}
	if !s.waitHeld(30 * time.Second) {
		stop()
		t.Fatalf("seed %d: the names did not all get a holder within 30s\n%s", p.Seed, s.stderrTail())
	}
	for _, f := range p.Faults {
		s.faults = append(s.faults, s.apply(f))
		time.Sleep(f.Settle)
	}
	// Liveness, with a generous bound: every name has a holder again.
	held := s.waitHeld(liveBound)
	s.end = mono()
	stop()
	r := check(p, s.events(), fe, s.faults, s.end)
	if !held {
		r.violations = append(r.violations, fmt.Sprintf("liveness: a name had no holder %v after the last fault", liveBound))
	}
	r.races, r.raceSample, r.ourRaces = s.races()
	if len(r.violations) > 0 || len(r.ourRaces) > 0 {
		r.kept = dir // the nodes' logs, for the failure
		if l, ok := srv.(interface{ logFile() string }); ok {
			if out, err := os.ReadFile(l.logFile()); err == nil {
				os.WriteFile(filepath.Join(dir, "server.log"), out, 0o644)
			}
		}
	} else {
		os.RemoveAll(dir)
	}
	return r
}

// stderrTail returns the end of every process's stderr, for a failure.
func (s *schedule) stderrTail() string {
	var b strings.Builder
	for _, p := range s.procs {
		out, _ := os.ReadFile(p.errs)
		if len(out) > 2000 {
			out = out[len(out)-2000:]
		}
		if len(out) > 0 {
			fmt.Fprintf(&b, "== %s stderr:\n%s\n", p.id, out)
		}
	}
	return b.String()
}

// races counts the race detector's reports in the nodes' stderr: those
// whose two conflicting accesses are both outside this module (go-zookeeper's
// own goroutines), and, as text, the others.
func (s *schedule) races() (foreign int, sample string, ours []string) {
	for _, p := range s.procs {
		out, _ := os.ReadFile(p.errs)
		for _, rep := range strings.Split(string(out), "==================\n") {
			if !strings.HasPrefix(rep, "WARNING: DATA RACE") {
				continue
			}
			if accessesInModule(rep) {
				ours = append(ours, p.id+": "+rep)
			} else {
				foreign++
				if sample == "" {
					sample = p.id + ": " + rep
				}
			}
		}
	}
	return foreign, sample, ours
}

// accessesInModule reports whether either access of a race report happened
// in this module's code: whether the innermost frame outside the standard
// library of either access stack is in package github.com/simba-go/simba/….
// A race between two accesses made by go-zookeeper's code (its own
// goroutines, or a call of ours into it) is go-zookeeper's.
func accessesInModule(rep string) bool {
	inAccess, seen := false, false
	for line := range strings.SplitSeq(rep, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Write at") || strings.HasPrefix(line, "Read at") ||
			strings.HasPrefix(line, "Previous write at") || strings.HasPrefix(line, "Previous read at"):
			inAccess, seen = true, false
		case line == "":
			inAccess = false
		case inAccess && !seen && strings.HasSuffix(line, ")") && !strings.HasPrefix(line, "/"):
			// A function line; the standard library's have no dot
			// before their first slash (reflect.Value.SetString()).
			fn := line
			if i := strings.IndexByte(fn, '/'); i < 0 || !strings.Contains(fn[:i], ".") {
				continue
			}
			seen = true
			if strings.HasPrefix(fn, "github.com/simba-go/simba") {
				return true
			}
		}
	}
	return false
}
