// Command billing runs a partitioned billing job on N nodes in one process:
// the accounts are split into 8 partitions, each a lease of its own
// (billing.0 … billing.7), and every node settles the partitions it holds,
// 500ms after its previous run on each. The partitions are balanced across
// the nodes; when a node leaves, its partitions move to the others, and
// when one joins, the fewest partitions needed move to it.
//
//	go run ./examples/billing [--nodes 3] [--for 9s] [--backend memory:] [--lease 3s]
//
// Lease settings come from $SIMBA_LEASE_DURATION and the other variables
// of runtime.ConfigFromEnv, overridden by the -simba-* flags of
// runtime.RegisterConfigFlags (--lease is --simba-lease-duration).
//
// The registration code is generated from the directive on Settle into
// simba_gen.go.
package main

//go:generate go tool simbagen

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/examples/internal/cluster"
	"github.com/simba-go/simba/runtime"
)

// Biller is one node's billing job.
type Biller struct {
	node  int
	books *Books
}

// Settle settles the accounts of one partition. It runs on the node that
// holds the partition's lease, 500ms after its previous run ended, if the
// partition's term has 100ms of validity left.
//
//simba:partitioned group=billing partitions=8 delay=500ms step=100ms
func (b *Biller) Settle(ctx context.Context, t *runtime.Term, partition int) error {
	return b.books.settle(partition, t.Token())
}

// Books records the settlements of every partition, with the token of the
// term that made each, shared for the demo's sake. A settlement with a
// lower token than one already made would mean two nodes settling one
// partition at once.
type Books struct {
	mu      sync.Mutex
	runs    [8]int
	highest [8]runtime.Token
	stale   int
}

func (b *Books) settle(partition int, token runtime.Token) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if token < b.highest[partition] {
		b.stale++
		return fmt.Errorf("partition %d settled with token %d after token %d", partition, token, b.highest[partition])
	}
	b.highest[partition] = token
	b.runs[partition]++
	return nil
}

func main() {
	opts := cluster.Flags(3, 9*time.Second)
	flag.Parse()
	if err := run(*opts); err != nil {
		fmt.Fprintln(os.Stderr, "billing:", err)
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
	books := &Books{}
	c.Printf("%d nodes share the 8 partitions of the group \"billing\" on %s (lease %v)", opts.Nodes, backendurl.Redact(opts.Backend), opts.Lease())
	watch, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	c.WatchGroup(watch, "billing", 8)
	for i, client := range c.Clients() {
		if _, err := RegisterAll(client, &Biller{node: i, books: books}); err != nil {
			return err
		}
	}
	third := opts.For / 3
	cluster.Wait(ctx, third)

	last := len(c.Clients()) - 1
	if last > 0 {
		c.Printf("stopping %s gracefully: it hands its partitions over", cluster.Node(last))
		if err := c.Stop(last); err != nil {
			return err
		}
	}
	cluster.Wait(ctx, third)

	i, err := c.AddNode(ctx)
	if err != nil {
		return err
	}
	c.Printf("%s joins: the fewest partitions needed move to it", cluster.Node(i))
	if _, err := RegisterAll(c.Client(i), &Biller{node: i, books: books}); err != nil {
		return err
	}
	cluster.Wait(ctx, opts.For-2*third)
	stopWatching()

	books.mu.Lock()
	defer books.mu.Unlock()
	c.Printf("done: settlements per partition %v; %d made by a stale holder", books.runs, books.stale)
	if books.stale > 0 {
		return fmt.Errorf("%d settlements by a stale holder", books.stale)
	}
	return nil
}
