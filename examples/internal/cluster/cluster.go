// Package cluster runs the nodes of an example in one process: it reads the
// flags the examples share (--backend, --nodes, --for, --lease) and the
// lease settings from $SIMBA_LEASE_DURATION and the other variables and
// flags of runtime.ConfigFromEnv and runtime.RegisterConfigFlags, opens the
// backend, starts one client per node, and prints the timeline.
package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends"
	_ "github.com/simba-go/simba/backends/all" // every store of the root module a URL may name
	"github.com/simba-go/simba/backends/backendurl"
	_ "github.com/simba-go/simba/backends/etcd" // and etcd://, a module of its own
	simbaredis "github.com/simba-go/simba/backends/redis"
	"github.com/simba-go/simba/runtime"
)

// Options are the flags every example takes.
type Options struct {
	Backend string        // a backend URL (package backendurl)
	Nodes   int           // nodes to run in this process
	For     time.Duration // how long the example runs
	// Config is every node's lease settings: $SIMBA_* variables, then
	// -simba-* flags (runtime.ConfigFromEnv, runtime.RegisterConfigFlags;
	// --lease D is -simba-lease-duration D). With neither LeaseDuration nor
	// RenewInterval set, the lease is DefaultLease, short for a demo.
	Config runtime.Config
	Out    io.Writer // where the timeline goes; nil means os.Stdout
}

// DefaultLease is the examples' lease duration unless told otherwise.
const DefaultLease = 3 * time.Second

// Lease returns the lease duration the nodes run with.
func (o Options) Lease() time.Duration {
	c := o.config()
	if c.LeaseDuration == 0 { // derived from RenewInterval (runtime.Config)
		return 3 * c.RenewInterval
	}
	return c.LeaseDuration
}

// config is o.Config with the examples' default lease; the other zero
// fields take their defaults, derived from it, in NewClient.
func (o Options) config() runtime.Config {
	c := o.Config
	if c.LeaseDuration == 0 && c.RenewInterval == 0 {
		c.LeaseDuration = DefaultLease
	}
	return c
}

// Flags registers the shared flags on the default flag set; the backend
// defaults to $SIMBA_BACKEND, else the memory store, and the lease
// settings to $SIMBA_LEASE_DURATION and the others (runtime.ConfigFromEnv).
// A variable that does not hold a valid setting ends the program, as a bad
// flag does (exit 2), with an error naming it.
func Flags(nodes int, runFor time.Duration) *Options {
	cfg, err := runtime.ConfigFromEnv("SIMBA")
	if err != nil {
		fmt.Fprintln(flag.CommandLine.Output(), err)
		os.Exit(2)
	}
	o := &Options{Config: cfg}
	backend := os.Getenv("SIMBA_BACKEND")
	if backend == "" {
		backend = backendurl.Default
	}
	flag.StringVar(&o.Backend, "backend", backend, "backend URL: memory:, memory:NAME, postgres://…, redis://…, zk://…, etcd://… (default $SIMBA_BACKEND, else memory:)")
	flag.IntVar(&o.Nodes, "nodes", nodes, "nodes to run in this process")
	flag.DurationVar(&o.For, "for", runFor, "how long to run")
	runtime.RegisterConfigFlags(flag.CommandLine, &o.Config)
	flag.Func("lease", "lease duration: how long a crashed or paused node keeps its lease; -simba-lease-duration (default 3s)",
		func(s string) error { return flag.CommandLine.Set("simba-lease-duration", s) })
	return o
}

// Cluster is the nodes of one example.
type Cluster struct {
	Opts    Options          // the options the cluster was started with
	Backend backends.Backend // the store every node shares, opened from Opts.Backend

	start      time.Time
	closer     io.Closer
	mu         sync.Mutex // serialises the timeline
	nodes      sync.Mutex
	clients    []*runtime.Client // node i+1 is clients[i]
	gates      []*gate           // between node i and the store
	announced  sync.Map          // lease name → struct{}: whose terms the timeline shows
	terms      sync.Map          // the terms whose election the timeline showed
	recovering atomic.Bool       // the store's amnesia guard was shown
}

