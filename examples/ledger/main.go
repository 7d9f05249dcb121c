// Command ledger applies batches to a ledger on N nodes in one process,
// with typed steps (G2): every second, the node holding the lease
// "ledger" applies the batches that have arrived, one step per batch. The
// generated wrapper checks before each batch that the term stays valid for
// the step (E1) and passes the term, and so its fencing token, with it.
//
// Rule names such as G2 refer to docs/design.md in the repository.
//
// The ledger is a fenced resource (a fencing.Cell): it accepts a write
// only with a token not lower than any it has accepted (F1). Midway, the
// leader freezes between reading the ledger and writing it, as a process
// does in a long GC pause: it sends nothing to the store, which expires its
// session after the lease; another node takes over and applies the batch;
// when the frozen node wakes and writes, the ledger rejects its stale token.
// The check before the step could not prevent this (E2); the token does.
//
//	go run ./examples/ledger [--nodes 3] [--for 10s] [--backend memory:] [--lease 3s]
//
// Lease settings come from $SIMBA_LEASE_DURATION and the other variables
// of runtime.ConfigFromEnv, overridden by the -simba-* flags of
// runtime.RegisterConfigFlags (--lease is --simba-lease-duration).
package main

//go:generate go tool simbagen

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"os"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/backends/backendurl"
	"github.com/simba-go/simba/examples/internal/cluster"
	"github.com/simba-go/simba/fencing"
	"github.com/simba-go/simba/runtime"
)

// Batch is a unit of work: the nth batch to apply, and its amount.
type Batch struct {
	N      int   // the batch's number, from 1; batches apply in this order
	Amount int64 // what the batch adds to the ledger's total
}

// Ledger is one node's view of the shared, fenced ledger.
type Ledger struct {
	node   int
	shared *Shared
}

// Apply applies one batch. It runs on the node that holds the lease
// "ledger", in every one-second slot, once per batch that PendingBatches
// yields, each only if the term stays valid for more than 300ms.
//
//simba:scheduled lease=ledger rate=1s step=300ms items=PendingBatches
func (l *Ledger) Apply(ctx context.Context, t *runtime.Term, b Batch) error {
	s := l.shared
	state, err := s.read(ctx)
	if err != nil {
		return err
	}
	if state.Applied >= b.N {
		return nil // applied already
	}
	if s.freeze.CompareAndSwap(true, false) {
		s.c.Printf("%s read the ledger; now it freezes for %v before writing batch %d (a long GC pause): it sends nothing to the store",
			cluster.Node(l.node), s.pause, b.N)
		s.c.Freeze(l.node)
		s.frozen <- l.node
		time.Sleep(s.pause) // frozen: this goroutine, like the node's calls to the store, waits
		s.c.Thaw(l.node)
		s.c.Printf("%s wakes up and writes batch %d with its token %d, unaware that its term is over", cluster.Node(l.node), b.N, t.Token())
		// A resumed process goes on from where it stopped: nothing has run
		// yet to tell this code that the term ended, so the write is sent
		// (without the term's context, which the engine may have cancelled
		// meanwhile). Only the ledger's token check can stop it (E2).
		ctx = context.WithoutCancel(ctx)
	}
	next := State{Applied: b.N, Total: state.Total + b.Amount}
	if err := s.ledger.Write(ctx, t.Token(), next.encode()); err != nil {
		if errors.Is(err, fencing.ErrStaleToken) {
			s.rejected.Add(1)
			s.c.Printf("the ledger REJECTS %s's write of batch %d: %v", cluster.Node(l.node), b.N, err)
		}
		return err // ends the run
	}
	s.c.Did(l.node, t, "applies batch %d (%+d, total %d) with token %d", b.N, b.Amount, next.Total, t.Token())
	return nil
}

// PendingBatches yields the batches that arrived and are not applied yet.
func (l *Ledger) PendingBatches(ctx context.Context, t *runtime.Term) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		state, err := l.shared.read(ctx)
		if err != nil {
			yield(Batch{}, err)
			return
		}
		for n := state.Applied + 1; n <= l.shared.arrived(); n++ {
			if !yield(Batch{N: n, Amount: int64(n*37%100 - 20)}, nil) {
				return
			}
		}
	}
}

// State is the ledger's value: the last batch applied, and the total.
type State struct {
	Applied int   // the number of the last batch applied, 0 if none
	Total   int64 // the sum of the amounts of the batches applied
}

func (s State) encode() []byte { return fmt.Appendf(nil, "%d %d", s.Applied, s.Total) }

// Shared is what the nodes share: the fenced ledger, the batches arriving
// (two per second), and the demo's controls.
type Shared struct {
	c        *cluster.Cluster
	ledger   fencing.Cell
	start    time.Time
	freeze   atomic.Bool // the next Apply freezes
	frozen   chan int    // receives the node that froze
	pause    time.Duration
	rejected atomic.Int64
}

func (s *Shared) arrived() int { return 1 + int(time.Since(s.start)/(500*time.Millisecond)) }

func (s *Shared) read(ctx context.Context) (State, error) {
	v, _, err := s.ledger.Read(ctx)
	if err != nil || v == nil {
		return State{}, err
	}
	var st State
	_, err = fmt.Sscanf(string(v), "%d %d", &st.Applied, &st.Total)
	return st, err
}

func main() {
	opts := cluster.Flags(3, 10*time.Second)
	flag.Parse()
	if err := run(*opts); err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
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
	shared := &Shared{c: c, start: time.Now(), frozen: make(chan int, 1), pause: opts.Lease() + 2*time.Second}
	c.Printf("%d nodes contend for the lease \"ledger\" on %s (lease %v); batches arrive twice a second", opts.Nodes, backendurl.Redact(opts.Backend), opts.Lease())
	c.Announce("ledger")
	for i, client := range c.Clients() {
		if _, err := RegisterAll(client, &Ledger{node: i, shared: shared}); err != nil {
			return err
		}
	}
	cluster.Wait(ctx, opts.For/4)

	shared.freeze.Store(true)
	select {
	case <-shared.frozen:
	case <-time.After(opts.For / 2):
		c.Printf("no batch to freeze on")
	}
	cluster.Wait(ctx, opts.For-time.Since(shared.start))

	state, err := shared.read(ctx)
	if err != nil {
		return err
	}
	c.Printf("done: the ledger holds batches 1 to %d, total %d; %d stale write(s) rejected", state.Applied, state.Total, shared.rejected.Load())
	return nil
}
