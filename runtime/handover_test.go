package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/backends/memory"
	"github.com/simba-go/simba/runtime"
)

// electedLog records the elected callbacks of several nodes, in order.
type electedLog struct {
	mu    sync.Mutex
	nodes []string
	terms []*runtime.Term
}

func (l *electedLog) listener(node string) runtime.Listener {
	return runtime.ListenerFuncs{OnElected: func(_ context.Context, t *runtime.Term) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.nodes = append(l.nodes, node)
		l.terms = append(l.terms, t)
	}}
}

func (l *electedLog) since(i int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.nodes[i:]...)
}

func (l *electedLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.nodes)
}

// A leader hands the lease over to the node it names, among three that
// accept a hand-over: the named node is the next elected, every time,
// whichever node leads and whoever else contends; the others are never
// elected in between, and the hand-over takes no longer than a release
// notification.
func TestHandOverToChosen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		names := []string{"node-a", "node-b", "node-c"}
		var log electedLog
		elections := map[string]*runtime.Election{}
		for _, n := range names {
			c := newClient(t, b, runtime.WithIdentity(n))
			defer closeClient(t, c)
			e, err := c.StartElection("lead", log.listener(n), runtime.AcceptHandOver())
			if err != nil {
				t.Fatal(err)
			}
			elections[n] = e
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if log.len() != 1 {
			t.Fatalf("elected %v; want one leader", log.since(0))
		}
		ctx := context.Background()
		for round := range 6 {
			// Hand-overs are rare: a candidate that gave the lease back to
			// the last successor is woken by its next attempt, not by a
			// release, until it sees that successor hold the lease.
			time.Sleep(cfg.RenewInterval)
			synctest.Wait()
			leader := log.since(log.len() - 1)[0]
			// The successor: the node after the leader, or the one after
			// that, so that each round passes over one contender.
			i := (indexOf(names, leader) + 1 + round%2) % len(names)
			to := names[i]
			before := log.len()
			start := time.Now()
			if err := elections[leader].HandOver(ctx, to); err != nil {
				t.Fatalf("round %d: %s hands over to %s: %v", round, leader, to, err)
			}
			synctest.Wait()
			if got := log.since(before); len(got) != 1 || got[0] != to {
				t.Fatalf("round %d: %s handed over to %s; elected since: %v", round, leader, to, got)
			}
			if took := time.Since(start); took > 0 {
				t.Errorf("round %d: the hand-over took %v of virtual time; want it at once, woken by the release", round, took)
			}
		}
		// The tokens still rise across hand-overs.
		log.mu.Lock()
		defer log.mu.Unlock()
		for i := 1; i < len(log.terms); i++ {
			if log.terms[i].Token() <= log.terms[i-1].Token() {
				t.Errorf("term %v after %v; want rising tokens", log.terms[i], log.terms[i-1])
			}
		}
	})
}

// A hand-over to a node that does not accept one — no such node, or one
// that contends without AcceptHandOver — changes nothing: the error says
// so and the leader keeps its term. A node that does not lead cannot hand
// over.
func TestHandOverChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		leaderC := newClient(t, b, runtime.WithIdentity("node-a"))
		plainC := newClient(t, b, runtime.WithIdentity("node-b"))
		defer closeClient(t, leaderC)
		defer closeClient(t, plainC)
		ctx := context.Background()
		e, err := leaderC.StartElection("lead", nil, runtime.AcceptHandOver())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		term := e.Term()
		if term == nil {
			t.Fatal("node-a does not lead")
		}
		plain, err := plainC.StartElection("lead", nil)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for _, to := range []string{"node-z", "node-b"} {
			err := e.HandOver(ctx, to)
			if !errors.Is(err, runtime.ErrNotCandidate) || !strings.Contains(err.Error(), `"lead" to "`+to+`"`) {
				t.Errorf("HandOver to %s = %v; want ErrNotCandidate naming the lease and %s", to, err, to)
			}
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if e.Term() != term || !term.Valid() {
				t.Errorf("after a hand-over to %s was refused, node-a's term is %v (valid %v); want %v, still valid", to, e.Term(), term.Valid(), term)
			}
		}
		if err := plain.HandOver(ctx, "node-a"); !errors.Is(err, runtime.ErrNotLeading) {
			t.Errorf("HandOver by a node that does not lead = %v; want ErrNotLeading", err)
		}
		if err := e.HandOver(ctx, "node-a"); err != nil || e.Term() != term {
			t.Errorf("HandOver to itself = %v, term %v; want nil and nothing changed", err, e.Term())
		}
		if err := e.HandOver(ctx, ""); err == nil {
			t.Error("HandOver to an empty identity = nil; want an error")
		}
	})
}

// A successor that does not come — here a node sitting out a step-down's
// cooldown, whose successor lease says it contends — holds the lease up no
// longer than LeaseDuration and a retry: the other candidates give the
// lease back meanwhile, then one of them adopts it.
func TestHandOverToSuccessorAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memory.New()
		var log electedLog
		ca := newClient(t, b, runtime.WithIdentity("node-a"))
		cb := newClient(t, b, runtime.WithIdentity("node-b"))
		cc := newClient(t, b, runtime.WithIdentity("node-c"))
		defer closeClient(t, ca)
		defer closeClient(t, cb)
		defer closeClient(t, cc)
		ctx := context.Background()
		ea, err := ca.StartElection("lead", log.listener("node-a"), runtime.AcceptHandOver())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if ea.Term() == nil {
			t.Fatal("node-a does not lead")
		}
		if _, err := cb.StartElection("lead", log.listener("node-b"), runtime.AcceptHandOver()); err != nil {
			t.Fatal(err)
		}
		ec, err := cc.StartElection("lead", log.listener("node-c"), runtime.AcceptHandOver())
		if err != nil {
			t.Fatal(err)
		}
		if err := ec.StepDown(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		start := time.Now()
		if err := ea.HandOver(ctx, "node-c"); err != nil {
			t.Fatal(err)
		}
		cfg := ca.Config()
		for log.len() < 2 && time.Since(start) < 2*cfg.LeaseDuration {
			time.Sleep(10 * time.Millisecond)
		}
		took := time.Since(start)
		got := log.since(1)
		if len(got) == 0 || got[0] == "node-c" {
			t.Fatalf("elected after the hand-over: %v; want node-a or node-b once the deferral ended", got)
		}
		if took < cfg.LeaseDuration || took > cfg.LeaseDuration+cfg.RenewInterval {
			t.Errorf("%s adopted the lease %v after a hand-over to a node away; want after the deferral of LeaseDuration (%v), within a retry", got[0], took, cfg.LeaseDuration)
		}
	})
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
