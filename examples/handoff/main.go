// Command handoff shows leader election and hand-off on the in-process memory
// store: N nodes (three by default) contend for one lease; the leader is
// stopped gracefully and another node takes over at once; the next leader
// steps down for a while; finally every node closes. Each line is printed as
// it happens, with the time since the start and the term's fencing token,
// which only ever increases.
//
//	go run ./examples/handoff [-nodes 3] [-lease 3s]
//
// The lease settings come from $SIMBA_LEASE_DURATION, $SIMBA_RENEW_INTERVAL
// and the other variables of runtime.ConfigFromEnv, overridden by the
// -simba-lease-duration, -simba-renew-interval, … flags of
// runtime.RegisterConfigFlags; -lease is -simba-lease-duration.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

func main() {
	// Lease settings from $SIMBA_LEASE_DURATION and the others, then the
	// -simba-* flags; -lease is -simba-lease-duration. A 3s lease unless
	// told otherwise.
	cfg, err := runtime.ConfigFromEnv("SIMBA")
	if err != nil {
		log.Fatal(err)
	}
	nodes := flag.Int("nodes", 3, "number of nodes contending for the lease")
	runtime.RegisterConfigFlags(flag.CommandLine, &cfg)
	flag.Func("lease", "lease duration; -simba-lease-duration (default 3s)",
		func(s string) error { return flag.CommandLine.Set("simba-lease-duration", s) })
	flag.Parse()
	if *nodes < 2 {
		log.Fatalf("-nodes %d: want at least 2", *nodes)
	}
	if cfg.LeaseDuration == 0 && cfg.RenewInterval == 0 {
		cfg.LeaseDuration = 3 * time.Second
	}
	if err := run(*nodes, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "handoff:", err)
		os.Exit(1)
	}
}

type demo struct {
	start   time.Time
	mu      sync.Mutex
	leader  chan int // receives the node that was just elected
	elected map[int]*runtime.Term
}

func (d *demo) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Printf("%8.1fms  %s\n", float64(time.Since(d.start).Microseconds())/1000, fmt.Sprintf(format, args...))
}

func (d *demo) listener(node int) runtime.Listener {
	return runtime.ListenerFuncs{
		OnElected: func(_ context.Context, t *runtime.Term) {
			d.printf("node-%d elected    %-8s token %d, valid for %v", node, t.Name(), t.Token(), t.Remaining().Round(time.Millisecond))
			d.mu.Lock()
			d.elected[node] = t
			d.mu.Unlock()
			d.leader <- node
		},
		OnRevoked: func(_ context.Context, t *runtime.Term, r runtime.Reason) {
			d.printf("node-%d revoked    %-8s token %d: %v", node, t.Name(), t.Token(), r)
		},
	}
}

func run(n int, cfg runtime.Config) error {
	ctx := context.Background()
	store := memory.New()
	d := &demo{start: time.Now(), leader: make(chan int, n), elected: make(map[int]*runtime.Term)}
	clients := make([]*runtime.Client, n)
	elections := make([]*runtime.Election, n)
	for i := range n {
		c, err := runtime.NewClient(store, cfg)
		if err != nil {
			return err
		}
		if i == 0 {
			eff := c.Config() // with its defaults
			fmt.Printf("%d nodes contend for the lease %q on the in-process memory store (lease %v, renewed every %v)\n\n",
				n, "report", eff.LeaseDuration, eff.RenewInterval)
		}
		clients[i] = c
		e, err := c.StartElection("report", d.listener(i+1))
		if err != nil {
			return err
		}
		elections[i] = e
	}
	first := <-d.leader

	time.Sleep(cfg.RenewInterval) // the leader works; its session is renewed meanwhile
	d.printf("stopping node-%d gracefully", first)
	stopped := time.Now()
	if err := elections[first-1].Stop(ctx); err != nil {
		return err
	}
	second := <-d.leader
	d.printf("hand-off from node-%d to node-%d took %v (release broadcast, no polling)", first, second, time.Since(stopped).Round(time.Microsecond))

	time.Sleep(cfg.RenewInterval)
	cooldown := 2 * cfg.RenewInterval
	d.printf("node-%d steps down for %v (drain before a deploy)", second, cooldown)
	if err := elections[second-1].StepDown(ctx, cooldown); err != nil {
		return err
	}
	third := <-d.leader
	d.printf("node-%d leads; node-%d is cooling down", third, second)

	time.Sleep(cfg.RenewInterval)
	d.printf("closing every node")
	for _, c := range clients {
		if err := c.Close(ctx); err != nil {
			return err
		}
	}
	d.printf("done: %d terms, tokens strictly increasing: %v", len(d.elected), increasing(d.elected, first, second, third))
	return nil
}

func increasing(terms map[int]*runtime.Term, order ...int) bool {
	for i := 1; i < len(order); i++ {
		if terms[order[i]].Token() <= terms[order[i-1]].Token() {
			return false
		}
	}
	return true
}