// Start opens the backend and starts a client per node, each with a
// session of its own, as separate processes would have.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes < 1 {
		return nil, fmt.Errorf("--nodes %d: want at least 1", o.Nodes)
	}
	// go-redis logs dial failures to stderr through a global logger; the
	// errors the examples print say the same, once.
	simbaredis.SetDriverLogger(nil)
	b, closer, err := backendurl.Open(ctx, o.Backend)
	if err != nil {
		return nil, err
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	c := &Cluster{Opts: o, Backend: b, start: time.Now(), closer: closer}
	for range o.Nodes {
		if _, err := c.AddNode(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// AddNode starts one more client, as a node joining the cluster, and
// returns its index.
func (c *Cluster) AddNode(ctx context.Context) (int, error) {
	c.nodes.Lock()
	i, g := len(c.clients), &gate{}
	client, err := runtime.NewClient(gated(c.Backend, g), c.Opts.config(),
		runtime.WithIdentity(Node(i)+" of "+runtime.DefaultIdentity()),
		runtime.WithObserver(runtime.ObserverFunc(func(e runtime.Event) { c.announce(i, e) })))
	if err != nil {
		c.nodes.Unlock()
		return 0, err
	}
	c.clients = append(c.clients, client)
	c.gates = append(c.gates, g)
	c.nodes.Unlock()
	rctx, cancel := context.WithTimeout(ctx, c.Opts.Lease())
	defer cancel()
	return i, client.Ready(rctx)
}

// Client returns node i's client.
func (c *Cluster) Client(i int) *runtime.Client {
	c.nodes.Lock()
	defer c.nodes.Unlock()
	return c.clients[i]
}

// Clients returns every node's client, node 1 first.
func (c *Cluster) Clients() []*runtime.Client {
	c.nodes.Lock()
	defer c.nodes.Unlock()
	return slices.Clone(c.clients)
}

// Leader returns the node that holds the lease name and its token, or -1.
func (c *Cluster) Leader(name string) (int, runtime.Token) {
	for i, client := range c.Clients() {
		for _, l := range client.Snapshot().Leases {
			if l.Name == name && l.Role == runtime.RoleLeader {
				return i, l.Token
			}
		}
	}
	return -1, 0
}

// Partitions returns, for each node, the partitions of group it holds.
func (c *Cluster) Partitions(group string) [][]int {
	clients := c.Clients()
	held := make([][]int, len(clients))
	for i, client := range clients {
		for _, g := range client.Snapshot().Groups {
			if g.Name == group {
				held[i] = g.Held
			}
		}
	}
	return held
}

// Announce makes the timeline show every term of the lease name: which
// node is elected, with which token, and when and why its term ends.
func (c *Cluster) Announce(name string) { c.announced.Store(name, struct{}{}) }

// announce prints node i's event e if it concerns an announced lease, and
// the first refusal of the store's amnesia guard, whatever its lease: a new
// store (a database whose tables were just created, a Redis with no data)
// grants nothing for up to its longest lease, and the timeline says why
// rather than showing nodes that are silently never elected.
func (c *Cluster) announce(i int, e runtime.Event) {
	if e.Kind == runtime.EventStoreRecovering {
		if c.recovering.CompareAndSwap(false, true) {
			c.Printf("%s waits: %v", Node(i), e.Err)
		}
		return
	}
	if _, ok := c.announced.Load(e.Name); !ok {
		return
	}
	switch e.Kind {
	case runtime.EventElected:
		c.elected(i, e.Name, e.Token)
	case runtime.EventRevoked:
		c.Printf("%s's term on %q (token %d) ends: %v", Node(i), e.Name, e.Token, e.Reason)
	}
}

// elected prints, once per term, that node i holds name with token.
func (c *Cluster) elected(i int, name string, token runtime.Token) {
	type term struct {
		node  int
		name  string
		token runtime.Token
	}
	if _, done := c.terms.LoadOrStore(term{i, name, token}, struct{}{}); !done {
		c.Printf("%s is elected: it holds %q with token %d", Node(i), name, token)
	}
}

// Did prints what node i did under term t. The observer reports elections
// on a goroutine of its own, so a term's first step can come first; Did
// prints the election before the step if it has not been printed yet.
func (c *Cluster) Did(i int, t *runtime.Term, format string, args ...any) {
	if _, ok := c.announced.Load(t.Name()); ok {
		c.elected(i, t.Name(), t.Token())
	}
	c.Printf("%s %s", Node(i), fmt.Sprintf(format, args...))
}

// WatchGroup prints which node holds which partitions of group whenever
// that changes, until ctx ends.
func (c *Cluster) WatchGroup(ctx context.Context, group string, partitions int) {
	c.watch(ctx, func(last string) string {
		held := c.Partitions(group)
		free := make([]bool, partitions)
		for i := range free {
			free[i] = true
		}
		var parts []string
		for node, ps := range held {
			for _, p := range ps {
				free[p] = false
			}
			if ps != nil || c.live(node) {
				parts = append(parts, fmt.Sprintf("%s: %-9s", Node(node), ints(ps)))
			}
		}
		var moving []int // held by no node: starting, or between holders
		for p, f := range free {
			if f {
				moving = append(moving, p)
			}
		}
		if len(moving) > 0 {
			parts = append(parts, "free: "+ints(moving))
		}
		now := strings.TrimRight(strings.Join(parts, " | "), " ")
		if now != last {
			c.Printf("%s", now)
		}
		return now
	})
}

// live reports whether node i's client is still open.
func (c *Cluster) live(i int) bool { return c.Client(i).Snapshot().State != runtime.SessionClosed }

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " ")
}

// watch calls poll every 20ms until ctx ends, passing what it returned
// the time before.
func (c *Cluster) watch(ctx context.Context, poll func(last string) string) {
	go func() {
		last := ""
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			last = poll(last)
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// Printf prints one line of the timeline: the time since the start, then
// the message.
func (c *Cluster) Printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.Opts.Out, "%6.2fs  %s\n", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
}

// Node names node i (0-based) for the timeline: "node-1".
func Node(i int) string { return fmt.Sprintf("node-%d", i+1) }

// Stop closes node i's client: it hands what it holds over with the
// hand-off order, as a node shut down for a deploy does.
func (c *Cluster) Stop(i int) error {
	return c.Client(i).Close(context.Background())
}

// Freeze stops node i's traffic to the store, as a long GC pause, a stopped
// VM or a swap storm does: its calls wait, the store hears no renewal and
// expires its session after the lease, and other nodes take over. Any
// backend works. [Cluster.Thaw] lets the held calls go on, late.
func (c *Cluster) Freeze(i int) { c.gate(i).freeze() }

// Thaw ends node i's freeze.
func (c *Cluster) Thaw(i int) { c.gate(i).thaw() }

func (c *Cluster) gate(i int) *gate {
	c.nodes.Lock()
	defer c.nodes.Unlock()
	return c.gates[i]
}

// Close closes every client, then the backend.
func (c *Cluster) Close() error {
	c.announced.Clear() // the timeline ends here
	var errs []error
	for i, client := range c.Clients() {
		c.Thaw(i)
		errs = append(errs, client.Close(context.Background()))
	}
	errs = append(errs, c.closer.Close())
	return errors.Join(errs...)
}

// Wait sleeps d or until ctx ends; it reports whether it slept all of d.
func Wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
