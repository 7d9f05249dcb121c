package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// An election: the listener hears when this node wins the lease and when it
// loses it; Stop hands the lease over in the documented order.
func ExampleClient_StartElection() {
	client, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	elected := make(chan *runtime.Term)
	election, err := client.StartElection("report", runtime.ListenerFuncs{
		OnElected: func(ctx context.Context, t *runtime.Term) { elected <- t },
		OnRevoked: func(ctx context.Context, t *runtime.Term, r runtime.Reason) {
			fmt.Println("revoked:", t.Name(), r)
		},
	})
	if err != nil {
		panic(err)
	}
	term := <-elected
	fmt.Println("elected:", term.Name(), "valid:", term.Valid(), "token > 0:", term.Token() > 0)

	if err := election.Stop(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("after stop, valid:", term.Valid())
	// Output:
	// elected: report valid: true token > 0: true
	// revoked: report stopped
	// after stop, valid: false
}

// RunWhileLeader runs a function on one node at a time, once per term, until
// its context ends.
func ExampleClient_RunWhileLeader() {
	client, err := runtime.NewClient(memory.New(), runtime.Config{})
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	err = client.RunWhileLeader(ctx, "report", func(ctx context.Context, t *runtime.Term) error {
		fmt.Println("leading", t.Name())
		cancel() // stop after one term, for the example
		<-ctx.Done()
		fmt.Println("term ended:", context.Cause(ctx))
		return nil
	})
	fmt.Println("RunWhileLeader returned", err)
	// Output:
	// leading report
	// term ended: stopped
	// RunWhileLeader returned <nil>
}

// A lock is held until it is unlocked; another node's TryLock fails meanwhile.
func ExampleClient_Lock() {
	store := memory.New()
	a, _ := runtime.NewClient(store, runtime.Config{})
	b, _ := runtime.NewClient(store, runtime.Config{})
	defer a.Close(context.Background())
	defer b.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	term, err := a.Lock(ctx, "ledger")
	if err != nil {
		panic(err)
	}
	_, err = b.TryLock(ctx, "ledger")
	fmt.Println("b:", errors.Is(err, runtime.ErrLeaseHeld))

	if err := a.Unlock(ctx, term); err != nil {
		panic(err)
	}
	next, err := b.TryLock(ctx, "ledger")
	fmt.Println("b after unlock:", err, "higher token:", next.Token() > term.Token())
	// Output:
	// b: true
	// b after unlock: <nil> higher token: true
}

// A semaphore of 2: at most two holders at once across the cluster, each
// permit a term of its own with its own fencing token.
func ExampleClient_Semaphore() {
	store := memory.New()
	a, _ := runtime.NewClient(store, runtime.Config{})
	b, _ := runtime.NewClient(store, runtime.Config{})
	defer a.Close(context.Background())
	defer b.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sa, _ := a.Semaphore("encoders", 2)
	sb, _ := b.Semaphore("encoders", 2)
	p1, _ := sa.Acquire(ctx)
	p2, _ := sb.Acquire(ctx)
	fmt.Println("two permits:", p1.Name() != p2.Name())
	_, err := sb.TryAcquire(ctx)
	fmt.Println("a third:", errors.Is(err, runtime.ErrLeaseHeld))

	if err := sa.Release(ctx, p1); err != nil {
		panic(err)
	}
	p3, err := sb.Acquire(ctx)
	fmt.Println("after a release:", err, p3.Name() == p1.Name(), p3.Token() > p1.Token())
	// Output:
	// two permits: true
	// a third: true
	// after a release: <nil> true true
}

// A leader hands its lease over to the node it names, not to whoever wins
// next: to a node that contends with AcceptHandOver, as a deploy moves the
// leader off a node it is about to restart.
func ExampleElection_HandOver() {
	store := memory.New()
	ctx := context.Background()
	elected := make(chan string, 16)
	var elections []*runtime.Election
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		c, _ := runtime.NewClient(store, runtime.Config{}, runtime.WithIdentity(node))
		defer c.Close(ctx)
		e, _ := c.StartElection("report", runtime.ListenerFuncs{OnElected: func(context.Context, *runtime.Term) {
			elected <- node
		}}, runtime.AcceptHandOver())
		if len(elections) == 0 {
			fmt.Println(<-elected, "elected") // node-a, alone
		}
		elections = append(elections, e)
	}

	a := elections[0]
	err := a.HandOver(ctx, "node-z")
	fmt.Println("to a node that does not contend:", errors.Is(err, runtime.ErrNotCandidate))
	// node-c says it accepts a hand-over as soon as its election starts;
	// until the store has it, a hand-over to it is refused.
	for errors.Is(a.HandOver(ctx, "node-c"), runtime.ErrNotCandidate) {
		time.Sleep(time.Millisecond)
	}
	fmt.Println(<-elected, "elected")
	// Output:
	// node-a elected
	// to a node that does not contend: true
	// node-c elected
}

