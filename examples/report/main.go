// Command report runs a leader-only report on N nodes in one process: the
// report runs once per second of the store's clock, on one node at a time,
// and a digest on a cron schedule, every even second of Paris's wall clock.
// The leader is stopped gracefully and another takes over at once; the next
// leader steps down for a while; no slot of either runs twice.
//
//	go run ./examples/report [--nodes 3] [--for 9s] [--backend memory:] [--lease 3s]
//
// Lease settings come from $SIMBA_LEASE_DURATION and the other variables
// of runtime.ConfigFromEnv, overridden by the -simba-* flags of
// runtime.RegisterConfigFlags (--lease is --simba-lease-duration).
//
// The registration code, RegisterReporterReport, RegisterReporterDigest and
// RegisterAll, is generated from the directives on Report and Digest into
// simba_gen.go.
package main

//go:generate go tool simbagen

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/examples/internal/cluster"
	"github.com/simba-go/simba/runtime"
)

// Reporter is one node's report job.
type Reporter struct {
	node int
	log  *Log
}

// Report runs in every one-second slot of the store's clock, on the node
// that holds the lease "report", if its term has 200ms of validity left.
//
//simba:scheduled lease=report rate=1s step=200ms
func (r *Reporter) Report(ctx context.Context, t *runtime.Term) error {
	r.log.ran(r.node, t)
	return nil
}

// Digest runs at the cron schedule's slots, every even second of Paris's
// wall clock, on the node that holds the lease "digest". Each slot runs at
// most once, whichever node runs it; after a fail-over, a slot missed by at
// most a second is caught up, an older one skipped.
//
//simba:scheduled lease=digest cron="*/2 * * * * *" tz=Europe/Paris overlap=skip catchup=1s
func (r *Reporter) Digest(ctx context.Context, t *runtime.Term) error {
	slot, _ := runtime.ScheduledSlot(ctx)
	r.log.digested(r.node, t, slot)
	return nil
}

// Log is what every node's Report and Digest did, shared for the demo's
// sake.
type Log struct {
	c       *cluster.Cluster
	mu      sync.Mutex
	runs    []time.Time       // when each run of Report started, in order
	byNode  map[int]int       // node → runs of Report
	digests map[time.Time]int // Digest's slot → runs
}

func (l *Log) digested(node int, t *runtime.Term, slot time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.digests[slot]++
	l.c.Did(node, t, "runs the digest of the %s slot (Paris; token %d)", slot.In(paris).Format("15:04:05"), t.Token())
}

// paris is the digest's location.
var paris = func() *time.Location {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		return time.UTC
	}
	return loc
}()

func (l *Log) ran(node int, t *runtime.Term) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, time.Now())
	l.byNode[node]++
	l.c.Did(node, t, "runs the report (token %d)", t.Token())
}

// minGap returns the shortest time between two runs after the first. The
// very first run starts as soon as a node is elected, in the middle of a
// slot; every later one starts at the beginning of a slot, one second
// apart, whichever node runs it. Two runs of one slot would start
// milliseconds apart.
func (l *Log) minGap() time.Duration {
	gap := time.Duration(1<<63 - 1)
	for i := 2; i < len(l.runs); i++ {
		gap = min(gap, l.runs[i].Sub(l.runs[i-1]))
	}
	return gap
}

func main() {
	opts := cluster.Flags(3, 9*time.Second)
	flag.Parse()
	if err := run(*opts); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(opts cluster.Options) error {
	ctx := context.Background()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	log := &Log{c: c, byNode: make(map[int]int), digests: make(map[time.Time]int)}
	c.Printf("%d nodes contend for the lease \"report\" on %s (lease %v)", opts.Nodes, backendurl.Redact(opts.Backend), opts.Lease())
	c.Announce("report")
	regs := make([][]runtime.Registration, opts.Nodes)
	for i, client := range c.Clients() {
		if regs[i], err = RegisterAll(client, &Reporter{node: i, log: log}); err != nil {
			return err
		}
	}
	third := opts.For / 3
	cluster.Wait(ctx, third)

	if first, _ := c.Leader("report"); first >= 0 && opts.Nodes > 1 {
		c.Printf("stopping %s gracefully, as for a deploy: the lease is released at once", cluster.Node(first))
		if err := c.Stop(first); err != nil {
			return err
		}
	}
	cluster.Wait(ctx, third)

	if second, _ := c.Leader("report"); second >= 0 && opts.Nodes > 2 {
		cooldown := third / 2
		c.Printf("%s steps down for %v, to drain before maintenance", cluster.Node(second), cooldown)
		if e, ok := regs[second][0].(*runtime.ScheduledTask); ok {
			if err := e.StepDown(ctx, cooldown); err != nil {
				return err
			}
		}
	}
	cluster.Wait(ctx, opts.For-2*third)

	log.mu.Lock()
	defer log.mu.Unlock()
	var by []string
	for node, n := range log.byNode {
		by = append(by, fmt.Sprintf("%s %d", cluster.Node(node), n))
	}
	slices.Sort(by)
	gap := log.minGap()
	c.Printf("done: %d runs (%s); after the first, runs were at least %v apart: no slot ran twice",
		len(log.runs), strings.Join(by, ", "), gap.Round(time.Millisecond))
	if len(log.runs) > 2 && gap < 500*time.Millisecond {
		return fmt.Errorf("two runs %v apart: a slot ran twice", gap)
	}
	for slot, n := range log.digests {
		if n > 1 {
			return fmt.Errorf("the digest's %v slot ran %d times", slot, n)
		}
	}
	c.Printf("the digest ran %d cron slots, each once", len(log.digests))
	return nil
}