// An election that accepts hand-over requests moves when an operator asks
// from outside the process: `simba handover --lease report --to node-b`
// holds the request lease with the identity HandOverRequestIdentity names,
// as the third client here does, until node-b leads.
func ExampleAcceptHandOverRequests() {
	store := memory.New()
	ctx := context.Background()
	elected := make(chan string, 16)
	for _, node := range []string{"node-a", "node-b"} {
		c, _ := runtime.NewClient(store, runtime.Config{}, runtime.WithIdentity(node))
		defer c.Close(ctx)
		c.StartElection("report", runtime.ListenerFuncs{OnElected: func(context.Context, *runtime.Term) {
			elected <- node
		}}, runtime.AcceptHandOver(), runtime.AcceptHandOverRequests())
		if node == "node-a" {
			fmt.Println(<-elected, "elected")
		}
	}
	// Wait until node-b's election says, in the store, that it contends.
	probe, _ := runtime.NewClient(store, runtime.Config{})
	defer probe.Close(ctx)
	for {
		if h, _ := probe.Holder(ctx, runtime.SuccessorName("report", "node-b")); !h.Free() {
			break
		}
		time.Sleep(time.Millisecond)
	}

	operator, _ := runtime.NewClient(store, runtime.Config{}, runtime.WithIdentity(runtime.HandOverRequestIdentity("node-b")))
	defer operator.Close(ctx)
	request, _ := operator.Lock(ctx, runtime.HandOverRequestName("report"))
	fmt.Println(<-elected, "elected on request")
	operator.Unlock(ctx, request)
	// Output:
	// node-a elected
	// node-b elected on request
}

// EnsureValid before every step: a step that would outlive the term does not
// start, and every write carries the term's token for the resource to check.
func ExampleTerm_EnsureValid() {
	client, _ := runtime.NewClient(memory.New(), runtime.Config{})
	defer client.Close(context.Background())
	term, err := client.Lock(context.Background(), "ledger")
	if err != nil {
		panic(err)
	}

	write := func(batch int, token runtime.Token) { fmt.Println("wrote batch", batch, "with the term's token") }
	for batch := range 3 {
		if err := term.EnsureValid(2 * time.Second); err != nil { // a batch takes up to 2s
			fmt.Println("stop:", err)
			return
		}
		write(batch, term.Token())
	}
	err = term.EnsureValid(time.Hour) // no term of a 15s lease lasts an hour
	fmt.Println(errors.Is(err, runtime.ErrTermExpired))
	// Output:
	// wrote batch 0 with the term's token
	// wrote batch 1 with the term's token
	// wrote batch 2 with the term's token
	// true
}

// A leader-only schedule: the work runs once per slot of the store's clock,
// on whichever node leads.
func ExampleClient_StartSchedule() {
	client, _ := runtime.NewClient(memory.New(), runtime.ConfigFor(time.Second))
	defer client.Close(context.Background())

	runs := make(chan int, 10)
	n := 0
	election, err := client.StartSchedule("report", runtime.Schedule{Rate: 20 * time.Millisecond, Step: 100 * time.Millisecond},
		func(ctx context.Context, t *runtime.Term) error {
			n++
			runs <- n
			return nil
		})
	if err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println("run", <-runs)
	}
	if err := election.Stop(context.Background()); err != nil {
		panic(err)
	}
	// Output:
	// run 1
	// run 2
	// run 3
}

// A partition group: two members share eight partitions, four each; each
// partition's task gets its own term and token.
func ExampleClient_StartGroup() {
	store := memory.New()
	cfg := runtime.ConfigFor(300 * time.Millisecond)
	work := func(ctx context.Context, t *runtime.Term, partition int) error {
		<-ctx.Done() // a long-running task, once per term
		return nil
	}
	var groups []*runtime.Group
	for range 2 {
		client, _ := runtime.NewClient(store, cfg)
		defer client.Close(context.Background())
		g, err := client.StartGroup("billing", 8, runtime.Schedule{}, work)
		if err != nil {
			panic(err)
		}
		groups = append(groups, g)
	}
	for len(groups[0].Partitions()) != 4 || len(groups[1].Partitions()) != 4 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("member 1 holds", len(groups[0].Partitions()), "partitions; member 2 holds", len(groups[1].Partitions()), "partitions")
	// Output:
	// member 1 holds 4 partitions; member 2 holds 4 partitions
}

// A cron schedule: every second, in Paris's wall-clock time; each run gets
// its slot, the scheduled instant on the store's clock, the same on every
// node (an idempotency key). A missed slot up to a minute old is caught up
// after a fail-over; a slot that comes while a run goes on is skipped.
func ExampleClient_StartSchedule_cron() {
	client, _ := runtime.NewClient(memory.New(), runtime.ConfigFor(time.Second))
	defer client.Close(context.Background())

	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		panic(err)
	}
	slots := make(chan time.Time, 10)
	task, err := client.StartSchedule("report", runtime.Schedule{Cron: "* * * * * *", Location: paris,
		Overlap: runtime.OverlapSkip, CatchUp: time.Minute},
		func(ctx context.Context, t *runtime.Term) error {
			slot, _ := runtime.ScheduledSlot(ctx)
			slots <- slot
			return nil
		})
	if err != nil {
		panic(err)
	}
	first, second := <-slots, <-slots
	fmt.Println("a second apart:", second.Sub(first))
	fmt.Println("on the second:", first.Equal(first.Truncate(time.Second)))
	if err := task.Stop(context.Background()); err != nil {
		panic(err)
	}

	_, err = runtime.ParseCron("0 */5 25 * * *", paris)
	fmt.Println(err)
	// Output:
	// a second apart: 1s
	// on the second: true
	// cron expression "0 */5 25 * * *": hour field "25": end of range (25) above maximum (23): 25
}
